"""Receipts → Kubernetes Events, rate-limited per regarded object, through the cluster port
(`EventStore`: the operator's `KubeClusterWriter`). The receipts of one publish (one status
write) share Events up to `per_event` each (`runs.receipts_per_event`; 1, an Event per
receipt, is the form release 0.1.0 reads)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from lattice_adapters.kube import KubeApiError
from lattice_adapters.kube.events import EVENTS, post_notice
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.builders import (
    REPORTING_CONTROLLER,
    RUN_UID_LABEL,
    receipts_event,
)
from lattice_operator.clock import Clock
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.metrics import K8S_EVENTS_DROPPED, RECEIPT_POST_FAILURES, RECEIPTS
from lattice_operator.pacing import TokenBucket
from lattice_operator.ports.cluster import EventStore
from lattice_operator.receipt_reader import event_receipts

log = logging.getLogger(__name__)
DROP_NOTICE_INTERVAL = 60.0
"""At most one ReceiptsDropped notice per object per this many seconds."""
BATCH_BYTES = 64 * 1024
"""The most receipt JSON one Event carries (the API server allows 256 KiB of annotations)."""


class ReceiptEvents:
    """Posts receipts as Events, up to `per_event` to an Event; a chatty object is capped by
    a token bucket of its own (a token per Event: the writes are what it bounds)."""

    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        *,
        rate: float,
        burst: int,
        per_event: int = 1,
        controller: str = REPORTING_CONTROLLER,
        instance: str = "lattice-operator",
    ) -> None:
        self._store = store
        self._clock = clock
        self._rate = rate
        self._burst = burst
        self._per_event = max(1, per_event)
        self._controller = controller
        self._instance = instance
        self._buckets: dict[str, TokenBucket] = {}
        self._dropped: dict[str, int] = {}
        self._dropped_ranges: dict[str, list[tuple[int, int]]] = {}
        self._noticed_at: dict[str, float] = {}

    def dropped(self, uid: str) -> int:
        """Receipts of this object not posted as Events (rate limit), since start-up."""
        return self._dropped.get(uid, 0)

    def dropped_sequences(self, uid: str) -> list[tuple[int, int]]:
        """Sequence numbers of the receipts not posted, as inclusive ranges (since start-up)."""
        return list(self._dropped_ranges.get(uid, ()))

    def forget(self, uid: str) -> None:
        """Drop the object's bucket and count (its Run daemon has ended; status keeps the total)."""
        self._buckets.pop(uid, None)
        self._dropped.pop(uid, None)
        self._dropped_ranges.pop(uid, None)
        self._noticed_at.pop(uid, None)

    def tracked(self) -> int:
        """Objects with rate-limit state held in memory."""
        return len(self._buckets.keys() | self._dropped.keys() | self._noticed_at.keys())

    async def published_sequences(self, regarding: ObjectRef) -> set[int]:
        """Sequence numbers of the receipts posted as Events regarding the object (still kept),
        whether an Event carries one receipt or several."""
        listing = await self._store.list(
            EVENTS, regarding.namespace, label_selector=f"{RUN_UID_LABEL}={regarding.uid}"
        )
        found: set[int] = set()
        for item in listing:
            if item.get("reportingController") != self._controller:
                continue  # anyone may post an Event with our annotations: count only ours
            # Read as every reader reads them (`lattice logs --receipts`, the MCP tools).
            for receipt in event_receipts(item) or ():
                if receipt["sequence"] is not None:
                    found.add(receipt["sequence"])
        return found

    async def publish(self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]) -> None:
        bucket = self._buckets.get(regarding.uid)
        if bucket is None:
            bucket = self._buckets[regarding.uid] = TokenBucket(
                self._clock, rate=self._rate, burst=self._burst
            )
        dropped_now: list[int | None] = []
        for batch, wire in _batches(list(receipts), self._per_event):
            for receipt in batch:
                RECEIPTS.labels(event=receipt.event, status=receipt.status).inc()
            if not bucket.take():
                for receipt in batch:
                    self._dropped[regarding.uid] = self._dropped.get(regarding.uid, 0) + 1
                    if receipt.sequence is not None:
                        _add(self._dropped_ranges.setdefault(regarding.uid, []), receipt.sequence)
                    K8S_EVENTS_DROPPED.inc()
                    dropped_now.append(receipt.sequence)
                continue
            body = receipts_event(
                regarding,
                batch,
                wire=wire,
                now=self._clock.now(),
                controller=self._controller,
                instance=self._instance,
            )
            try:
                # False: the same receipts were posted before a restart (the name is theirs).
                await self._store.create(EVENTS, regarding.namespace, body)
            except KubeApiError as exc:
                if exc.conflict:  # a 409 other than AlreadyExists: there all the same
                    continue
                # Events are evidence, not state: a failed post is logged, never fatal.
                RECEIPT_POST_FAILURES.inc()
                ids = ", ".join(r.receipt_id for r in batch)
                log.warning("could not post Event for receipt(s) %s: %s", ids, exc)
        if dropped_now:
            await self._notice_drops(regarding, dropped_now)

    async def _notice_drops(self, regarding: ObjectRef, dropped: list[int | None]) -> None:
        """Say so when receipts are dropped, as it happens: a ReceiptsDropped notice (outside
        the receipts' rate limit, at most one per object per DROP_NOTICE_INTERVAL)."""
        last = self._noticed_at.get(regarding.uid)
        now = self._clock.monotonic()
        if last is not None and now - last < DROP_NOTICE_INTERVAL:
            return
        self._noticed_at[regarding.uid] = now
        numbers = [n for n in dropped if n is not None]
        where = f" (sequence {min(numbers)} to {max(numbers)})" if numbers else ""
        total = self._dropped.get(regarding.uid, 0)
        note = (
            f"{len(dropped)} receipt(s){where} not posted as Events: over the Event rate limit "
            f"of this object ({total} dropped since the operator started); they are recorded "
            "as dropped, not lost, and counted in status.receipts.eventsDropped"
        )
        await post_notice(
            self._store,
            regarding,
            reason="ReceiptsDropped",
            note=note,
            warning=False,
            clock=self._clock,
            controller=self._controller,
            instance=self._instance,
        )


def _batches(
    receipts: list[LifecycleReceipt], most: int
) -> Iterator[tuple[list[LifecycleReceipt], list[dict[str, Any]] | None]]:
    """The receipts in order, in runs of at most `most` and `BATCH_BYTES` of JSON (a receipt
    larger than that alone); each run with its receipts' wire forms, made once for measuring
    and posting (None for runs of one: posted in the single form)."""
    if most == 1:
        yield from (([r], None) for r in receipts)
        return
    batch: list[LifecycleReceipt] = []
    wires: list[dict[str, Any]] = []
    size = 0
    for receipt in receipts:
        wire = receipt.to_wire()
        length = len(json.dumps(wire, separators=(",", ":")))
        if batch and (len(batch) == most or size + length > BATCH_BYTES):
            yield batch, wires
            batch, wires, size = [], [], 0
        batch.append(receipt)
        wires.append(wire)
        size += length
    if batch:
        yield batch, wires


def _add(ranges: list[tuple[int, int]], number: int) -> None:
    """Add `number` to sorted inclusive ranges (receipts are dropped in sequence order)."""
    if ranges and ranges[-1][0] <= number <= ranges[-1][1]:
        return
    if ranges and ranges[-1][1] == number - 1:
        ranges[-1] = (ranges[-1][0], number)
    else:
        ranges.append((number, number))
