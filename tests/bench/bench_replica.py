"""How many concurrently active Runs one operator replica keeps up with (issue 30, "how far
one replica goes"); figures in bench-results/replica.json, printed by
`python -m tests.bench.report`.

Per N (25, 50, 100, 300, 1,000; `LATTICE_BENCH_REPLICA_N`: the issue's 100, 300 and 1,000,
and two below them to find the knee): N warm Sprites (one Run per Sprite at a
time is the product's rule, so N active Runs need N Sprites: the local server runs each as a
runc container, and they are made once and reused by the next N), then N Runs at once, each an
agent that writes 20 protocol events a second, one line at a time (outbox first, then
`LATTICE_EVENT` on stdout, as the protocol's prelude does), until one wall-clock deadline
common to all; then COMPLETED. The operator runs with the product's Run timings (outbox read
at most every 0.5 s or when stdout shows an event, a status patch at most every 1 s per Run)
and the product's fleet interval.

Measured over the window in which all N are Running (every second: the operator's CPU from
/proc/PID/stat, its open file descriptors and sockets from /proc/PID/fd, RSS and threads from
/proc/PID/status, its own counters of events committed, status patches and backend calls and
errors), each event loop's lag (a bench-only `sitecustomize` starts a task in every
`asyncio.run` of the operator that sleeps 100 ms and logs how late it woke: the reconciling
kopf operator's loop is the one that holds the exec sessions), and at the deadline the events
emitted (the outboxes' lines) against the events folded into the Runs' status
(`status.events.eventCount`), then how long until every Run has caught up and Succeeded. The
operator is sampled by py-spy during the window's last 20 s (`LATTICE_BENCH_REPLICA_PROFILE=0`
turns it off). A larger N runs only while the smaller ones caught up within
`CATCH_UP_TIMEOUT` after their deadline (`kept_up` says whether an N kept up: lag at the
deadline within 2 s of emission, every event in status within 10 s of it, nothing lost, no
failed pass; `catch_up_after_deadline_s` also waits for every Run to be Succeeded).
The two cores are shared: every N carries the load average before and after, and
CPU-seconds by process.

Measurements, not tests: nothing here asserts a number. Bounded: at most the Ns listed, each
agent ends at its deadline, every wait has a timeout.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from lattice_adapters.kube import resource_path
from tests.support import pyspy
from tests.support.admission_cases import build
from tests.support.bench_ingest import calls_between, cpu_seconds, sprite_calls
from tests.support.capacity import (
    PRODUCT_FLEET,
    Bench,
    cleared,
    commit,
    cpu_shares,
    daemon_failures,
    load,
    run_body,
    same,
    sprite_ready,
)
from tests.support.cluster import Cluster, wait_for
from tests.support.loadgen import StartWatch, apiserver_metrics, pct
from tests.support.operator import spawn_operator
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack, wait_webhooks_served

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "replica.json"

COUNTS = [
    int(n) for n in os.environ.get("LATTICE_BENCH_REPLICA_N", "25,50,100,300,1000").split(",")
]
RATE = 20
"""Events per second per Run."""
WINDOW = float(os.environ.get("LATTICE_BENCH_REPLICA_SECONDS", "60"))
"""Seconds all N Runs stream at once (at least: the Runs that started first stream longer)."""
PROFILE = os.environ.get("LATTICE_BENCH_REPLICA_PROFILE", "1") != "0"
PROFILE_SECONDS = 20.0
ENDED = ("Succeeded", "Failed")
CATCH_UP_TIMEOUT = 300.0
"""After the deadline, how long to wait for every Run to catch up and end; an N that did not
is the last one measured."""


def ramp(n: int) -> float:
    """Seconds allowed for N Runs to start before the common window begins."""
    return 20.0 + 0.12 * n


# The agent: one event line every 1/RATE s (outbox, then stdout), from its start until the
# epoch `until`, then COMPLETED; it writes how many it emitted to agent-done.
AGENT = r"""
import json, os, sys, time
sprite, work = os.environ["LATTICE_SPRITE_ID"], os.environ["LATTICE_WORK_ITEM_ID"]
rate, until = int(sys.argv[1]), float(sys.argv[2])
os.makedirs("/workspace/.lattice", exist_ok=True)
out = open("/workspace/.lattice/outbox.jsonl", "a")
head = ('{"protocol_version":"v1","event_type":"INFO","sprite_id":%s,"work_item_id":%s,'
        '"timestamp":"2026-01-15T10:30:00Z","payload":{"message":"tick ' %
        (json.dumps(sprite), json.dumps(work)))
