"""Translate HTTP error responses and httpx / websockets / OS exceptions into our tree.

Every message built here goes through `redact`, so a token echoed by a server or a library
never reaches a log line or an exception message.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Mapping

import httpx
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
    WebSocketException,
)

from lattice_operator.ports.errors import (
    AdapterError,
    Conflict,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    ServerError,
    Timeout,
    TransportError,
    Unauthorized,
)

_MAX_DETAIL = 300


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` (and its bearer header form) masked."""
    if secret:
        text = text.replace(secret, "***")
    return text


def error_from_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    what: str,
    secret: str | None = None,
) -> AdapterError:
    """The exception for an HTTP error answer (any of the body shapes the service uses)."""
    detail, code, retry_after_body = _parse_error_body(body)
    message = redact(f"{what}: HTTP {status}" + (f": {detail}" if detail else ""), secret)
    if status == 401:
        return Unauthorized(message, status=status, code=code)
    if status == 404:
        return NotFound(message, status=status, code=code)
    if status in (409, 410):
        return Conflict(message, status=status, code=code)
    if status == 413:
        return PayloadTooLarge(message, status=status, code=code)
    if status == 429:
        retry_after = retry_after_body
        if retry_after is None:
            retry_after = parse_retry_after(_header(headers, "retry-after"))
        return RateLimited(message, retry_after=retry_after, status=status, code=code)
    if status in (502, 503, 504):
        return TransportError(message, status=status, code=code)
    if status >= 500:
        return ServerError(message, status=status, code=code)
    return InvalidRequest(message, status=status, code=code)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def translate_exception(exc: BaseException, *, what: str, secret: str | None) -> AdapterError:
    """Our exception for anything raised by httpx, websockets or the OS."""
    if isinstance(exc, AdapterError):
        return exc
    text = redact(f"{what}: {type(exc).__name__}: {exc}", secret)
    if isinstance(exc, httpx.TimeoutException):
        return Timeout(text)
    if isinstance(exc, httpx.ConnectError):
        return TransportError(text, maybe_executed=False)
    if isinstance(exc, httpx.TransportError):
        return TransportError(text)
    if isinstance(exc, InvalidStatus):
        response = exc.response
        return error_from_response(
            response.status_code,
            {k.lower(): v for k, v in response.headers.raw_items()},
            bytes(response.body or b""),
            what=what,
            secret=secret,
        )
    if isinstance(exc, InvalidURI):
        return InvalidRequest(text)
    if isinstance(exc, ConnectionClosed):
        return TransportError(text)
    if isinstance(exc, InvalidHandshake | WebSocketException):
        return ProtocolError(text)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return Timeout(text)
    if isinstance(exc, ConnectionRefusedError):
        return TransportError(text, maybe_executed=False)
    if isinstance(exc, OSError):
        return TransportError(text)
    if isinstance(exc, ValueError | KeyError | TypeError):
        return ProtocolError(text)
    return ServerError(text)


def _parse_error_body(body: bytes) -> tuple[str, str | None, float | None]:
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return "", None, None
    try:
        data = json.loads(text)
    except ValueError:
        return text[:_MAX_DETAIL], None, None
    if not isinstance(data, dict):
        return text[:_MAX_DETAIL], None, None
    parts: list[str] = []
    for key in ("error", "message"):
        value = data.get(key)
        if isinstance(value, str) and value and value not in parts:
            parts.append(value)
    errors = data.get("errors")
    if isinstance(errors, list):
        parts.extend(str(e) for e in errors)
    code = data.get("code")
    retry_after = data.get("retry_after_seconds")
    return (
        "; ".join(parts)[:_MAX_DETAIL] or text[:_MAX_DETAIL],
        code if isinstance(code, str) else None,
        float(retry_after) if isinstance(retry_after, int | float) and retry_after > 0 else None,
    )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


__all__ = ["error_from_response", "parse_retry_after", "redact", "translate_exception"]
