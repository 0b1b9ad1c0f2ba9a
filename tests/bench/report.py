"""Print issue 17's table from bench-results/capacity.json (`make bench` ends with it), and
one line per N of bench-results/replica.json (how many active Runs one replica keeps up with)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "capacity.json"
REPLICA = RESULTS.with_name("replica.json")


def replica_line(n: str, row: dict[str, Any]) -> str:
    """One N of the replica bench: kept up or not, and what ran out."""
    window = row.get("window") or {}
    lag = (window.get("event_loop_lag") or {}).get("kopf-reconciling") or {}
    catch_up = row.get("catch_up_after_deadline_s")
    return (
        f"- {n} active Runs at {row['events_per_s_per_run']} events/s: "
        f"{'kept up' if row.get('kept_up') else 'did not keep up'}; "
        f"{window.get('events_committed_per_s')}/s committed of "
        f"{window.get('events_offered_per_s')}/s offered, lag at the deadline "
        f"{row['lag_at_deadline_s_of_emission']} s of emission, caught up "
        f"{'not within the timeout' if catch_up is None else f'{catch_up} s'} after it; "
        f"operator {window.get('operator_cores')} cores ({window.get('operator_cpu_s')} CPU-s), "
        f"reconciling loop lag p50/p99 {lag.get('p50_ms')}/{lag.get('p99_ms')} ms, "
        f"{window.get('sockets_max')} sockets, RSS {window.get('rss_mib_max')} MiB, "
        f"{window.get('status_patches_per_s')} status patches/s; "
        f"load {row['load_average_1m_before_after']}; {row['measured']['at']} "
        f"{row['measured']['commit']}"
    )


def main() -> int:
    if not RESULTS.exists() and not REPLICA.exists():
        print(f"{RESULTS} does not exist: run `make bench` (tests/bench/bench_capacity.py)")
        return 1
    if RESULTS.exists():
        rows = json.loads(RESULTS.read_text())["table"]
        for row in rows:
            print(
                f"- {row['measure']}\n    measured: {row['figure']}\n    target:   {row['target']}"
            )
            print(f"    method:   {row['method']}")
    if REPLICA.exists():
        print("One replica, concurrently active Runs (tests/bench/bench_replica.py):")
        counts = json.loads(REPLICA.read_text()).get("counts", {})
        for n, row in sorted(counts.items(), key=lambda kv: int(kv[0])):
            print(replica_line(n, row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
