"""Error answers and library exceptions become our exceptions, with the token masked."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.http11 import Response

# The adapter's error translation (private to lattice_adapters.sprites), tested on its own.
from lattice_adapters.sprites._translate import (
    error_from_response,
    parse_retry_after,
    redact,
    translate_exception,
)
from lattice_operator.ports import errors

SECRET = "org/42/very-secret"


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, errors.InvalidRequest),
        (401, errors.Unauthorized),
        (403, errors.InvalidRequest),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (410, errors.Conflict),
        (413, errors.PayloadTooLarge),
        (422, errors.InvalidRequest),
        (429, errors.RateLimited),
        (500, errors.ServerError),
        (502, errors.TransportError),
        (503, errors.TransportError),
    ],
)
def test_status_classes(status: int, cls: type[errors.AdapterError]) -> None:
    error = error_from_response(status, {}, b"", what="GET /x")
    assert type(error) is cls
    assert error.status == status


def test_body_shapes() -> None:
    structured = error_from_response(
        429,
        {"Retry-After": "3"},
        b'{"error":"sprite_creation_rate_limited","message":"too many","retry_after_seconds":12}',
        what="POST /v1/sprites",
    )
    assert isinstance(structured, errors.RateLimited)
    assert structured.retry_after == 12  # the body wins over the header
    assert "sprite_creation_rate_limited; too many" in str(structured)

    listed = error_from_response(400, {}, b'{"errors":["bad a","bad b"]}', what="x")
    assert "bad a; bad b" in str(listed)

    fs = error_from_response(
        404, {}, b'{"error":"file not found","code":"ENOENT","path":"/w"}', what="x"
    )
    assert fs.code == "ENOENT"

    plain = error_from_response(404, {}, b"session not found: 20", what="x")
    assert str(plain) == "x: HTTP 404: session not found: 20"


def test_retry_after_header_forms() -> None:
    assert error_from_response(429, {"retry-after": "5"}, b"", what="x").retry_after == 5  # type: ignore[attr-defined]
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after(future) or 0) <= 31


def test_the_secret_is_masked_everywhere() -> None:
    error = error_from_response(
        401, {}, f'{{"error":"bad token {SECRET}"}}'.encode(), what="x", secret=SECRET
    )
    assert SECRET not in str(error)
    assert redact(f"Bearer {SECRET}", SECRET) == "Bearer ***"
    wrapped = translate_exception(RuntimeError(f"oops {SECRET}"), what="y", secret=SECRET)
    assert SECRET not in str(wrapped)


def test_httpx_exceptions() -> None:
    request = httpx.Request("GET", "http://127.0.0.1:1/v1/sprites")
    refused = translate_exception(
        httpx.ConnectError("refused", request=request), what="x", secret=None
    )
    assert isinstance(refused, errors.TransportError)
    assert refused.maybe_executed is False
    reset = translate_exception(httpx.ReadError("reset", request=request), what="x", secret=None)
    assert type(reset) is errors.TransportError
    assert reset.maybe_executed is True
    timeout = translate_exception(httpx.ReadTimeout("slow", request=request), what="x", secret=None)
    assert isinstance(timeout, errors.Timeout)


def test_os_and_asyncio_exceptions() -> None:
    assert isinstance(translate_exception(TimeoutError(), what="x", secret=None), errors.Timeout)
    reset = translate_exception(ConnectionResetError(104, "reset"), what="x", secret=None)
    assert type(reset) is errors.TransportError
    assert reset.maybe_executed is True
    assert isinstance(
        translate_exception(ValueError("bad json"), what="x", secret=None), errors.ProtocolError
    )
    assert isinstance(
        translate_exception(RuntimeError("bug"), what="x", secret=None), errors.ServerError
    )


def test_websocket_exceptions() -> None:
    response = Response(
        404, "Not Found", Headers({"Content-Type": "text/plain"}), b"session not found: 7"
    )
    missing = translate_exception(InvalidStatus(response), what="attach", secret=None)
    assert isinstance(missing, errors.NotFound)
    assert "session not found: 7" in str(missing)
    limited = translate_exception(
        InvalidStatus(Response(429, "Too Many", Headers({"Retry-After": "9"}), b"")),
        what="exec",
        secret=None,
    )
    assert isinstance(limited, errors.RateLimited)
    assert limited.retry_after == 9
    closed = translate_exception(ConnectionClosedError(None, None), what="exec", secret=None)
    assert isinstance(closed, errors.TransportError)
    refused = translate_exception(ConnectionRefusedError(111, "refused"), what="exec", secret=None)
    assert isinstance(refused, errors.TransportError)
    assert refused.maybe_executed is False
