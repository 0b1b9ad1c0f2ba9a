"""A Run versus a Pod on the real node: apply → command started, one object at a time.

Run inside the node cluster's network namespace (where its API server is), by
tests/bench/bench_node_pod.py: `python -m tests.support.node_runpod ARGS`; prints one JSON
document. Each round applies a Run (in a warm sprite) and a Pod (on the node, an image already
imported, imagePullPolicy Never) running the same command, `sh -c 'date +%s.%N'`, one after
the other (each side first in turn), each only once the previous object has finished.

"Applied" is the moment just before the create request is sent (this process's clock).
"Command started" is taken two ways, each the same kind for both:

- as the runtime records it: the Run's `status.startTime` (written when the sprite confirmed
  the exec session) and the Pod container's `startedAt` in containerd's CRI status (what
  `crictl inspect` shows, in nanoseconds; the Pod's own status has whole seconds only);
- as the command itself prints it: the `date +%s.%N` line, read back from the Run's
  `status.logTail` and from the Pod's log.

The sprites, the containers and this process read the one clock of this machine. Every wait
is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from lattice_adapters.kube import KubeClient, KubeConfig, resource_path
from lattice_devtools.localcluster.node import oci_archive
from tests.support.loadgen import StartWatch, ms, pct, stamp

COMMAND = ["sh", "-c", "date +%s.%N"]
FINISHED_RUN = {"Succeeded", "Failed", "Canceled"}
FINISHED_POD = {"Succeeded", "Failed"}
PRINTED = re.compile(r"^\s*(\d{9,11}\.\d{9})\s*$", re.M)


def printed_stamp(text: str) -> float | None:
    """The `date +%s.%N` line of a command's output (None if it printed none)."""
    found = PRINTED.search(text)
    return float(found.group(1)) if found else None


def cri_times(containerd_root: Path, container_id: str) -> dict[str, float]:
    """The container's creation and start as containerd's CRI plugin recorded them (its
    status checkpoint: what `crictl inspect` reports as createdAt and startedAt, in ns), in
    seconds since the epoch."""
    path = containerd_root / "io.containerd.grpc.v1.cri" / "containers" / container_id / "status"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    status = doc.get("Status") or doc
    return {k: int(status[k]) / 1e9 for k in ("CreatedAt", "StartedAt") if status.get(k)}


MINIMAL_IMAGE = "lattice.invalid/minimal-sh:1"
MINIMAL_FILES = (
    # (in the image, from this machine): what `sh -c 'date +%s.%N'` needs, nothing more.
    ("bin/sh", "/bin/dash"),
    ("bin/date", "/bin/date"),
    ("lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("lib64/ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"),
)


def minimal_image(work: Path) -> Path:
    """An OCI archive of the smallest image the command runs in: this machine's dash,
    date and C library (about 2.5 MB), built as the node's pause image is."""
    work = work / "minimal-image"
    rootfs = work / "rootfs"
    for inside, source in MINIMAL_FILES:
        (rootfs / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(source).resolve(), rootfs / inside)
    return oci_archive(work, MINIMAL_IMAGE, rootfs, "/", ["--config.env", "PATH=/bin"])


def run_body(name: str, sprite: str) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": name},
        "spec": {"spriteRef": {"name": sprite}, "command": COMMAND, "retries": 0},
    }


def pod_body(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": image, "imagePullPolicy": "Never", "command": COMMAND}
            ],
        },
    }


