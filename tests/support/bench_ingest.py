"""The single fast Run of the operator benchmarks: an agent writing ~N events/s to its outbox
and stdout, and what its ingest cost (shared by bench_operator and bench_monitoring)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.admission_cases import build
from tests.support.cluster import wait_for
from tests.support.stack import Stack

HZ = os.sysconf("SC_CLK_TCK")

FAST_AGENT = r"""
import json, os, sys, time
sprite, work = os.environ["LATTICE_SPRITE_ID"], os.environ["LATTICE_WORK_ITEM_ID"]
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
os.makedirs("/workspace/.lattice", exist_ok=True)
out = open("/workspace/.lattice/outbox.jsonl", "a")
head = ('{"protocol_version":"v1","event_type":"INFO","sprite_id":%s,"work_item_id":%s,'
        '"timestamp":"2026-01-15T10:30:00Z","payload":{"message":"tick ' %
        (json.dumps(sprite), json.dumps(work)))
start, n, batch = time.monotonic(), 0, max(1, rate // 100)
while time.monotonic() - start < seconds:
    lines = [head + str(n + i) + '","kind":"progress"}}' for i in range(batch)]
    n += batch
    text = "\n".join(lines) + "\n"
    out.write(text); out.flush()
    sys.stdout.write("".join("LATTICE_EVENT " + l + "\n" for l in lines)); sys.stdout.flush()
    delay = start + n / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
done = json.dumps({"protocol_version": "v1", "event_type": "COMPLETED", "sprite_id": sprite,
                   "work_item_id": work, "timestamp": "2026-01-15T10:30:00Z",
                   "payload": {"status": "success", "summary": "%d events" % n}})
out.write(done + "\n"); out.flush()
print("LATTICE_EVENT " + done, flush=True)
with open("/workspace/.lattice/agent-done", "w") as f:
    f.write("%f %d" % (time.time(), n))
"""


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def _metrics_text(stack: Stack) -> str:
    return httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False).text


def metric(stack: Stack, name: str) -> float:
    text = _metrics_text(stack)
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def sprite_calls(stack: Stack) -> dict[str, int]:
    """The operator's calls to the Sprites backend so far, by operation (its own count,
    `lattice_backend_call_duration_seconds_count`)."""
    text = _metrics_text(stack)
    prefix = 'lattice_backend_call_duration_seconds_count{operation="'
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            operation = line[len(prefix) :].split('"', 1)[0]
            counts[operation] = counts.get(operation, 0) + int(float(line.split()[-1]))
    return counts


def calls_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v != before.get(k, 0)}


def runs_caught_up(items: list[dict[str, Any]], target: dict[str, int]) -> bool:
    """Every Run named in `target` has at least that many events folded into its status."""
    counts = {
        i["metadata"]["name"]: ((i.get("status") or {}).get("events") or {}).get("eventCount", 0)
        for i in items
    }
    return all(counts.get(name, 0) >= least for name, least in target.items())


def run_doc(name: str, sprite: str, command: list[str], **spec: Any) -> dict[str, Any]:
    doc = build("run.yaml", name, {"spec.command": command, "spec.spriteRef.name": sprite})
    doc["spec"].pop("timeoutSeconds", None)
    doc["spec"]["retries"] = 0
    doc["spec"].update(spec)
    return doc


def bench_fast_run(stack: Stack, namespace: str, rate: int, seconds: float) -> dict[str, Any]:
    stack.apply(namespace, build("sprite.yaml", "fast", {"spec.networkPolicy": {"rules": []}}))
    sprite = stack.wait_sprite_ready(namespace, "fast")["status"]["spriteName"]
    pid = stack.operator.proc.pid
    cpu0, patches0, wall0 = (
        cpu_seconds(pid),
        metric(stack, "lattice_status_patches_total"),
        time.time(),
    )
    stack.apply(
        namespace, run_doc("fast", "fast", ["python3", "-c", FAST_AGENT, str(rate), str(seconds)])
    )
    done_file = stack.sprites.host_root(sprite) / ".lattice" / "agent-done"
    lags: list[int] = []

    def agent_done() -> bool:
        status = stack.get(namespace, "runs", "fast").get("status") or {}
        outbox = stack.sprites.host_root(sprite) / ".lattice" / "outbox.jsonl"
        if outbox.exists():
            lines = outbox.stat().st_size
            consumed = (status.get("cursor") or {}).get("outboxOffset", 0)
            lags.append(lines - consumed)
        return done_file.exists()

    wait_for(agent_done, timeout=seconds + 120, interval=1.0, what="the agent to finish")
    finished_at, emitted = done_file.read_text().split()
    final = stack.wait_phase(namespace, "runs", "fast", {"Succeeded", "Failed"}, timeout=600)
    wall1 = time.time()
    cpu1, patches1 = cpu_seconds(pid), metric(stack, "lattice_status_patches_total")
    catch_up = wall1 - float(finished_at)
    duration = wall1 - wall0
    status = final["status"]
    return {
        "target_events_per_s": rate,
        "seconds": seconds,
        "events_emitted": int(emitted) + 1,
        "events_in_status": status["events"]["eventCount"],
        "phase": status["phase"],
        "achieved_ingest_events_per_s": round(
            (int(emitted) + 1) / (float(finished_at) - wall0 + catch_up), 1
        ),
        "catch_up_after_agent_end_s": round(catch_up, 2),
        "max_outbox_lag_bytes_seen": max(lags) if lags else None,
        "status_patches_per_s": round((patches1 - patches0) / duration, 2),
        "operator_cpu_s": round(cpu1 - cpu0, 2),
        "operator_cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / duration, 1),
    }