start, n = time.monotonic(), 0
left = until - time.time()
while left > 0:
    line = head + str(n) + '","kind":"progress"}}'
    n += 1
    out.write(line + "\n"); out.flush()
    sys.stdout.write("LATTICE_EVENT " + line + "\n"); sys.stdout.flush()
    delay = min(start + n / rate - time.monotonic(), left)
    if delay > 0:
        time.sleep(delay)
    left = until - time.time()
done = json.dumps({"protocol_version": "v1", "event_type": "COMPLETED", "sprite_id": sprite,
                   "work_item_id": work, "timestamp": "2026-01-15T10:30:00Z",
                   "payload": {"status": "success", "summary": "%d events" % n}})
out.write(done + "\n"); out.flush()
print("LATTICE_EVENT " + done, flush=True)
"""

# Loaded into the bench's operator only (PYTHONPATH): every `asyncio.run` in it (the main
# thread's supervisor and each kopf operator's thread) also runs a task that sleeps 100 ms
# and writes how late it woke ("<epoch> <thread> <lag ms>") to $LATTICE_BENCH_LOOP_LAG.
LAG_HOOK = r"""
import asyncio, os, threading, time
_path = os.environ.get("LATTICE_BENCH_LOOP_LAG")
if _path:
    _out = open(_path, "a", buffering=1)
    _lock = threading.Lock()
    _real_run = asyncio.run

    async def _probe(name):
        while True:
            began = time.monotonic()
            await asyncio.sleep(0.1)
            late = time.monotonic() - began - 0.1
            with _lock:
                _out.write("%.3f %s %.2f\n" % (time.time(), name, 1000 * late))

    def _run(main, **kwargs):
        async def probed():
            probe = asyncio.ensure_future(_probe(threading.current_thread().name))
            try:
                return await main
            finally:
                probe.cancel()
        return _real_run(probed(), **kwargs)

    asyncio.run = _run
"""

RUN_TIMINGS: dict[str, Any] = {}
"""The product's Run timings (the settings' defaults), not the test stack's faster ones."""


# -- /proc -----------------------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(value.split()[0])
    return out


def descriptors(pid: int) -> tuple[int, int]:
    """Open file descriptors and, of them, sockets."""
    fds = sockets = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        fds += 1
        try:
            if os.readlink(fd).startswith("socket:"):
                sockets += 1
        except OSError:
            continue  # closed meanwhile
    return fds, sockets


def mem_available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return -1


# -- the pieces ------------------------------------------------------------------------------


def warm_sprites(bench: Bench, namespace: str, names: list[str]) -> float:
    """`names` created at once, Ready, each has run a command; the seconds it took."""
    began = time.monotonic()
    bodies = [build("sprite.yaml", n, {"spec.networkPolicy": {"rules": []}}) for n in names]
    bench.run(bench.generator(namespace, "sprites", 32).burst(bodies, same))
    path = resource_path("lattice.dev", "v1alpha1", "sprites", namespace)
    wanted = set(names)

    def ready() -> bool:
        items = bench.run(bench.kube.get(path))["items"]
        return sum(1 for i in items if i["metadata"]["name"] in wanted and sprite_ready(i)) == len(
            names
        )

    wait_for(ready, timeout=1200, interval=2.0, what=f"{len(names)} Sprites Ready")
    warmups = [run_body(f"warm-{n}", n, ["true"]) for n in names]
    bench.loaded_runs(namespace, warmups, same, timeout=1200)
    return round(time.monotonic() - began, 1)