class Rounds:
    """Applies one object and waits for it to finish; returns its times."""

    def __init__(self, kube: KubeClient, config: KubeConfig, args: argparse.Namespace) -> None:
        self.kube = kube
        self.config = config
        self.namespace: str = args.namespace
        self.sprite: str = args.sprite
        self.containerd_root = Path(args.containerd_root)
        self.warm_wait: float = args.warm_wait
        self.timeout: float = args.timeout
        self.runs = resource_path("lattice.dev", "v1alpha1", "runs", self.namespace)
        self.pods = f"/api/v1/namespaces/{self.namespace}/pods"
        # The caller has just run a warm-up Run in the sprite: the first Run waits too.
        self.last_exec = time.monotonic()

    async def run(self, watch: StartWatch, name: str) -> dict[str, Any]:
        # The sprite idles past warm_after first: every Run starts in a warm sprite.
        await asyncio.sleep(max(0.0, self.last_exec + self.warm_wait - time.monotonic()))
        applied = time.time()
        await self.kube.create(self.runs, run_body(name, self.sprite))
        await watch.wait_phases({name}, FINISHED_RUN, self.timeout)
        self.last_exec = time.monotonic()
        obj = await self.kube.get(f"{self.runs}/{name}")
        status = obj.get("status") or {}
        started = stamp(status["startTime"]) if status.get("startTime") else None
        await self.kube.delete(f"{self.runs}/{name}")
        return {
            "name": name,
            "phase": status.get("phase"),
            "applied": applied,
            "started_runtime": started,
            "started_printed": printed_stamp("\n".join(status.get("logTail") or [])),
        }

    async def pod(self, name: str, image: str) -> dict[str, Any]:
        applied = time.time()
        await self.kube.create(self.pods, pod_body(name, image))
        deadline = time.monotonic() + self.timeout
        obj: dict[str, Any] = {}
        while time.monotonic() < deadline:
            obj = await self.kube.get(f"{self.pods}/{name}")
            if (obj.get("status") or {}).get("phase") in FINISHED_POD:
                break
            await asyncio.sleep(0.1)  # the start is the runtime's record, not this poll's
        status = obj.get("status") or {}
        container = (status.get("containerStatuses") or [{}])[0]
        container_id = str(container.get("containerID") or "").partition("://")[2]
        terminated = (container.get("state") or {}).get("terminated") or {}
        log = await self._log(name)
        cri = cri_times(self.containerd_root, container_id) if container_id else {}
        row = {
            "name": name,
            "phase": status.get("phase"),
            "applied": applied,
            "started_runtime": cri.get("StartedAt"),
            "created_runtime": cri.get("CreatedAt"),
            "started_printed": printed_stamp(log),
            "started_status_s": stamp(terminated["startedAt"])
            if terminated.get("startedAt")
            else None,
        }
        await self.kube.request("DELETE", f"{self.pods}/{name}", params={"gracePeriodSeconds": "0"})
        return row

    async def _log(self, name: str) -> str:
        """The Pod's log (plain text, which KubeClient does not read)."""
        headers = {}
        token = self.config.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        connector = aiohttp.TCPConnector(ssl=self.config.ssl_context())
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(connector=connector, trust_env=False, timeout=timeout) as s,
            s.get(f"{self.config.server}{self.pods}/{name}/log", headers=headers) as resp,
        ):
            return await resp.text() if resp.status == 200 else ""


def _latencies(rounds: list[dict[str, Any]], side: str, end: str, start: str) -> list[float]:
    """`end - start` of `side` in every round that has both (a side may sit rounds out)."""
    rows = [r[side] for r in rounds if side in r]
    return [x[end] - x[start] for x in rows if x.get(end) is not None and x.get(start) is not None]


def _stats(lat: list[float]) -> dict[str, Any]:
    return {
        "n": len(lat),
        "p50_ms": ms(pct(lat, 50)),
        "p90_ms": ms(pct(lat, 90)),
        "min_ms": ms(min(lat) if lat else None),
        "max_ms": ms(max(lat) if lat else None),
    }


