"""Receipts → Kubernetes Events, rate-limited per regarded object, through the cluster port
(`EventStore`: the operator's `KubeClusterWriter`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from lattice_adapters.kube import KubeApiError
from lattice_adapters.kube.events import EVENTS, post_notice
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.builders import (
    REPORTING_CONTROLLER,
    RUN_UID_LABEL,
    receipt_event,
)
from lattice_operator.clock import Clock
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.metrics import K8S_EVENTS_DROPPED, RECEIPT_POST_FAILURES, RECEIPTS
from lattice_operator.pacing import TokenBucket
from lattice_operator.ports.cluster import EventStore

log = logging.getLogger(__name__)
DROP_NOTICE_INTERVAL = 60.0
"""At most one ReceiptsDropped notice per object per this many seconds."""


class ReceiptEvents:
    """Posts one Event per receipt; a chatty object is capped by a token bucket of its own."""

    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        *,
        rate: float,
        burst: int,
        controller: str = REPORTING_CONTROLLER,
        instance: str = "lattice-operator",
    ) -> None:
        self._store = store
        self._clock = clock
        self._rate = rate
        self._burst = burst
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
        """Sequence numbers of the receipts posted as Events regarding the object (still kept)."""
        listing = await self._store.list(
            EVENTS, regarding.namespace, label_selector=f"{RUN_UID_LABEL}={regarding.uid}"
        )
        found: set[int] = set()
        for item in listing:
            if item.get("reportingController") != self._controller:
                continue  # anyone may post an Event with our annotations: count only ours
            value = (item.get("metadata", {}).get("annotations") or {}).get("lattice.dev/sequence")
            if value and value.isdigit():
                found.add(int(value))
        return found

    async def publish(self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]) -> None:
        bucket = self._buckets.get(regarding.uid)
        if bucket is None:
            bucket = self._buckets[regarding.uid] = TokenBucket(
                self._clock, rate=self._rate, burst=self._burst
            )
        dropped_now: list[int | None] = []
        for receipt in receipts:
            RECEIPTS.labels(event=receipt.event, status=receipt.status).inc()
            if not bucket.take():
                self._dropped[regarding.uid] = self._dropped.get(regarding.uid, 0) + 1
                if receipt.sequence is not None:
                    _add(self._dropped_ranges.setdefault(regarding.uid, []), receipt.sequence)
                K8S_EVENTS_DROPPED.inc()
                dropped_now.append(receipt.sequence)
                continue
            body = receipt_event(
                regarding,
                receipt,
                now=self._clock.now(),
                controller=self._controller,
                instance=self._instance,
            )
            try:
                # False: the same receipt was posted before a restart (its name is its own).
                await self._store.create(EVENTS, regarding.namespace, body)
            except KubeApiError as exc:
                if exc.conflict:  # a 409 other than AlreadyExists: there all the same
                    continue
                # Events are evidence, not state: a failed post is logged, never fatal.
                RECEIPT_POST_FAILURES.inc()
                log.warning("could not post Event for receipt %s: %s", receipt.receipt_id, exc)
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


def _add(ranges: list[tuple[int, int]], number: int) -> None:
    """Add `number` to sorted inclusive ranges (receipts are dropped in sequence order)."""
    if ranges and ranges[-1][0] <= number <= ranges[-1][1]:
        return
    if ranges and ranges[-1][1] == number - 1:
        ranges[-1] = (ranges[-1][0], number)
    else:
        ranges.append((number, number))
