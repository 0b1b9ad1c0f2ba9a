"""The suite's files in the order that keeps both xdist workers busy until the end.

With `--dist loadfile` a file's tests run on one worker, and a worker takes the next file
when it has little left. xdist's default order (files with the most tests first) puts the long
e2e files, which have few tests, last, so one worker ran the last long file while the other
had nothing left. Longest first (LPT scheduling) ends both workers within about one short file
of each other. The costs are seconds measured on the CI machine (tests/file-costs.json); a file
not listed there costs the median of its directory. Stale costs only worsen the balance, never
what runs.

One exception to longest first: the e2e files that share the worker's operator (the default
`stack`, tests/support/operator_slot.py) run as one block, longest first within it, where the
longest of them would run. Interleaved with files that start their own operator (or none),
each of them would restart the shared one (seconds of CPU each); together, each worker starts
it about once. The block sits early (its longest file is among the suite's longest), so the
end of the run is still the short files and the balance is kept.

Measuring: `pytest ... --timeline timeline.jsonl` has every worker append one line per test
(file, worker, start, end); `python -m tests.support.file_costs timeline.jsonl` writes the
costs file from it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
COSTS = ROOT / "tests" / "file-costs.json"
DEFAULT_COST = 1.0


def load_costs(path: Path = COSTS) -> dict[str, float]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, int | float)}


def file_cost(rel: str, costs: Mapping[str, float]) -> float:
    """A file's measured cost, or the median of the measured files in its directory."""
    if rel in costs:
        return costs[rel]
    directory = rel.rsplit("/", 1)[0] + "/"
    siblings = [cost for name, cost in costs.items() if name.startswith(directory)]
    return statistics.median(siblings) if siblings else DEFAULT_COST


def longest_first(
    rels: Iterable[str], costs: Mapping[str, float], together: Collection[str] = ()
) -> list[str]:
    """The files by cost, longest first; equal costs keep their collected order. The files in
    `together` form one block (longest first) at the place of the longest of them."""
    ordered = sorted(dict.fromkeys(rels), key=lambda rel: -file_cost(rel, costs))
    block = [rel for rel in ordered if rel in together]
    if not block:
        return ordered
    at = ordered.index(block[0])
    rest = [rel for rel in ordered if rel not in together]
    return rest[:at] + block + rest[at:]


def order_items(
    items: list[Any], root: Path, costs: Mapping[str, float], together: Collection[str] = ()
) -> None:
    """Reorder pytest items in place: files longest first (`together`: see longest_first),
    each file's tests kept together and in their own order."""
    by_file: dict[str, list[Any]] = defaultdict(list)
    for item in items:
        by_file[relative(Path(str(item.path)), root)].append(item)
    items[:] = [item for rel in longest_first(by_file, costs, together) for item in by_file[rel]]


def relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


class Timeline:
    """A pytest plugin: one JSON line per test (file, worker, start, end, outcome)."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path, self.root = path, root
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.started: dict[str, float] = {}
        self.lock = threading.Lock()

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int, str]) -> None:
        self.started[nodeid] = time.time()

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int, str]) -> None:
        start = self.started.pop(nodeid, None)
        if start is None:
            return
        line = {
            "file": nodeid.split("::", 1)[0],
            "test": nodeid,
            "worker": self.worker,
            "start": round(start, 3),
            "end": round(time.time(), 3),
        }
        with self.lock, self.path.open("a") as sink:
            sink.write(json.dumps(line) + "\n")


def costs_from_timeline(lines: Iterable[str]) -> dict[str, float]:
    """Seconds per file: the sum of its tests' times (set-up and tear-down included)."""
    totals: dict[str, float] = defaultdict(float)
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        totals[str(entry["file"])] += float(entry["end"]) - float(entry["start"])
    return {name: round(total, 2) for name, total in sorted(totals.items())}


def worker_spans(lines: Iterable[str]) -> dict[str, tuple[float, float, float]]:
    """Per worker: first start, last end, and seconds spent in tests (for the balance)."""
    spans: dict[str, list[float]] = {}
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        start, end = float(entry["start"]), float(entry["end"])
        span = spans.setdefault(str(entry["worker"]), [start, end, 0.0])
        span[0], span[1] = min(span[0], start), max(span[1], end)
        span[2] += end - start
    return {worker: (s[0], s[1], s[2]) for worker, s in sorted(spans.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write tests/file-costs.json from a timeline")
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--output", type=Path, default=COSTS)
    args = parser.parse_args(argv)
    lines = args.timeline.read_text().splitlines()
    args.output.write_text(json.dumps(costs_from_timeline(lines), indent=1) + "\n")
    spans = worker_spans(lines)
    first = min(s[0] for s in spans.values())
    for worker, (start, end, busy) in spans.items():
        print(f"{worker}: {start - first:7.1f} s → {end - first:7.1f} s, {busy:7.1f} s in tests")
    print(f"wrote {args.output} ({len(costs_from_timeline(lines))} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
