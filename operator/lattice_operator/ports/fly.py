"""The Fly port: what the operator asks of the Fly Machines API for a deployment hook (list
an app's machines, read one, create, start, stop, wait for a state).

`lattice_adapters.fly.FlyMachinesClient` implements it over httpx. Every failure is an
exception of `lattice_operator.ports.errors`: NotFound (no such app or machine), Conflict
(409/412: the machine's state forbids it), Unauthorized (401/403), InvalidRequest (400/422),
RateLimited (429), TransportError (unreachable, 502/503/504), Timeout (no answer, or a wait
whose state was not reached in time: 408), ServerError.

The wire shapes are Fly's (docs/fly.md names the description they were checked against).
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

WaitState = Literal["started", "stopped", "destroyed"]
"""The states the Machines API's wait endpoint can wait for."""

ACTIVE_STATES = frozenset({"created", "starting", "started", "stopping", "stopped", "suspended"})
"""States of a machine that exists (not destroying or destroyed)."""


class _Frozen(BaseModel):
    # No use_attribute_docstrings: no schema is made of these, and reading the docstrings
    # when the class is defined is start-up CPU (see modeling.ApiModel).
    model_config = ConfigDict(frozen=True, extra="ignore")


class FlyGuest(_Frozen):
    """The machine's size."""

    cpu_kind: str = "shared"
    """shared or performance."""
    cpus: int = Field(default=1, ge=1)
    memory_mb: int = Field(default=256, ge=1)


class FlyMachineConfig(_Frozen):
    """The part of a machine's config the operator sets and reads."""

    image: str
    """The OCI image it runs."""
    env: dict[str, str] = {}
    guest: FlyGuest | None = None
    metadata: dict[str, str] = {}
    """Free key/value pairs (the operator records the Intent that made it)."""
    auto_destroy: bool = False
    """Destroy the machine when it exits."""


class FlyMachine(_Frozen):
    """A machine as the API returns it (the fields the operator uses)."""

    id: str
    name: str = ""
    state: str = ""
    """created, starting, started, stopping, stopped, suspending, suspended, replacing,
    destroying, destroyed."""
    region: str = ""
    instance_id: str = ""
    config: FlyMachineConfig | None = None
    created_at: str = ""
    updated_at: str = ""


class FlyMachines(Protocol):
    """One Fly organisation's Machines API, with the operator's own token."""

    async def list_machines(self, app: str) -> list[FlyMachine]:
        """The app's machines (not the destroyed ones)."""
        ...

    async def get_machine(self, app: str, machine_id: str) -> FlyMachine: ...

    async def create_machine(
        self,
        app: str,
        config: FlyMachineConfig,
        *,
        name: str | None = None,
        region: str | None = None,
    ) -> FlyMachine:
        """Create (and launch) a machine; not retried on an answer that may mean it was
        made (the caller looks it up by name before trying again)."""
        ...

    async def start_machine(self, app: str, machine_id: str) -> None: ...

    async def stop_machine(
        self, app: str, machine_id: str, *, signal: str | None = None, kill_after: str | None = None
    ) -> None:
        """Stop it (`kill_after`: its grace before a kill, as the API takes it: `30s`)."""
        ...

    async def wait_for_state(
        self, app: str, machine_id: str, state: WaitState, *, timeout_seconds: int
    ) -> None:
        """Return once the machine is in `state`; Timeout when it is not within
        `timeout_seconds` (the API waits 60 s at most)."""
        ...

    async def aclose(self) -> None: ...


__all__ = [
    "ACTIVE_STATES",
    "FlyGuest",
    "FlyMachine",
    "FlyMachineConfig",
    "FlyMachines",
    "WaitState",
]
