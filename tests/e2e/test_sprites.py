"""Sprites end to end: created at the backend, converged, drift repaired, deletion bounded."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lattice_adapters.kube import KubeClient, KubeConfig
from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1 import Sprite

# The Sprite handler's status write, called directly with an operator's context (both private
# to handlers/) to send a stale status to the server.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.sprite import _patch_status
from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites, sprites_server
from tests.support.stack import FAST_SETTINGS, Stack, operator_stack

pytestmark = pytest.mark.e2e

COLD_AFTER = 6.0
"""This module's sprites go cold after 6 s idle (the session's server waits an hour)."""


@pytest.fixture(scope="module")
def local_sprites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSprites]:
    """A server of this module's own, whose sprites go warm after 1 s and cold after
    COLD_AFTER: spec.keepWarm is seen keeping one out of cold."""
    workdir = tmp_path_factory.mktemp("sprites-warmth")
    with sprites_server(workdir, warm_after=1.0, cold_after=COLD_AFTER) as s:
        yield s


@pytest.fixture(scope="module")
def stack(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The operator against this module's server; kept-warm sprites are woken when not seen
    running for 2 s (a third of COLD_AFTER)."""
    backend = {**FAST_SETTINGS["backend"], "keep_warm_interval": 2.0}
    log_dir = tmp_path_factory.mktemp("operator")
    with operator_stack(cluster, local_sprites, log_dir, backend=backend) as s:
        yield s
        if not s.operator.alive():
            raise AssertionError(f"the operator died:\n{s.operator.log()[-5000:]}")


async def _backend_names(sprites: LocalSprites) -> set[str]:
    async with SpritesAdapter(sprites.credentials) as backend:
        return {s.name async for s in backend.iter_sprites()}


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


async def test_sprite_is_created_and_converged(stack: Stack, namespace: str) -> None:
    stack.create(namespace, build("sprite.yaml", "conv", {}))
    obj = stack.wait_sprite_ready(namespace, "conv")
    status = obj["status"]
    name = status["spriteName"]
    assert name == f"{namespace}-conv"
    assert status["spriteId"]
    assert status["backendStatus"] in ("cold", "warm", "running")
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert _conditions(obj)["Synced"]["status"] == "True"
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        info = await backend.get_sprite(name)
        assert info.url_auth == "sprite"
        owner = f"lattice-owner-{obj['metadata']['uid']}"
        # spec.labels, plus the label that marks the backend sprite as this object's.
        assert sorted(info.labels) == sorted(["repo-work", "sample", owner])
        rules = await backend.get_network_policy(name)
        assert [r.domain for r in rules] == [None, "*.internal.example"]

    # A spec change converges: URL auth and labels are updated at the backend.
    stack.cluster.kubectl(
        "patch",
        "sprite",
        "conv",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"urlAuth": "public", "labels": ["changed"]}}),
    )

    def converged() -> bool:
        obj = stack.get(namespace, "sprites", "conv")
        return bool(obj["status"].get("observedGeneration") == obj["metadata"]["generation"])

    wait_for(converged, timeout=60, what="the new generation to be reconciled")
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        info = await backend.get_sprite(name)
    assert info.url_auth == "public"
    assert sorted(info.labels) == sorted(["changed", owner])


async def test_existing_sprite_is_adopted_only_when_allowed(stack: Stack, namespace: str) -> None:
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.create_sprite(f"{namespace}-taken")
    stack.create(namespace, build("sprite.yaml", "taken", {}))

    def refused() -> dict[str, Any] | None:
        cond = _conditions(stack.get(namespace, "sprites", "taken")).get("Ready")
        return cond if cond and cond["reason"] == "AlreadyExists" else None

    cond = wait_for(refused, timeout=60, what="Ready=False AlreadyExists")
    assert cond["status"] == "False"
    assert "spec.adopt" in cond["message"]
    stack.cluster.kubectl(
        "patch",
        "sprite",
        "taken",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"spec":{"adopt":true}}',
    )
    stack.wait_sprite_ready(namespace, "taken")


async def test_sprite_deleted_behind_our_back_is_recreated(stack: Stack, namespace: str) -> None:
    stack.create(namespace, build("sprite.yaml", "phoenix", {}))
    first = stack.wait_sprite_ready(namespace, "phoenix")["status"]["spriteId"]
    name = f"{namespace}-phoenix"
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.delete_sprite(name)

    def recreated() -> str | None:
        status = stack.get(namespace, "sprites", "phoenix")["status"]
        return status["spriteId"] if status.get("spriteId") not in (None, first) else None

    second = wait_for(recreated, timeout=60, what="the sprite to be recreated")
    assert second != first
    assert name in await _backend_names(stack.sprites)


async def test_a_network_policy_changed_behind_our_back_is_put_back(
    stack: Stack, namespace: str
) -> None:
    stack.create(namespace, build("sprite.yaml", "drift", {}))
    name = stack.wait_sprite_ready(namespace, "drift")["status"]["spriteName"]
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        wanted = await backend.get_network_policy(name)
        await backend.set_network_policy(name, [])  # someone opens the sprite up

    async def restored() -> bool:
        async with SpritesAdapter(stack.sprites.credentials) as backend:
            return await backend.get_network_policy(name) == wanted

    for _ in range(120):  # the fleet pass re-reads every Sprite in turn
        if await restored():
            break
        await asyncio.sleep(0.5)
    assert await restored()