def summarize(rounds: list[dict[str, Any]], sides: list[str]) -> dict[str, Any]:
    """Per kind of "started" (the runtime's record, the command's print): each side's
    p50/p90 from applied, and each Pod side's p50 over the Run's (sides[0], "run"); per Pod
    side, where its time went (applied → container created → started, from CRI)."""
    run, pods = sides[0], sides[1:]
    out: dict[str, Any] = {
        "phases": sorted({f"{s}:{r[s]['phase']}" for r in rounds for s in sides if s in r})
    }
    for kind in ("runtime", "printed"):
        figures: dict[str, Any] = {
            s: _stats(_latencies(rounds, s, f"started_{kind}", "applied")) for s in sides
        }
        for s in pods:
            pod_p50, run_p50 = figures[s]["p50_ms"], figures[run]["p50_ms"]
            figures[f"{s}_over_run_p50"] = (
                round(pod_p50 / run_p50, 1) if pod_p50 and run_p50 else None
            )
        out[kind] = figures
    for s in pods:
        created = _latencies(rounds, s, "created_runtime", "applied")
        started = _latencies(rounds, s, "started_runtime", "created_runtime")
        out[f"{s}_breakdown"] = {
            "applied_to_container_created_p50_ms": ms(pct(created, 50)),
            "container_created_to_started_p50_ms": ms(pct(started, 50)),
        }
    return out


RUN_VS_POD = "Run vs Pod on the real node, apply → command started, p50 of 20"
RUN_VS_POD_TARGET = "(no target: the ratio itself)"


def run_vs_pod_row(rvp: dict[str, Any]) -> dict[str, str]:
    """The row of issue 17's table (`python -m tests.bench.report`) for the figures
    tests/bench/bench_node_pod.py wrote under "run_vs_pod"."""
    rt, pr = rvp["runtime"], rvp["printed"]
    big = rt["pod_operator_image"]
    m = rvp.get("measured") or {}
    scale = "" if m.get("scale", 1) == 1 else f", SCALE {m.get('scale')} (not for quoting)"
    return {
        "measure": RUN_VS_POD,
        "figure": f"Pod / Run = {rt['pod_over_run_p50']}x (Run {rt['run']['p50_ms']} / "
        f"{rt['run']['p90_ms']} ms, Pod {rt['pod']['p50_ms']} / {rt['pod']['p90_ms']} ms at "
        f"p50 / p90; as the command prints it {pr['pod_over_run_p50']}x); a Pod of the "
        f"operator image {big['p50_ms']} ms ({rt['pod_operator_image_over_run_p50']}x, p50 "
        f"of {big['n']})",
        "target": RUN_VS_POD_TARGET,
        "method": f"{rvp['rounds']} rounds one at a time, `sh -c 'date +%s.%N'` as a Run in a "
        "warm sprite and as a Pod of a minimal image present on the node; create sent → "
        "status.startTime / CRI startedAt (tests/bench/bench_node_pod.py); load "
        f"{rvp.get('load_average_1m_before_after')}; {m.get('at')} {m.get('commit')}{scale}",
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    config = KubeConfig.load(args.kubeconfig)
    pods = dict(p.split("=", 1) for p in args.pod)
    limits = {side: int(n) for side, n in (p.split("=", 1) for p in args.limit)}
    rounds: list[dict[str, Any]] = []
    async with KubeClient(config, user_agent="lattice-bench-node") as kube:
        state = Rounds(kube, config, args)
        async with StartWatch(config, args.namespace) as watch:
            for i in range(args.count):
                sides = ["run", *(p for p in pods if i < limits.get(p, args.count))]
                # Each side goes first in turn: none always follows the same one.
                turn = i % len(sides)
                row: dict[str, Any] = {"round": i}
                for side in sides[turn:] + sides[:turn]:
                    if side == "run":
                        row[side] = await state.run(watch, f"rvp-run-{i}")
                    else:
                        row[side] = await state.pod(f"rvp-{side.replace('_', '-')}-{i}", pods[side])
                rounds.append(row)
    return {"command": COMMAND, "pods": pods, "rounds": rounds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--sprite", required=True)
    parser.add_argument(
        "--pod", action="append", required=True, help="SIDE=IMAGE: a Pod of this image each round"
    )
    parser.add_argument("--containerd-root", required=True)
    parser.add_argument(
        "--limit", action="append", default=[], help="SIDE=N: that side in the first N rounds only"
    )
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--warm-wait", type=float, default=6.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(main_async(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
