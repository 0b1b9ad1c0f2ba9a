"""What handlers get from `lattice run` through kopf's memo."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lattice_adapters.kube.writer import KubeClusterWriter
from lattice_operator.clock import Clock, SystemClock
from lattice_operator.handlers._counted_once import CountedOnce
from lattice_operator.reconcilers.sprite_waiters import SpriteWaiters
from lattice_operator.reconcilers.sprite_writers import SpriteWriters
from lattice_operator.settings import OperatorSettings

if TYPE_CHECKING:
    from lattice_adapters.kube import KubeClient
    from lattice_adapters.kube_events import ReceiptEvents
    from lattice_operator.policy import CompiledPolicy
    from lattice_operator.ports.cluster import ClusterWriter, ForgeAccess
    from lattice_operator.ports.fly import FlyMachines
    from lattice_operator.ports.sprites import SpriteBackend
    from lattice_operator.reconcilers.intent_workers import IntentWorkers


SEEN_WAITS = 1024
"""Run checkpoints remembered as listed (`OperatorContext.listed_waits`)."""


@dataclass
class OperatorContext:
    """Shared by every handler of one operator process; filled in at start-up."""

    settings: OperatorSettings = field(default_factory=OperatorSettings)
    clock: Clock = field(default_factory=SystemClock)
    backend: SpriteBackend | None = None
    kube: KubeClient | None = None
    writer: ClusterWriter | None = None
    """The writes and Events of the handlers' plans (None: over `kube` and `events`, made at
    start-up or when first needed)."""
    decisions_counted: CountedOnce = field(default_factory=CountedOnce)
    """Intent decisions already counted in the metrics (per Intent and spec generation)."""
    listed_waits: CountedOnce = field(default_factory=lambda: CountedOnce(SEEN_WAITS))
    """Run checkpoints already listed in their Sprite's status when the Run went Waiting
    (a restarted operator lists each once more)."""
    events: ReceiptEvents | None = None
    default_policy: CompiledPolicy | None = None
    """The cluster-wide IntentPolicy from the settings, tried after a namespace's own."""
    identity: str | None = None
    backend_problem: str = "no Sprites backend is configured"
    """Why `backend` is None, for the Sprites' status."""
    """The user name the API server knows this operator by (SelfSubjectReview at start-up)."""
    scratch: list[Path] = field(default_factory=list)
    """Throwaway directories of this process (the webhook's key files): removed at exit."""
    background: list[asyncio.Task[None]] = field(default_factory=list)
    """Loops started at start-up (certificate reload and rotation): cancelled at clean-up."""
    intent_workers: IntentWorkers | None = None
    """Open Intents' tasks (made on the first Intent event, with kopf's indexes), woken when
    what they read changes; stopped at clean-up."""
    sprite_waiters: SpriteWaiters = field(default_factory=SpriteWaiters)
    """Runs' daemons by (namespace, Sprite): woken when the Sprite changes or, the one next in
    line, when a Run on it ends, so a Run waiting for its Sprite starts at once instead of at
    its next poll."""
    sprite_writers: SpriteWriters = field(default_factory=SpriteWriters)
    """Held by whoever converges a backend sprite (Sprite handlers, the fleet observer, a
    remediation): one at a time per Sprite, each deciding from the newest view."""
    forge: ForgeAccess | None = None
    """GitHub, with the operator's own credential (None: not configured)."""
    forge_problem: str = (
        "no GitHub credential is configured (settings forge.token_secret or forge.app_id)"
    )
    """Why `forge` is None, for the Intents that wait for it."""
    fly: FlyMachines | None = None
    """Fly's Machines API, with the operator's own token (None: not configured)."""
    fly_problem: str = "no Fly token is configured (settings fly.token_secret)"
    """Why `fly` is None."""

    def require_backend(self) -> SpriteBackend:
        if self.backend is None:
            raise RuntimeError("the Sprites backend is not configured yet")
        return self.backend

    def require_kube(self) -> KubeClient:
        if self.kube is None:
            raise RuntimeError("the Kubernetes client is not started yet")
        return self.kube

    def require_writer(self) -> ClusterWriter:
        if self.writer is None:
            self.writer = KubeClusterWriter(
                self.require_kube(),
                receipts=self.events,
                clock=self.clock,
                instance=self.settings.component,
            )
        return self.writer

    def require_events(self) -> ReceiptEvents:
        if self.events is None:
            raise RuntimeError("the Event publisher is not started yet")
        return self.events


def context_of(memo: object) -> OperatorContext:
    """The OperatorContext stored in kopf's memo (a default one when run bare under kopf)."""
    ctx = getattr(memo, "lattice", None)
    if isinstance(ctx, OperatorContext):
        return ctx
    ctx = OperatorContext()
    setattr(memo, "lattice", ctx)  # noqa: B010 - kopf.Memo is an attribute bag
    return ctx
