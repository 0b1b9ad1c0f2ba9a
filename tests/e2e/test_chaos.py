"""Chaos: a 10,000-event Run survives 20 dropped sockets and 3 operator crashes, exactly."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.cluster import Cluster
from tests.support.e2e_runs import lattice
from tests.support.sprites_server import LocalSprites
from tests.support.stack import operator_stack

pytestmark = pytest.mark.e2e

EVENTS = 10_000
CHATTY_AGENT = agent(
    r"""
for i in range(EVENTS):
    emit("INFO", {"message": "event %d" % i, "kind": "progress",
                  "metadata": {"percent": i * 100 // EVENTS}})
    time.sleep(0.003)
# The chaos goes on until the test says it is over, however long the machine takes for it.
for _ in range(6000):
    if os.path.exists("/workspace/chaos-over"):
        break
    time.sleep(0.1)
emit("COMPLETED", {"status": "success", "summary": "all events sent"})
""".replace("EVENTS", str(EVENTS))
)


def test_events_and_receipts_survive_socket_drops_and_operator_crashes(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    rng = random.Random(20261121)
    with operator_stack(cluster, local_sprites, tmp_path, "--namespace", namespace) as stack:
        stack.apply(namespace, build("sprite.yaml", "chaos", {"spec.networkPolicy": {"rules": []}}))
        sprite = stack.wait_sprite_ready(namespace, "chaos")["status"]["spriteName"]
        run = build(
            "run.yaml",
            "chaos",
            {"spec.command": ["python3", "-c", CHATTY_AGENT], "spec.spriteRef.name": "chaos"},
        )
        run["spec"]["retries"] = 0
        stack.apply(namespace, run)
        stack.wait_phase(namespace, "runs", "chaos", {"Running"})

        drops = restarts = dropped_sockets = 0
        deadline = time.monotonic() + 300
        # Bounded: 20 drops and 3 crashes, or the deadline, whichever comes first.
        while drops < 20 and time.monotonic() < deadline:
            status = stack.get(namespace, "runs", "chaos")["status"]
            assert status["phase"] in ("Starting", "Running"), status.get("conditions")
            dropped_sockets += stack.sprites.drop_sockets(sprite)
            drops += 1
            if drops in (5, 10, 15):
                stack.crash_and_restart()
                restarts += 1
            time.sleep(rng.uniform(0.3, 0.8))
        assert (drops, restarts) == (20, 3)
        assert dropped_sockets >= 10, "the drops hit live exec sockets"
        (stack.sprites.host_root(sprite) / "chaos-over").write_text("over\n")

        final = stack.wait_phase(namespace, "runs", "chaos", {"Succeeded", "Failed"}, timeout=300)
        status = final["status"]
        assert status["phase"] == "Succeeded", status["conditions"]

        outbox = stack.sprites.host_root(sprite) / ".lattice" / "outbox.jsonl"
        lines = outbox.read_bytes().splitlines()
        assert len(lines) == EVENTS + 1
        # Every outbox line counted exactly once: no duplicates, nothing lost.
        assert status["events"]["eventCount"] == len(lines)
        assert status["cursor"]["lineCount"] == len(lines)
        assert status["events"]["counts"]["info"] == EVENTS
        assert status["events"]["violationCount"] == 0, status["events"]["violations"]

        receipts = json.loads(
            lattice(stack, "logs", "chaos", "-n", namespace, "--receipts", "--json").stdout
        )
        # Gap-free, or every gap reported exactly: a crash between storing the ledger and
        # posting its receipts leaves numbers that a receipt.gap_detected names.
        sequences = {r["sequence"] for r in receipts}
        missing = set(range(1, max(sequences) + 1)) - sequences
        reported = set()
        for gap in (r for r in receipts if r["event"] == "receipt.gap_detected"):
            summary = gap["telemetry_summary"]
            reported |= set(range(summary["missing_from"], summary["missing_to"] + 1))
        assert missing == reported
        lost = [r for r in receipts if r["event"] == "capability.degraded"]
        assert len(lost) >= 2, "stdout loss and recovery are receipts"
        # A restart loses the stream too (a crash between storing the ledger and posting
        # may swallow one, reported as a gap above, hence not an exact count).
        after_restart = [r for r in lost if "operator restarted" in json.dumps(r)]
        assert after_restart, "an operator restart is a capability.degraded receipt"
