"""Driving one Run driver in a unit test: fake backend, directory, writer, receipts, clock.

The harness keeps the Run as the API server would: every status the driver writes becomes
the status the driver's `view()` sees next, and the test edits the spec (`cancel`,
`resume`) through `harness.edit_spec`. Time is real (the driver's waits are short,
from `FAST_TIMINGS`) and can be moved forward with `clock.advance`, for timeouts.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Run
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.ports import ForgeAccess, Grants, SpriteView
from lattice_operator.reconcilers.run import RunDriver
from lattice_operator.settings import RunTimings
from tests.support.fake_backend import FakeBackend

SPRITE = "box"
BACKEND_SPRITE = "lattice-box-1"
FAST_TIMINGS = RunTimings(
    outbox_interval=0.02,
    patch_interval=0.02,
    sprite_wait=0.02,
    reattach_deadline=1.0,
    waiting_exit_grace=30.0,
    idle_poll=0.02,
    start_retry_wait=0.02,
)


class MovableClock:
    """Real time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self._start_wall = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)
        self._start_mono = time.monotonic()
        self._offset = 0.0

    def now(self) -> datetime:
        return self._start_wall + timedelta(seconds=self.monotonic() - self._start_mono)

    def monotonic(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds


class Directory:
    """The SpriteDirectory port: one Sprite, ready unless the test says otherwise."""

    def __init__(self) -> None:
        self.view: SpriteView | None = SpriteView(ready=True, backend_name=BACKEND_SPRITE)
        self.held_by: str | None = None
        self.looks = 0
        """How often a Run asked who holds the Sprite."""

    def lookup(self, namespace: str, name: str) -> SpriteView | None:
        return self.view if name == SPRITE else None

    def holder(self, namespace: str, sprite: str, run_uid: str) -> str | None:
        self.looks += 1
        return self.held_by


class Publisher:
    """The ReceiptPublisher port, recording what was posted."""

    def __init__(self) -> None:
        self.posted: list[LifecycleReceipt] = []
        self.kept: set[int] | None = None
        """What `published_sequences` answers (default: every sequence posted)."""

    async def publish(self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]) -> None:
        self.posted.extend(receipts)

    async def published_sequences(self, regarding: ObjectRef) -> set[int]:
        if self.kept is not None:
            return set(self.kept)
        return {r.sequence for r in self.posted if r.sequence is not None}

    def dropped(self, uid: str) -> int:
        return 0

    def dropped_sequences(self, uid: str) -> list[tuple[int, int]]:
        return []


class Actions:
    """The ActionServices port: grants and secrets from dicts; what was done, recorded."""

    def __init__(self) -> None:
        self.granted: dict[str, Grants] = {}
        self.secrets: dict[tuple[str, str], bytes] = {}
        self.notices: list[tuple[str | None, str, str]] = []
        self.proposed: list[dict[str, Any]] = []
        self.forge_access: ForgeAccess | None = None

    def forge(self) -> ForgeAccess | None:
        return self.forge_access

    def grants(self, namespace: str, intent: str) -> Grants | None:
        return self.granted.get(intent)

    async def secret_value(self, namespace: str, name: str, key: str) -> bytes:
        try:
            return self.secrets[(name, key)]
        except KeyError:
            raise LookupError(f"{name}/{key}") from None

    async def notify(self, namespace: str, intent: str | None, run: str, message: str) -> None:
        self.notices.append((intent, run, message))

    async def propose(self, manifest: dict[str, Any]) -> None:
        self.proposed.append(manifest)


def run_doc(name: str = "job", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "generation": 1,
        },
        "spec": {"spriteRef": {"name": SPRITE}, "command": ["agent"], **spec},
    }


class Harness:
    """One Run, its driver and everything around it."""

    def __init__(self, doc: dict[str, Any], *, backend: FakeBackend | None = None) -> None:
        self.doc = doc
        self.backend = backend or FakeBackend()
        self.directory = Directory()
        self.publisher = Publisher()
        self.actions = Actions()
        self.clock = MovableClock()
        self.writes: list[dict[str, Any]] = []
        self.stopped = asyncio.Event()
        self.sprite_changed = asyncio.Event()
        """Set by a test where the operator's indexes would: the Sprite or a claim changed."""
        self.timings = FAST_TIMINGS
        self.driver: RunDriver | None = None
        self.task: asyncio.Task[None] | None = None

    # -- the Run as the API server keeps it ----------------------------------------------

    def view(self) -> Run:
        return Run.model_validate(copy.deepcopy(self.doc))

    def edit_spec(self, **changes: Any) -> None:
        self.doc["spec"].update(changes)
        self.doc["metadata"]["generation"] += 1

    async def write_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.writes.append(copy.deepcopy(status))
        self.doc["status"] = copy.deepcopy(status)

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.doc.get("status") or {})

    @property
    def phase(self) -> str | None:
        return self.status.get("phase")

    def condition(self) -> dict[str, Any]:
        return next(c for c in self.status["conditions"] if c["type"] == "Succeeded")

    # -- the driver -------------------------------------------------------------------

    def start(self) -> None:
        """A driver for the Run as it is now (a restarted operator builds a new one)."""
        self.stopped = asyncio.Event()
        self.driver = RunDriver(
            self.view(),
            view=self.view,
            backend=self.backend,  # type: ignore[arg-type]
            sprites=self.directory,
            writer=self,
            publisher=self.publisher,
            clock=self.clock,
            timings=self.timings,
            stopped=self.stopped,
            actions=self.actions,
            sprite_changed=self.sprite_changed,
        )
        self.task = asyncio.create_task(self.driver.drive())

    async def stop(self) -> None:
        """The daemon is told to stop (operator shutdown): the driver detaches."""
        self.stopped.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)

    async def finished(self, limit: float = 5.0) -> dict[str, Any]:
        """Wait for drive() to return; the final status."""
        assert self.task is not None
        await asyncio.wait_for(self.task, limit)
        return self.status

    async def until(
        self, predicate: Callable[[], object], *, limit: float = 5.0, what: str = ""
    ) -> None:
        deadline = time.monotonic() + limit
        while not predicate():
            if self.task is not None and self.task.done():
                self.task.result()  # raise what it raised
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or predicate}: {self.status}")
            await asyncio.sleep(0.005)

    async def until_phase(self, *phases: str, limit: float = 5.0) -> None:
        await self.until(lambda: self.phase in phases, limit=limit, what=f"phase {phases}")

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.stopped.set()
            try:
                await asyncio.wait_for(self.task, 5)
            except Exception:
                self.task.cancel()
        await self.backend.aclose()


__all__ = [
    "BACKEND_SPRITE",
    "FAST_TIMINGS",
    "SPRITE",
    "Actions",
    "Directory",
    "Harness",
    "MovableClock",
    "Publisher",
    "run_doc",
]
