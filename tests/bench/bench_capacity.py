"""Where users wait, and what the operator holds (`make bench`; bench-results/capacity.json,
printed as a table by `python -m tests.bench.report`).

Every row of issue 17's table, each with its method next to it:

- the API server's ceiling alone: bare custom objects (a CRD nobody watches) created and
  status-patched at full speed — measured first, in the same run, so the sustained rate is
  reported as a ratio to it;
- Run applied → exec started in a warm sprite, and an auto-approved Intent applied → its
  Run's exec started: open-loop Poisson arrivals at a low rate (what one user waits), and a
  burst of 100 (what a busy moment looks like). "Exec started" is the Run's
  `status.startTime`, written when the sprite confirmed the session; "applied" is when the
  create was due at the client (the generator and the operator share this machine's clock);
- Intents sustained: Poisson arrivals at 100/s for 60 s over 200 warm sprites, reported per
  10 s window, with the API server's own counts of the writes made meanwhile (so writes per
  Intent) and each admission webhook's latency from its
  `apiserver_admission_webhook_admission_duration_seconds`;
- an operator crash with 100 active Runs: time from the restart until every Run's status has
  caught up with what its sprite wrote while no operator ran;
- operator RSS with 1,000 Sprites and 10,000 finished Runs (a fresh operator that made them
  all), with what holds it (a census of live Python objects by type, taken in the operator
  on SIGUSR2 by a bench-only `sitecustomize`);
- the protocol engine alone (tests/bench/bench_protocol.py's workload, GC-tuned as the operator
  runs it), events per CPU-second.

The two cores are shared with whatever else runs: each figure carries the 1-minute load
average before and after it. Measurements, not tests: nothing here asserts a number.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lattice_adapters.kube import resource_path
from tests.support import pyspy
from tests.support.agents import agent
from tests.support.bench_ingest import calls_between, cpu_seconds, runs_caught_up, sprite_calls
from tests.support.capacity import (
    PRODUCT_FLEET,
    Bench,
    cleared,
    commit,
    cpu_shares,
    daemon_failures,
    loaded,
    rss_kib,
    run_body,
    same,
)
from tests.support.cluster import Cluster, wait_for
from tests.support.loadgen import (
    PROBE_CRD,
    READ_VERBS,
    StartWatch,
    apiserver_metrics,
    audit_size,
    ceiling,
    requests_between,
    webhook_latency,
    writes_by_writer,
)
from tests.support.node_runpod import RUN_VS_POD, RUN_VS_POD_TARGET, run_vs_pod_row
from tests.support.operator import spawn_operator
from tests.support.protocol_bench import protocol_workload
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack
from tests.support.write_cost import anatomy, size

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "capacity.json"

# LATTICE_BENCH_SCALE=0.1 runs a tenth of every count and duration (rates stay): a quick look
# while working, never the figures to quote.
SCALE = float(os.environ.get("LATTICE_BENCH_SCALE", "1"))
SUSTAINED_RATE, SUSTAINED_SECONDS, SUSTAINED_SPRITES = 100.0, 60.0 * SCALE, int(200 * SCALE)
SUSTAINED_ALSO = [
    float(r) for r in os.environ.get("LATTICE_BENCH_SUSTAINED_ALSO", "").split(",") if r
]
"""LATTICE_BENCH_SUSTAINED_ALSO=25: the sustained row again at these rates (below the API
server's bound, say), each kept as `sustained_intents_at_<rate>`."""
LATENCY_RATE, LATENCY_SECONDS, BURST = 5.0, 30.0 * SCALE, int(100 * SCALE)
RESTART_RUNS = int(100 * SCALE)
COST_INTENTS = max(1, int(40 * SCALE))
BATCHED_RECEIPTS = 8
"""`runs.receipts_per_event` of the cost row's second run (the first has the default, 1)."""
INTENT_WRITES = ("intents", "runs", "events")
MEMORY_SPRITES, MEMORY_RUNS, MEMORY_RUN_SPRITES = int(1_000 * SCALE), int(10_000 * SCALE), 250
CEILING_OBJECTS, CEILING_IN_FLIGHT = int(3_000 * SCALE), 64

SLOW_AGENT = agent(
    r"""
for i in range(10**6):
    emit("INFO", {"message": "beat %d" % i})
    time.sleep(0.5)
"""
)

# Loaded into the memory bench's operator only (PYTHONPATH): on SIGUSR2 it writes a census of
# live objects by type to $LATTICE_BENCH_CENSUS (with LATTICE_BENCH_TRACEMALLOC=N also
# tracemalloc's largest allocation sites, traced from the start with N frames, and grouped by
# owner: the most recent frame in our packages or kopf, else the allocating package; at scale
# 0.1 and N=8 the census takes ~10 minutes). Nothing of it is in the operator's code.
CENSUS_HOOK = r"""
import os, signal
def _census(signum, frame):
    import gc, json, sys, tracemalloc
    gc.collect()
    rows = {}
    for obj in gc.get_objects():
        name = f"{type(obj).__module__}.{type(obj).__qualname__}"
        count, size = rows.get(name, (0, 0))
        rows[name] = (count + 1, size + sys.getsizeof(obj))
    top = sorted(rows.items(), key=lambda kv: -kv[1][1])[:25]
    out = {"gc_objects_by_type": [
        {"type": k, "count": c, "shallow_bytes": s} for k, (c, s) in top
    ]}
    # Who holds the per-object things: asyncio tasks by coroutine, and for a few sampled
    # objects of the types that grow with the object count, their referrers' types.
    tasks = {}
    for obj in gc.get_objects():
        if type(obj).__name__ == "Task":
            coro = obj.get_coro()
            name = getattr(coro, "__qualname__", type(coro).__name__)
            tasks[name] = tasks.get(name, 0) + 1
    out["tasks_by_coroutine"] = sorted(tasks.items(), key=lambda kv: -kv[1])[:15]
    holders = {}
    for wanted in ("Body", "deque", "set", "Memo"):
        sample = [o for o in gc.get_objects() if type(o).__name__ == wanted][-200::20]
        seen = {}
        for obj in sample:
            for ref in gc.get_referrers(obj):
                if ref is sample or type(ref).__name__ == "frame":
                    continue
                up = type(ref).__qualname__
                if isinstance(ref, dict):
                    owners = [type(r).__qualname__ for r in gc.get_referrers(ref)
                              if type(r).__name__ not in ("list", "frame")][:2]
                    up = "dict<" + ",".join(owners) + ">"
                seen[up] = seen.get(up, 0) + 1
        holders[wanted] = sorted(seen.items(), key=lambda kv: -kv[1])[:6]
    out["sampled_holders"] = holders
    # What the C allocator holds (all arenas): live, and freed but kept from the OS.
    try:
        import ctypes
        class _Info(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                "uordblks", "fordblks", "keepcost")]
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Info
        info = libc.mallinfo2()
        out["malloc"] = {"in_use_bytes": info.uordblks + info.hblkhd,
                         "freed_but_held_bytes": info.fordblks,
                         "mmapped_bytes": info.hblkhd}
    except (OSError, AttributeError):
        pass
    out["python_allocated_blocks"] = sys.getallocatedblocks()
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        by_traceback = snapshot.statistics("traceback")  # grouped once: minutes at 10^6 blocks
        out["tracemalloc_by_traceback"] = [
            {"where": [str(f) for f in s.traceback if "json" not in f.filename][:4],
             "bytes": s.size, "blocks": s.count}
            for s in by_traceback[:12]
        ]
        out["tracemalloc_total_bytes"] = sum(s.size for s in snapshot.statistics("filename"))
        out["tracemalloc_by_line"] = [
            {"where": str(s.traceback), "bytes": s.size, "blocks": s.count}
            for s in snapshot.statistics("lineno")[:25]
        ]
        out.update(_by_owner(by_traceback))
    with open(os.environ["LATTICE_BENCH_CENSUS"], "w") as f:
        json.dump(out, f)
_packages = {}
def _package(filename):
    # "lattice_operator/handlers/runs.py", "kopf/_core/...", a site-package's name, or the
    # standard library's module (memoized: a snapshot has ~10^5 tracebacks of N frames).
    if filename not in _packages:
        _packages[filename] = _package_of(filename)
    return _packages[filename]
def _package_of(filename):
    f = filename.replace("\\", "/")
    for ours in ("lattice_operator/", "lattice_adapters/", "kopf/"):
        at = f.rfind("/" + ours)
        if at >= 0:
            return f[at + 1:]
    if "site-packages/" in f:
        return f.split("site-packages/", 1)[1].split("/", 1)[0]
    if f.startswith("<"):
        return f
    return "stdlib:" + f.rsplit("/", 1)[-1]
def _by_owner(stats):
    # Each traced block's owner: the most recent frame in our packages or kopf (what asked
    # for it: a kopf watch stream's JSON, our model), else the most recent frame's package.
    owners, sites, total = {}, {}, 0
    for s in stats:
        frames = list(s.traceback)[::-1]  # most recent first
        owner_frame = next((fr for fr in frames if _package(fr.filename).startswith(
            ("lattice_operator/", "lattice_adapters/", "kopf/"))), None)
        pkgs = [_package(fr.filename) for fr in frames]
        if any("importlib" in p for p in pkgs):
            owner_frame = None  # code and module-level objects: loaded, not held per object
        if owner_frame is None:
            owner = next((p for p in pkgs if not p.startswith(("stdlib:", "<"))), pkgs[0])
            if any("importlib" in p for p in pkgs):
                owner = "imports (code, module-level objects)"
            site = owner
        else:
            pkg = _package(owner_frame.filename)
            top = pkg.split("/")
            owner = "/".join(top[:2]) if top[0] != "kopf" else "kopf/" + top[-1]
            site = f"{pkg}:{owner_frame.lineno}"
        total += s.size
        b, n = owners.get(owner, (0, 0))
        owners[owner] = (b + s.size, n + s.count)
        b, n, where = sites.get(site, (0, 0, None))
        sites[site] = (b + s.size, n + s.count, where or [
            f"{_package(fr.filename)}:{fr.lineno}" for fr in frames[:6]])
    return {
        "tracemalloc_by_owner": [
            {"owner": k, "bytes": b, "blocks": n, "share": round(b / max(total, 1), 3)}
            for k, (b, n) in sorted(owners.items(), key=lambda kv: -kv[1][0])[:25]
        ],
        "tracemalloc_by_owner_site": [
            {"site": k, "bytes": b, "blocks": n, "most_recent_frames": w}
            for k, (b, n, w) in sorted(sites.items(), key=lambda kv: -kv[1][0])[:25]
        ],
    }
if os.environ.get("LATTICE_BENCH_CENSUS"):
    signal.signal(signal.SIGUSR2, _census)
    if os.environ.get("LATTICE_BENCH_TRACEMALLOC"):
        import tracemalloc
        tracemalloc.start(int(os.environ["LATTICE_BENCH_TRACEMALLOC"]))
"""


PROFILE = bool(os.environ.get("LATTICE_BENCH_PROFILE"))
"""LATTICE_BENCH_PROFILE=1: py-spy samples the operator during the latency, restart and
sustained rows (collapsed stacks in bench-results/profile-*.txt, a summary in the row); the figures
of a profiled run carry "profiled": true."""


@contextmanager
def profiled(stack: Stack, name: str, into: dict[str, Any]) -> Iterator[None]:
    if not PROFILE:
        yield
        return
    out = RESULTS.parent / f"profile-{name}.txt"
    out.parent.mkdir(exist_ok=True)
    with pyspy.record(stack.operator.proc.pid, out):
        yield
    into["profiled"] = True
    into["profile"] = pyspy.summary(out)


def allow_all(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "IntentPolicy",
        "metadata": {"name": "bench", "namespace": namespace},
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
    }


def intent_body(name: str, sprite: str, command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": {"name": name},
        "spec": {
            "kind": "sprite_task_exec",
            "proposedBy": {"type": "system"},
            "params": {"spriteTaskExec": {"spriteRef": {"name": sprite}, "command": command}},
        },
    }


def run_of_intent(name: str) -> str:
    return f"{name}-run"


# -- the rows ------------------------------------------------------------------------------


@contextmanager
def probe_crd(cluster: Cluster) -> Iterator[None]:
    """PROBE_CRD established for the block, deleted after it (its objects with it)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(PROBE_CRD))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/probes.bench.lattice.dev", "--timeout=60s"
    )
    try:
        yield
    finally:
        cluster.kubectl("delete", "crd", "probes.bench.lattice.dev", "--wait=false")


def measure_ceiling(bench: Bench, namespace: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with probe_crd(bench.cluster), loaded(out), cpu_shares(bench, None, out):
        runs = [
            bench.run(
                ceiling(bench.kube, namespace, CEILING_OBJECTS // 3, CEILING_IN_FLIGHT, f"p{i}-")
            )
            for i in range(3)
        ]
    best = max(r["create_plus_status_patch_per_s"] for r in runs)
    out["apiserver_cpu_ms_per_write"] = apiserver_ms_per_write(
        out, sum(2 * r["objects"] for r in runs)
    )
    return {**out, "runs": runs, "best_create_plus_status_patch_per_s": best}


def latency_rows(bench: Bench, stack: Stack, runs_ns: str, intents_ns: str) -> dict[str, Any]:
    """Run and Intent apply → exec started: a low open-loop rate, then a burst of 100."""
    sprites = [f"w{i}" for i in range(BURST)]
    out: dict[str, Any] = {
        "parameters": {"rate": LATENCY_RATE, "seconds": LATENCY_SECONDS, "burst": BURST}
    }
    for namespace in (runs_ns, intents_ns):
        bench.sprites(namespace, sprites, warm=True)
    bench.cluster.kubectl("apply", "-f", "-", input=json.dumps(allow_all(intents_ns)))
    time.sleep(6)  # the local sprites go from running to warm after 5 s idle

    def runs(i: int) -> dict[str, Any]:
        return run_body(f"ol-{i}", sprites[i % BURST], ["true"])

    def intents(i: int) -> dict[str, Any]:
        return intent_body(f"ol-{i}", sprites[i % BURST], ["true"])

    for key, namespace, plural, body_of, run_of in (
        ("run", runs_ns, "runs", runs, same),
        ("intent", intents_ns, "intents", intents, run_of_intent),
    ):
        row: dict[str, Any] = {}
        with loaded(row), profiled(stack, f"{key}-open-loop", row):
            report = bench.open_loop(
                namespace, plural, body_of, run_of, LATENCY_RATE, LATENCY_SECONDS
            )
        row.update(report.summary())
        row["timeline"] = report.timeline()
        out[f"{key}_open_loop"] = row
        time.sleep(6)
        burst: dict[str, Any] = {}
        bodies = [
            (run_body if key == "run" else intent_body)(f"b-{i}", sprites[i], ["true"])
            for i in range(BURST)
        ]
        with loaded(burst), profiled(stack, f"{key}-burst", burst):
            report = bench.loaded_runs(namespace, bodies, run_of, plural=plural)
        burst.update(report.summary())
        burst["timeline"] = report.timeline()
        out[f"{key}_burst"] = burst
        time.sleep(6)
    return out


def warm_for_intents(bench: Bench, namespace: str, sprites: list[str]) -> list[str]:
    """Warm `sprites` and a policy that allows their exec Intents; back once they idle."""
    bench.sprites(namespace, sprites, warm=True)
    bench.cluster.kubectl("apply", "-f", "-", input=json.dumps(allow_all(namespace)))
    time.sleep(6)  # the local sprites go from running to warm after 5 s idle
    return sprites


def sustained(
    bench: Bench, stack: Stack, namespace: str, rate: float = SUSTAINED_RATE
) -> dict[str, Any]:
    sprites = warm_for_intents(bench, namespace, [f"s{i}" for i in range(SUSTAINED_SPRITES)])

    def body_of(i: int) -> dict[str, Any]:
        return intent_body(f"sus-{i}", sprites[i % SUSTAINED_SPRITES], ["true"])

    row: dict[str, Any] = {
        "target_per_s": rate,
        "seconds": SUSTAINED_SECONDS,
        "sprites": SUSTAINED_SPRITES,
    }
    before = bench.run(apiserver_metrics(bench.config))
    cpu0 = cpu_seconds(stack.operator.proc.pid)
    failures0 = daemon_failures(stack)
    calls0 = sprite_calls(stack)
    with loaded(row), profiled(stack, "sustained", row), cpu_shares(bench, stack, row):
        report = bench.open_loop(
            namespace, "intents", body_of, run_of_intent, rate, SUSTAINED_SECONDS
        )
    after = bench.run(apiserver_metrics(bench.config))
    cpu = cpu_seconds(stack.operator.proc.pid) - cpu0
    summary = report.summary()
    started = [report.started[s.run] for s in report.samples if s.run in report.started]
    first = min(s.due for s in report.samples)
    # The rate that reached exec: Runs started while Intents arrived (the first 60 s).
    in_time = sum(1 for t in started if t - first <= SUSTAINED_SECONDS)
    writes = requests_between(before, after)
    total_writes = sum(writes.values())
    row.update(summary)
    row["arrived"] = len(report.samples)
    row["exec_started_per_s_during_arrivals"] = round(in_time / SUSTAINED_SECONDS, 1)
    row["exec_started_per_s_overall"] = (
        round(len(started) / max(1e-9, max(started) - first), 1) if started else 0.0
    )
    row["windows"] = report.windows()
    row["timeline"] = report.timeline()
    row["api_writes_by_resource"] = writes
    row["api_writes_by_kind"] = requests_between(before, after, detailed=True)
    row["api_writes_per_intent"] = round(total_writes / max(1, len(started)), 1)
    row["apiserver_cpu_ms_per_write"] = apiserver_ms_per_write(row, total_writes)
    row["api_reads_by_kind"] = requests_between(before, after, detailed=True, verbs=READ_VERBS)
    row["sprite_calls_by_operation"] = calls_between(calls0, sprite_calls(stack))
    row["webhooks"] = webhook_latency(before, after)
    row["daemon_failures"] = daemon_failures(stack) - failures0
    row["operator_cpu_s"] = round(cpu, 1)
    row["operator_cpu_ms_per_intent"] = round(1000 * cpu / max(1, len(started)), 2)
    return row


def intent_cost(bench: Bench, stack: Stack, namespace: str) -> dict[str, Any]:
    """What one auto-approved Intent costs with nothing else to do: Intents one after the
    other, each to its end; the API server's own count of the writes (by resource,
    subresource, verb and code) and the operator's CPU time, per Intent. The sustained rate
    is bounded by these two: the API server's ceiling over the writes, a core over the CPU."""
    sprites = warm_for_intents(bench, namespace, [f"c{i}" for i in range(COST_INTENTS)])
    row: dict[str, Any] = {"intents": COST_INTENTS}
    plane = bench.cluster.local
    audited = plane is not None and plane.audit_writes
    audit0 = audit_size(plane.audit_log) if plane is not None and audited else 0
    before = bench.run(apiserver_metrics(bench.config))
    cpu0 = cpu_seconds(stack.operator.proc.pid)
    calls0 = sprite_calls(stack)
    with loaded(row), cpu_shares(bench, stack, row):
        for i, sprite in enumerate(sprites):
            body = intent_body(f"cost-{i}", sprite, ["true"])
            bench.loaded_runs(namespace, [body], run_of_intent, plural="intents")
        time.sleep(2)  # the last Intent's finalizer removed, its receipts posted
    after = bench.run(apiserver_metrics(bench.config))
    cpu = cpu_seconds(stack.operator.proc.pid) - cpu0
    writes = requests_between(before, after, detailed=True)
    # The Intents' own (their writes, their Runs', their receipts); the rest (the fleet
    # observer's Sprite status, the Lease) is background, listed but not counted.
    own = sum(v for k, v in writes.items() if k.split()[0].split("/")[0] in INTENT_WRITES)
    row["api_writes_per_intent"] = round(own / COST_INTENTS, 2)
    row["api_writes_per_intent_by_kind"] = {
        k: round(v / COST_INTENTS, 2) for k, v in sorted(writes.items())
    }
    row["operator_cpu_ms_per_intent"] = round(1000 * cpu / COST_INTENTS, 1)
    row["apiserver_cpu_ms_per_write"] = apiserver_ms_per_write(row, sum(writes.values()))
    row["sprite_calls_per_intent"] = {
        k: round(v / COST_INTENTS, 2) for k, v in calls_between(calls0, sprite_calls(stack)).items()
    }
    if plane is not None and audited:
        # Who made each write (LATTICE_APISERVER_AUDIT=1; the audit log costs the API server
        # CPU of its own, so its CPU per write is not quoted from such a run).
        row["api_writes_per_intent_by_writer"] = {
            k: round(v / COST_INTENTS, 2)
            for k, v in writes_by_writer(plane.audit_log, namespace, audit0).items()
        }
    return row


