"""Monitoring benchmarks (`make bench`); figures go to bench-results/monitoring.json.

- series exposed on /metrics with 10 Sprites and 100 Runs, then with 100 Sprites and 1,000
  Runs (cardinality must not grow with the objects), and the scrape duration at each;
- one Run ingesting ~10,000 events/s for 20 s, once without and once while /metrics is
  scraped 4 times a second: scrape durations during the ingest, and the ingest's rate,
  catch-up and CPU with and without the scrapes.

Measurements, not tests: nothing here asserts a number.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.bench_ingest import bench_fast_run, pct
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "monitoring.json"
SHORT_AGENT = agent(
    """
emit("INFO", {"message": "hello"})
emit("COMPLETED", {"status": "success", "summary": "ok"})
"""
)


def scrape(stack: Stack) -> tuple[float, str]:
    started = time.perf_counter()
    text = httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False).text
    return time.perf_counter() - started, text


def scrape_figures(stack: Stack, times: int = 20) -> dict[str, Any]:
    durations, text = [], ""
    for _ in range(times):
        took, text = scrape(stack)
        durations.append(took)
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {
        "series": len(series),
        "families": sum(1 for line in text.splitlines() if line.startswith("# TYPE ")),
        "bytes": len(text.encode()),
        "scrape_p50_ms": round(1000 * statistics.median(durations), 2),
        "scrape_max_ms": round(1000 * max(durations), 2),
    }


def create_fleet(stack: Stack, namespace: str, first: int, sprites: int, runs_each: int) -> None:
    names = [f"s{i}" for i in range(first, first + sprites)]
    for name in names:
        stack.apply(namespace, build("sprite.yaml", name, {"spec.networkPolicy": {"rules": []}}))
    for name in names:
        stack.wait_sprite_ready(namespace, name, timeout=300)
    for name in names:
        for r in range(runs_each):
            doc = build("run.yaml", f"{name}-r{r}", {"spec.spriteRef.name": name})
            doc["spec"]["command"] = ["python3", "-c", SHORT_AGENT]
            doc["spec"].pop("timeoutSeconds", None)
            doc["spec"]["retries"] = 0
            stack.cluster.custom.create_namespaced_custom_object(
                "lattice.dev", "v1alpha1", namespace, "runs", doc
            )


def wait_runs_done(stack: Stack, namespace: str, count: int) -> float:
    started = time.monotonic()

    def done() -> bool:
        items = stack.cluster.custom.list_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "runs"
        )["items"]
        finished = [i for i in items if (i.get("status") or {}).get("phase") in ("Succeeded",)]
        failed = [i for i in items if (i.get("status") or {}).get("phase") == "Failed"]
        if failed:
            raise AssertionError(f"{len(failed)} Runs failed: {failed[0]['status']}")
        return len(finished) == count

    wait_for(done, timeout=3600, interval=5.0, what=f"{count} Runs to succeed")
    return time.monotonic() - started


def bench_cardinality(stack: Stack, namespace: str) -> dict[str, Any]:
    out: dict[str, Any] = {"before_any_object": scrape_figures(stack)}
    create_fleet(stack, namespace, 0, sprites=10, runs_each=10)
    took = wait_runs_done(stack, namespace, 100)
    out["sprites_10_runs_100"] = {**scrape_figures(stack), "runs_done_in_s": round(took, 1)}
    create_fleet(stack, namespace, 10, sprites=90, runs_each=10)
    took = wait_runs_done(stack, namespace, 1000)
    out["sprites_100_runs_1000"] = {**scrape_figures(stack), "runs_done_in_s": round(took, 1)}
    return out


def bench_scrape_during_ingest(
    stack: Stack, quiet_ns: str, scraped_ns: str, rate: int, seconds: float
) -> dict[str, Any]:
    quiet = bench_fast_run(stack, quiet_ns, rate=rate, seconds=seconds)
    durations: list[float] = []
    stop = threading.Event()

    def scraper() -> None:
        deadline = time.monotonic() + seconds + 600  # bounded whatever happens
        while not stop.is_set() and time.monotonic() < deadline:
            took, _ = scrape(stack)
            durations.append(took)
            stop.wait(0.25)

    thread = threading.Thread(target=scraper, name="scraper", daemon=True)
    thread.start()
    try:
        scraped = bench_fast_run(stack, scraped_ns, rate=rate, seconds=seconds)
    finally:
        stop.set()
        thread.join(30)
    ms = [1000 * d for d in durations]
    return {
        "without_scrapes": quiet,
        "with_4_scrapes_per_s": scraped,
        "scrapes": len(ms),
        "scrape_p50_ms": round(pct(ms, 50), 2),
        "scrape_p99_ms": round(pct(ms, 99), 2),
        "scrape_max_ms": round(max(ms), 2),
    }


def test_monitoring_benchmarks(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    load_before = os.getloadavg()
    namespaces = [cluster.create_namespace(f"bench-mon-{i}") for i in range(3)]
    try:
        with operator_stack(cluster, local_sprites, tmp_path) as stack:
            results["scrape_during_10k_events_per_s"] = bench_scrape_during_ingest(
                stack, namespaces[0], namespaces[1], rate=10_000, seconds=20
            )
            results["cardinality"] = bench_cardinality(stack, namespaces[2])
    finally:
        for ns in namespaces:
            cluster.delete_namespace(ns)
    # The 2 cores are shared with other work: the load says how much.
    results["machine"]["load_average_1m_before_after"] = [
        round(load_before[0], 1),
        round(os.getloadavg()[0], 1),
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
