"""The Sprites backend port's errors: the one exception tree every backend adapter raises.

They belong to the port, not to an adapter: the reconcilers decide on them, and each
adapter translates httpx, websocket and SDK errors into them at its boundary (nothing else
leaks upward). Each class names its Lifeloop failure class; the retry class
defaults to the contract's table and is tightened where blind retry would be unsafe
(`ExitStatusUnknown`: the command may have run, so reread before acting).

| Exception            | When                                              | Failure class        |
|----------------------|---------------------------------------------------|----------------------|
| NotFound             | 404: sprite, session, file or checkpoint missing  | state_conflict       |
| Conflict             | 409/410: the name is taken, the state disagrees   | state_conflict       |
| Unauthorized         | 401: token missing, wrong or revoked              | operator_required    |
| CredentialsMissing   | no token configured at all                        | operator_required    |
| InvalidRequest       | 400/403/405/422: the request itself is wrong      | invalid_request      |
| PayloadTooLarge      | 413: body over the backend's limit                | payload_too_large    |
| RateLimited          | 429: try again after `retry_after` seconds        | transport_error      |
| TransportError       | connection refused/reset, 502/503/504             | transport_error      |
| ExitStatusUnknown    | exec socket closed without an exit frame          | transport_error (*)  |
| Timeout              | no answer within the deadline                     | timeout              |
| ProtocolError        | the backend answered something we cannot parse    | internal_error       |
| OperationFailed      | an error line inside a 200 progress stream        | internal_error       |
| ServerError          | other 5xx                                         | internal_error       |

(*) retry class tightened to `retry_after_reread`.
"""

from __future__ import annotations

from typing import ClassVar

from lattice_operator.lifeloop.classes import DEFAULT_RETRY, FailureClass, RetryClass


class AdapterError(Exception):
    """Base of every error an adapter raises on purpose."""

    failure_class: ClassVar[FailureClass] = FailureClass.INTERNAL_ERROR
    """The Lifeloop failure class this error maps to."""
    retry_override: ClassVar[RetryClass | None] = None
    """A tighter retry posture than the contract's default, where one is needed."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        """The HTTP status the backend answered, if any."""
        self.code = code
        """The backend's machine-readable error code (e.g. `ENOENT`), if any."""

    @property
    def retry_class(self) -> RetryClass:
        """How a caller may retry: the contract default for the class, or the tightened one."""
        return self.retry_override or DEFAULT_RETRY[self.failure_class]

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r})"


class NotFound(AdapterError):
    """The sprite, session, file or checkpoint does not exist."""

    failure_class = FailureClass.STATE_CONFLICT


class Conflict(AdapterError):
    """The request conflicts with the backend's state (name taken, session already exited)."""

    failure_class = FailureClass.STATE_CONFLICT


class Unauthorized(AdapterError):
    """The backend refused the credentials (401)."""

    failure_class = FailureClass.OPERATOR_REQUIRED


class CredentialsMissing(AdapterError):
    """No Sprites token is configured (neither the Secret nor the environment has one)."""

    failure_class = FailureClass.OPERATOR_REQUIRED


class InvalidRequest(AdapterError):
    """The request is malformed or not allowed (400, 403, 405, 422), e.g. a path escape."""

    failure_class = FailureClass.INVALID_REQUEST


class PayloadTooLarge(AdapterError):
    """The request body exceeds the backend's limit (413; 16 MiB for file writes)."""

    failure_class = FailureClass.PAYLOAD_TOO_LARGE


class TransportError(AdapterError):
    """The connection failed: refused, reset, dropped, or a gateway error (502/503/504)."""

    failure_class = FailureClass.TRANSPORT_ERROR

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        maybe_executed: bool = True,
    ):
        super().__init__(message, status=status, code=code)
        self.maybe_executed = maybe_executed
        """False only when the request provably never reached the backend (connect failed)."""


class RateLimited(TransportError):
    """The backend refused the request for now (429); wait `retry_after` seconds.

    The request was not executed, so even a create may be retried after the wait.
    """

    failure_class = FailureClass.TRANSPORT_ERROR

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = 429,
        code: str | None = None,
    ):
        super().__init__(message, status=status, code=code, maybe_executed=False)
        self.retry_after = retry_after
        """Seconds to wait, from the body's retry_after_seconds or the Retry-After header."""


class ExitStatusUnknown(TransportError):
    """The exec socket closed without an exit frame: the outcome is unknown, never success.

    The process may still be running. List the sprite's sessions and attach again by id; if
    the session is gone, read the outcome the program left on disk.
    """

    retry_override = RetryClass.RETRY_AFTER_REREAD

    def __init__(self, message: str, *, session_id: str | None = None):
        super().__init__(message, maybe_executed=True)
        self.session_id = session_id
        """The session whose socket was lost."""


class Timeout(AdapterError):
    """The backend did not answer within the deadline."""

    failure_class = FailureClass.TIMEOUT


class ProtocolError(AdapterError):
    """The backend answered something that does not follow the protocol."""

    failure_class = FailureClass.INTERNAL_ERROR


class OperationFailed(AdapterError):
    """A streamed operation (checkpoint, restore, service) reported an error inside a 200."""

    failure_class = FailureClass.INTERNAL_ERROR


class ServerError(AdapterError):
    """The backend failed (a 5xx other than the gateway ones)."""

    failure_class = FailureClass.INTERNAL_ERROR


__all__ = [
    "AdapterError",
    "Conflict",
    "CredentialsMissing",
    "ExitStatusUnknown",
    "InvalidRequest",
    "NotFound",
    "OperationFailed",
    "PayloadTooLarge",
    "ProtocolError",
    "RateLimited",
    "ServerError",
    "Timeout",
    "TransportError",
    "Unauthorized",
]
