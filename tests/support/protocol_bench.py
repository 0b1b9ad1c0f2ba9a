"""One workload of tests/bench/bench_protocol.py in its own process (so its peak RSS is its
own); shared by the benchmarks that quote the engine's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def protocol_workload(*args: str) -> dict[str, Any]:
    """`python -m tests.bench.bench_protocol ARGS...`: its JSON line as a dict."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["operator", "adapters", "."])}
    out = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_protocol", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result
