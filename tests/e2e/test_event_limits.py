"""A chatty sprite cannot flood the API server with Events: what is dropped is counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import FAST_SETTINGS, operator_stack

pytestmark = pytest.mark.e2e

PHASES = 60
CHATTY_PHASES = agent(
    r"""
for i in range(PHASES):
    emit("PHASE_STARTED", {"phase": "p%d" % i})
    emit("PHASE_FINISHED", {"phase": "p%d" % i, "success": True})
emit("COMPLETED", {"status": "success"})
""".replace("PHASES", str(PHASES))
)


def test_receipt_events_are_rate_limited_per_run(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    runs = {**FAST_SETTINGS["runs"], "events_per_second": 1.0, "events_burst": 20}
    with operator_stack(cluster, local_sprites, tmp_path, "--namespace", namespace, runs=runs) as s:
        s.apply(namespace, build("sprite.yaml", "chatty", {"spec.networkPolicy": {"rules": []}}))
        s.wait_sprite_ready(namespace, "chatty")
        run = build(
            "run.yaml",
            "chatty",
            {"spec.command": ["python3", "-c", CHATTY_PHASES], "spec.spriteRef.name": "chatty"},
        )
        s.apply(namespace, run)
        done = s.wait_phase(namespace, "runs", "chatty", {"Succeeded", "Failed"})
        status = done["status"]
        assert status["phase"] == "Succeeded"

        notices: list[dict[str, object]] = []

        def settled() -> tuple[int, int, int] | None:
            # The final count of drops is written just after the last receipts are posted.
            receipts = s.get(namespace, "runs", "chatty")["status"]["receipts"]
            listing = cluster.kubectl(
                "get",
                "events.events.k8s.io",
                "-n",
                namespace,
                "-o",
                "json",
                "--field-selector",
                "regarding.name=chatty",
            ).stdout
            items = json.loads(listing)["items"]
            events = [e for e in items if e.get("reason") != "ReceiptsDropped"]
            notices.clear()
            notices.extend(e for e in items if e.get("reason") == "ReceiptsDropped")
            handed_out, dropped = receipts["state"]["ledger"]["sequence"], receipts["eventsDropped"]
            return (
                (handed_out, dropped, len(events)) if dropped + len(events) == handed_out else None
            )

        handed_out, dropped, posted = wait_for(settled, timeout=30, what="posted + dropped = all")
        assert handed_out >= 4 * PHASES  # frame.opening/opened/ending/ended per phase
        assert dropped > 0
        assert posted >= 20  # the burst went through
        # Said when it happened: one notice (at most one a minute), naming the numbers...
        assert len(notices) == 1, notices
        assert "not posted as Events: over the Event rate limit" in str(notices[0]["note"])
        # ... and recorded, so that a restart does not take them for a crash's losses.
        ranges = s.get(namespace, "runs", "chatty")["status"]["receipts"]["droppedSequences"]
        assert sum(r["last"] - r["first"] + 1 for r in ranges) == dropped
        metrics = httpx.get(f"http://127.0.0.1:{s.metrics_port}/metrics", trust_env=False).text
        line = next(
            x for x in metrics.splitlines() if x.startswith("lattice_kube_events_dropped_total")
        )
        assert float(line.split()[-1]) == dropped

        # `lattice logs --receipts` shows what was posted and says how many were dropped.
        args = ["logs", "chatty", "-n", namespace, "--receipts", "--json"]
        cli = subprocess.run(
            [sys.executable, "-m", "lattice_operator", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            timeout=120,
            check=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert len(json.loads(cli.stdout)) == posted
        assert f"{dropped} receipt(s) of this Run were not posted" in cli.stderr
