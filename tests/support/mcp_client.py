"""An MCP session with `lattice mcp` through the SDK's own stdio client (a real subprocess),
or with the same server object in process (`in_process`): the tools, their schemas and their
error codes do not depend on the transport, and a subprocess costs a second of CPU. Each
module keeps a subprocess test proving its real entry point."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

LATTICE = Path(sys.executable).parent / "lattice"


@asynccontextmanager
async def lattice_mcp(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> AsyncIterator[ClientSession]:
    # The SDK starts the server with a few safe variables only: PYTHONPATH is passed on so
    # the server runs the code under test (a worktree's), not the installed package.
    inherited = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    params = StdioServerParameters(
        command=str(LATTICE), args=["mcp", *args], env=inherited | (env or {}), cwd=cwd
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


class ToolCaller(Protocol):
    """What the helpers below need: a stdio `ClientSession` or an in-process `Client`."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any: ...


@asynccontextmanager
async def in_process(server: Any) -> AsyncIterator[Client]:
    """A client of the server object `lattice mcp` would serve (`lattice_operator.mcp.entry`),
    over the SDK's in-memory JSON-RPC streams with the initialize handshake, as over stdio."""
    async with Client(server, mode="legacy") as client:
        yield client


async def call(session: ToolCaller, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's JSON payload; asserts the text and structured copies agree."""
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult), result
    payload = result.structured_content
    assert isinstance(payload, dict), result
    text = result.content[0]
    assert isinstance(text, TextContent), result
    assert json.loads(text.text) == payload
    assert result.is_error == ("error" in payload)
    return payload


async def error_code(session: ToolCaller, tool: str, **arguments: Any) -> str:
    payload = await call(session, tool, **arguments)
    assert "error" in payload, payload
    error = payload["error"]
    assert error["message"], error
    assert error["suggestion"], error
    return str(error["code"])
