"""Receipt Events: a chatty sprite cannot flood the API server with them (what is dropped is
counted), and the receipts of one status write may share one."""

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
from tests.support.e2e_intents import (
    api_writes,
    intent_doc,
    intent_writes,
    quiet_cluster,
    setup_namespace,
)
from tests.support.e2e_runs import logged_receipts
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


def test_receipts_share_events_when_allowed_and_an_intent_makes_eight_writes(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    """`runs.receipts_per_event` > 1: the receipts of one status write go out in one Event, so
    an auto-approved Intent makes at most 8 API writes (10 with an Event per receipt, the
    default, test_intents.py), and every reader still sees each receipt once, in order."""
    runs = {**FAST_SETTINGS["runs"], "receipts_per_event": 8}
    # Cluster-wide, as the shared operator: a namespace an earlier test left being deleted is
    # finalized, so that its writes are over before these are counted.
    with operator_stack(cluster, local_sprites, tmp_path, runs=runs) as s:
        setup_namespace(s, namespace)
        quiet_cluster(s)
        before = api_writes(s)
        s.create(namespace, intent_doc("batched", ["sh", "-c", "echo done"], trusted=True))
        intent = s.wait_phase(namespace, "intents", "batched", {"Succeeded", "Failed"})
        assert intent["status"]["phase"] == "Succeeded", intent["status"]
        run = intent["status"]["runRef"]["name"]
        # Through `lattice logs --receipts --json`, once the session's end is posted.
        receipts = logged_receipts(
            s, namespace, run, lambda r: any(x["event"] == "session.ended" for x in r),
            what="the Run's receipts",
        )  # fmt: skip
        writes = intent_writes(before, api_writes(s))
        made = sum(v for k, v in writes.items() if k.split()[-1].startswith("2"))
        assert made <= 8, writes
        assert sum(writes.values()) == made, writes  # none refused
        assert [r["event"] for r in receipts] == [
            "session.starting",
            "session.started",
            "session.ending",
            "session.ended",
        ]
        assert [r["sequence"] for r in receipts] == [1, 2, 3, 4]
        # Two Events carry them, each named for its receipts' sequence numbers.
        uid = s.get(namespace, "runs", run)["metadata"]["uid"]
        listing = cluster.kubectl(
            "get", "events.events.k8s.io", "-n", namespace, "-o", "json",
            "-l", f"lattice.dev/run-uid={uid}",
        ).stdout  # fmt: skip
        events = json.loads(listing)["items"]
        assert sorted(e["reason"] for e in events) == ["SessionEnded", "SessionStarted"]
        assert sorted(e["metadata"]["annotations"]["lattice.dev/sequences"] for e in events) == [
            "1-2",
            "3-4",
        ]
