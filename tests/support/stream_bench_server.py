"""The stream server alone, for the fan-out benchmark: allows every token, publishes on
request (`POST /publish?rate=&seconds=&size=`, bounded) and reports its own CPU and memory.

    python -m tests.support.stream_bench_server PORT
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
from pathlib import Path

from aiohttp import web

from lattice_operator.clock import SystemClock
from lattice_operator.stream.access import AccessCache, Identity
from lattice_operator.stream.envelope import StreamEvent, Subject
from lattice_operator.stream.hub import EventHub
from lattice_operator.stream.server import HUB, build_app


class AllowAll:
    async def authenticate(self, token: str) -> Identity | None:
        return Identity(user="bench")

    async def may_get(self, who: Identity, subject: Subject) -> bool:
        return True


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def publish(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    rate = min(float(request.query.get("rate", "1000")), 10_000)
    seconds = min(float(request.query.get("seconds", "10")), 60)
    size = min(int(request.query.get("size", "200")), 65_536)
    clock = SystemClock()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime
    loop = asyncio.get_running_loop()
    start = loop.time()
    total = int(rate * seconds)
    for n in range(total):  # open loop at the rate, bounded by count
        due = start + n / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        hub.publish(
            StreamEvent(
                type="run.output",
                ts=clock.now(),
                trace_id="bench",
                run_id=f"r{n % 50}",
                payload={"namespace": "bench", "name": f"r{n % 50}", "pad": "x" * size},
                subject=Subject(namespace="bench", resource="runs", name=f"r{n % 50}"),
            )
        )
    wall = loop.time() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    return web.json_response(
        {
            "events": total,
            "wall_s": wall,
            "cpu_s": cpu,
            "cpu_share_of_one_core": cpu / wall,
            "rss_kib": _rss_kib(),
            "subscribers": hub.subscribers,
            "cut_off": hub.cut_off,
        }
    )


async def main(port: int) -> None:
    hub = EventHub(buffer=10_000, queue=1_000)
    app = build_app(hub, AccessCache(AllowAll(), SystemClock()), SystemClock(), write_timeout=2.0)
    app.router.add_post("/publish", publish)
    app.router.add_get("/rss", lambda _: _rss_response())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.sleep(600)  # bounded: the benchmark stops it long before
    await runner.cleanup()


async def _rss_response() -> web.Response:
    return web.json_response({"rss_kib": _rss_kib(), "pid": os.getpid()})


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
