"""The API server's error answers, typed by their Status (code and reason), as kopf's own
client types them: callers catch `NotFound`, `Conflict`, `Invalid`... and read structured
fields (`causes`, `retry_after`), never a message text.

Every type is a `KubeApiError`, so `except KubeApiError` and `.status` keep working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Cause:
    """One entry of a Status's `details.causes`: which field, why (a machine reason such as
    FieldValueInvalid or UnexpectedServerResponse), and the server's words."""

    field: str
    reason: str
    message: str


class KubeApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, body: JsonObject | None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def details(self) -> JsonObject:
        details = self.body.get("details")
        return details if isinstance(details, dict) else {}

    @property
    def causes(self) -> tuple[Cause, ...]:
        """`details.causes`, parsed (malformed entries are skipped, not fatal)."""
        raw = self.details.get("causes")
        if not isinstance(raw, list):
            return ()
        return tuple(
            Cause(
                field=str(c.get("field") or ""),
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
            )
            for c in raw
            if isinstance(c, dict)
        )

    # By the code, as before the types: an error built by hand (a test's) still answers.
    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """A 409: AlreadyExists or a resourceVersion/precondition Conflict."""
        return self.status == 409


class BadRequest(KubeApiError):
    """400: the request itself is malformed (a JSON patch that is no patch, say)."""


class Unauthorized(KubeApiError):
    """401: the credentials were refused."""


class Forbidden(KubeApiError):
    """403: RBAC (or an admission policy) refused the verb."""


class NotFound(KubeApiError):
    """404: no such object (or no such resource type)."""


class Conflict(KubeApiError):
    """409: the object changed since it was read (resourceVersion or a delete precondition)."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create found an object of that name (a Conflict, as kopf has it)."""


class Gone(KubeApiError):
    """410 (Expired/Gone): a watch's or list's resourceVersion is too old."""


class Invalid(KubeApiError):
    """422: the object (or the patched object) was refused; `causes` says which fields why."""


class PatchTestFailed(Invalid):
    """422: a JSON patch's `test` operation found another value (the precondition failed).

    The API server does not say so: a failed `test` is answered 422 Invalid with the generic
    message and no causes, exactly as any other patch that cannot be applied (checked against
    the real server in tests/e2e/test_cluster.py). So `KubeClient.json_patch` reads the object
    again after such an answer and raises this when one of its tests no longer holds there;
    `failed` names the paths. No message text is read."""

    def __init__(
        self, status: int, reason: str, message: str, body: JsonObject | None, failed: list[str]
    ) -> None:
        super().__init__(status, reason, f"{message} (test failed at {', '.join(failed)})", body)
        self.failed = failed


class TooManyRequests(KubeApiError):
    """429: throttled (API priority and fairness); `retry_after` seconds, if the server said."""

    @property
    def retry_after(self) -> float | None:
        seconds = self.details.get("retryAfterSeconds")
        return float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None


class InternalError(KubeApiError):
    """500: the server failed (an admission webhook that errored, etcd trouble...)."""


class ServerTimeout(KubeApiError):
    """500 ServerTimeout or 504 Timeout: the server gave up waiting; the request may retry."""


class ServiceUnavailable(KubeApiError):
    """503: the server (or an aggregated API behind it) is not serving now."""


_BY_CODE: dict[int, type[KubeApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: ServerTimeout,
}
# Reasons that refine a code (the same code carries several reasons).
_BY_REASON: dict[tuple[int, str], type[KubeApiError]] = {
    (409, "AlreadyExists"): AlreadyExists,
    (500, "ServerTimeout"): ServerTimeout,
    (500, "Timeout"): ServerTimeout,
}

_MISSING = object()


def _at(document: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901) in `document`, or _MISSING."""
    value = document
    for token in pointer.split("/")[1:] if pointer else ():
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def failed_tests(ops: list[JsonObject], stored: JsonObject) -> list[str]:
    """The paths of a JSON patch's `test` operations that do not hold on `stored`."""
    return [
        str(op.get("path"))
        for op in ops
        if op.get("op") == "test" and _at(stored, str(op.get("path", ""))) != op.get("value")
    ]


def api_error(
    status: int, body: JsonObject | None, *, reason: str = "", message: str = ""
) -> KubeApiError:
    """The typed error for an error answer: `status` (the HTTP code) and its Status `body`
    (reason and message taken from it where it has them)."""
    body = body or {}
    reason = str(body.get("reason") or reason)
    message = str(body.get("message") or message)[:2000]
    kind = _BY_REASON.get((status, reason)) or _BY_CODE.get(status, KubeApiError)
    return kind(status, reason, message, body)


__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Cause",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "KubeApiError",
    "NotFound",
    "PatchTestFailed",
    "ServerTimeout",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "api_error",
    "failed_tests",
]