def write_anatomy(
    bench: Bench, cluster: Cluster, local_sprites: LocalSprites, tmp_path: Path
) -> dict[str, Any]:
    """What a status write costs the API server, by size and by CRD (tests/support/write_cost):
    the status of an auto-approved Intent's finished Run, as the operator stored it, patched
    onto objects nobody watches once that operator is gone."""
    local = cluster.local
    if local is None or local.state is None:
        return {"skipped": "the API server's CPU is read from its process: a local plane only"}
    (apiserver,) = (p.pid for p in local.state.processes if p.name == "kube-apiserver")
    sample_ns = cluster.create_namespace("cap-anatomy-sample")
    with operator_stack(cluster, local_sprites, tmp_path, backend=PRODUCT_FLEET):
        (sprite,) = warm_for_intents(bench, sample_ns, ["a0"])
        bench.loaded_runs(
            sample_ns, [intent_body("anatomy", sprite, ["true"])], run_of_intent, plural="intents"
        )
        time.sleep(2)  # its last status write and receipts
        runs = resource_path("lattice.dev", "v1alpha1", "runs", sample_ns)
        run = bench.run(bench.kube.get(f"{runs}/{run_of_intent('anatomy')}"))
        cleared(cluster, sample_ns)
    namespace = cluster.create_namespace("cap-anatomy")
    out: dict[str, Any] = {
        "stored_run_bytes": size(run),
        "stored_status_bytes": size(run["status"]),
    }
    try:
        with probe_crd(cluster), loaded(out):
            out.update(
                bench.run(
                    anatomy(
                        bench.kube,
                        namespace,
                        run_status=run["status"],
                        run_spec=run["spec"],
                        cpu=lambda: cpu_seconds(apiserver),
                        objects=max(10, int(150 * SCALE)),
                    )
                )
            )
    finally:
        cleared(cluster, namespace)
    return out


