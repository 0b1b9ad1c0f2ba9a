"""What a line on the MCP stdio wire must be before the SDK sees it.

The SDK turns a line it cannot read into an exception it only logs, so a client that sends
`"params": [1, 2]`, nesting 100k deep or not JSON at all waits for an answer that never
comes. Each such line is answered here with a JSON-RPC error instead (the request's `id`
when it can be read, else null). Depth needs no bound before parsing: Python's json stops
at its recursion limit (~1,000) at once, and MAX_DEPTH keeps messages below the SDK's own
parser limit (~200), past which it would fail silently again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import ValidationError

MAX_DEPTH = 64
"""Nesting levels a message may have (the envelope takes 3; an Intent spec needs ~10)."""
MAX_LINE = 32 * 1024 * 1024
"""Characters a message may have: a document body of megabytes fits, memory stays bounded."""


@dataclass(frozen=True)
class Refusal:
    """The JSON-RPC error a line gets; `reply` is False for a notification (never answered)."""

    id: str | int | None
    code: int
    message: str
    reply: bool = True

    def as_message(self) -> types.JSONRPCError:
        return types.JSONRPCError(
            jsonrpc="2.0", id=self.id, error=types.ErrorData(code=self.code, message=self.message)
        )


def too_long() -> Refusal:
    return Refusal(None, types.INVALID_REQUEST, f"message longer than {MAX_LINE} characters")


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:  # deeper is refused anyway: stop counting
                pending.extend(
                    (v, level + 1) for v in (item.values() if isinstance(item, dict) else item)
                )
    return deepest


def _request_id(message: dict[str, Any]) -> str | int | None:
    value = message.get("id")
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def refusal(line: str) -> Refusal | None:
    """None when the SDK can read the line as one JSON-RPC message, else its error."""
    try:
        message = json.loads(line)
    except RecursionError:
        return Refusal(None, types.PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH}")
    except ValueError as err:
        return Refusal(None, types.PARSE_ERROR, f"Parse error: not JSON ({err})")
    if not isinstance(message, dict):
        return Refusal(
            None,
            types.INVALID_REQUEST,
            "Invalid Request: a message is one JSON object (batches are not supported)",
        )
    # A response of the client's (result or error) is never answered, even when malformed.
    reply = "id" in message and not message.keys() & {"result", "error"}
    request_id = _request_id(message)
    if _depth(message) > MAX_DEPTH:
        return Refusal(
            request_id, types.PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH}", reply
        )
    params = message.get("params")
    if "method" in message and params is not None and not isinstance(params, dict):
        return Refusal(
            request_id,
            types.INVALID_PARAMS,
            f"Invalid params: 'params' must be an object (named parameters), "
            f"not {type(params).__name__}",
            reply,
        )
    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "message"
        return Refusal(
            request_id, types.INVALID_REQUEST, f"Invalid Request: {where}: {first['msg']}", reply
        )
    return None


__all__ = ["MAX_DEPTH", "MAX_LINE", "Refusal", "refusal", "too_long"]
