"""Runs queued on one Sprite are handed it by the watch, not by their poll.

The operator here polls a waiting Run once a minute only, so every hand-over within the
test's 30 s is a wake-up: the Run before it ending, or being deleted while it runs (its
session killed, its end written, then its object gone). A deletion event's own wake-up, for a
holder gone without an end written, is pinned by tests/unit/handlers/test_sprite_wakeups.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import FAST_SETTINGS, Stack, operator_stack

pytestmark = pytest.mark.e2e

SPRITE = "queue"
POLL = {"sprite_wait": 60.0, "sprite_wait_max": 60.0}


def apply_run(stack: Stack, namespace: str, name: str, command: list[str]) -> None:
    stack.apply(
        namespace,
        build("run.yaml", name, {"spec.command": command, "spec.spriteRef.name": SPRITE}),
    )


def queued(stack: Stack, namespace: str, name: str) -> dict[str, Any]:
    def busy() -> dict[str, Any] | None:
        run = stack.get(namespace, "runs", name)
        cond = next(iter((run.get("status") or {}).get("conditions", [])), None)
        return cond if cond and cond["reason"] == "SpriteBusy" else None

    cond: dict[str, Any] = wait_for(busy, timeout=30, what=f"Run {name} to queue")
    return cond


def test_queued_runs_take_turns_woken_by_the_watch(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    runs = {**FAST_SETTINGS["runs"], **POLL}
    with operator_stack(cluster, local_sprites, tmp_path, "--namespace", namespace, runs=runs) as s:
        s.apply(namespace, build("sprite.yaml", SPRITE, {"spec.networkPolicy": {"rules": []}}))
        s.wait_sprite_ready(namespace, SPRITE)

        # A Run that ends hands the Sprite to the oldest of the Runs queued behind it.
        apply_run(s, namespace, "first", ["sh", "-c", "sleep 2"])
        s.wait_phase(namespace, "runs", "first", {"Running"})
        for name in ("second", "third"):
            apply_run(s, namespace, name, ["true"])
            assert "first" in queued(s, namespace, name)["message"]
        done = {
            name: s.wait_phase(namespace, "runs", name, {"Succeeded", "Failed"}, timeout=30)
            for name in ("first", "second", "third")
        }
        assert {d["status"]["phase"] for d in done.values()} == {"Succeeded"}
        assert done["second"]["status"]["startTime"] >= done["first"]["status"]["completionTime"]
        assert done["third"]["status"]["startTime"] >= done["second"]["status"]["completionTime"]

        # A Run deleted while it holds the Sprite hands it over when it is gone.
        apply_run(s, namespace, "holder", ["sleep", "600"])
        s.wait_phase(namespace, "runs", "holder", {"Running"})
        apply_run(s, namespace, "after", ["true"])
        queued(s, namespace, "after")
        cluster.kubectl("delete", "run", "holder", "-n", namespace, "--wait=false")
        after = s.wait_phase(namespace, "runs", "after", {"Succeeded", "Failed"}, timeout=30)
        assert after["status"]["phase"] == "Succeeded"
