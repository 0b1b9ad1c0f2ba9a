"""Benchmark of the protocol engine: split → parse → validate → merge → reduce.

Every event of a realistic stream (mostly progress INFO of 20-240 characters,
phases, artifacts, the odd action request; every line distinct) is written
twice, as the protocol asks: on stdout, among ordinary log lines and cut into
4 KiB frames, and to the outbox, which is read from the cursor every
`poll_events` events (an unfinished last line is simply read again). Only the
engine's work is timed; generating the stream is not.

The naive baseline is written here, for comparison in the same run: it
splits frames on newlines (with a carry-over, to be fair), `json.loads` each
event line, checks it as a dict, re-reads and re-parses the whole outbox at
every poll, merges the two copies keyed by (event_type, timestamp) and sorts
by timestamp, then folds all events into a dict status. Because it re-reads
the whole outbox, its cost grows with the square of the stream length; the
"single read" variant (the outbox read once, at the end) shows its per-event
cost without that.

The reference the engine's target is stated against is measured in the same run too:
a bare typed decode of each event line (msgspec Structs of the envelope and every
payload, a tagged union by event_type, nothing else: no splitting, no checks, no
merge, no status), over the same stream.

Each workload runs in its own process so that its peak RSS is its own. Run
with `make bench` (or `pytest -m bench tests/bench/bench_protocol.py`);
figures go to bench-results/protocol.json. No timing is asserted.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import msgspec

from tests.support.protocol_bench import protocol_workload

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results" / "protocol.json"
FRAME_BYTES = 4096
CHUNK_EVENTS = 10_000
ENGINE_EVENTS = 1_000_000
COMPARE_EVENTS = 50_000
POLL_EVENTS = 1_000
TRACED_EVENTS = 200_000
RUNS = 3  # the machine is shared: report the median and the spread


def _chunks(total: int) -> Iterator[tuple[list[bytes], bytes, bytes]]:
    """(lines, stdout bytes, outbox bytes) per chunk of the stream, generated lazily."""
    from tests.support.streams import PREFIX, realistic_events

    events = realistic_events(total, seed=7)
    index = 0
    while chunk := list(itertools.islice(events, CHUNK_EVENTS)):
        stdout = bytearray()
        for line in chunk:
            if index % 2 == 0:
                stdout += b"  compiling module_%d.py ... ok\r\n" % index
            stdout += PREFIX + line + b"\n"
            index += 1
        yield chunk, bytes(stdout), b"".join(line + b"\n" for line in chunk)


def _schedule(stdout: bytes, outbox: bytes, lines: list[bytes]) -> list[tuple[str, int, int]]:
    """The chunk as the operator sees it: stdout frames, and an outbox read every poll.

    Steps are (kind, start, end) into the chunk's stdout or outbox bytes; an outbox
    step's end is how much of the chunk the sprite has written by then (mid-line is fine).
    """
    frames = [(i, min(i + FRAME_BYTES, len(stdout))) for i in range(0, len(stdout), FRAME_BYTES)]
    polls = max(1, len(lines) // POLL_EVENTS)
    steps: list[tuple[str, int, int]] = []
    per_poll = -(-len(frames) // polls)
    written = len(outbox) // polls
    for p in range(polls):
        steps += [("stdout", a, b) for a, b in frames[p * per_poll : (p + 1) * per_poll]]
        steps.append(("outbox", 0, len(outbox) if p == polls - 1 else (p + 1) * written))
    return steps


def run_engine(total: int) -> dict[str, Any]:
    from lattice_operator.protocol import RunEventEngine
    from lattice_operator.protocol.projection import STATUS_BUDGET_BYTES, status_size

    rss_start = _maxrss_kib()
    engine = RunEventEngine("sprite-42", "issue-17")
    base = 0  # file offset of the chunk's first outbox byte
    wall = cpu = 0.0
    largest_status = 0
    for lines, stdout, outbox in _chunks(total):
        steps = _schedule(stdout, outbox, lines)
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        for kind, start, end in steps:
            if kind == "stdout":
                engine.feed_stdout(stdout[start:end])
            else:
                # The backend returns the bytes from the cursor's offset to what is written.
                cursor = engine.cursor.outbox_offset
                engine.feed_outbox(outbox[cursor - base : end], cursor)
        status = engine.status()  # what the operator would patch, about once a second
        wall += time.perf_counter() - t_wall
        cpu += time.process_time() - t_cpu
        largest_status = max(largest_status, status_size(status))
        base += len(outbox)
        del lines, stdout, outbox, steps  # let the next chunk replace this one, not join it
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    engine.end_session(0)
    wall += time.perf_counter() - t_wall
    cpu += time.process_time() - t_cpu
    cursor = engine.cursor
    assert cursor.event_count == total, cursor
    assert largest_status <= STATUS_BUDGET_BYTES, largest_status  # at any stream length
    return {
        "events": total,
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "events_per_second_wall": round(total / wall),
        "events_per_second_cpu": round(total / cpu),
        "largest_status_bytes": largest_status,
        "stdout_only_reported": engine.status().violation_counts.get("stdout_only_event", 0),
        "rss_after_imports_kib": rss_start,
        "peak_rss_kib": _maxrss_kib(),
    }


def run_engine_gc_tuned(total: int) -> dict[str, Any]:
    """The engine workload as a tuned long-running process would run it.

    `gc.freeze()` after start-up (the imported modules are never scanned again) and a
    larger first-generation threshold: a process-wide choice for the operator to make
    at start-up, not something the engine does.
    """
    import gc

    import lattice_operator.protocol  # noqa: F401 (start-up imports, frozen below)

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    return run_engine(total)


def run_engine_traced(total: int) -> dict[str, Any]:
    """The engine workload under tracemalloc: the Python memory it holds at its peak."""
    import tracemalloc

    import lattice_operator.protocol  # noqa: F401 (imports are not the engine's memory)

    tracemalloc.start()
    result = run_engine(total)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "events": total,
        "traced_peak_kib": peak // 1024,
        "traced_at_end_kib": current // 1024,
        "largest_status_bytes": result["largest_status_bytes"],
    }


def run_typed_decode(total: int) -> dict[str, Any]:
    """The bound: one typed msgspec decode per event line, and nothing else."""
    decode = _reference_decoder()
    cpu = wall = 0.0
    decoded = 0
    for lines, _, _ in _chunks(total):
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        events = list(map(decode, lines))
        wall += time.perf_counter() - t_wall
        cpu += time.process_time() - t_cpu
        decoded += len(events)
    assert decoded == total
    return {
        "events": total,
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "events_per_second_wall": round(total / wall),
        "events_per_second_cpu": round(total / cpu),
    }


class _Ref(msgspec.Struct, tag_field="event_type"):
    # The reference decoder's types, written here so that they do not move with the engine.
    protocol_version: Literal["v1"]
    sprite_id: str
    work_item_id: str
    timestamp: datetime


class _RefInfo(msgspec.Struct):
    message: str
    kind: str | None = None
    metadata: dict[str, Any] | None = None


class _RefPhase(msgspec.Struct):
    phase: str
    success: bool | None = None


class _RefRequest(msgspec.Struct):
    action: str
    blocking: bool
    parameters: dict[str, Any] = {}


class _RefArtifact(msgspec.Struct):
    kind: str
    ref: str | None = None
    url: str | None = None
    metadata: dict[str, Any] | None = None


class _RefInfoEvent(_Ref, tag="INFO"):
    payload: _RefInfo


class _RefStartedEvent(_Ref, tag="PHASE_STARTED"):
    payload: _RefPhase


class _RefFinishedEvent(_Ref, tag="PHASE_FINISHED"):
    payload: _RefPhase


class _RefRequestEvent(_Ref, tag="ACTION_REQUEST"):
    payload: _RefRequest


class _RefArtifactEvent(_Ref, tag="ARTIFACT"):
    payload: _RefArtifact


def _reference_decoder() -> Any:
    """A typed decoder of one v1 event (the stream's five types), nothing more."""
    event = (
        _RefInfoEvent | _RefStartedEvent | _RefFinishedEvent | _RefRequestEvent | _RefArtifactEvent
    )
    return msgspec.json.Decoder(event).decode


def run_naive(total: int, *, single_read: bool = False) -> dict[str, Any]:
    rss_start = _maxrss_kib()
    status: dict[str, Any] = {}
    wall = cpu = 0.0
    outbox_file = bytearray()
    stdout_events: dict[tuple[str, str], dict[str, Any]] = {}
    carry = ""
    merged: list[dict[str, Any]] = []

    def poll() -> list[dict[str, Any]]:
        complete = outbox_file.decode().split("\n")[:-1]  # the last piece is unfinished
        parsed = [json.loads(line) for line in complete if line]
        by_key = dict(stdout_events)
        by_key.update({(e["event_type"], e["timestamp"]): e for e in parsed if _ok(e)})
        events = sorted(by_key.values(), key=lambda e: e["timestamp"])
        status.clear()
        for event in events:
            _naive_reduce(status, event)
        return events

    for lines, stdout, outbox in _chunks(total):
        steps = _schedule(stdout, outbox, lines)
        start = len(outbox_file)
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        for kind, begin, end in steps:
            if kind == "stdout":
                parts = (carry + stdout[begin:end].decode()).split("\n")
                carry = parts.pop()
                for part in parts:
                    if part.startswith("LATTICE_EVENT "):
                        event = json.loads(part[len("LATTICE_EVENT ") :])
                        if _ok(event):
                            stdout_events[(event["event_type"], event["timestamp"])] = event
            else:
                outbox_file[start:] = outbox[:end]
                if not single_read:
                    merged = poll()
        wall += time.perf_counter() - t_wall
        cpu += time.process_time() - t_cpu
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    merged = poll()
    wall += time.perf_counter() - t_wall
    cpu += time.process_time() - t_cpu
    return {
        "events": total,
        "events_merged": len(merged),
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "events_per_second_wall": round(total / wall),
        "events_per_second_cpu": round(total / cpu),
        "rss_after_imports_kib": rss_start,
        "peak_rss_kib": _maxrss_kib(),
    }


def _ok(event: Any) -> bool:
    return (
        isinstance(event, dict)
        and event.get("protocol_version") == "v1"
        and event.get("sprite_id") == "sprite-42"
        and event.get("work_item_id") == "issue-17"
        and isinstance(event.get("payload"), dict)
        and isinstance(event.get("timestamp"), str)
    )


def _naive_reduce(status: dict[str, Any], event: dict[str, Any]) -> None:
    kind, payload = event["event_type"], event["payload"]
    status.setdefault("counts", {}).setdefault(kind, 0)
    status["counts"][kind] += 1
    recent = status.setdefault("recent", [])
    recent.append(event)
    del recent[:-20]
    if kind == "INFO" and payload.get("kind") == "progress":
        status["progress"] = payload.get("metadata", {}).get("percent")
    elif kind in ("PHASE_STARTED", "PHASE_FINISHED"):
        status.setdefault("phases", {})[payload.get("phase")] = payload.get("success", True)
    elif kind == "ARTIFACT":
        status.setdefault("artifacts", []).append(payload)


def _maxrss_kib() -> int:
    """Peak resident set size of this process, in KiB.

    VmHWM, because getrusage's ru_maxrss survives exec on Linux and would report the
    parent's (pytest's) peak for a fresh child.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_protocol_benchmark() -> None:
    engine_runs = [protocol_workload("engine", str(ENGINE_EVENTS)) for _ in range(RUNS)]
    tuned_runs = [protocol_workload("engine-gc-tuned", str(ENGINE_EVENTS)) for _ in range(RUNS)]
    compare_runs = [protocol_workload("engine", str(COMPARE_EVENTS)) for _ in range(RUNS)]
    reference_runs = [protocol_workload("typed-decode", str(ENGINE_EVENTS)) for _ in range(RUNS)]
    traced = protocol_workload("engine-traced", str(TRACED_EVENTS))
    naive = protocol_workload("naive", str(COMPARE_EVENTS))
    naive_single = protocol_workload("naive-single-read", str(COMPARE_EVENTS))

    def median(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(run[key] for run in runs)

    compare_cpu = median(compare_runs, "events_per_second_cpu")
    reference_cpu = median(reference_runs, "events_per_second_cpu")
    result = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "frame_bytes": FRAME_BYTES,
        "outbox_poll_every_events": POLL_EVENTS,
        "engine_1m": {
            "runs": engine_runs,
            "median_events_per_second_cpu": median(engine_runs, "events_per_second_cpu"),
            "median_events_per_second_wall": median(engine_runs, "events_per_second_wall"),
            "best_events_per_second_cpu": max(r["events_per_second_cpu"] for r in engine_runs),
            "worst_events_per_second_cpu": min(r["events_per_second_cpu"] for r in engine_runs),
            "peak_rss_kib": max(r["peak_rss_kib"] for r in engine_runs),
            "tracemalloc": traced,
        },
        "typed_decode_1m": {
            "what": "one typed msgspec decode per event line, nothing else: the target's bound",
            "runs": reference_runs,
            "median_events_per_second_cpu": reference_cpu,
            "best_events_per_second_cpu": max(r["events_per_second_cpu"] for r in reference_runs),
            "worst_events_per_second_cpu": min(r["events_per_second_cpu"] for r in reference_runs),
            "engine_share_of_typed_decode": round(
                median(engine_runs, "events_per_second_cpu") / reference_cpu, 3
            ),
        },
        "engine_1m_gc_tuned": {
            "runs": tuned_runs,
            "median_events_per_second_cpu": median(tuned_runs, "events_per_second_cpu"),
            "best_events_per_second_cpu": max(r["events_per_second_cpu"] for r in tuned_runs),
            "worst_events_per_second_cpu": min(r["events_per_second_cpu"] for r in tuned_runs),
        },
        "comparison": {
            "events": COMPARE_EVENTS,
            "engine_runs": compare_runs,
            "engine_median_events_per_second_cpu": compare_cpu,
            "naive": naive,
            "naive_single_read": naive_single,
            "ratio_vs_naive_cpu": round(compare_cpu / naive["events_per_second_cpu"], 1),
            "ratio_vs_naive_single_read_cpu": round(
                compare_cpu / naive_single["events_per_second_cpu"], 1
            ),
        },
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    assert all(r["events"] == ENGINE_EVENTS for r in engine_runs + tuned_runs)
    assert all(r["largest_status_bytes"] <= 64 * 1024 for r in engine_runs)
    assert all(r["stdout_only_reported"] == 0 for r in engine_runs + compare_runs)
    assert naive["events_merged"] > 0


def main(argv: list[str]) -> None:
    workload, total = argv[0], int(argv[1])
    if workload == "engine":
        result = run_engine(total)
    elif workload == "engine-gc-tuned":
        result = run_engine_gc_tuned(total)
    elif workload == "engine-traced":
        result = run_engine_traced(total)
    elif workload == "typed-decode":
        result = run_typed_decode(total)
    elif workload == "naive":
        result = run_naive(total)
    elif workload == "naive-single-read":
        result = run_naive(total, single_read=True)
    else:
        raise SystemExit(f"unknown workload {workload!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