async def test_missing_sprite_without_recreate_is_reported(stack: Stack, namespace: str) -> None:
    stack.create(namespace, build("sprite.yaml", "gone", {"spec.recreate": False}))
    stack.wait_sprite_ready(namespace, "gone")
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.delete_sprite(f"{namespace}-gone")

    def missing() -> dict[str, Any] | None:
        cond = _conditions(stack.get(namespace, "sprites", "gone")).get("Ready")
        return cond if cond and cond["reason"] == "Missing" else None

    cond = wait_for(missing, timeout=60, what="Ready=False reason=Missing")
    assert cond["status"] == "False"
    assert f"{namespace}-gone" not in await _backend_names(stack.sprites)


async def test_delete_removes_the_backend_sprite_unless_orphaned(
    stack: Stack, namespace: str
) -> None:
    stack.create(namespace, build("sprite.yaml", "doomed", {}))
    stack.create(namespace, build("sprite.yaml", "kept", {"spec.deletionPolicy": "Orphan"}))
    stack.wait_sprite_ready(namespace, "doomed")
    stack.wait_sprite_ready(namespace, "kept")
    stack.cluster.kubectl("delete", "sprite", "doomed", "kept", "-n", namespace, "--wait=true")
    names = await _backend_names(stack.sprites)
    assert f"{namespace}-doomed" not in names
    assert f"{namespace}-kept" in names


async def test_a_status_write_from_an_older_view_puts_nothing_back(
    stack: Stack, namespace: str
) -> None:
    """The fleet observer writes a Sprite's whole status from its view of the object, which
    can be older than the handler's last write. Such a write must not put old values back (it
    once set observedGeneration back under load, and the Sprite looked unconverged forever)."""
    stack.create(namespace, build("sprite.yaml", "stale", {}))
    old = Sprite.model_validate(stack.wait_sprite_ready(namespace, "stale"))
    stack.cluster.kubectl(
        "patch", "sprite", "stale", "-n", namespace, "--type", "merge",
        "-p", json.dumps({"spec": {"labels": ["moved-on"]}}),
    )  # fmt: skip

    def converged() -> dict[str, Any] | None:
        obj = stack.get(namespace, "sprites", "stale")
        done = obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
        return obj if done else None

    new = wait_for(converged, timeout=60, what="the new generation reconciled")
    assert new["metadata"]["generation"] > (old.metadata.generation or 0)
    stale_status = old.status.model_copy(update={"backend_status": "warm"}).to_patch()
    async with KubeClient(KubeConfig.load(stack.cluster.kubeconfig)) as kube:
        context = OperatorContext(backend=object(), kube=kube)  # type: ignore[arg-type]
        await _patch_status(context, old, stale_status)
    after = stack.get(namespace, "sprites", "stale")
    assert after["status"]["observedGeneration"] == after["metadata"]["generation"]


def _cold_starts(stack: Stack) -> float:
    text = httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False).text
    [line] = [x for x in text.splitlines() if x.startswith("lattice_run_cold_starts_total ")]
    return float(line.split()[1])


async def test_a_sprite_kept_warm_never_goes_cold_and_one_left_does(
    stack: Stack, namespace: str
) -> None:
    stack.create(namespace, build("sprite.yaml", "hot", {"spec.keepWarm": True}))
    stack.create(namespace, build("sprite.yaml", "cool", {"spec.keepWarm": False}))
    hot = stack.wait_sprite_ready(namespace, "hot")["status"]["spriteName"]
    cool = stack.wait_sprite_ready(namespace, "cool")["status"]["spriteName"]
    started = time.monotonic()
    # A mark in each sprite's memory: /dev/shm is emptied when a sprite goes cold.
    for name in (hot, cool):
        await asyncio.to_thread((stack.sprites.host_shm(name) / "mark").write_text, "here")

    def gone_cold() -> dict[str, Any] | None:
        # Cold after it went warm (the backend says when): the status written at creation
        # says cold too, from the create's answer, before the first use woke it.
        obj = stack.get(namespace, "sprites", "cool")
        status = obj["status"]
        return (
            obj if status.get("backendStatus") == "cold" and status.get("lastWarmingTime") else None
        )

    obj = wait_for(gone_cold, timeout=60, what="the Sprite left to go cold to be reported cold")
    warm = _conditions(obj)["Warm"]
    assert (warm["status"], warm["reason"]) == ("True", "NotKeptWarm")
    assert warm["observedGeneration"] == obj["metadata"]["generation"]
    assert not (stack.sprites.host_shm(cool) / "mark").exists()

    # The kept-warm one, looked at until twice COLD_AFTER has passed: never cold.
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        seen: set[str] = set()
        while time.monotonic() - started < 2 * COLD_AFTER:
            seen.add((await backend.get_sprite(hot)).status)
            await asyncio.sleep(0.2)
    assert "cold" not in seen, seen
    assert (stack.sprites.host_shm(hot) / "mark").read_text() == "here"
    obj = stack.get(namespace, "sprites", "hot")
    assert obj["status"]["backendStatus"] in ("warm", "running")
    warm = _conditions(obj)["Warm"]
    assert (warm["status"], warm["reason"]) == ("True", "KeptWarm")
    assert warm["observedGeneration"] == obj["metadata"]["generation"]

    # A Run on the cold one meets a cold start, and the metric counts it.
    before = _cold_starts(stack)
    run = build("run.yaml", "after-cold", {"spec.spriteRef.name": "cool"})
    stack.create(namespace, run)
    done = stack.wait_phase(namespace, "runs", "after-cold", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert _cold_starts(stack) - before == 1
