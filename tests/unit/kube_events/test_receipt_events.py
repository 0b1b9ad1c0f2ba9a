"""ReceiptEvents over the cluster port: receipts are Events created through it (one already
there is no failure), and what was published is read back by the Run's label, ours only."""

from __future__ import annotations

from lattice_adapters.kube import Forbidden
from lattice_adapters.kube_events import ReceiptEvents
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.builders import RUN_UID_LABEL
from lattice_operator.metrics import REGISTRY
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.lifeloop import observed_receipt

RUN = ObjectRef("lattice.dev/v1alpha1", "Run", "ns", "run-1", "uid-1")
OTHER = ObjectRef("lattice.dev/v1alpha1", "Run", "ns", "run-2", "uid-2")


def _failures() -> float:
    return REGISTRY.get_sample_value("lattice_receipt_post_failures_total") or 0.0


async def test_published_sequences_are_this_runs_events_posted_by_us() -> None:
    writer = FakeClusterWriter()
    events = ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10)
    await events.publish(RUN, [observed_receipt(1), observed_receipt(2)])
    await events.publish(OTHER, [observed_receipt(3)])
    # Someone else's Event with our label and annotations is not counted as published.
    writer.put(
        "events",
        {
            "metadata": {
                "name": "forged",
                "namespace": "ns",
                "labels": {RUN_UID_LABEL: RUN.uid},
                "annotations": {"lattice.dev/sequence": "9"},
            },
            "reportingController": "someone-else",
        },
    )
    assert await events.published_sequences(RUN) == {1, 2}
    assert await events.published_sequences(OTHER) == {3}
    [listed, *_] = [c for c in writer.calls if c.verb == "list"]
    assert listed.selector == f"{RUN_UID_LABEL}={RUN.uid}"


async def test_a_receipt_posted_before_a_restart_is_no_failure() -> None:
    writer = FakeClusterWriter()
    await ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10).publish(RUN, [observed_receipt(1)])
    before = _failures()
    # A new process (new buckets) posts the same receipt again: the Event is there already.
    await ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10).publish(RUN, [observed_receipt(1)])
    assert _failures() == before
    assert len(writer.objects) == 1


async def test_a_refused_post_is_counted_and_the_rest_still_posted() -> None:
    writer = FakeClusterWriter()
    writer.fail("create", Forbidden(403, "Forbidden", "events is forbidden", {}))
    before = _failures()
    await ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10).publish(
        RUN, [observed_receipt(1), observed_receipt(2)]
    )
    assert _failures() == before + 1
    assert await ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10).published_sequences(
        RUN
    ) == {2}


async def test_drops_are_noticed_once_through_the_port_with_a_generated_name() -> None:
    writer = FakeClusterWriter()
    events = ReceiptEvents(writer, FakeClock(), rate=0.001, burst=1)
    await events.publish(RUN, [observed_receipt(1), observed_receipt(2), observed_receipt(3)])
    await events.publish(
        RUN, [observed_receipt(4)]
    )  # within DROP_NOTICE_INTERVAL: no second notice
    reasons = [e["reason"] for e in writer.created("events")]
    assert reasons == ["SessionStarted", "ReceiptsDropped"]
    [notice] = [o for o in writer.objects.values() if o["reason"] == "ReceiptsDropped"]
    assert notice["metadata"]["name"].startswith("run-1-")
    assert "sequence 2 to 3" in notice["note"]
    assert events.dropped_sequences(RUN.uid) == [(2, 4)]
