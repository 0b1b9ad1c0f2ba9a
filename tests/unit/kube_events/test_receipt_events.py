"""ReceiptEvents over the cluster port: receipts are Events created through it (one already
there is no failure), several to an Event when `per_event` allows, and what was published is
read back by the Run's label, ours only, in either form."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from lattice_adapters import kube_events
from lattice_adapters.kube import Forbidden
from lattice_adapters.kube_events import ReceiptEvents
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.builders import (
    RECEIPT_ANNOTATION,
    RECEIPTS_ANNOTATION,
    RUN_UID_LABEL,
    receipts_event,
)
from lattice_operator.metrics import REGISTRY
from lattice_operator.receipt_reader import receipts_from_events
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.lifeloop import observed_receipt

RUN = ObjectRef("lattice.dev/v1alpha1", "Run", "ns", "run-1", "uid-1")
OTHER = ObjectRef("lattice.dev/v1alpha1", "Run", "ns", "run-2", "uid-2")
NOW = datetime(2026, 11, 28, tzinfo=UTC)


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


async def test_the_receipts_of_one_publish_share_events_up_to_per_event() -> None:
    writer = FakeClusterWriter()
    events = ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10, per_event=2)
    await events.publish(RUN, [observed_receipt(n) for n in range(1, 6)])
    posted = writer.created("events")
    assert [e["metadata"]["name"] for e in posted] == [
        "run-1.r000001-000002-lfr-2",
        "run-1.r000003-000004-lfr-4",
        "run-1.r000005-lfr-5",  # alone: the form an Event per receipt has
    ]
    batch = posted[0]["metadata"]["annotations"]
    assert [r["sequence"] for r in json.loads(batch[RECEIPTS_ANNOTATION])] == [1, 2]
    assert batch["lattice.dev/sequences"] == "1-2"
    assert RECEIPT_ANNOTATION in posted[2]["metadata"]["annotations"]
    assert posted[0]["note"] == "#1 session.started observed receipt=lfr-1; " + (
        "#2 session.started observed receipt=lfr-2"
    )
    # Read back whole, in order, by the restart audit and by every reader.
    assert await events.published_sequences(RUN) == {1, 2, 3, 4, 5}
    listing = {"items": list(writer.objects.values())}
    receipts, untrusted = receipts_from_events(listing)
    assert [r["sequence"] for r in receipts] == [1, 2, 3, 4, 5]
    assert untrusted == 0


async def test_a_batch_takes_one_token_and_a_dropped_batch_is_each_receipt_dropped() -> None:
    writer = FakeClusterWriter()
    events = ReceiptEvents(writer, FakeClock(), rate=0.001, burst=1, per_event=2)
    await events.publish(RUN, [observed_receipt(n) for n in range(1, 5)])
    assert [e["reason"] for e in writer.created("events")] == ["SessionStarted", "ReceiptsDropped"]
    assert events.dropped(RUN.uid) == 2
    assert events.dropped_sequences(RUN.uid) == [(3, 4)]
    assert await events.published_sequences(RUN) == {1, 2}


async def test_a_batch_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    one = len(json.dumps(observed_receipt(1).to_wire(), separators=(",", ":")))
    monkeypatch.setattr(kube_events, "BATCH_BYTES", 2 * one + 10)
    writer = FakeClusterWriter()
    events = ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10, per_event=64)
    await events.publish(RUN, [observed_receipt(n) for n in range(1, 6)])
    names = [e["metadata"]["name"] for e in writer.created("events")]
    assert names == [
        "run-1.r000001-000002-lfr-2",
        "run-1.r000003-000004-lfr-4",
        "run-1.r000005-lfr-5",
    ]
    assert await events.published_sequences(RUN) == {1, 2, 3, 4, 5}


async def test_a_batch_posted_again_after_a_restart_is_no_failure_and_no_twin() -> None:
    writer = FakeClusterWriter()
    batch = [observed_receipt(1), observed_receipt(2)]
    await ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10, per_event=8).publish(RUN, batch)
    before = _failures()
    await ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10, per_event=8).publish(RUN, batch)
    assert _failures() == before
    assert len(writer.objects) == 1


async def test_a_forged_batch_is_not_counted_as_published() -> None:
    writer = FakeClusterWriter()
    forged = receipts_event(RUN, [observed_receipt(7), observed_receipt(8)], now=NOW,
                            controller="someone-else", instance="x")  # fmt: skip
    writer.put("events", forged)
    events = ReceiptEvents(writer, FakeClock(), rate=1.0, burst=10, per_event=8)
    assert await events.published_sequences(RUN) == set()
    assert receipts_from_events({"items": [forged]}) == ([], 1)