def restart(bench: Bench, stack: Stack, namespace: str) -> dict[str, Any]:
    sprites = [f"r{i}" for i in range(RESTART_RUNS)]
    bench.sprites(namespace, sprites, warm=False)
    names = [f"act-{i}" for i in range(RESTART_RUNS)]
    bodies = [
        run_body(n, s, ["python3", "-c", SLOW_AGENT]) for n, s in zip(names, sprites, strict=True)
    ]

    async def start_all() -> None:
        async with StartWatch(bench.config, namespace) as watch:
            await bench.generator(namespace, "runs").burst(bodies, same)
            await watch.wait_phases(set(names), {"Running"}, 300)

    bench.run(start_all())
    stack.operator.kill()
    time.sleep(5)  # the sprites keep writing while no operator watches
    path = resource_path("lattice.dev", "v1alpha1", "sprites", namespace)
    backend = {
        i["metadata"]["name"]: i["status"]["spriteName"]
        for i in bench.run(bench.kube.get(path))["items"]
    }
    target = {}
    for name, sprite in zip(names, sprites, strict=True):
        outbox = stack.sprites.host_root(backend[sprite]) / ".lattice" / "outbox.jsonl"
        target[name] = len(outbox.read_bytes().splitlines())
    row: dict[str, Any] = {"active_runs": RESTART_RUNS, "operator_down_s": 5}
    runs_path = resource_path("lattice.dev", "v1alpha1", "runs", namespace)
    with loaded(row):
        restarted = time.monotonic()
        stack.start()
        live = time.monotonic() - restarted

        def caught_up() -> bool:
            return runs_caught_up(bench.run(bench.kube.get(runs_path))["items"], target)

        with profiled(stack, "restart", row):
            wait_for(caught_up, timeout=600, interval=0.2, what="every Run to catch up")
        row["time_to_catch_up_s"] = round(time.monotonic() - restarted, 2)
        row["of_which_process_start_s"] = round(live, 2)
    for name in names:
        bench.run(bench.kube.merge_patch(f"{runs_path}/{name}", {"spec": {"cancel": True}}))
    return row


