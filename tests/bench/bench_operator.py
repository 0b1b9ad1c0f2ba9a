"""Operator benchmarks on the local stack (`make bench`); figures go to bench-results/operator.json.

- apply → exec started for 100 Runs on warm sprites: p50/p99 (client clock at create vs. the
  operator's recorded attempt start);
- one Run emitting ~10,000 events/s for 30 s: does ingest keep up (lag when the agent ends,
  time from its last event to Succeeded), status patches per second, the operator's CPU;
- operator crash and restart with 50 active Runs: time until every Run has caught up with
  what its sprite wrote while the operator was down.

Measurements, not tests: nothing here asserts a number.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.bench_ingest import bench_fast_run, pct, run_doc, runs_caught_up
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "operator.json"

SLOW_AGENT = agent(
    r"""
for i in range(10**6):
    emit("INFO", {"message": "beat %d" % i})
    time.sleep(0.5)
"""
)


def warm_sprites(stack: Stack, namespace: str, count: int) -> list[str]:
    names = [f"w{i}" for i in range(count)]
    for name in names:
        stack.apply(namespace, build("sprite.yaml", name, {"spec.networkPolicy": {"rules": []}}))
    for name in names:
        stack.wait_sprite_ready(namespace, name)
        stack.apply(namespace, run_doc(f"warm-{name}", name, ["true"]))
    for name in names:
        stack.wait_phase(namespace, "runs", f"warm-{name}", {"Succeeded"})
    return names


def bench_apply_to_exec(stack: Stack, namespace: str) -> dict[str, Any]:
    # One Run per Sprite (Runs on one Sprite take turns): 100 warm sprites.
    sprites = warm_sprites(stack, namespace, 100)
    created: dict[str, float] = {}
    for i in range(100):
        name = f"lat-{i}"
        body = run_doc(name, sprites[i], ["sleep", "1"])
        created[name] = time.time()
        stack.cluster.custom.create_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "runs", body
        )
    started: dict[str, float] = {}

    def all_started() -> bool:
        items = stack.cluster.custom.list_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "runs"
        )["items"]
        for item in items:
            attempts = (item.get("status") or {}).get("attempts") or []
            name = item["metadata"]["name"]
            if (
                name in created
                and attempts
                and attempts[0].get("startTime")
                and name not in started
            ):
                stamp = datetime.fromisoformat(attempts[0]["startTime"].replace("Z", "+00:00"))
                started[name] = stamp.timestamp()
        return len(started) == len(created)

    wait_for(all_started, timeout=600, interval=0.5, what="100 exec sessions")
    latencies = [started[n] - created[n] for n in created]
    return {
        "runs": len(latencies),
        "sprites": len(sprites),
        "p50_s": round(pct(latencies, 50), 3),
        "p99_s": round(pct(latencies, 99), 3),
        "max_s": round(max(latencies), 3),
        "mean_s": round(statistics.mean(latencies), 3),
    }


def bench_restart(stack: Stack, namespace: str, runs: int) -> dict[str, Any]:
    sprites = warm_sprites(stack, namespace, runs)
    names = [f"act-{i}" for i in range(runs)]
    for i, name in enumerate(names):
        stack.apply(
            namespace,
            run_doc(name, sprites[i], ["python3", "-c", SLOW_AGENT], workItemId=name),
        )
    for name in names:
        stack.wait_phase(namespace, "runs", name, {"Running"}, timeout=300)
    stack.operator.kill()
    time.sleep(5)  # the sprites keep writing while no operator watches
    target = {}
    for i, name in enumerate(names):
        sprite = stack.get(namespace, "sprites", sprites[i])["status"]["spriteName"]
        outbox = stack.sprites.host_root(sprite) / ".lattice" / "outbox.jsonl"
        target[name] = len(outbox.read_bytes().splitlines())
    restarted = time.monotonic()
    stack.crash_and_restart()

    def caught_up() -> bool:
        items = stack.cluster.custom.list_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "runs"
        )["items"]
        return runs_caught_up(items, target)

    wait_for(caught_up, timeout=600, interval=0.5, what="every Run to catch up")
    elapsed = time.monotonic() - restarted
    for name in names:
        stack.cluster.kubectl(
            "patch",
            "run",
            name,
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            '{"spec":{"cancel":true}}',
        )
    return {"active_runs": runs, "operator_down_s": 5, "time_to_catch_up_s": round(elapsed, 2)}


def bench_intents(stack: Stack, namespace: str, count: int) -> dict[str, Any]:
    """`count` auto-approved sprite_task_exec Intents at once: apply → their Run's exec start."""
    stack.apply(
        namespace,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "IntentPolicy",
            "metadata": {"name": "bench"},
            "spec": {
                "rules": [
                    {
                        "name": "all-exec",
                        "risk": "safe",
                        "outcome": "allow",
                        "match": "intent.spec.kind == 'sprite_task_exec'",
                    }
                ]
            },
        },
    )
    sprites = warm_sprites(stack, namespace, count)
    created: dict[str, float] = {}
    started_all = time.time()
    for i, sprite in enumerate(sprites):
        name = f"bi-{i}"
        body = {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "metadata": {"name": name},
            "spec": {
                "kind": "sprite_task_exec",
                "proposedBy": {"type": "system"},
                "params": {
                    "spriteTaskExec": {"spriteRef": {"name": sprite}, "command": ["sleep", "1"]}
                },
            },
        }
        created[f"{name}-run"] = time.time()
        stack.cluster.custom.create_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "intents", body
        )
    applied_all = time.time()
    started: dict[str, float] = {}

    def all_started() -> bool:
        items = stack.cluster.custom.list_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "runs"
        )["items"]
        for item in items:
            name = item["metadata"]["name"]
            attempts = (item.get("status") or {}).get("attempts") or []
            if (
                name in created
                and name not in started
                and attempts
                and attempts[0].get("startTime")
            ):
                stamp = datetime.fromisoformat(attempts[0]["startTime"].replace("Z", "+00:00"))
                started[name] = stamp.timestamp()
        return len(started) == len(created)

    wait_for(all_started, timeout=900, interval=1.0, what=f"{count} Intents' Runs to start")
    latencies = [started[n] - created[n] for n in created]
    return {
        "intents": count,
        "apply_seconds": round(applied_all - started_all, 2),
        "p50_s": round(pct(latencies, 50), 3),
        "p99_s": round(pct(latencies, 99), 3),
        "max_s": round(max(latencies), 3),
        "all_started_after_first_apply_s": round(max(started.values()) - started_all, 2),
    }


def test_operator_benchmarks(cluster: Cluster, local_sprites: LocalSprites, tmp_path: Path) -> None:
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    namespaces = [cluster.create_namespace(f"bench-{i}") for i in range(4)]
    try:
        with operator_stack(cluster, local_sprites, tmp_path) as stack:
            # The single fast Run first, while it is the only object writing status.
            results["single_run_10k_events_per_s_30s"] = bench_fast_run(
                stack, namespaces[1], rate=10_000, seconds=30
            )
            results["apply_to_exec_started_100_runs"] = bench_apply_to_exec(stack, namespaces[0])
            results["restart_with_50_active_runs"] = bench_restart(stack, namespaces[2], runs=50)
            results["auto_approved_intents_200"] = bench_intents(stack, namespaces[3], count=200)
    finally:
        for ns in namespaces:
            cluster.delete_namespace(ns)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
