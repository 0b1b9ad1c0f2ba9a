"""End-to-end helpers for Sprites and Runs: a ready Sprite, a Run applied, the `lattice` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.admission_cases import build
from tests.support.stack import Stack

REPO = Path(__file__).resolve().parents[2]


def ready_sprite(stack: Stack, namespace: str, name: str = "box") -> str:
    stack.apply(namespace, build("sprite.yaml", name, {"spec.networkPolicy": {"rules": []}}))
    obj = stack.wait_sprite_ready(namespace, name)
    return str(obj["status"]["spriteName"])


def apply_run(stack: Stack, namespace: str, name: str, command: list[str], **spec: Any) -> None:
    doc = build("run.yaml", name, {"spec.command": command, "spec.spriteRef.name": "box"})
    doc["spec"].pop("retries", None)
    doc["spec"].update(spec)
    stack.apply(namespace, doc)


def lattice(stack: Stack, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(stack.cluster.kubeconfig)}
    proc = subprocess.run(
        [sys.executable, "-m", "lattice_operator", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"lattice {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def session_ids(stack: Stack, sprite: str) -> set[str]:
    return {s["id"] for s in stack.sprites.describe(sprite).get("sessions", [])}
