"""githubkit's and httpx's errors → the port's error tree (each with its Lifeloop class).

| GitHub answers                           | raised            | failure class     |
|------------------------------------------|-------------------|-------------------|
| 401; 403 without a rate limit            | Unauthorized      | operator_required |
| 403/429 with a rate limit (primary,      | RateLimited       | transport_error   |
| secondary: Retry-After, x-ratelimit-*)   |                   |                   |
| 404, 410                                 | NotFound          | state_conflict    |
| 409; 422 "already exists"                | Conflict          | state_conflict    |
| 400, 422                                 | InvalidRequest    | invalid_request   |
| 413                                      | PayloadTooLarge   | payload_too_large |
| 500, 502, 503, 504; connection failures  | TransportError    | transport_error   |
| other 5xx                                | ServerError       | internal_error    |
| no answer in time                        | Timeout           | timeout           |

GitHub's 500s are transient in practice: they are transport errors, so reads are retried;
a write that got one may have happened, and is retried only after a reread (idempotency
keys, see `lattice_operator.ports.forge`).
"""

from __future__ import annotations

import httpx
from githubkit.exception import (
    GitHubException,
    RateLimitExceeded,
    RequestError,
    RequestFailed,
    RequestTimeout,
    SecondaryRateLimitExceeded,
)

from lattice_operator.ports.errors import (
    AdapterError,
    Conflict,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Timeout,
    TransportError,
    Unauthorized,
)


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if not isinstance(data, dict):
        return str(data)[:300]
    text = str(data.get("message") or "")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        details = [
            str(e.get("message") or e.get("code") or e) if isinstance(e, dict) else str(e)
            for e in errors[:3]
        ]
        text = f"{text} ({'; '.join(details)})"
    return text[:500]


def translate(exc: GitHubException, doing: str) -> AdapterError:
    """The port's error for what went wrong while `doing` something."""
    if isinstance(exc, RateLimitExceeded):
        kind = "secondary" if isinstance(exc, SecondaryRateLimitExceeded) else "primary"
        return RateLimited(
            f"{doing}: GitHub's {kind} rate limit; retry in {exc.retry_after.total_seconds():.0f}s",
            retry_after=exc.retry_after.total_seconds(),
            status=exc.response.status_code,
            code=kind,
        )
    if isinstance(exc, RequestFailed):
        raw = exc.response.raw_response
        status = raw.status_code
        text = f"{doing}: GitHub answered {status}: {_message(raw)}"
        if status == 401 or status == 403:
            return Unauthorized(text, status=status)
        if status in (404, 410):
            return NotFound(text, status=status)
        if status == 409 or (status == 422 and "already exist" in text.lower()):
            return Conflict(text, status=status)
        if status == 413:
            return PayloadTooLarge(text, status=status)
        if status in (400, 422):
            return InvalidRequest(text, status=status)
        if status in (500, 502, 503, 504):
            return TransportError(text, status=status)
        return ServerError(text, status=status)
    if isinstance(exc, RequestTimeout):
        return Timeout(f"{doing}: GitHub did not answer in time")
    if isinstance(exc, RequestError):
        cause = exc.exc
        sent = not isinstance(cause, httpx.ConnectError)
        return TransportError(f"{doing}: GitHub unreachable: {cause}", maybe_executed=sent)
    return ServerError(f"{doing}: {exc!r}")


__all__ = ["translate"]