def memory(
    bench: Bench, cluster: Cluster, local_sprites: LocalSprites, tmp_path: Path
) -> dict[str, Any]:
    """A fresh operator makes 1,000 Sprites and runs 10,000 Runs to the end; then its RSS."""
    hook = tmp_path / "census-hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(CENSUS_HOOK)
    census_file = tmp_path / "census.json"
    namespace = cluster.create_namespace("cap-memory")
    row: dict[str, Any] = {
        "sprites": MEMORY_SPRITES,
        "finished_runs": MEMORY_RUNS,
        "wave": min(MEMORY_RUN_SPRITES, MEMORY_SPRITES),
    }
    settings = {"runs": {**_fast_runs(), "history_limit": 0}}
    try:
        with operator_stack(cluster, local_sprites, tmp_path, **settings) as stack:
            stack.operator.stop()
            env = {**stack.env, "LATTICE_BENCH_CENSUS": str(census_file)}
            # Only its namespace: the earlier sections' namespaces may still be terminating,
            # and their objects (open Intents, queued Runs) are not what this row measures.
            stack.operator = spawn_operator(
                cluster.kubeconfig,
                stack.log_dir,
                *stack.args,
                "--namespace",
                namespace,
                env=env,
                extra_path=[hook],
                ready_timeout=300,  # tracemalloc slows the imports of start-up several-fold
            )
            pid = stack.operator.proc.pid
            row["rss_empty_kib"] = rss_kib(pid)
            names = [f"m{i}" for i in range(MEMORY_SPRITES)]
            with loaded(row):
                bench.sprites(namespace, names, warm=False)
                row["rss_1000_sprites_kib"] = rss_kib(pid)
                per_wave = min(MEMORY_RUN_SPRITES, MEMORY_SPRITES)
                for wave in range(MEMORY_RUNS // per_wave):
                    bodies = [run_body(f"f{wave}-{i}", names[i], ["true"]) for i in range(per_wave)]
                    bench.loaded_runs(namespace, bodies, same, timeout=600)
            time.sleep(5)  # daemons stopped, kopf's idle workers gone
            row["rss_kib"] = rss_kib(pid)
            row["rss_mib"] = round(row["rss_kib"] / 1024, 1)
            # Each TLS connection holds a read buffer (asyncio's SSLProtocol.max_size).
            row["open_sockets"] = open_sockets(pid)
            row["bytes_per_sprite_approx"] = round(
                1024 * (row["rss_1000_sprites_kib"] - row["rss_empty_kib"]) / MEMORY_SPRITES
            )
            row["bytes_per_finished_run_approx"] = round(
                1024 * (row["rss_kib"] - row["rss_1000_sprites_kib"]) / MEMORY_RUNS
            )
            os.kill(pid, signal.SIGUSR2)
            wait_for(census_file.exists, timeout=900, interval=0.5, what="the census")
            time.sleep(1)
            row["census"] = json.loads(census_file.read_text())
            row["tracemalloc"] = bool(os.environ.get("LATTICE_BENCH_TRACEMALLOC"))
    finally:
        cluster.delete_namespace(namespace)
    return row


def open_sockets(pid: int) -> int:
    fds = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(fd).startswith("socket:")
    return count


def _fast_runs() -> dict[str, Any]:
    from tests.support.stack import FAST_SETTINGS

    runs: dict[str, Any] = dict(FAST_SETTINGS["runs"])
    return runs


def apiserver_ms_per_write(row: dict[str, Any], writes: int) -> float | None:
    """The API server's CPU over a row (every request it served) per write in it."""
    spent = row.get("cpu_seconds_by_process", {}).get("kube-apiserver")
    return round(1000 * spent / writes, 2) if spent is not None and writes else None


def engine() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with loaded(out):
        runs = [protocol_workload("engine-gc-tuned", "300000") for _ in range(3)]
    values = [r["events_per_second_cpu"] for r in runs]
    return {
        **out,
        "events": 300_000,
        "runs": 3,
        "median_events_per_cpu_s": statistics.median(values),
        "range": [min(values), max(values)],
    }


# -- the table -------------------------------------------------------------------------------


NOT_MEASURED = "not measured yet (LATTICE_BENCH_ONLY left it out)"


def _when(section: dict[str, Any], load_of: dict[str, Any] | None = None) -> str:
    m = section.get("measured") or {}
    load = (load_of or section).get("load_average_1m_before_after")
    scale = "" if m.get("scale", 1) == 1 else f", SCALE {m.get('scale')} (not for quoting)"
    return f"; load {load}; {m.get('at')} {m.get('commit')}{scale}"


def _per_api_core(section: dict[str, Any]) -> str:
    """What the API server's measured CPU per write of ours allows, per core of it."""
    per_write, writes = section.get("apiserver_cpu_ms_per_write"), section["api_writes_per_intent"]
    if not per_write or not writes:
        return ""
    per_core = 1000 / (per_write * writes)
    return (
        f"; the API server spent {per_write} CPU-ms per write: "
        f"{round(per_core, 1)} Intents/s per core of it"
    )


def _busiest(section: dict[str, Any]) -> str:
    """Which process bounded a row, in cores of the machine's."""
    cores = section.get("cpu_cores_by_process")
    if not cores:
        return ""
    top = ", ".join(f"{name} {value}" for name, value in list(cores.items())[:4])
    return f"; CPU in cores of {os.cpu_count()}: {top}"


def table(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 17's table: every row, with its method (and when, on what, under what load)."""
    rows = []

    def row(measure: str, figure: str, target: str, method: str) -> None:
        rows.append({"measure": measure, "figure": figure, "target": target, "method": method})

    lat = results.get("latency")
    for key, what, target in (
        ("run", "Run applied → exec started, warm sprite", "≤ 50 ms / ≤ 150 ms"),
        ("intent", "auto-approved Intent applied → its Run's exec started", "≤ 100 / ≤ 300 ms"),
    ):
        if not lat:
            row(f"{what}, p50 / p99", NOT_MEASURED, target, "")
            continue
        p = lat["parameters"]
        ol = lat[f"{key}_open_loop"]
        bu = lat[f"{key}_burst"]
        row(
            f"{what}, p50 / p99",
            f"{ol['p50_ms']} / {ol['p99_ms']} ms (burst of {p['burst']}: {bu['p50_ms']} / "
            f"{bu['p99_ms']} ms, all in {bu['all_started_after_s']} s)",
            target,
            f"Poisson {p['rate']:g}/s for {p['seconds']:g} s over {p['burst']} warm sprites; "
            f"due at the client → status.startTime{_when(lat, ol)}",
        )
    sus, ceiling_row = results.get("sustained_intents"), results.get("api_ceiling")
    ceil = ceiling_row["best_create_plus_status_patch_per_s"] if ceiling_row else None
    measure = "sustained Intents per second to exec started, 60 s"
    target = "≥ 100/s or the API server's ceiling"
    if sus:
        # What the API server alone could carry: its write ceiling over the writes one
        # Intent costs (its own, its Run's, their receipts and finalizers).
        bound = (
            f" → at most {round(2 * ceil / sus['api_writes_per_intent'], 1)} Intents/s"
            " at bare objects' cost"
            if ceil and sus["api_writes_per_intent"] and sus["started"] == sus["arrived"]
            else " (per started Intent: most had not finished, so not a per-Intent cost)"
        )
        bound += _per_api_core(sus)
        row(
            measure,
            f"{sus['exec_started_per_s_during_arrivals']}/s of {sus['target_per_s']:g}/s offered "
            f"(p50 {sus['p50_ms']} ms, p99 {sus['p99_ms']} ms); API ceiling {ceil}/s "
            f"create+status-patch pairs, {sus['api_writes_per_intent']} API writes per "
            f"Intent{bound}{_busiest(sus)}",
            target,
            f"Poisson {sus['target_per_s']:g}/s for {sus['seconds']:g} s, {sus['sprites']} warm "
            f"sprites, per-10 s windows in the JSON{_when(sus)}",
        )
        for key in sorted(k for k in results if k.startswith("sustained_intents_at_")):
            also = results[key]
            row(
                f"… the same at {also['target_per_s']:g}/s offered",
                f"{also['exec_started_per_s_during_arrivals']}/s while arriving, "
                f"{also['exec_started_per_s_overall']}/s overall, {also['started']} of "
                f"{also['arrived']} started (p50 {also['p50_ms']} ms, p99 {also['p99_ms']} ms), "
                f"{also['api_writes_per_intent']} API writes per Intent, operator "
                f"{also['operator_cpu_ms_per_intent']} CPU-ms per Intent{_busiest(also)}",
                "(below the API server's bound)",
                f"as above{_when(also)}",
            )
    else:
        row(measure, NOT_MEASURED, target, "")
    cost = results.get("intent_cost")
    if cost:
        per_core = round(1000 / cost["operator_cpu_ms_per_intent"], 1)
        api = (
            f", the API server's ceiling {round(2 * ceil / cost['api_writes_per_intent'], 1)}/s"
            " at bare objects' cost"
            if ceil
            else ""
        )
        api += _per_api_core(cost)
        row(
            "… what one Intent costs (bounds the sustained rate)",
            f"{cost['api_writes_per_intent']} API writes, {cost['operator_cpu_ms_per_intent']} "
            f"operator CPU-ms → one core of the operator carries {per_core} Intents/s"
            f"{api}",
            "(what bounds the row above)",
            f"{cost['intents']} Intents one after the other on warm sprites, each to its end; "
            f"the API server's request counts, the operator's /proc CPU time{_when(cost)}",
        )
    batched = results.get("intent_cost_receipts_batched")
    if batched:
        row(
            "… the same, the receipts of one status write in one Event",
            f"{batched['api_writes_per_intent']} API writes, "
            f"{batched['operator_cpu_ms_per_intent']} operator CPU-ms{_per_api_core(batched)}",
            "≤ 8 writes",
            f"as above with runs.receipts_per_event {batched['receipts_per_event']} "
            f"(default 1: docs/install.md, rolling back){_when(batched)}",
        )
    anatomy_row = results.get("write_anatomy")
    if anatomy_row and "median_ms_per_patch" in anatomy_row:
        ms, sizes = anatomy_row["median_ms_per_patch"], anatomy_row["status_bytes"]
        fitted = anatomy_row["schemaless_fit_ms"]
        row(
            "API-server CPU per status write, by what is stored (median of 3)",
            f"bare {ms['probe-bare']} ms; a finished Run's status ({sizes['run-status']} B) "
            f"{ms['run-status']} ms on a Run ({round(ms['run-status'] / ms['probe-bare'], 1)}x"
            f" bare), {ms['probe-run-status']} ms schema-less; with a full receipt ledger "
            f"({sizes['run-status-full-ledger']} B) {ms['run-status-full-ledger']} ms; a Run "
            f"with a one-field status {ms['run-bare']} ms; schema-less by size "
            f"{fitted['base']} ms + {fitted['per_kb']} ms per KiB",
            "≤ 2x bare",
            f"{anatomy_row['objects_per_round']} objects x {anatomy_row['patches_per_object']}"
            " status merge patches each, nobody watching, variants interleaved; the API"
            f" server's /proc CPU{_when(anatomy_row)}",
        )
    if ceiling_row:
        row(
            "the API server alone (the ceiling)",
            f"{ceil} create+status-patch pairs/s",
            "(reference)",
            f"bare objects of a CRD nobody watches, {CEILING_IN_FLIGHT} in flight, best of 3"
            f"{_when(ceiling_row)}",
        )
    mem = results.get("memory")
    measure, target = "operator RSS, 1,000 Sprites + 10,000 finished Runs", "≤ 200 MB"
    if mem:
        row(
            measure,
            f"{mem['rss_mib']} MiB (empty {round(mem['rss_empty_kib'] / 1024, 1)} MiB, "
            f"~{mem['bytes_per_finished_run_approx']} B per finished Run, "
            f"~{mem.get('bytes_per_sprite_approx', '?')} B per Sprite)",
            target,
            f"{mem['sprites']} Sprites, {mem['finished_runs']} Runs in waves of "
            f"{mem['wave']}, a fresh operator; VmRSS after{_when(mem)}",
        )
    else:
        row(measure, NOT_MEASURED, target, "")
    rst = results.get("restart_100_active_runs")
    measure, target = "restart with 100 active Runs → all caught up", "≤ 10 s"
    if rst:
        row(
            measure,
            f"{rst['time_to_catch_up_s']} s for {rst['active_runs']} (process start "
            f"{rst['of_which_process_start_s']} s)",
            target,
            "kill -9, 5 s down while sprites write, restart → every status.events.eventCount ≥ "
            f"the outbox's lines{_when(rst)}",
        )
    else:
        row(measure, NOT_MEASURED, target, "")
    eng = results.get("protocol_engine")
    measure, target = "protocol engine alone", "≥ 300k events/CPU-s"
    if eng:
        row(
            measure,
            f"{eng['median_events_per_cpu_s']:,} events/CPU-s (range {eng['range']})",
            target,
            "bench_protocol's workload, GC-tuned, 300,000 events, median of 3 subprocesses"
            f"{_when(eng)}",
        )
    else:
        row(measure, NOT_MEASURED, target, "")
    rvp = results.get("run_vs_pod")
    if rvp:
        rows.append(run_vs_pod_row(rvp))
    else:
        row(
            RUN_VS_POD,
            "not measured yet (tests/bench/bench_node_pod.py, root)",
            RUN_VS_POD_TARGET,
            "",
        )
    return rows


SECTIONS = ("ceiling", "latency", "cost", "anatomy", "restart", "sustained", "memory", "engine")


def _chosen() -> list[str]:
    """LATTICE_BENCH_ONLY=latency,sustained runs only those sections (default: all)."""
    wanted = [w.strip() for w in os.environ.get("LATTICE_BENCH_ONLY", "").split(",") if w.strip()]
    unknown = sorted(set(wanted) - set(SECTIONS))
    if unknown:
        raise ValueError(f"LATTICE_BENCH_ONLY: unknown sections {unknown}; known: {SECTIONS}")
    return [s for s in SECTIONS if not wanted or s in wanted]


def test_capacity(cluster: Cluster, local_sprites: LocalSprites, tmp_path: Path) -> None:
    """Each section is written to capacity.json as soon as it is measured, stamped with the
    time, the commit and the scale; a run of some sections keeps the others' earlier figures
    (each with its own stamp)."""
    chosen = _chosen()
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    stamp = {"commit": commit(), "scale": SCALE}

    def record(key: str, value: dict[str, Any]) -> None:
        value["measured"] = {**stamp, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        results[key] = value
        results["table"] = table(results)
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")

    bench = Bench(cluster)
    try:
        if "ceiling" in chosen:
            namespace = cluster.create_namespace("cap-ceiling")
            record("api_ceiling", measure_ceiling(bench, namespace))
            cleared(cluster, namespace)
        if {"latency", "cost", "restart", "sustained"} & set(chosen):
            with operator_stack(cluster, local_sprites, tmp_path, backend=PRODUCT_FLEET) as stack:
                if "latency" in chosen:
                    runs_ns = cluster.create_namespace("cap-runs")
                    intents_ns = cluster.create_namespace("cap-intents")
                    record("latency", latency_rows(bench, stack, runs_ns, intents_ns))
                    cleared(cluster, runs_ns, intents_ns)
                if "cost" in chosen:
                    namespace = cluster.create_namespace("cap-cost")
                    record("intent_cost", intent_cost(bench, stack, namespace))
                    cleared(cluster, namespace)
                if "restart" in chosen:
                    namespace = cluster.create_namespace("cap-restart")
                    record("restart_100_active_runs", restart(bench, stack, namespace))
                    cleared(cluster, namespace)
                if "sustained" in chosen:
                    namespace = cluster.create_namespace("cap-sustained")
                    row = sustained(bench, stack, namespace)
                    record("sustained_intents", row)
                    # What deleting the row's open Intents and Runs took (a user's namespace
                    # deleted under load): kept with the row.
                    row["namespace_deleted_after_s"] = cleared(cluster, namespace)
                    record("sustained_intents", row)
                    for rate in SUSTAINED_ALSO:
                        namespace = cluster.create_namespace(f"cap-sustained-{rate:g}")
                        record(
                            f"sustained_intents_at_{rate:g}",
                            sustained(bench, stack, namespace, rate),
                        )
                        cleared(cluster, namespace)
        if "cost" in chosen:
            # The same row with the receipts of one status write sharing an Event.
            runs = {**_fast_runs(), "receipts_per_event": BATCHED_RECEIPTS}
            with operator_stack(
                cluster, local_sprites, tmp_path, backend=PRODUCT_FLEET, runs=runs
            ) as stack:
                namespace = cluster.create_namespace("cap-cost-batched")
                row = intent_cost(bench, stack, namespace)
                row["receipts_per_event"] = BATCHED_RECEIPTS
                record("intent_cost_receipts_batched", row)
                cleared(cluster, namespace)
        if "anatomy" in chosen:
            record("write_anatomy", write_anatomy(bench, cluster, local_sprites, tmp_path))
        if "memory" in chosen:
            record("memory", memory(bench, cluster, local_sprites, tmp_path))
        if "engine" in chosen:
            record("protocol_engine", engine())
    finally:
        bench.close()
