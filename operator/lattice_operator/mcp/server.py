"""Wires a set of tools to the MCP SDK's low-level server over stdio.

The low-level server is used (not the decorator API) so each tool's input schema is exactly
the table we publish, and so tool errors keep the seed's `{"error": {code, message,
suggestion}}` shape. The SDK does not validate arguments; each handler does, with codes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
    """Serve one client over stdin/stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lattice-operator")
    except PackageNotFoundError:
        return "0+unknown"


__all__ = ["Dispatch", "PublishedTool", "build_server", "package_version", "serve_stdio"]
