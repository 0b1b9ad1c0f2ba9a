"""Lifeloop failure classes and retry classes, with the contract's default mapping."""

from __future__ import annotations

from enum import StrEnum


class FailureClass(StrEnum):
    """Lifecycle failure classifications (lifeloop-lifecycle-contract, "Failure Classes")."""

    ADAPTER_UNAVAILABLE = "adapter_unavailable"
    CAPABILITY_UNSUPPORTED = "capability_unsupported"
    CAPABILITY_DEGRADED = "capability_degraded"
    PLACEMENT_UNAVAILABLE = "placement_unavailable"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    PAYLOAD_REJECTED = "payload_rejected"
    IDENTITY_UNAVAILABLE = "identity_unavailable"
    TRANSPORT_ERROR = "transport_error"
    TIMEOUT = "timeout"
    OPERATOR_REQUIRED = "operator_required"
    STATE_CONFLICT = "state_conflict"
    INVALID_REQUEST = "invalid_request"
    INTERNAL_ERROR = "internal_error"

    @property
    def default_retry(self) -> RetryClass:
        """The contract's default retry class for this failure class."""
        return DEFAULT_RETRY[self]


class RetryClass(StrEnum):
    """Retry postures (lifeloop-lifecycle-contract, "Retry Classes")."""

    SAFE_RETRY = "safe_retry"
    RETRY_AFTER_REREAD = "retry_after_reread"
    RETRY_AFTER_RECONFIGURE = "retry_after_reconfigure"
    RETRY_AFTER_OPERATOR = "retry_after_operator"
    DO_NOT_RETRY = "do_not_retry"


DEFAULT_RETRY: dict[FailureClass, RetryClass] = {
    FailureClass.ADAPTER_UNAVAILABLE: RetryClass.RETRY_AFTER_RECONFIGURE,
    FailureClass.CAPABILITY_UNSUPPORTED: RetryClass.DO_NOT_RETRY,
    FailureClass.CAPABILITY_DEGRADED: RetryClass.RETRY_AFTER_REREAD,
    FailureClass.PLACEMENT_UNAVAILABLE: RetryClass.RETRY_AFTER_RECONFIGURE,
    FailureClass.PAYLOAD_TOO_LARGE: RetryClass.DO_NOT_RETRY,
    FailureClass.PAYLOAD_REJECTED: RetryClass.RETRY_AFTER_RECONFIGURE,
    FailureClass.IDENTITY_UNAVAILABLE: RetryClass.RETRY_AFTER_RECONFIGURE,
    FailureClass.TRANSPORT_ERROR: RetryClass.SAFE_RETRY,
    FailureClass.TIMEOUT: RetryClass.SAFE_RETRY,
    FailureClass.OPERATOR_REQUIRED: RetryClass.RETRY_AFTER_OPERATOR,
    FailureClass.STATE_CONFLICT: RetryClass.RETRY_AFTER_REREAD,
    FailureClass.INVALID_REQUEST: RetryClass.DO_NOT_RETRY,
    FailureClass.INTERNAL_ERROR: RetryClass.RETRY_AFTER_REREAD,
}
"""The failure→retry table, the one place it is written down."""