def outbox_lines(stack: Stack, backend: dict[str, str], sprites: list[str]) -> list[int]:
    """Each sprite's outbox lines now (a sprite keeps its outbox from one Run to the next:
    a Run's events are the lines written after it started)."""
    counts = []
    for sprite in sprites:
        outbox = stack.sprites.host_root(backend[sprite]) / ".lattice" / "outbox.jsonl"
        counts.append(outbox.read_bytes().count(b"\n") if outbox.exists() else 0)
    return counts


def named_runs(bench: Bench, namespace: str, names: set[str]) -> list[dict[str, Any]]:
    """The named Runs, as the API server has them now."""
    path = resource_path("lattice.dev", "v1alpha1", "runs", namespace)
    items = bench.run(bench.kube.get(path))["items"]
    return [item for item in items if item["metadata"]["name"] in names]


def folded(bench: Bench, namespace: str, names: set[str]) -> dict[str, tuple[int, str]]:
    """Each named Run's events in status and its phase."""
    return fold(named_runs(bench, namespace, names))


def fold(runs: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    out = {}
    for item in runs:
        status = item.get("status") or {}
        count = (status.get("events") or {}).get("eventCount", 0)
        out[item["metadata"]["name"]] = (int(count), str(status.get("phase") or "Pending"))
    return out


def end_reasons(runs: list[dict[str, Any]]) -> dict[str, int]:
    """How the Runs that did not succeed ended: a count per phase, reason and message
    (numbers and names in it replaced, so that alike endings count together)."""
    counts: dict[str, int] = {}
    for item in runs:
        status = item.get("status") or {}
        if status.get("phase") == "Succeeded":
            continue
        ended: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Succeeded"), {}
        )
        message = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "N", str(ended.get("message", "")))
        key = f"{status.get('phase')}: {ended.get('reason')}: {message[:160]}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def violations(runs: list[dict[str, Any]]) -> dict[str, int]:
    """Protocol violations in the Runs' status, by category, summed over the Runs."""
    counts: dict[str, int] = {}
    for item in runs:
        by_category = ((item.get("status") or {}).get("events") or {}).get("violationCounts")
        for category, count in (by_category or {}).items():
            counts[category] = counts.get(category, 0) + int(count)
    return dict(sorted(counts.items()))


