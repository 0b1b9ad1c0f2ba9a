"""Stream fan-out (`make bench`, figures in bench-results/stream.json): 100 subscribers at
1,000 events/s for 10 s — delivery latency and the server's CPU; then 100 subscribers that
never read while the same load runs — the server's memory. No assertions on the numbers."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from lattice_devtools.localcluster.controlplane import free_port

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "stream.json"
SUBSCRIBERS = 100
RATE = 1000
SECONDS = 10


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def subscriber(
    url: str, latencies: list[float], totals: list[int], stop: asyncio.Event
) -> None:
    """A lean SSE reader (raw socket): counts every event, times every 20th from its `ts`."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer b\r\n\r\n")
    await writer.drain()
    received, buffer = 0, b""
    try:
        while not stop.is_set():
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            now = time.time()
            buffer += chunk
            frames = buffer.split(b"\n\n")
            buffer = frames.pop()
            for frame in frames:
                at = frame.find(b'"ts":"')
                if at < 0:
                    continue
                received += 1
                totals[0] += 1
                if received % 20 == 0:
                    stamp = frame[at + 6 : frame.index(b'"', at + 6)].decode()
                    latencies.append(now - datetime.fromisoformat(stamp).timestamp())
    finally:
        writer.close()


async def fan_out(url: str) -> dict[str, float]:
    latencies: list[float] = []
    stop = asyncio.Event()
    totals = [0]
    readers = [
        asyncio.create_task(subscriber(url, latencies, totals, stop)) for _ in range(SUBSCRIBERS)
    ]
    async with httpx.AsyncClient(timeout=120) as http:
        for _ in range(200):
            if (await http.get(f"{url}/healthz")).json()["subscribers"] == SUBSCRIBERS:
                break
            await asyncio.sleep(0.05)
        report = (await http.post(f"{url}/publish?rate={RATE}&seconds={SECONDS}")).json()
        await asyncio.sleep(1.0)
    stop.set()
    for task in readers:
        task.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    delivered = totals[0]
    return {
        "subscribers": SUBSCRIBERS,
        "rate_per_s": RATE,
        "events_published": report["events"],
        "deliveries": delivered,
        "latency_samples": len(latencies),
        "deliveries_expected": report["events"] * SUBSCRIBERS,
        "latency_p50_ms": statistics.median(latencies) * 1000,
        "latency_p99_ms": percentile(latencies, 99) * 1000,
        "server_cpu_share_of_one_core": report["cpu_share_of_one_core"],
        "cut_off": report["cut_off"],
    }


async def stalled(url: str) -> dict[str, float]:
    host, port = url.removeprefix("http://").split(":")
    writers = []
    for _ in range(SUBSCRIBERS):  # connections that never read
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer b\r\n\r\n")
        await writer.drain()
        writers.append(writer)
    async with httpx.AsyncClient(timeout=120) as http:
        before = (await http.get(f"{url}/rss")).json()["rss_kib"]
        report = (await http.post(f"{url}/publish?rate={RATE}&seconds={SECONDS}&size=1024")).json()
        after = (await http.get(f"{url}/rss")).json()["rss_kib"]
    for writer in writers:
        writer.close()
    return {
        "stalled_subscribers": SUBSCRIBERS,
        "events_published": report["events"],
        "rss_before_kib": before,
        "rss_after_kib": after,
        "cut_off": report["cut_off"],
    }


@pytest.mark.bench
def test_stream_fan_out() -> None:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO / "adapters"), str(REPO)]),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.stream_bench_server", str(port)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == b"ready"
        url = f"http://127.0.0.1:{port}"
        figures = {"fan_out": asyncio.run(fan_out(url))}
        figures["stalled"] = asyncio.run(stalled(url))
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
