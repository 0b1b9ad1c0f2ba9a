"""What one status write costs the API server, by what is written and where: the capacity
bench's `anatomy` section (issue 30, "API-server CPU per write").

Objects are created, then their status merge-patched three times (as a Run's life: Starting,
Running, Succeeded), with nothing watching them; the API server's CPU over the patches, per
patch, is the figure. The variants run in interleaved rounds so the machine's load falls on
each alike. Two kinds of object: `Probe` (the ceiling row's CRD: no schema, so the size alone)
and `Run` (our CRD: its structural schema and CEL rules too), and four kinds of status: a
one-field one (the bare write), the status the operator stored for a finished Run, the same
status with the Lifeloop ledger at its bound (`IDEMPOTENCY_MEMORY` records: a long Run), and
synthetic ones of a given size (the line through them: the CPU each stored KB costs).
"""

from __future__ import annotations

import asyncio
import copy
import json
import statistics
from collections.abc import Callable
from typing import Any

from lattice_adapters.kube import KubeClient, resource_path
from lattice_operator.lifeloop.ledger import IDEMPOTENCY_MEMORY
from tests.support.loadgen import probe, probes

PHASES = ("Starting", "Running", "Succeeded")
SYNTHETIC_KB = (0.5, 1, 2, 4, 8)


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def synthetic(kb: float) -> dict[str, Any]:
    """A status of about `kb` KiB under a schema-less object: short keys, short strings."""
    return {"phase": "Running", "blob": {f"k{j:04d}": "v" * 20 for j in range(int(kb * 1024 / 30))}}


def full_ledger(status: dict[str, Any]) -> dict[str, Any]:
    """A Run status whose receipt ledger holds as many idempotency records as it keeps."""
    out = copy.deepcopy(status)
    ledger = out.setdefault("receipts", {}).setdefault("state", {}).setdefault("ledger", {})
    records = ledger.get("idempotency") or []
    if records:
        template = records[-1]
        ledger["idempotency"] = [
            {**template, "key": f"{template['key'][:-4]}{i:04d}", "sequence": i + 1}
            for i in range(IDEMPOTENCY_MEMORY)
        ]
    return out


class Variant:
    """A status, patched onto fresh objects of one kind: `new(name)` is such an object and
    `collection(namespace)` where they are."""

    def __init__(
        self,
        name: str,
        status: dict[str, Any],
        new: Callable[[str], dict[str, Any]],
        collection: Callable[[str], str],
    ) -> None:
        self.name, self.status, self.new, self.collection = name, status, new, collection
        self.ms_per_patch: list[float] = []


async def _round(
    kube: KubeClient,
    namespace: str,
    variant: Variant,
    cpu: Callable[[], float],
    objects: int,
    in_flight: int,
    tag: str,
) -> float:
    collection = variant.collection(namespace)
    slots = asyncio.Semaphore(in_flight)
    names = [f"{variant.name}-{tag}-{i}" for i in range(objects)]

    async def create(name: str) -> None:
        async with slots:
            await kube.create(collection, variant.new(name))

    async def patch(name: str, status: dict[str, Any]) -> None:
        async with slots:
            await kube.merge_patch(f"{collection}/{name}/status", {"status": status})

    await asyncio.gather(*(create(n) for n in names))
    before = cpu()
    for phase in PHASES:
        status = {**variant.status, "phase": phase}
        await asyncio.gather(*(patch(n, status) for n in names))
    return 1000 * (cpu() - before) / (objects * len(PHASES))


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares: ms = base + per_kb * KB."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    per_kb = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - per_kb * mx, per_kb


async def anatomy(
    kube: KubeClient,
    namespace: str,
    *,
    run_status: dict[str, Any],
    run_spec: dict[str, Any],
    cpu: Callable[[], float],
    objects: int,
    rounds: int = 3,
    in_flight: int = 16,
) -> dict[str, Any]:
    """The API server's CPU per status patch of each variant, median of `rounds`."""
    spec = {k: v for k, v in run_spec.items() if k != "intentRef"}

    def run(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name},
            "spec": spec,
        }

    def runs(namespace: str) -> str:
        return resource_path("lattice.dev", "v1alpha1", "runs", namespace)

    bare = {"phase": "Running"}
    sized = [Variant(f"probe-{kb:g}kb", synthetic(kb), probe, probes) for kb in SYNTHETIC_KB]
    variants = [
        Variant("probe-bare", bare, probe, probes),
        Variant("probe-run-status", run_status, probe, probes),
        Variant("run-bare", bare, run, runs),
        Variant("run-status", run_status, run, runs),
        Variant("run-status-full-ledger", full_ledger(run_status), run, runs),
        *sized,
    ]
    for r in range(rounds):
        for variant in variants:
            ms = await _round(kube, namespace, variant, cpu, objects, in_flight, f"r{r}")
            variant.ms_per_patch.append(round(ms, 2))
    medians = {v.name: statistics.median(v.ms_per_patch) for v in variants}
    base, per_kb = fit([(size(v.status) / 1024, medians[v.name]) for v in sized])
    return {
        "objects_per_round": objects,
        "rounds": rounds,
        "patches_per_object": len(PHASES),
        "status_bytes": {v.name: size(v.status) for v in variants},
        "apiserver_cpu_ms_per_patch": {v.name: v.ms_per_patch for v in variants},
        "median_ms_per_patch": medians,
        "schemaless_fit_ms": {"base": round(base, 2), "per_kb": round(per_kb, 2)},
    }
