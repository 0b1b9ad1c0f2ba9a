"""What the capacity benches share: one event loop and API client for a bench, the load
average and each process's CPU around a measurement, warm Sprites, cleared namespaces, the
commit measured (tests/bench/bench_capacity.py, tests/bench/bench_replica.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lattice_adapters.kube import KubeClient, KubeConfig, resource_path
from tests.support.admission_cases import build
from tests.support.bench_ingest import cpu_seconds
from tests.support.cluster import Cluster, wait_for
from tests.support.loadgen import Generator, LoadReport, StartWatch
from tests.support.stack import Stack

REPO = Path(__file__).resolve().parents[2]

PRODUCT_FLEET = {"observe_interval": 30.0, "page_size": 100}
"""The fleet observer as the product runs it (the settings' defaults), not the test stack's
1 s pass: it polls the backend in the background (a LIST and ten sprites re-read in full per
pass, ~30 sprite calls a second at 1 s: a fifth of the operator's CPU in a profile of
sequential Intents), whatever the load, which is no part of what a user waits on."""


def load() -> float:
    return round(os.getloadavg()[0], 1)


@contextmanager
def loaded(into: dict[str, Any]) -> Iterator[None]:
    """Record the machine's load average before and after a measurement."""
    before = load()
    yield
    into["load_average_1m_before_after"] = [before, load()]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def run_body(name: str, sprite: str, command: list[str]) -> dict[str, Any]:
    doc = build("run.yaml", name, {"spec.command": command, "spec.spriteRef.name": sprite})
    doc["spec"].pop("timeoutSeconds", None)
    doc["spec"]["retries"] = 0
    return doc


def same(name: str) -> str:
    return name


class Bench:
    """One event loop and one API client for the whole benchmark."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.config = KubeConfig.load(cluster.kubeconfig)
        self.loop = asyncio.new_event_loop()
        self.kube = KubeClient(self.config, user_agent="lattice-bench")
        self.loop.run_until_complete(self.kube.__aenter__())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.kube.close())
        self.loop.close()

    def generator(self, namespace: str, plural: str, in_flight: int = 64) -> Generator:
        return Generator(self.kube, namespace, plural, in_flight)

    def sprites(self, namespace: str, names: list[str], *, warm: bool) -> None:
        """Sprites created at once, Ready; warm: each has run a command (the sprite is set up)."""
        bodies = [build("sprite.yaml", n, {"spec.networkPolicy": {"rules": []}}) for n in names]
        self.run(self.generator(namespace, "sprites", 32).burst(bodies, same))
        path = resource_path("lattice.dev", "v1alpha1", "sprites", namespace)

        def ready() -> bool:
            items = self.run(self.kube.get(path))["items"]
            return sum(sprite_ready(i) for i in items) >= len(names)

        wait_for(ready, timeout=600, interval=1.0, what=f"{len(names)} Sprites Ready")
        if warm:
            warmups = [run_body(f"warm-{n}", n, ["true"]) for n in names]
            self.loaded_runs(namespace, warmups, same, timeout=600)

    def loaded_runs(
        self,
        namespace: str,
        bodies: list[dict[str, Any]],
        run_of: Callable[[str], str],
        *,
        plural: str = "runs",
        timeout: float = 300,
    ) -> LoadReport:
        """A burst of `bodies`; back once every Run has finished."""

        async def go() -> LoadReport:
            async with StartWatch(self.config, namespace, plural, timeline=True) as watch:
                samples = await self.generator(namespace, plural).burst(bodies, run_of)
                names = {s.run for s in samples}
                await watch.wait_phases(names, {"Succeeded", "Failed", "Canceled"}, timeout)
                return LoadReport(samples, dict(watch.started), steps=watch.steps)

        report: LoadReport = self.run(go())
        return report

    def open_loop(
        self,
        namespace: str,
        plural: str,
        body_of: Callable[[int], dict[str, Any]],
        run_of: Callable[[str], str],
        rate: float,
        seconds: float,
    ) -> LoadReport:
        async def go() -> LoadReport:
            async with StartWatch(self.config, namespace, plural, timeline=True) as watch:
                samples = await self.generator(namespace, plural, in_flight=256).open_loop(
                    body_of, run_of, rate=rate, seconds=seconds
                )
                names = {s.run for s in samples if not s.error}
                await watch.wait(names, within=300)
                await watch.wait_phases(names, {"Succeeded", "Failed", "Canceled"}, 300)
                return LoadReport(samples, dict(watch.started), steps=watch.steps)

        report: LoadReport = self.run(go())
        return report


def cleared(cluster: Cluster, *namespaces: str, timeout: float = 600) -> float | None:
    """Delete `namespaces` and wait until they are gone: the deletion of a row's objects (their
    finalizers removed by the operator, their receipts and Sprites deleted) must not be
    counted in the next row's writes and CPU. The seconds it took; None if they were not gone
    within `timeout` (a row after it then shares the machine with the deletion)."""
    began = time.monotonic()
    for name in namespaces:
        cluster.delete_namespace(name)

    def gone() -> bool:
        left = {n.metadata.name for n in cluster.core.list_namespace().items if n.metadata}
        return not left & set(namespaces)

    try:
        wait_for(gone, timeout=timeout, interval=1.0, what=f"namespaces {namespaces} deleted")
    except AssertionError:
        return None
    return round(time.monotonic() - began, 1)


def sprite_ready(item: dict[str, Any]) -> bool:
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def daemon_failures(stack: Stack) -> int:
    """Daemon passes that failed (kopf logs each, then starts the daemon again later)."""
    return stack.operator.log().count("failed with an exception and will try again")


def processes(bench: Bench, stack: Stack | None) -> dict[str, int]:
    """Who shares the cores during a row: the control plane's processes (when this suite
    started them: under another KUBECONFIG they are not ours to see), the operator and the
    Sprites server (when the row has them) and the load generator (this process)."""
    local = bench.cluster.local
    plane = {p.name: p.pid for p in local.state.processes} if local and local.state else {}
    ours = (
        {"operator": stack.operator.proc.pid, "sprites-server": stack.sprites.process.pid}
        if stack is not None
        else {}
    )
    return {**plane, **ours, "load-generator": os.getpid()}


@contextmanager
def cpu_shares(bench: Bench, stack: Stack | None, into: dict[str, Any]) -> Iterator[None]:
    """Each process's CPU over the block, in cores (1.0: one core all the time): which one
    bounds the row. The machine has os.cpu_count() of them."""
    pids = processes(bench, stack)
    start = time.monotonic()
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    yield
    seconds = max(1e-9, time.monotonic() - start)
    spent = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    cores = {name: round(value / seconds, 2) for name, value in spent.items()}
    into["cpu_cores_by_process"] = dict(sorted(cores.items(), key=lambda kv: -kv[1]))
    into["cpu_seconds_by_process"] = {name: round(value, 1) for name, value in spent.items()}
    into["cpu_busiest"] = max(cores, key=lambda name: cores[name])


def commit() -> str:
    """The commit measured (LATTICE_BENCH_COMMIT when the tree is an export, not a clone)."""
    if os.environ.get("LATTICE_BENCH_COMMIT"):
        return os.environ["LATTICE_BENCH_COMMIT"]
    out = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"
