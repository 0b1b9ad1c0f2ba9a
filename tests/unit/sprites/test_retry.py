"""Retries only where the retry class allows, with jittered backoff under a deadline."""

from __future__ import annotations

import random

import pytest

from lattice_adapters.sprites import RetryPolicy, call_with_retry
from lattice_operator.ports import errors
from tests.support.clock import FakeClock


class Recorder:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


def failing(*failures: BaseException, result: str = "ok"):  # type: ignore[no-untyped-def]
    calls = {"n": 0}

    async def operation() -> str:
        calls["n"] += 1
        if calls["n"] <= len(failures):
            raise failures[calls["n"] - 1]
        return result

    operation.calls = calls  # type: ignore[attr-defined]
    return operation


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_transport_errors_are_retried_for_idempotent_calls(clock: FakeClock) -> None:
    rec = Recorder(clock)
    op = failing(errors.TransportError("reset"), errors.Timeout("slow"))
    result = await call_with_retry(
        RetryPolicy(), op, idempotent=True, clock=clock, sleep=rec.sleep, rng=random.Random(1)
    )
    assert result == "ok"
    assert op.calls["n"] == 3
    # Full jitter: each wait lies under the doubling ceiling.
    assert 0 <= rec.waits[0] <= 0.2
    assert 0 <= rec.waits[1] <= 0.4


async def test_non_idempotent_call_is_not_retried_after_it_may_have_run(clock: FakeClock) -> None:
    rec = Recorder(clock)
    op = failing(errors.TransportError("reset after sending"))
    with pytest.raises(errors.TransportError):
        await call_with_retry(RetryPolicy(), op, idempotent=False, clock=clock, sleep=rec.sleep)
    assert op.calls["n"] == 1
    assert rec.waits == []


async def test_non_idempotent_call_is_retried_when_it_never_reached_the_server(
    clock: FakeClock,
) -> None:
    rec = Recorder(clock)
    op = failing(errors.TransportError("connection refused", maybe_executed=False))
    assert (
        await call_with_retry(RetryPolicy(), op, idempotent=False, clock=clock, sleep=rec.sleep)
        == "ok"
    )
    assert op.calls["n"] == 2


async def test_429_waits_for_retry_after_even_for_creates(clock: FakeClock) -> None:
    rec = Recorder(clock)
    op = failing(errors.RateLimited("429", retry_after=7))
    policy = RetryPolicy()
    result = await call_with_retry(
        policy, op, idempotent=False, clock=clock, sleep=rec.sleep, rng=random.Random(3)
    )
    assert result == "ok"
    assert 7 <= rec.waits[0] <= 7 + policy.base_delay


async def test_429_beyond_the_longest_wait_is_raised(clock: FakeClock) -> None:
    op = failing(errors.RateLimited("429", retry_after=600))
    with pytest.raises(errors.RateLimited):
        await call_with_retry(RetryPolicy(max_retry_after=60), op, idempotent=True, clock=clock)


@pytest.mark.parametrize(
    "error",
    [
        errors.ExitStatusUnknown("lost"),
        errors.NotFound("404"),
        errors.Unauthorized("401"),
        errors.InvalidRequest("400"),
        errors.OperationFailed("error line"),
    ],
)
async def test_errors_outside_the_retry_classes_are_raised_at_once(
    clock: FakeClock, error: errors.AdapterError
) -> None:
    rec = Recorder(clock)
    op = failing(error)
    with pytest.raises(type(error)):
        await call_with_retry(RetryPolicy(), op, idempotent=True, clock=clock, sleep=rec.sleep)
    assert op.calls["n"] == 1


async def test_attempts_and_deadline_bound_the_retries(clock: FakeClock) -> None:
    rec = Recorder(clock)
    op = failing(*[errors.TransportError("down")] * 10)
    with pytest.raises(errors.TransportError):
        await call_with_retry(
            RetryPolicy(max_attempts=4), op, idempotent=True, clock=clock, sleep=rec.sleep
        )
    assert op.calls["n"] == 4

    rec = Recorder(clock)
    op = failing(*[errors.RateLimited("429", retry_after=20)] * 10)
    with pytest.raises(errors.RateLimited):
        await call_with_retry(
            RetryPolicy(deadline=50, max_attempts=10),
            op,
            idempotent=True,
            clock=clock,
            sleep=rec.sleep,
        )
    assert sum(rec.waits) <= 50
    assert op.calls["n"] == 3
