"""FileOps (`make bench`, bench-results/fileops.json): time for a 20-op request carried out
in a local sprite through the adapter (8 writes, 4 reads, 4 patches, 2 JSON writes, 2
commands), median of 10. No assertions on the numbers."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.fileops.executor import execute
from tests.support.sprites_server import sprites_server

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "fileops.json"


def twenty_ops(n: int) -> FileOpsRequest:
    ops: list[dict[str, Any]] = []
    for i in range(8):
        ops.append({"op": "write_file", "path": f"src/m{i}.py", "content": f"x = {n}\ny = 0\n"})
    for i in range(4):
        ops.append({"op": "read_file", "path": f"src/m{i}.py"})
    for i in range(4):
        patch = (
            f"*** Begin Patch\n*** Update File: src/m{i}.py\n@@\n-y = 0\n+y = {i}\n*** End Patch"
        )
        ops.append({"op": "apply_patch", "patch": patch})
    ops += [{"op": "write_json", "path": f"s{i}.json", "value": {"n": n}} for i in range(2)]
    ops += [{"op": "run", "cmd": "cat src/*.py | wc -l"}, {"op": "run", "cmd": "true"}]
    return FileOpsRequest.model_validate(
        {
            "proto": "triflow.fileops.v1",
            "id": f"B{n}",
            "purpose": "execute_step",
            "summary": "bench",
            "done": ["done"],
            "ops": ops,
            "report": {"changedFiles": True, "diffSummary": True, "commandOutputs": "on_failure"},
        }
    )


@pytest.mark.bench
def test_fileops_twenty_op_request(tmp_path: Path) -> None:
    with sprites_server(tmp_path / "server") as server:

        async def run() -> list[float]:
            async with SpritesAdapter(server.credentials) as adapter:
                await adapter.create_sprite("bench")
                times = []
                for n in range(11):
                    started = time.perf_counter()
                    res = await execute(adapter, "bench", twenty_ops(n), now=datetime.now(UTC))
                    times.append(time.perf_counter() - started)
                    assert res.status == "ok", res.wire()
                await adapter.delete_sprite("bench")
                return times[1:]  # the first wakes the sprite's container

        times = asyncio.run(run())
    figures = {
        "ops": 20,
        "requests": len(times),
        "median_ms": statistics.median(times) * 1000,
        "max_ms": max(times) * 1000,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
