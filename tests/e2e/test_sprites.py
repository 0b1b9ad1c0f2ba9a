"""Sprites end to end: created at the backend, converged, drift repaired, deletion bounded."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from lattice_adapters.kube import KubeClient, KubeConfig
from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1 import Sprite
from lattice_operator.handlers.sprite import _patch_status
from tests.support.admission_cases import build
from tests.support.cluster import wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


async def _backend_names(sprites: LocalSprites) -> set[str]:
    async with SpritesAdapter(sprites.credentials) as backend:
        return {s.name async for s in backend.iter_sprites()}


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


async def test_sprite_is_created_and_converged(stack: Stack, namespace: str) -> None:
    stack.apply(namespace, build("sprite.yaml", "conv", {}))
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
        return obj["status"].get("observedGeneration") == obj["metadata"]["generation"]

    wait_for(converged, timeout=60, what="the new generation to be reconciled")
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        info = await backend.get_sprite(name)
    assert info.url_auth == "public"
    assert sorted(info.labels) == sorted(["changed", owner])


async def test_existing_sprite_is_adopted_only_when_allowed(stack: Stack, namespace: str) -> None:
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.create_sprite(f"{namespace}-taken")
    stack.apply(namespace, build("sprite.yaml", "taken", {}))

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
    stack.apply(namespace, build("sprite.yaml", "phoenix", {}))
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
    stack.apply(namespace, build("sprite.yaml", "drift", {}))
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
    stack.apply(namespace, build("sprite.yaml", "gone", {"spec.recreate": False}))
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
    stack.apply(namespace, build("sprite.yaml", "doomed", {}))
    stack.apply(namespace, build("sprite.yaml", "kept", {"spec.deletionPolicy": "Orphan"}))
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
    stack.apply(namespace, build("sprite.yaml", "stale", {}))
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
        await _patch_status(SimpleNamespace(require_kube=lambda: kube), old, stale_status)  # type: ignore[arg-type]
    after = stack.get(namespace, "sprites", "stale")
    assert after["status"]["observedGeneration"] == after["metadata"]["generation"]
