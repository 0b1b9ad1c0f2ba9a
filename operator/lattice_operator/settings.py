"""Operator settings: a tree of small typed models, loaded once at start-up."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class PeeringSettings(_Settings):
    """How several operator replicas agree that only one is active (kopf peering)."""

    name: str = "lattice"
    """Name of the ClusterKopfPeering object the replicas share."""
    standalone: bool = False
    """Skip peering entirely (single replica, or tests)."""
    priority: int = 0
    """This replica's priority; the highest live one is active. Give replicas distinct values."""


class ProbeSettings(_Settings):
    """The liveness endpoint kopf serves."""

    host: str = "127.0.0.1"
    """Address the liveness endpoint binds to."""
    port: int = Field(default=8080, ge=0, le=65535)
    """Port of the liveness endpoint; 0 disables it."""


class WatchSettings(_Settings):
    """Watch-stream behaviour."""

    inactivity_timeout: float = Field(default=70.0, gt=0)
    """Reconnect a watch that has been silent this long (seconds); bookmarks arrive every 60 s."""


class OperatorSettings(_Settings):
    """Everything `lattice run` needs to know."""

    namespaces: tuple[str, ...] = ()
    """Namespaces (globs) to serve; empty means the whole cluster."""
    peering: PeeringSettings = PeeringSettings()
    """Peering between replicas."""
    probe: ProbeSettings = ProbeSettings()
    """Liveness endpoint."""
    watch: WatchSettings = WatchSettings()
    """Watch streams."""
    component: str = "lattice-operator"
    """reportingComponent of the Events the operator posts."""
    finalizer: str = "lattice.dev/finalizer"
    """Finalizer the operator puts on the objects it must clean up after."""


__all__ = ["OperatorSettings", "PeeringSettings", "ProbeSettings", "WatchSettings"]
