"""Sprites backend benchmarks (`make bench`); figures go to bench-results/sprites.json.

- exec round trip of `true` through the adapter against the local server, p50/p99, and the
  same command as a local subprocess, with the ratio;
- stdout throughput of a command writing 100 MB through the adapter, against the same
  bytes through `cat` to /dev/null locally, with the ratio;
- tailing a 50 MB outbox from byte offsets as it grows (Range reads), and the same growth
  read the fallback way (whole file each time, sliced) for comparison;
- per isolation mode (container, the default, and sandbox): exec round trip, sprite create,
  the first exec of a new sprite (it starts the container), memory per idle sprite (its
  processes' resident memory, and the server's growth, over 20 sprites);
- the sprite root filesystem build, cold (its cache moved aside) and warm;
- the egress proxy: throughput of a CONNECT tunnel from inside a sprite to a server on the
  host's loopback (the bench server allows 127.0.0.1), against the same transfer from the
  host straight to that server, and the time to open a tunnel and echo a line through it;
  and the kernel memory (slab, per-CPU) each idle sprite's namespace adds.

No assertions on the numbers: they are measurements, not tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from lattice_adapters.sprites import SpritesAdapter

# The local server's namespace primitives, measured on their own.
from lattice_devtools.sprites_local._container import setns
from lattice_devtools.sprites_local._netns import CLONE_NEWNET, close_namespace, new_namespace
from lattice_operator.api.v1alpha1 import NetworkRule
from tests.support.loopback_server import LoopbackServer
from tests.support.sprites_server import LocalSprites, sprites_server

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "sprites.json"
ROUND_TRIPS = 200
STDOUT_BYTES = 100 * 1024 * 1024
OUTBOX_BYTES = 50 * 1024 * 1024
OUTBOX_STEP = 1024 * 1024
MB = 1_000_000
TUNNEL_BYTES = 256 * 1024 * 1024
TUNNELS = 200

# Run inside a sprite: a 256 MiB download through a CONNECT tunnel, then TUNNELS tunnels
# opened one after another (CONNECT, a line echoed, closed), as JSON.
EGRESS_PROBE = """
import json, socket, statistics, sys, time
port, total, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(f"CONNECT localhost:{port} HTTP/1.1\\r\\n\\r\\n".encode())
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        head += s.recv(1)
    assert b" 200 " in head, head
    return s
s = tunnel()
started = time.perf_counter()
s.sendall(f"SOURCE {total}\\n".encode())
got = 0
while chunk := s.recv(1 << 20):
    got += len(chunk)
seconds = time.perf_counter() - started
assert got == total, got
s.close()
times = []
for _ in range(count):
    started = time.perf_counter()
    s = tunnel()
    s.sendall(b"PING\\n")
    assert s.recv(100) == b"PING\\n"
    s.close()
    times.append(time.perf_counter() - started)
times.sort()
print(json.dumps({"mb_per_s": total / seconds / 1e6, "p50": statistics.median(times),
                  "p99": times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]}))
