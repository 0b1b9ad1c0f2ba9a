"""Run handlers: the per-Run Event rate-limit state lives only as long as the Run's daemon,
and every daemon pass is one `kind="Run"` reconcile in the metrics. The receipt publisher
posts through the cluster port, faked once (`tests/support/cluster_writer.py`)."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

import lattice_operator.handlers.run as run_handlers
from lattice_adapters.kube_events import ReceiptEvents
from lattice_operator.api.object_ref import ObjectRef

# The per-Run state under test lives in the handlers' private context (boot builds it).
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.metrics import REGISTRY
from tests.support.admission_cases import sample
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.lifeloop import observed_receipt


class NeverStopped:
    async def wait(self) -> None:
        import asyncio

        await asyncio.Event().wait()


class ChattyDriver:
    """Stands in for RunDriver: posts more receipts than the burst allows, then ends."""

    fail = False

    def __init__(self, run: Any, **kwargs: Any) -> None:
        self.ref = ObjectRef(
            "lattice.dev/v1alpha1", "Run", "ns", run.metadata.name, run.metadata.uid
        )
        self.publisher: ReceiptEvents = kwargs["publisher"]

    async def drive(self) -> None:
        await self.publisher.publish(self.ref, [observed_receipt(i) for i in range(1, 6)])
        assert self.publisher.dropped(self.ref.uid) == 3  # burst 2: the other 3 were dropped
        if self.fail:
            raise RuntimeError("backend went away")


def _body(i: int) -> kopf.Body:
    doc = sample("run.yaml")
    doc["metadata"] = {"name": f"run-{i}", "namespace": "ns", "uid": f"uid-{i}", "generation": 1}
    return kopf.Body(doc)


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _context(writer: FakeClusterWriter) -> tuple[kopf.Memo, ReceiptEvents]:
    events = ReceiptEvents(writer, FakeClock(), rate=0.001, burst=2)
    memo = kopf.Memo()
    memo.lattice = OperatorContext(backend=object(), writer=writer, events=events)  # type: ignore[arg-type]
    return memo, events


async def _pass(memo: kopf.Memo, i: int) -> None:
    await run_handlers.run_daemon(
        body=_body(i),
        memo=memo,
        stopped=NeverStopped(),  # type: ignore[arg-type]
        sprite_directory={},
        run_claims={},
        intent_grants={},
    )


async def test_rate_limit_state_is_forgotten_when_each_run_daemon_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_handlers, "RunDriver", ChattyDriver)
    writer = FakeClusterWriter()
    memo, events = _context(writer)
    ok_before = _sample("lattice_reconcile_total", kind="Run", outcome="ok")
    for i in range(200):
        await _pass(memo, i)
        assert events.tracked() == 0  # bounded: nothing outlives the Run's daemon
    # Each Run had a fresh bucket of its own: its burst of 2, and one ReceiptsDropped notice.
    created = writer.created("events")
    assert len(created) == 3 * 200
    for i in range(200):
        run = [e for e in created if e["regarding"]["uid"] == f"uid-{i}"]
        assert [e["reason"] for e in run] == ["SessionStarted"] * 2 + ["ReceiptsDropped"]
    assert _sample("lattice_reconcile_total", kind="Run", outcome="ok") == ok_before + 200


async def test_a_failed_daemon_pass_forgets_too_and_counts_as_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ChattyDriver, "fail", True)
    monkeypatch.setattr(run_handlers, "RunDriver", ChattyDriver)
    memo, events = _context(FakeClusterWriter())
    errors_before = _sample("lattice_reconcile_total", kind="Run", outcome="error")
    durations_before = _sample("lattice_reconcile_duration_seconds_count", kind="Run")
    with pytest.raises(RuntimeError):
        await _pass(memo, 1)
    assert events.tracked() == 0
    assert _sample("lattice_reconcile_total", kind="Run", outcome="error") == errors_before + 1
    assert _sample("lattice_reconcile_duration_seconds_count", kind="Run") == durations_before + 1


async def test_an_invalid_run_is_a_blocked_reconcile() -> None:
    memo, _ = _context(FakeClusterWriter())
    body = kopf.Body({"apiVersion": "lattice.dev/v1alpha1", "kind": "Run", "metadata": {}})
    blocked_before = _sample("lattice_reconcile_total", kind="Run", outcome="blocked")
    with pytest.raises(kopf.PermanentError):
        await run_handlers.run_daemon(
            body=body,
            memo=memo,
            stopped=NeverStopped(),  # type: ignore[arg-type]
            sprite_directory={},
            run_claims={},
            intent_grants={},
        )
    assert _sample("lattice_reconcile_total", kind="Run", outcome="blocked") == blocked_before + 1