def violation_sample(runs: list[dict[str, Any]], keep: int = 3) -> dict[str, Any]:
    """How the charged violations spread over the Runs, and a few of them as the status
    holds them (where in the stream, why, how the Run's session went): what to look at."""
    charged = []
    for item in runs:
        status = item.get("status") or {}
        events = status.get("events") or {}
        if events.get("violationCount"):
            charged.append((int(events["violationCount"]), item))
    charged.sort(key=lambda pair: pair[0])
    counts = [count for count, _ in charged]
    sample = []
    for count, item in charged[-keep:]:
        status = item["status"]
        sample.append(
            {
                "run": item["metadata"]["name"],
                "violations": count,
                "events": status["events"].get("eventCount"),
                "session": status.get("sessionId"),
                "attempts": [
                    {k: a.get(k) for k in ("sessionId", "outcome", "exitCode")}
                    for a in status.get("attempts") or []
                ],
                "first": [
                    {k: v.get(k) for k in ("category", "line", "offset", "reason")}
                    | {"excerpt": str(v.get("excerpt", ""))[-60:]}
                    for v in (status["events"].get("violations") or [])[:3]
                ],
            }
        )
    return {
        "runs_charged": len(counts),
        "per_run_min_median_max": [counts[0], counts[len(counts) // 2], counts[-1]],
        "worst": sample,
    }


def lag_summary(lag_file: Path, since: float, until: float) -> dict[str, dict[str, float]]:
    """Each event loop's lag (ms) between two epochs: p50, p99, max, samples."""
    by_loop: dict[str, list[float]] = {}
    for line in lag_file.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and since <= float(parts[0]) <= until:
            by_loop.setdefault(parts[1], []).append(float(parts[2]))
    return {
        name: {
            "samples": len(v),
            "p50_ms": round(pct(v, 50) or 0.0, 1),
            "p99_ms": round(pct(v, 99) or 0.0, 1),
            "max_ms": round(max(v), 1),
        }
        for name, v in sorted(by_loop.items())
    }


class Sampler:
    """Every second while running: the operator's CPU, descriptors, memory and counters."""

    def __init__(self, stack: Stack) -> None:
        self._stack = stack
        self._pid = stack.operator.proc.pid
        self.rows: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="replica-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                fds, sockets = descriptors(self._pid)
                status = proc_status(self._pid)
                row: dict[str, Any] = {
                    "t": round(time.time(), 2),
                    "cpu_s": cpu_seconds(self._pid),
                    "fds": fds,
                    "sockets": sockets,
                    "rss_mib": round(status["VmRSS"] / 1024, 1),
                    "threads": status["Threads"],
                    **counters(self._stack),
                }
            except (
                OSError,
                ValueError,
                httpx.HTTPError,
            ) as exc:  # the metrics door too busy to answer, say
                row = {"t": round(time.time(), 2), "error": str(exc)[:200]}
            self.rows.append(row)
            self._stop.wait(1.0)

    def between(self, since: float, until: float) -> list[dict[str, Any]]:
        return [r for r in self.rows if since <= r["t"] <= until and "error" not in r]


COUNTERS = {
    "events": "lattice_events_ingested_total",
    "patches": "lattice_status_patches_total",
    "backend_errors": "lattice_backend_errors_total",
}


def counters(stack: Stack) -> dict[str, float]:
    """The operator's own counters of `COUNTERS`, summed over labels, from one scrape."""
    text = httpx.get(
        f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False, timeout=10
    ).text
    out = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        for key, name in COUNTERS.items():
            if line.startswith(name) and line[len(name)] in "{ ":
                out[key] += float(line.split()[-1])
    return out


def backend_latency(stack: Stack) -> dict[str, tuple[float, float]]:
    """The operator's Sprites calls so far by operation: (seconds in all, calls)."""
    text = httpx.get(
        f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False, timeout=10
    ).text
    out: dict[str, tuple[float, float]] = {}
    base = "lattice_backend_call_duration_seconds_"
    for line in text.splitlines():
        for part, index in (("sum", 0), ("count", 1)):
            prefix = f'{base}{part}{{operation="'
            if line.startswith(prefix):
                operation = line[len(prefix) :].split('"', 1)[0]
                pair = list(out.get(operation, (0.0, 0.0)))
                pair[index] = float(line.split()[-1])
                out[operation] = (pair[0], pair[1])
    return out


def mean_ms(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    out = {}
    for key, (total, count) in after.items():
        total0, count0 = before.get(key, (0.0, 0.0))
        if count > count0:
            out[key] = round(1000 * (total - total0) / (count - count0), 1)
    return out


def apiserver_latency(values: dict[tuple[str, str], float]) -> dict[str, tuple[float, float]]:
    """The API server's own latency of Run status PATCHes and of its etcd updates of Runs:
    (seconds in all, requests)."""
    wanted = {
        "runs/status PATCH": ("apiserver_request_duration_seconds", 'subresource="status"'),
        "etcd update runs": ("etcd_request_duration_seconds", 'operation="update"'),
    }
    out: dict[str, tuple[float, float]] = {}
    for key, (metric, mark) in wanted.items():
        total = count = 0.0
        for (name, labels), value in values.items():
            if 'resource="runs"' not in labels or mark not in labels:
                continue
            if key.endswith("PATCH") and 'verb="PATCH"' not in labels:
                continue
            if name == f"{metric}_sum":
                total += value
            elif name == f"{metric}_count":
                count += value
        out[key] = (total, count)
    return out


def unfinished(
    bench: Bench, stack: Stack, namespace: str, names: set[str], backend: dict[str, str]
) -> list[dict[str, Any]]:
    """Up to five Runs not ended: what their status says, and what the sprite has running."""
    path = resource_path("lattice.dev", "v1alpha1", "runs", namespace)
    out = []
    for item in bench.run(bench.kube.get(path))["items"]:
        status = item.get("status") or {}
        name = item["metadata"]["name"]
        if name not in names or status.get("phase") in ("Succeeded", "Failed"):
            continue
        sprite = backend[item["spec"]["spriteRef"]["name"]]
        try:
            described: Any = stack.sprites.describe(sprite)
        except httpx.HTTPError as exc:
            described = str(exc)[:200]
        out.append(
            {
                "run": name,
                "phase": status.get("phase"),
                "conditions": [
                    {k: c.get(k) for k in ("type", "status", "reason", "message")}
                    for c in status.get("conditions") or []
                ],
                "gate": (status.get("cursor") or {}).get("gate"),
                "event_count": (status.get("events") or {}).get("eventCount"),
                "session_id": status.get("sessionId"),
                "sprite": described,
            }
        )
        if len(out) == 5:
            break
    return out


def rate_of(rows: list[dict[str, Any]], key: str) -> float | None:
    if len(rows) < 2:
        return None
    spent = float(rows[-1][key] - rows[0][key])
    return round(spent / max(1e-9, float(rows[-1]["t"] - rows[0]["t"])), 2)


def one_count(
    bench: Bench, stack: Stack, namespace: str, n: int, sprites: list[str], lag_file: Path
) -> dict[str, Any]:
    names = [f"n{n}-{i}" for i in range(n)]
    row: dict[str, Any] = {"active_runs": n, "events_per_s_per_run": RATE, "sprites": n}
    path = resource_path("lattice.dev", "v1alpha1", "sprites", namespace)
    backend = {
        i["metadata"]["name"]: i["status"]["spriteName"]
        for i in bench.run(bench.kube.get(path))["items"]
    }
    time.sleep(6)  # the warm-ups' sessions ended, the sprites idle
    pid = stack.operator.proc.pid
    row["load_average_1m_before_after"] = [load(), None]
    row["mem_available_mib_before"] = mem_available_mib()
    failures0, calls0 = daemon_failures(stack), sprite_calls(stack)
    lines_before = outbox_lines(stack, backend, sprites)
    latency0 = backend_latency(stack)
    api0 = apiserver_latency(bench.run(apiserver_metrics(bench.config)))
    began = time.time()
    until = began + ramp(n) + WINDOW
    bodies = [
        run_body(name, sprite, ["python3", "-c", AGENT, str(RATE), f"{until:.3f}"])
        for name, sprite in zip(names, sprites, strict=True)
    ]
    with Sampler(stack) as sampler, cpu_shares(bench, stack, row):

        async def start_all() -> dict[str, float]:
            async with StartWatch(bench.config, namespace) as watch:
                await bench.generator(namespace, "runs").burst(bodies, same)
                await watch.wait_phases(set(names), {"Running"}, max(1.0, until - time.time()))
                return {k: v for k, v in watch.started.items() if k in set(names)}

        started = bench.run(start_all())
        all_running = time.time()
        row["runs_started"] = len(started)
        row["all_running_after_s"] = round(all_running - began, 1)
        row["exec_started_p50_p99_s"] = [
            round((pct(list(started.values()), q) or began) - began, 1) for q in (50, 99)
        ]
        window_from = min(all_running, until - 1.0)
        profile_out = RESULTS.parent / f"profile-replica-{n}.txt"
        profile_from = max(window_from, until - PROFILE_SECONDS)
        if time.time() < profile_from:
            time.sleep(profile_from - time.time())
        if PROFILE:
            RESULTS.parent.mkdir(exist_ok=True)
            with pyspy.record(pid, profile_out):
                time.sleep(max(0.0, until - time.time()))
            row["profile"] = pyspy.summary(profile_out)
        else:
            time.sleep(max(0.0, until - time.time()))
        at_end = folded(bench, namespace, set(names))
        end_read = time.time()
        row["sprite_call_mean_ms"] = mean_ms(latency0, backend_latency(stack))
        api1 = apiserver_latency(bench.run(apiserver_metrics(bench.config)))
        row["apiserver_mean_ms"] = {
            key: round(1000 * (api1[key][0] - api0[key][0]) / (api1[key][1] - api0[key][1]), 1)
            for key in api1
            if api1[key][1] > api0[key][1]
        }
        time.sleep(2)  # every agent past its deadline has written COMPLETED
        lines = outbox_lines(stack, backend, sprites)
        target = {
            name: after - before
            for name, after, before in zip(names, lines, lines_before, strict=True)
        }
        emitted = sum(target.values())
        in_status = sum(c for c, _ in at_end.values())
        row["window_s"] = round(until - window_from, 1)
        row["events_emitted"] = emitted
        row["events_in_status_at_deadline"] = in_status
        row["lag_at_deadline_events"] = emitted - in_status
        row["lag_at_deadline_s_of_emission"] = round((emitted - in_status) / (n * RATE), 2)
        row["runs_behind_at_deadline"] = sum(
            1 for name, (c, _) in at_end.items() if c < target[name] - 1
        )
        row["deadline_read_took_s"] = round(end_read - until, 2)

        events_in: list[float] = []
        ended: list[list[float]] = []
        catch_up_profile = RESULTS.parent / f"profile-replica-{n}-catch-up.txt"
        recording: Any = None
        row["catch_up_after_deadline_s"] = None
        while time.time() - until < CATCH_UP_TIMEOUT:
            now = folded(bench, namespace, set(names))
            after = round(time.time() - until, 1)
            events = all(now.get(name, (0, ""))[0] >= least for name, least in target.items())
            if events and not events_in:
                events_in.append(after)
            done = sum(1 for name in target if now.get(name, (0, ""))[1] in ENDED)
            if not ended or ended[-1][1] != done:
                ended.append([after, done])
            if events and done == len(target):
                row["catch_up_after_deadline_s"] = after
                break
            if PROFILE and recording is None and after >= 30.0:
                # Not ended 30 s after the deadline: what the operator does meanwhile.
                recording = pyspy.record(pid, catch_up_profile)
                recording.__enter__()
                profile_until = time.time() + PROFILE_SECONDS
            if recording and time.time() >= profile_until:
                recording.__exit__(None, None, None)
                row["catch_up_profile"] = pyspy.summary(catch_up_profile)
                recording = False  # taken: not again
            time.sleep(1.0)
        if recording:
            recording.__exit__(None, None, None)
            row["catch_up_profile"] = pyspy.summary(catch_up_profile)
        row["runs_ended_after_deadline_s"] = ended
        if row["catch_up_after_deadline_s"] is None:
            row["unfinished_sample"] = unfinished(bench, stack, namespace, set(names), backend)
        row["events_caught_up_after_deadline_s"] = round(events_in[0], 1) if events_in else None
        window = sampler.between(window_from, until)
    row["load_average_1m_before_after"][1] = load()
    row["mem_available_mib_after"] = mem_available_mib()
    runs = named_runs(bench, namespace, set(names))
    last = fold(runs)
    row["phases_after"] = dict(
        sorted({p: sum(1 for _, q in last.values() if q == p) for _, p in last.values()}.items())
    )
    if any(phase != "Succeeded" for _, phase in last.values()):
        row["not_succeeded_by_reason"] = end_reasons(runs)
    row["events_in_status_after"] = sum(c for c, _ in last.values())
    row["events_lost"] = max(0, emitted - row["events_in_status_after"])
    # The agent keeps the protocol: any violation charged to it is the operator's error.
    row["violations_charged"] = violations(runs)
    if row["violations_charged"]:
        row["violations_sample"] = violation_sample(runs)
    if window:
        cpu = window[-1]["cpu_s"] - window[0]["cpu_s"]
        span = max(1e-9, window[-1]["t"] - window[0]["t"])
        row["window"] = {
            "seconds_sampled": round(span, 1),
            "operator_cpu_s": round(cpu, 1),
            "operator_cores": round(cpu / span, 2),
            "operator_cpu_ms_per_event": round(
                1000 * cpu / max(1.0, window[-1]["events"] - window[0]["events"]), 3
            ),
            "events_offered_per_s": n * RATE,
            "events_committed_per_s": rate_of(window, "events"),
            "status_patches_per_s": rate_of(window, "patches"),
            "backend_errors": window[-1]["backend_errors"] - window[0]["backend_errors"],
            "fds_max": max(r["fds"] for r in window),
            "sockets_max": max(r["sockets"] for r in window),
            "rss_mib_max": max(r["rss_mib"] for r in window),
            "threads_max": max(r["threads"] for r in window),
            "event_loop_lag": lag_summary(lag_file, window_from, until),
        }
        cores = [
            (b["cpu_s"] - a["cpu_s"]) / max(1e-9, b["t"] - a["t"])
            for a, b in itertools.pairwise(window)
        ]
        row["window"]["operator_cores_per_second_p50_max"] = [
            round(statistics.median(cores), 2) if cores else None,
            round(max(cores), 2) if cores else None,
        ]
    row["sampler_errors"] = sum(1 for r in sampler.rows if "error" in r)
    row["daemon_failures"] = daemon_failures(stack) - failures0
    row["sprite_calls_by_operation"] = calls_between(calls0, sprite_calls(stack))
    seconds = max(1e-9, time.time() - began)
    row["sprite_calls_per_s"] = round(sum(row["sprite_calls_by_operation"].values()) / seconds, 1)
    row["kept_up"] = bool(
        row["runs_started"] == n
        and row["lag_at_deadline_s_of_emission"] <= 2.0
        and row["events_caught_up_after_deadline_s"] is not None
        and row["events_caught_up_after_deadline_s"] <= 10.0
        and row["events_lost"] == 0
        and row["daemon_failures"] == 0
    )
    return row


def test_replica(cluster: Cluster, local_sprites: LocalSprites, tmp_path: Path) -> None:
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "mem_total_mib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20),
    }
    results["parameters"] = {
        "counts": COUNTS,
        "events_per_s_per_run": RATE,
        "window_s": WINDOW,
        "run_timings": "product defaults (outbox_interval 0.5 s, patch_interval 1 s)",
        "fleet": PRODUCT_FLEET,
    }
    rows: dict[str, Any] = results.setdefault("counts", {})
    stamp = {"commit": commit()}

    def record(n: int, row: dict[str, Any]) -> None:
        row["measured"] = {**stamp, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        rows[str(n)] = row
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")

    hook = tmp_path / "lag-hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(LAG_HOOK)
    lag_file = tmp_path / "loop-lag.txt"
    bench = Bench(cluster)
    namespace = cluster.create_namespace("cap-replica")
    try:
        with operator_stack(
            cluster, local_sprites, tmp_path, backend=PRODUCT_FLEET, runs=RUN_TIMINGS
        ) as stack:
            stack.operator.stop()
            stack.operator = spawn_operator(
                cluster.kubeconfig,
                stack.log_dir,
                *stack.args,
                "--namespace",
                namespace,
                env={**stack.env, "LATTICE_BENCH_LOOP_LAG": str(lag_file)},
                extra_path=[hook],
            )
            wait_webhooks_served(cluster)
            sprites: list[str] = []
            for n in sorted(COUNTS):
                more = [f"r{i}" for i in range(len(sprites), n)]
                made = warm_sprites(bench, namespace, more) if more else 0.0
                sprites += more
                row = one_count(bench, stack, namespace, n, sprites[:n], lag_file)
                row["sprites_made_s"] = made
                record(n, row)
                if row["catch_up_after_deadline_s"] is None or row["runs_started"] < n:
                    break  # not even caught up afterwards: a larger N only breaks further
            results["namespace_deleted_after_s"] = cleared(cluster, namespace, timeout=600)
    finally:
        bench.close()
        cluster.delete_namespace(namespace)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
