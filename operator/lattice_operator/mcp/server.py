"""Wires a set of tools to the MCP SDK's low-level server over stdio.

The low-level server is used (not the decorator API) so each tool's input schema is exactly
the table we publish, and so tool errors keep the seed's `{"error": {code, message,
suggestion}}` shape. The SDK does not validate arguments; each tool's input model does
(`tool_input`), with codes.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, cast

from lattice_operator.mcp.errors import ToolError

log = logging.getLogger(__name__)

Dispatch = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class PublishedTool:
    """What tools/list shows of a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


def build_server(
    name: str, version: str, tools: Sequence[PublishedTool], dispatch: Dispatch
) -> Any:
    """A configured `mcp.server.lowlevel.Server` (typed Any: the SDK import stays lazy)."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    listed = [
        types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
        for t in tools
    ]
    known = {t.name for t in tools}

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            if params.name not in known:
                raise ToolError(
                    "UNKNOWN_TOOL",
                    f"No tool named '{params.name}'",
                    "List the tools with tools/list",
                )
            payload = await dispatch(params.name, dict(params.arguments or {}))
            is_error = False
        except ToolError as err:
            payload, is_error = err.as_payload(), True
        except Exception as err:  # a bug must reach the agent as an error, not kill the server
            log.exception("tool %s failed", params.name)
            payload = ToolError(
                "INTERNAL_ERROR", f"{type(err).__name__}: {err}", "Report this as a bug"
            ).as_payload()
            is_error = True
        text = json.dumps(payload, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content=payload,
            is_error=is_error,
        )

    return Server(name, version=version, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def serve_stdio(server: Any) -> None:
    """Serve one client over stdin/stdout until stdin closes; every line the SDK could not
    read is answered with a JSON-RPC error here (mcp.wire)."""
    from mcp.server.stdio import stdio_server

    with _claimed_stdin() as wire:
        lines = _GuardedLines(wire)
        # The SDK claims stdout itself (fd 1 points at stderr meanwhile); stdin is ours. It
        # only iterates stdin, which _GuardedLines does like an anyio AsyncFile.
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.answer_to(write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[TextIO]:
    """The client's stdin on a private descriptor while fd 0 reads /dev/null (as the SDK
    does when it reads stdin itself): a tool's child process cannot take the client's bytes."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # closefd=False: a worker thread may still be blocked reading it after we return.
        raw = os.fdopen(private, "rb", closefd=False)
        yield io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    finally:
        os.dup2(private, 0)


class _GuardedLines:
    """The client's lines as the SDK reads them (`async for`), less the ones it could not
    read: those are answered with their JSON-RPC error, in order, before the next line."""

    def __init__(self, wire: TextIO) -> None:
        import anyio

        self._wire = wire
        self._ready = anyio.Event()
        self._write: Any = None

    def answer_to(self, write_stream: Any) -> None:
        self._write = write_stream
        self._ready.set()

    def __aiter__(self) -> _GuardedLines:
        return self

    async def __anext__(self) -> str:
        import anyio
        from mcp.shared.message import SessionMessage

        from lattice_operator.mcp.wire import MAX_LINE, Refusal, refusal, too_long

        while True:
            line = await anyio.to_thread.run_sync(self._wire.readline, MAX_LINE + 1)
            if not line:
                raise StopAsyncIteration
            refused: Refusal | None
            if len(line) > MAX_LINE and not line.endswith("\n"):
                while True:  # the rest of an over-long line is dropped, never held
                    rest = await anyio.to_thread.run_sync(self._wire.readline, MAX_LINE)
                    if not rest or rest.endswith("\n"):
                        break
                refused = too_long()
            elif not line.strip():
                continue
            else:
                refused = refusal(line)
            if refused is None:
                return line
            log.warning("refused a message: %s", refused.message)
            if refused.reply:
                await self._ready.wait()
                await self._write.send(SessionMessage(refused.as_message()))


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lattice-operator")
    except PackageNotFoundError:
        return "0+unknown"


__all__ = ["Dispatch", "PublishedTool", "build_server", "package_version", "serve_stdio"]
