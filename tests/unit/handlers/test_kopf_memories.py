"""kopf's per-object memories keep no body once no daemon of the object runs
(handlers/_memories.py). kopf's own event step for a kind with a daemon is what keeps it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, cast

import kopf
import pytest
from kopf._cogs.structs import ephemera, patches, references
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.intents import causes
from kopf._core.reactor import processing
from kopf._core.reactor.inventory import ResourceMemory

# handlers/_memories is the module under test (kopf's per-object memories kept lean).
from lattice_operator.handlers import _memories
from lattice_operator.handlers._memories import ResourceMemories, keep_lean, release_idle_bodies

RUNS = references.Resource("lattice.dev", "v1alpha1", "runs", namespaced=True)


def _registry() -> kopf.OperatorRegistry:
    """A daemon for running Runs only, as handlers/run.py has."""
    registry = kopf.OperatorRegistry()

    def running(body: kopf.Body, **_: Any) -> bool:
        return bool(body.get("status", {}).get("phase") == "Running")

    @kopf.daemon("lattice.dev", "v1alpha1", "runs", registry=registry, when=running)
    async def daemon(stopped: kopf.DaemonStopped, **_: Any) -> None:
        await stopped.wait()

    return registry


def _raw(uid: str, phase: str) -> kopf.RawBody:
    doc: dict[str, Any] = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"namespace": "team", "name": f"run-{uid}", "uid": uid},
        "status": {"phase": phase},
    }
    return cast(kopf.RawBody, doc)


async def _event(
    memories: ResourceMemories, registry: kopf.OperatorRegistry, raw: kopf.RawBody
) -> ResourceMemory:
    """kopf's handling of one watch event, as far as daemons are concerned."""
    memory = await memories.recall(raw)
    live = memory.daemons_memory.live_fresh_body
    if live is not None:
        live._replace_with(raw)
    body = live if live is not None else kopf.Body(raw)
    cause = causes.SpawningCause(
        resource=RUNS,
        indices=OperatorIndexers().indices,
        logger=logging.getLogger(__name__),
        patch=patches.Patch(body=body),
        body=body,
        memo=ephemera.AnyMemo(kopf.Memo()),
        reset=False,
    )
    await processing.process_spawning_cause(
        registry=registry,
        settings=kopf.OperatorSettings(),
        memory=memory,
        cause=cause,
        operator_paused=None,
    )
    return memory


async def _stop_all(*memories: ResourceMemory) -> None:
    for memory in memories:
        for daemon in list(memory.daemons_memory.running_daemons.values()):
            daemon.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await daemon.task


async def test_kopf_keeps_a_finished_objects_body_and_the_release_drops_it() -> None:
    memories, registry = ResourceMemories(), _registry()
    done = await _event(memories, registry, _raw("done", "Succeeded"))
    busy = await _event(memories, registry, _raw("busy", "Running"))
    try:
        # kopf keeps both bodies, though no daemon runs (or will) for the finished Run.
        assert done.daemons_memory.live_fresh_body is not None
        assert not done.daemons_memory.running_daemons
        running = busy.daemons_memory.live_fresh_body
        assert running is not None
        assert busy.daemons_memory.running_daemons

        assert release_idle_bodies(memories) == 1

        assert done.daemons_memory.live_fresh_body is None
        assert busy.daemons_memory.live_fresh_body is running  # what its daemon reads
        assert release_idle_bodies(memories) == 0
    finally:
        await _stop_all(done, busy)


async def test_a_daemon_started_after_a_release_reads_the_fresh_body() -> None:
    memories, registry = ResourceMemories(), _registry()
    memory = await _event(memories, registry, _raw("r", "Pending"))
    release_idle_bodies(memories)
    await _event(memories, registry, _raw("r", "Running"))
    try:
        daemons = memory.daemons_memory
        assert list(daemons.running_daemons)  # spawned by the later event
        body = daemons.live_fresh_body
        assert body is not None
        assert body["status"]["phase"] == "Running"
    finally:
        await _stop_all(memory)


async def test_the_loop_releases_until_cancelled() -> None:
    memories, registry = ResourceMemories(), _registry()
    memory = await _event(memories, registry, _raw("r", "Succeeded"))
    lean = asyncio.create_task(keep_lean(memories, interval=0.01))
    for _ in range(500):
        if memory.daemons_memory.live_fresh_body is None:
            break
        await asyncio.sleep(0.01)
    lean.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await lean
    assert memory.daemons_memory.live_fresh_body is None


async def test_a_pass_that_released_bodies_trims_the_allocator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(_memories, "trim_allocator", lambda: trims.append(1))
    memories, registry = ResourceMemories(), _registry()
    memory = await _event(memories, registry, _raw("r", "Succeeded"))
    lean = asyncio.create_task(keep_lean(memories, interval=0.01))
    for _ in range(500):
        if trims:
            break
        await asyncio.sleep(0.01)
    lean.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await lean
    assert memory.daemons_memory.live_fresh_body is None
    assert trims
