"""Benchmark of `lattice mcp`: cold start to `initialize` answered, and create_task calls/s.

Cold start: spawn the `lattice` console script, write `initialize`, time until its response
line is read (the figure an agent pays at every spawn); the median of RUNS spawns. Throughput:
CALLS sequential `lattice_create_task` calls through the SDK's stdio client into a project
that grows as they go (each create scans the project for ID collisions). Figures go to
bench-results/mcp.json. No timing is asserted.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.mcp_client import call, lattice_mcp

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results" / "mcp.json"
LATTICE = Path(sys.executable).parent / "lattice"
RUNS = 15
CALLS = 500
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n'
)


def _cold_start(project: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(LATTICE), "mcp", "--project", str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    assert b'"id":1' in line
    return elapsed


@pytest.mark.bench
async def test_bench_mcp(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "api").mkdir(parents=True)
    (project / "api" / "api.md").write_text("---\nlattice-id: LROOTA\n---\n\n# API\n")
    _cold_start(project)  # warm the page cache and .pyc files, as on an agent's machine
    starts = [_cold_start(project) for _ in range(RUNS)]
    body = "## Steps\n\n" + "\n".join(f"{i}. do `thing` $(x) 'y'" for i in range(40))
    async with lattice_mcp("--project", str(project)) as session:
        started = time.perf_counter()
        for i in range(CALLS):
            result = await call(
                session,
                "lattice_create_task",
                directory="api/",
                description=f"Fix bug number {i} in the login flow",
                task_type="bug",
                body=body,
            )
            assert "error" not in result
        elapsed = time.perf_counter() - started
    figures = {
        "cold_start_to_initialize_s": {
            "median": round(statistics.median(starts), 4),
            "min": round(min(starts), 4),
            "max": round(max(starts), 4),
            "runs": RUNS,
        },
        "create_task": {
            "calls": CALLS,
            "seconds": round(elapsed, 3),
            "calls_per_second": round(CALLS / elapsed, 1),
            "project_documents_at_end": CALLS + 1,
        },
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
