"""End-to-end helpers for Sprites and Runs: a ready Sprite, a Run applied, the `lattice` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from lattice_operator.receipt_reader import receipt_event_params, receipts_from_events
from tests.support.admission_cases import build
from tests.support.cli_in_process import run_lattice
from tests.support.cluster import wait_for
from tests.support.stack import Stack

REPO = Path(__file__).resolve().parents[2]


def ready_sprite(stack: Stack, namespace: str, name: str = "box") -> str:
    stack.create(namespace, build("sprite.yaml", name, {"spec.networkPolicy": {"rules": []}}))
    obj = stack.wait_sprite_ready(namespace, name)
    return str(obj["status"]["spriteName"])


def apply_run(stack: Stack, namespace: str, name: str, command: list[str], **spec: Any) -> None:
    doc = build("run.yaml", name, {"spec.command": command, "spec.spriteRef.name": "box"})
    doc["spec"].pop("retries", None)
    doc["spec"].update(spec)
    stack.create(namespace, doc)


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


def lattice_in_process(
    stack: Stack, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`lattice(stack, *args)` without the interpreter start (tests/support/cli_in_process), for
    a command whose process start another call or module already covers."""
    env = {**os.environ, "KUBECONFIG": str(stack.cluster.kubeconfig)}
    done = run_lattice(list(args), env, REPO)
    if check and done.returncode != 0:
        raise AssertionError(f"lattice {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def session_ids(stack: Stack, sprite: str) -> set[str]:
    return {s["id"] for s in stack.sprites.describe(sprite).get("sessions", [])}


Receipts = list[dict[str, Any]]


def logged_receipts(
    stack: Stack,
    namespace: str,
    name: str,
    until: Callable[[Receipts], bool],
    *,
    what: str,
    timeout: float = 30.0,
) -> Receipts:
    """`lattice logs NAME --receipts --json` once the Run's receipts satisfy `until`. Waited
    for in this process, through the reader the command uses (an interpreter start per poll
    cost a second or more of CPU on a loaded machine); then shown by the command itself."""

    def posted() -> bool:
        run = stack.get(namespace, "runs", name)
        params = receipt_event_params(run)
        listing = cast(
            dict[str, Any],
            stack.cluster.custom.list_namespaced_custom_object(
                "events.k8s.io", "v1", namespace, "events", label_selector=params["labelSelector"]
            ),
        )
        return until(receipts_from_events(listing)[0])

    wait_for(posted, timeout=timeout, interval=0.2, what=what)

    def shown() -> Receipts | None:
        args = ("logs", name, "-n", namespace, "--receipts", "--json")
        got: Receipts = json.loads(lattice(stack, *args).stdout)
        return got if until(got) else None

    found: Receipts = wait_for(shown, timeout=timeout, interval=0.5, what=f"{what} (shown)")
    return found
