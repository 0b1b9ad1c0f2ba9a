"""Receipts → Kubernetes Events, rate-limited per regarded object."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from lattice_adapters.kube import KubeApiError, KubeClient, resource_path
from lattice_operator.builders import (
    REPORTING_CONTROLLER,
    RUN_UID_LABEL,
    ObjectRef,
    receipt_event,
)
from lattice_operator.clock import Clock
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.metrics import K8S_EVENTS_DROPPED, RECEIPTS
from lattice_operator.pacing import TokenBucket

log = logging.getLogger(__name__)


class ReceiptEvents:
    """Posts one Event per receipt; a chatty object is capped by a token bucket of its own."""

    def __init__(
        self,
        kube: KubeClient,
        clock: Clock,
        *,
        rate: float,
        burst: int,
        controller: str = REPORTING_CONTROLLER,
        instance: str = "lattice-operator",
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._rate = rate
        self._burst = burst
        self._controller = controller
        self._instance = instance
        self._buckets: dict[str, TokenBucket] = {}
        self._dropped: dict[str, int] = {}

    def dropped(self, uid: str) -> int:
        """Receipts of this object not posted as Events (rate limit), since start-up."""
        return self._dropped.get(uid, 0)

    def forget(self, uid: str) -> None:
        """Drop the object's bucket and count (its Run daemon has ended; status keeps the total)."""
        self._buckets.pop(uid, None)
        self._dropped.pop(uid, None)

    def tracked(self) -> int:
        """Objects with rate-limit state held in memory."""
        return len(self._buckets.keys() | self._dropped.keys())

    async def published_sequences(self, regarding: ObjectRef) -> set[int]:
        """Sequence numbers of the receipts posted as Events regarding the object (still kept)."""
        path = resource_path("events.k8s.io", "v1", "events", regarding.namespace)
        listing = await self._kube.get(path, {"labelSelector": f"{RUN_UID_LABEL}={regarding.uid}"})
        found: set[int] = set()
        for item in listing.get("items", []):
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
        path = resource_path("events.k8s.io", "v1", "events", regarding.namespace)
        for receipt in receipts:
            RECEIPTS.labels(event=receipt.event, status=receipt.status).inc()
            if not bucket.take():
                self._dropped[regarding.uid] = self._dropped.get(regarding.uid, 0) + 1
                K8S_EVENTS_DROPPED.inc()
                continue
            body = receipt_event(
                regarding,
                receipt,
                now=self._clock.now(),
                controller=self._controller,
                instance=self._instance,
            )
            try:
                await self._kube.create(path, body)
            except KubeApiError as exc:
                if exc.conflict:  # the same receipt posted before a restart
                    continue
                # Events are evidence, not state: a failed post is logged, never fatal.
                log.warning("could not post Event for receipt %s: %s", receipt.receipt_id, exc)