"""


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def timed(samples: int, action: Callable[[], Awaitable[None]]) -> list[float]:
    for _ in range(5):  # warm-up
        await action()
    results = []
    for _ in range(samples):
        started = time.perf_counter()
        await action()
        results.append(time.perf_counter() - started)
    return results


async def exec_round_trip(adapter: SpritesAdapter, sprite: str) -> dict[str, float]:
    async def through_adapter() -> None:
        session = await adapter.exec(sprite, ["true"], stdin=False)
        assert await session.wait() == 0

    async def local_subprocess() -> None:
        proc = await asyncio.create_subprocess_exec("true")
        assert await proc.wait() == 0

    remote = await timed(ROUND_TRIPS, through_adapter)
    local = await timed(ROUND_TRIPS, local_subprocess)
    return {
        "samples": ROUND_TRIPS,
        "adapter_p50_ms": statistics.median(remote) * 1000,
        "adapter_p99_ms": percentile(remote, 99) * 1000,
        "local_subprocess_p50_ms": statistics.median(local) * 1000,
        "local_subprocess_p99_ms": percentile(local, 99) * 1000,
        "ratio_p50": statistics.median(remote) / statistics.median(local),
        "ratio_p99": percentile(remote, 99) / percentile(local, 99),
    }


async def stdout_throughput(adapter: SpritesAdapter, sprite: str) -> dict[str, float]:
    command = ["head", "-c", str(STDOUT_BYTES), "/dev/zero"]
    started = time.perf_counter()
    session = await adapter.exec(sprite, command, stdin=False)
    received = 0
    async for chunk in session:
        received += len(chunk.data)
    adapter_seconds = time.perf_counter() - started
    assert session.exit_code == 0
    assert received == STDOUT_BYTES

    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", f"head -c {STDOUT_BYTES} /dev/zero | cat > /dev/null"
    )
    assert await proc.wait() == 0
    local_seconds = time.perf_counter() - started
    adapter_rate = STDOUT_BYTES / adapter_seconds / MB
    local_rate = STDOUT_BYTES / local_seconds / MB
    return {
        "bytes": STDOUT_BYTES,
        "adapter_mb_per_s": adapter_rate,
        "local_cat_to_devnull_mb_per_s": local_rate,
        "ratio": adapter_rate / local_rate,
    }


async def outbox_tail(
    adapter: SpritesAdapter, server: LocalSprites, sprite: str
) -> dict[str, float]:
    outbox = server.host_root(sprite) / ".lattice" / "outbox.jsonl"
    outbox.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps({"event_type": "INFO", "payload": {"message": "x" * 180}}) + "\n").encode()
    step = line * (OUTBOX_STEP // len(line))
    path = "/workspace/.lattice/outbox.jsonl"

    async def grow_and_read(fetch: Callable[[int], Awaitable[bytes]]) -> tuple[float, int]:
        outbox.write_bytes(b"")
        offset, read_seconds, useful = 0, 0.0, 0
        while offset < OUTBOX_BYTES:
            with outbox.open("ab") as out:  # the sprite appends (not timed)
                out.write(step)
            started = time.perf_counter()
            data = await fetch(offset)
            read_seconds += time.perf_counter() - started
            offset += len(data)
            useful += len(data)
        return read_seconds, useful

    async def range_read(offset: int) -> bytes:
        return await adapter.read_file(sprite, path, offset=offset)

    async def whole_file(offset: int) -> bytes:
        return (await adapter.read_file(sprite, path))[offset:]

    range_seconds, useful = await grow_and_read(range_read)
    whole_seconds, useful_whole = await grow_and_read(whole_file)
    assert useful == useful_whole
    return {
        "bytes": useful,
        "reads": useful // len(step),
        "range_reads_mb_per_s": useful / range_seconds / MB,
        "whole_file_rereads_mb_per_s": useful / whole_seconds / MB,
    }


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _group_rss_kib(server: LocalSprites, sprite: str) -> int:
    """Resident memory of every process the sprite has (idle: its container's init)."""
    described = server.describe(sprite)
    pids: set[int] = set()
    container = described.get("container")
    if container:
        init = int(container["init_pid"])
        pids.add(init)
        children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        pids.update(int(c) for c in children)
    return sum(_rss_kib(p) for p in pids)


async def isolation_figures(server: LocalSprites, sprites: int = 20) -> dict[str, float]:
    async with SpritesAdapter(server.credentials) as adapter:
        await adapter.create_sprite("rt")
        round_trip = await exec_round_trip(adapter, "rt")
        await adapter.delete_sprite("rt")
        before = _rss_kib(server.process.pid)
        creates, first_execs, own = [], [], []
        for n in range(sprites):
            name = f"idle-{n}"
            started = time.perf_counter()
            await adapter.create_sprite(name)
            creates.append(time.perf_counter() - started)
            started = time.perf_counter()
            session = await adapter.exec(name, ["true"], stdin=False)
            assert await session.wait() == 0
            first_execs.append(time.perf_counter() - started)
            own.append(_group_rss_kib(server, name))
        server_growth = (_rss_kib(server.process.pid) - before) / sprites
        for n in range(sprites):
            await adapter.delete_sprite(f"idle-{n}")
    return {
        "exec_true_p50_ms": round_trip["adapter_p50_ms"],
        "exec_true_p99_ms": round_trip["adapter_p99_ms"],
        "sprite_create_p50_ms": statistics.median(creates) * 1000,
        "first_exec_p50_ms": statistics.median(first_execs) * 1000,
        "first_exec_max_ms": max(first_execs) * 1000,
        "idle_sprite_processes_rss_kib": statistics.median(own),
        "server_rss_growth_per_sprite_kib": server_growth,
        "sprites": sprites,
    }


def _direct_download(port: int, total: int) -> float:
    """MB/s of the same download from the host straight to the loopback server."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        started = time.perf_counter()
        sock.sendall(f"SOURCE {total}\n".encode())
        got = 0
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
        seconds = time.perf_counter() - started
    assert got == total
    return total / seconds / MB


def _meminfo_kib() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = int(value.split()[0])
    return fields


async def egress_figures(server: LocalSprites, origin: LoopbackServer) -> dict[str, float]:
    async with SpritesAdapter(server.credentials) as adapter:
        await adapter.create_sprite("egress")
        await adapter.set_network_policy(
            "egress", [NetworkRule(domain="localhost", action="allow")]
        )
        argv = ["python3", "-c", EGRESS_PROBE, str(origin.port), str(TUNNEL_BYTES)]
        session = await adapter.exec("egress", [*argv, str(TUNNELS)], stdin=False)
        out = b"".join([chunk.data async for chunk in session])
        assert session.exit_code == 0, out
        inside = json.loads(out.decode().strip().splitlines()[-1])
        await adapter.delete_sprite("egress")
        direct = await asyncio.to_thread(_direct_download, origin.port, TUNNEL_BYTES)
    return {
        "tunnel_bytes": TUNNEL_BYTES,
        "connect_tunnel_mb_per_s": inside["mb_per_s"],
        "direct_loopback_mb_per_s": direct,
        "ratio": inside["mb_per_s"] / direct,
        "tunnels": TUNNELS,
        "tunnel_open_and_echo_p50_ms": inside["p50"] * 1000,
        "tunnel_open_and_echo_p99_ms": inside["p99"] * 1000,
        **netns_costs(),
    }


def netns_costs(count: int = 50, switches: int = 20_000) -> dict[str, float]:
    """What a sprite's namespace costs by itself: making one (with `lo` up and the proxy's
    socket listening), one setns into it (the exec path's fifth), and the kernel memory
    it holds (slab and per-CPU growth over `count` namespaces: it is in no process's
    resident set; noisy on a shared machine)."""
    before = _meminfo_kib()
    made, times = [], []
    for _ in range(count):
        started = time.perf_counter()
        made.append(new_namespace(0))
        times.append(time.perf_counter() - started)
    after = _meminfo_kib()
    fd = made[0][0]
    per_switch: list[float] = []

    def switch() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        started = time.perf_counter()
        for _ in range(switches // 2):
            setns(fd, CLONE_NEWNET)
            setns(own, CLONE_NEWNET)
        per_switch.append((time.perf_counter() - started) / switches)
        os.close(own)

    thread = threading.Thread(target=switch)
    thread.start()
    thread.join()
    for namespace in made:
        close_namespace(*namespace)
    return {
        "netns_create_p50_ms": statistics.median(times) * 1000,
        "netns_create_p99_ms": percentile(times, 99) * 1000,
        "setns_net_us": per_switch[0] * 1e6,
        "netns_kernel_slab_kib": (after["Slab"] - before["Slab"]) / count,
        "netns_kernel_percpu_kib": (after["Percpu"] - before["Percpu"]) / count,
    }


def rootfs_build() -> dict[str, float]:
    """Cold (the cached rootfs moved aside, apt's package cache warm) and warm builds."""
    cache = Path(os.environ.get("LATTICE_CACHE") or Path.home() / ".cache" / "lattice-operator")
    store = cache / "sprite-rootfs"
    aside = cache / "sprite-rootfs.bench-aside"
    script = ["bash", str(REPO / "hack" / "build-sprite-rootfs.sh")]
    shutil.rmtree(aside, ignore_errors=True)
    store.rename(aside)
    try:
        started = time.perf_counter()
        out = subprocess.run(script, capture_output=True, text=True, check=True).stdout
        cold = time.perf_counter() - started
        rootfs = Path(out.strip().splitlines()[-1])
        size = int(
            subprocess.run(
                ["du", "-sk", str(rootfs)], capture_output=True, text=True, check=True
            ).stdout.split()[0]
        )
    finally:
        shutil.rmtree(store, ignore_errors=True)
        aside.rename(store)
    started = time.perf_counter()
    subprocess.run(script, capture_output=True, check=True)
    warm = time.perf_counter() - started
    return {"cold_s": cold, "warm_s": warm, "size_mib": size / 1024}


@pytest.mark.bench
def test_sprites_backend_benchmarks(tmp_path: Path) -> None:
    allow = ["--egress-allow-private", "127.0.0.1/32"]
    with LoopbackServer() as origin, sprites_server(tmp_path / "server", extra=allow) as server:

        async def run() -> dict[str, object]:
            async with SpritesAdapter(server.credentials) as adapter:
                await adapter.create_sprite("bench")
                figures: dict[str, object] = {
                    "exec_round_trip_true": await exec_round_trip(adapter, "bench"),
                    "stdout_throughput_100mb": await stdout_throughput(adapter, "bench"),
                    "outbox_tail_50mb": await outbox_tail(adapter, server, "bench"),
                }
                await adapter.delete_sprite("bench")
                return figures

        figures = asyncio.run(run())
        figures["container"] = asyncio.run(isolation_figures(server))
        figures["egress_proxy"] = asyncio.run(egress_figures(server, origin))
    with sprites_server(tmp_path / "sandbox", extra=["--isolation", "sandbox"]) as sandbox:
        figures["sandbox"] = asyncio.run(isolation_figures(sandbox))
    figures["sprite_rootfs_build"] = rootfs_build()
    figures["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
