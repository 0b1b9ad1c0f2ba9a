"""health_remediate's recreate_sprite and restart_service, through the pipeline (an
IntentPolicy allows them) and the Sprites backend, against the local Sprites server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.ports.errors import NotFound
from tests.support.admission_cases import build
from tests.support.cluster import wait_for
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

ALLOW_ALL = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "team"},
    "spec": {"rules": [{"name": "all", "match": "true", "risk": "safe", "outcome": "allow"}]},
}


def remedy(name: str, remediation: str, sprite: str, **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": {"name": name},
        "spec": {
            "kind": "health_remediate",
            "summary": f"{remediation} {sprite}",
            "proposedBy": {"type": "system"},
            "params": {
                "healthRemediate": {
                    "remediation": remediation,
                    "spriteRef": {"name": sprite},
                    **params,
                }
            },
        },
    }


def succeeded(intent: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in intent["status"]["conditions"] if c["type"] == "Succeeded")


async def test_recreate_sprite_makes_a_fresh_backend_sprite(stack: Stack, namespace: str) -> None:
    stack.create(namespace, ALLOW_ALL)
    # spec.recreate false: the remediation recreates it all the same (it was asked for).
    stack.create(namespace, build("sprite.yaml", "sick", {"spec.recreate": False}))
    first = stack.wait_sprite_ready(namespace, "sick")["status"]
    name = first["spriteName"]
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.write_file(name, "/workspace/marker", b"before")
        rules = await backend.get_network_policy(name)
    stack.create(namespace, remedy("recreate", "recreate_sprite", "sick"))
    intent = stack.wait_phase(namespace, "intents", "recreate", {"Succeeded", "Failed"})
    assert intent["status"]["phase"] == "Succeeded", json.dumps(intent["status"])
    assert succeeded(intent)["reason"] == "Remediated"
    assert intent["status"]["result"]["status"] == "success"
    assert f"Sprite sick recreated: backend sprite {name}" in intent["status"]["result"]["summary"]
    sprite = stack.get(namespace, "sprites", "sick")
    assert sprite["status"]["spriteId"] not in (None, first["spriteId"])
    ready = next(c for c in sprite["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        info = await backend.get_sprite(name)
        assert info.id == sprite["status"]["spriteId"]
        with pytest.raises(NotFound):  # a new sprite: the old one's files are gone
            await backend.read_file(name, "/workspace/marker")
        assert await backend.get_network_policy(name) == rules  # converged as the spec says

    # The receipt on the Sprite says what happened and why.
    def recreated_event() -> dict[str, Any] | None:
        events = json.loads(
            stack.cluster.kubectl("-n", namespace, "get", "events", "-o", "json").stdout
        )["items"]
        return next(
            (
                e
                for e in events
                if e["reason"] == "Recreated" and e["involvedObject"]["name"] == "sick"
            ),
            None,
        )

    event = wait_for(recreated_event, timeout=30, what="the Sprite's Recreated event")
    assert first["spriteId"] in event["message"]


SERVICE = {
    "name": "ticker",
    "cmd": "sh",
    "args": ["-c", "echo started >> /workspace/starts; exec sleep 3600"],
}


async def test_restart_service_stops_and_starts_the_service(stack: Stack, namespace: str) -> None:
    stack.create(namespace, ALLOW_ALL)
    stack.create(namespace, build("sprite.yaml", "served", {"spec.services": [SERVICE]}))
    name = stack.wait_sprite_ready(namespace, "served")["status"]["spriteName"]

    async def starts() -> int:
        async with SpritesAdapter(stack.sprites.credentials) as backend:
            try:
                data = await backend.read_file(name, "/workspace/starts")
            except NotFound:
                return 0
        return data.decode().count("started")

    async def service_pid() -> int | None:
        async with SpritesAdapter(stack.sprites.credentials) as backend:
            (service,) = [s for s in await backend.list_services(name) if s.spec.name == "ticker"]
        return service.pid if service.status == "running" else None

    for _ in range(60):
        if await starts() == 1 and await service_pid():
            break
        await asyncio.sleep(0.5)
    assert await starts() == 1
    before = await service_pid()
    assert before
    stack.create(namespace, remedy("restart", "restart_service", "served", service="ticker"))
    intent = stack.wait_phase(namespace, "intents", "restart", {"Succeeded", "Failed"})
    assert intent["status"]["phase"] == "Succeeded", json.dumps(intent["status"])
    assert intent["status"]["result"]["summary"] == "service ticker of Sprite served restarted"
    assert await starts() == 2
    after = await service_pid()
    assert after
    assert after != before


async def test_restart_service_of_a_service_the_sprite_lacks_fails_with_the_reason(
    stack: Stack, namespace: str
) -> None:
    stack.create(namespace, ALLOW_ALL)
    stack.create(namespace, build("sprite.yaml", "plain", {}))
    stack.wait_sprite_ready(namespace, "plain")
    stack.create(namespace, remedy("nosvc", "restart_service", "plain", service="nope"))
    intent = stack.wait_phase(namespace, "intents", "nosvc", {"Succeeded", "Failed"})
    assert intent["status"]["phase"] == "Failed"
    assert succeeded(intent)["reason"] == "RemediationFailed"
    assert intent["status"]["result"]["summary"].startswith("restart service failed:")
