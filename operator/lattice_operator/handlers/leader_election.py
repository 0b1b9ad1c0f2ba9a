"""The leader Lease through the API server: read, written with optimistic concurrency, renewed,
released. The rules (who may take it, when it is lost) are lattice_operator.leadership's."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from lattice_adapters.kube import KubeApiError, KubeClient, resource_path
from lattice_operator.clock import Clock
from lattice_operator.leadership import JITTER, LeaderElection, LeaseRecord, Write
from lattice_operator.metrics import LEADER
from lattice_operator.settings import LeaderElectionSettings

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_identity(settings: LeaderElectionSettings) -> str:
    """holderIdentity: the Pod's name in a cluster; elsewhere unique per process, as
    client-go's host name plus a random suffix."""
    return (
        settings.identity
        or os.environ.get("POD_NAME")
        or (f"{socket.gethostname()}_{uuid.uuid4()}")
    )


def lease_namespace(settings: LeaderElectionSettings) -> str:
    if settings.lease_namespace:
        return settings.lease_namespace
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


class LeaseLock:
    """One Lease object: get, create, replace (409 when someone else wrote first)."""

    def __init__(self, kube: KubeClient, namespace: str, name: str) -> None:
        self._kube = kube
        self.namespace, self.name = namespace, name
        self._collection = resource_path("coordination.k8s.io", "v1", "leases", namespace)
        self._resource_version: str | None = None

    async def get(self) -> LeaseRecord | None:
        try:
            lease = await self._kube.get(f"{self._collection}/{self.name}")
        except KubeApiError as exc:
            if exc.not_found:
                self._resource_version = None
                return None
            raise
        self._resource_version = str(lease["metadata"]["resourceVersion"])
        return LeaseRecord.from_spec(lease.get("spec") or {})

    async def write(self, write: Write) -> bool:
        """Write the record; False if someone else wrote (or created) the Lease first."""
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": write.record.to_spec(),
        }
        try:
            if write.create:
                done = await self._kube.create(self._collection, body)
            else:
                body["metadata"]["resourceVersion"] = self._resource_version
                done = await self._kube.replace(f"{self._collection}/{self.name}", body)
        except KubeApiError as exc:
            if exc.conflict:
                return False
            raise
        self._resource_version = str(done["metadata"]["resourceVersion"])
        return True


class Elector:
    """Acquires the Lease, keeps it, and hands it back."""

    def __init__(
        self, lock: LeaseLock, election: LeaderElection, *, rng: random.Random | None = None
    ) -> None:
        self.lock, self.election = lock, election
        self._rng = rng or random.Random()

    @classmethod
    def for_settings(
        cls, kube: KubeClient, settings: LeaderElectionSettings, clock: Clock
    ) -> Elector:
        lock = LeaseLock(kube, lease_namespace(settings), settings.lease_name)
        return cls(lock, LeaderElection(own_identity(settings), settings.timings(), clock))

    @property
    def identity(self) -> str:
        return self.election.identity

    async def try_once(self) -> bool:
        """One attempt to acquire or renew; True when we hold the Lease afterwards."""
        write = self.election.plan(await self.lock.get())
        if write is None:
            return False
        if not await self.lock.write(write):
            return False  # someone else won this round; the next read shows who
        self.election.written(write)
        return True

    async def _attempt(self, limit: float) -> bool:
        try:
            return await asyncio.wait_for(self.try_once(), limit)
        except (KubeApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("leader election: Lease %s: %s", self._where(), exc or type(exc).__name__)
            return False

    async def acquire(self) -> None:
        """Return once this replica holds the Lease (tries every retry period, jittered)."""
        timings = self.election.timings
        log.info("leader election: %s is waiting for Lease %s", self.identity, self._where())
        while not await self._attempt(timings.renew_deadline):  # noqa: ASYNC110 - polling a Lease
            await asyncio.sleep(timings.retry_period * (1 + self._rng.random() * JITTER))
        record = self.election.observed
        log.info(
            "leader election: %s holds Lease %s (transitions: %s)",
            self.identity,
            self._where(),
            record.transitions if record else "?",
        )
        LEADER.set(1)

    async def keep(self) -> None:
        """Renew every retry period; return when the Lease is lost (renew deadline passed,
        or someone else holds it)."""
        timings = self.election.timings
        while True:
            await asyncio.sleep(timings.retry_period)
            await self._attempt(timings.retry_period)
            if self.election.lost():
                holder = self.election.observed.holder if self.election.observed else ""
                log.error(
                    "leader election: %s lost Lease %s (now held by %r)",
                    self.identity,
                    self._where(),
                    holder,
                )
                LEADER.set(0)
                return

    async def release(self) -> None:
        """Hand the Lease back so a standby takes over at once (best effort)."""
        record = self.election.release()
        LEADER.set(0)
        if record is None:
            return
        try:
            if await self.lock.write(Write(record, create=False)):
                self.election.released(record)
                log.info("leader election: %s released Lease %s", self.identity, self._where())
        except (KubeApiError, aiohttp.ClientError, OSError) as exc:
            log.warning("leader election: releasing Lease %s failed: %s", self._where(), exc)

    def _where(self) -> str:
        return f"{self.lock.namespace}/{self.lock.name}"


__all__ = ["Elector", "LeaseLock", "lease_namespace", "own_identity"]
