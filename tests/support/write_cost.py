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
    def __init__(self, name: str, plural: str, status: dict[str, Any]) -> None:
        self.name, self.plural, self.status = name, plural, status
        self.ms_per_patch: list[float] = []


async def _round(
    kube: KubeClient,
    namespace: str,
    variant: Variant,
    body: Callable[[str, str], dict[str, Any]],
    cpu: Callable[[], float],
    objects: int,
    in_flight: int,
    tag: str,
) -> float:
    group, version = (
        ("bench.lattice.dev", "v1")
        if variant.plural == "probes"
        else (
            "lattice.dev",
            "v1alpha1",
        )
    )
    collection = resource_path(group, version, variant.plural, namespace)
    slots = asyncio.Semaphore(in_flight)
    names = [f"{variant.name}-{tag}-{i}" for i in range(objects)]

    async def create(name: str) -> None:
        async with slots:
            await kube.create(collection, body(variant.plural, name))

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
    variants = [
        Variant("probe-bare", "probes", {"phase": "Running"}),
        Variant("probe-run-status", "probes", run_status),
        Variant("run-bare", "runs", {"phase": "Running"}),
        Variant("run-status", "runs", run_status),
        Variant("run-status-full-ledger", "runs", full_ledger(run_status)),
        *(Variant(f"probe-{kb:g}kb", "probes", synthetic(kb)) for kb in SYNTHETIC_KB),
    ]
    spec = {k: v for k, v in run_spec.items() if k != "intentRef"}

    def body(plural: str, name: str) -> dict[str, Any]:
        if plural == "probes":
            return {
                "apiVersion": "bench.lattice.dev/v1",
                "kind": "Probe",
                "metadata": {"name": name},
                "spec": {"command": ["true"], "note": "x" * 200},
            }
        return {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name},
            "spec": spec,
        }

    for r in range(rounds):
        for variant in variants:
            ms = await _round(kube, namespace, variant, body, cpu, objects, in_flight, f"r{r}")
            variant.ms_per_patch.append(round(ms, 2))
    medians = {v.name: statistics.median(v.ms_per_patch) for v in variants}
    base, per_kb = fit([(size(v.status) / 1024, medians[v.name]) for v in variants[5:]])
    return {
        "objects_per_round": objects,
        "rounds": rounds,
        "patches_per_object": len(PHASES),
        "status_bytes": {v.name: size(v.status) for v in variants},
        "apiserver_cpu_ms_per_patch": {v.name: v.ms_per_patch for v in variants},
        "median_ms_per_patch": medians,
        "schemaless_fit_ms": {"base": round(base, 2), "per_kb": round(per_kb, 2)},
    }
