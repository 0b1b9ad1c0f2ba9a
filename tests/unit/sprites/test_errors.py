"""The exception tree: every class maps to a Lifeloop failure class and retry posture."""

from __future__ import annotations

import pytest

from lattice_operator.lifeloop import FailureClass, RetryClass
from lattice_operator.ports import errors

EXPECTED = {
    errors.NotFound: (FailureClass.STATE_CONFLICT, RetryClass.RETRY_AFTER_REREAD),
    errors.Conflict: (FailureClass.STATE_CONFLICT, RetryClass.RETRY_AFTER_REREAD),
    errors.Unauthorized: (FailureClass.OPERATOR_REQUIRED, RetryClass.RETRY_AFTER_OPERATOR),
    errors.CredentialsMissing: (FailureClass.OPERATOR_REQUIRED, RetryClass.RETRY_AFTER_OPERATOR),
    errors.InvalidRequest: (FailureClass.INVALID_REQUEST, RetryClass.DO_NOT_RETRY),
    errors.PayloadTooLarge: (FailureClass.PAYLOAD_TOO_LARGE, RetryClass.DO_NOT_RETRY),
    errors.TransportError: (FailureClass.TRANSPORT_ERROR, RetryClass.SAFE_RETRY),
    errors.RateLimited: (FailureClass.TRANSPORT_ERROR, RetryClass.SAFE_RETRY),
    errors.ExitStatusUnknown: (FailureClass.TRANSPORT_ERROR, RetryClass.RETRY_AFTER_REREAD),
    errors.Timeout: (FailureClass.TIMEOUT, RetryClass.SAFE_RETRY),
    errors.ProtocolError: (FailureClass.INTERNAL_ERROR, RetryClass.RETRY_AFTER_REREAD),
    errors.OperationFailed: (FailureClass.INTERNAL_ERROR, RetryClass.RETRY_AFTER_REREAD),
    errors.ServerError: (FailureClass.INTERNAL_ERROR, RetryClass.RETRY_AFTER_REREAD),
}


def test_every_public_error_is_mapped() -> None:
    public = {getattr(errors, n) for n in errors.__all__} - {errors.AdapterError}
    assert public == set(EXPECTED)


@pytest.mark.parametrize(
    ("cls", "expected"), EXPECTED.items(), ids=lambda v: getattr(v, "__name__", "")
)
def test_failure_and_retry_class(
    cls: type[errors.AdapterError], expected: tuple[FailureClass, RetryClass]
) -> None:
    error = cls("boom")
    assert issubclass(cls, errors.AdapterError)
    assert (error.failure_class, error.retry_class) == expected


def test_rate_limited_keeps_retry_after_and_was_not_executed() -> None:
    error = errors.RateLimited("slow down", retry_after=12)
    assert error.retry_after == 12
    assert error.status == 429
    assert error.maybe_executed is False
    assert isinstance(error, errors.TransportError)


def test_exit_status_unknown_is_a_transport_error_with_the_session() -> None:
    error = errors.ExitStatusUnknown("socket closed", session_id="1234")
    assert isinstance(error, errors.TransportError)
    assert error.session_id == "1234"
    assert error.maybe_executed is True


def test_str_and_repr_carry_the_message_only() -> None:
    error = errors.NotFound("GET /v1/sprites/x: HTTP 404", status=404, code="ENOENT")
    assert str(error) == "GET /v1/sprites/x: HTTP 404"
    assert repr(error) == "NotFound('GET /v1/sprites/x: HTTP 404', status=404)"
    assert error.code == "ENOENT"
