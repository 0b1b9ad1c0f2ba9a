"""Print issue 17's table from bench-results/capacity.json (`make bench` ends with it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "bench-results" / "capacity.json"


def main() -> int:
    if not RESULTS.exists():
        print(f"{RESULTS} does not exist: run `make bench` (tests/bench/bench_capacity.py)")
        return 1
    rows = json.loads(RESULTS.read_text())["table"]
    for row in rows:
        print(f"- {row['measure']}\n    measured: {row['figure']}\n    target:   {row['target']}")
        print(f"    method:   {row['method']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
