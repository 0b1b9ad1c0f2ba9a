"""The Machines API's answers → the port's error tree (each with its Lifeloop class).

| Fly answers                          | raised            | failure class     |
|--------------------------------------|-------------------|-------------------|
| 401, 403                             | Unauthorized      | operator_required |
| 404                                  | NotFound          | state_conflict    |
| 409, 412                             | Conflict          | state_conflict    |
| 400, 422                             | InvalidRequest    | invalid_request   |
| 408 (a wait that did not see the     | Timeout           | timeout           |
| state in time); no answer in time    |                   |                   |
| 429                                  | RateLimited       | transport_error   |
| 500, 502, 503, 504; unreachable      | TransportError    | transport_error   |
| other 5xx                            | ServerError       | internal_error    |

The body of an error is `{"error": "...", "status": "..."}` (status: a machine-readable code
such as `insufficient_capacity`), kept as the message and the code.
"""

from __future__ import annotations

import httpx

from lattice_operator.ports.errors import (
    AdapterError,
    Conflict,
    InvalidRequest,
    NotFound,
    RateLimited,
    ServerError,
    Timeout,
    TransportError,
    Unauthorized,
)

RETRYABLE = frozenset({429, 500, 502, 503, 504})
"""Answers after which the request was not carried out (or may be asked again safely)."""


def _body(response: httpx.Response) -> tuple[str, str | None]:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300], None
    if not isinstance(data, dict):
        return str(data)[:300], None
    code = data.get("status")
    return str(data.get("error") or "")[:500], code if isinstance(code, str) else None


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def from_response(response: httpx.Response, doing: str) -> AdapterError:
    """The port's error for an answer of 400 or more while `doing` something."""
    status = response.status_code
    message, code = _body(response)
    text = f"{doing}: Fly answered {status}: {message or response.reason_phrase}"
    if status in (401, 403):
        return Unauthorized(text, status=status, code=code)
    if status == 404:
        return NotFound(text, status=status, code=code)
    if status in (409, 412):
        return Conflict(text, status=status, code=code)
    if status == 408:
        return Timeout(text, status=status, code=code)
    if status == 429:
        return RateLimited(text, retry_after=_retry_after(response), code=code)
    if status in (400, 422):
        return InvalidRequest(text, status=status, code=code)
    if status in (500, 502, 503, 504):
        return TransportError(text, status=status, code=code)
    if status >= 500:
        return ServerError(text, status=status, code=code)
    return InvalidRequest(text, status=status, code=code)


def from_transport(exc: httpx.HTTPError, doing: str) -> AdapterError:
    """The port's error for a request that got no answer."""
    if isinstance(exc, httpx.TimeoutException):
        return Timeout(f"{doing}: Fly did not answer in time")
    sent = not isinstance(exc, httpx.ConnectError)
    return TransportError(f"{doing}: Fly unreachable: {exc}", maybe_executed=sent)


__all__ = ["RETRYABLE", "from_response", "from_transport"]
