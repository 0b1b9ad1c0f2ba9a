"""The operator's own HTTP doors against slow and greedy clients (issue 27): a half-sent or
silent connection is closed, one connection over the bound is answered 503, and /metrics
is what prometheus_client serves, without a thread per connection."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, generate_latest

from lattice_operator.doors import BoundedSite, runner_options, serve_metrics
from lattice_operator.settings import ConnectionLimits

WAIT = 20.0
"""Bound on every wait for the server to act (the limits under test are far shorter)."""


async def _hello(request: web.Request) -> web.Response:
    return web.Response(text="hello")


@pytest.fixture
async def site() -> AsyncIterator[BoundedSite]:
    limits = ConnectionLimits(header_timeout=0.3, idle_timeout=0.5, max_connections=3)
    app = web.Application()
    app.router.add_get("/", _hello)
    runner = web.AppRunner(app, access_log=None, **runner_options(limits))
    await runner.setup()
    bounded = BoundedSite(runner, "127.0.0.1", 0, limits)
    await bounded.start()
    try:
        yield bounded
    finally:
        await runner.cleanup()


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server closed the connection (EOF or reset), False if it kept it."""
    try:
        while await asyncio.wait_for(reader.read(4096), WAIT):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"],
    ids=["silent", "half-sent headers", "idle after a response"],
)
async def test_a_connection_that_does_not_send_a_request_is_closed(
    site: BoundedSite, sent: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
    try:
        writer.write(sent)
        await writer.drain()
        assert await _closed_by_server(reader)
    finally:
        writer.close()
    for _ in range(100):  # the count drops as the loop handles the close
        if site.open == 0:
            break
        await asyncio.sleep(0.01)
    assert site.open == 0


async def test_trickled_headers_do_not_keep_a_connection_open(site: BoundedSite) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
    try:
        writer.write(b"GET / HTTP/1.1\r\n")
        for n in range(40):  # one header line every 0.1 s: never complete within 0.3 s
            if reader.at_eof():
                break
            writer.write(f"X-{n}: y\r\n".encode())
            await writer.drain()
            await asyncio.sleep(0.1)
        assert await _closed_by_server(reader)
    except ConnectionError:
        pass  # closed while we were still writing: what is asserted
    finally:
        writer.close()


async def test_one_connection_over_the_bound_is_answered_503(site: BoundedSite) -> None:
    held = [await asyncio.open_connection("127.0.0.1", site.bound_port) for _ in range(3)]
    try:
        for _ in range(100):
            if site.open == 3:
                break
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), WAIT)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"too many connections" in answer
    finally:
        for _, held_writer in held:
            held_writer.close()
    # Once they are gone, requests are served again.
    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            if site.open == 0:
                break
            await asyncio.sleep(0.01)
        async with http.get(f"http://127.0.0.1:{site.bound_port}/") as r:
            assert (r.status, await r.text()) == (200, "hello")


async def test_a_burst_of_connections_is_bounded_too(site: BoundedSite) -> None:
    async def one() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", site.bound_port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        try:
            return (await asyncio.wait_for(reader.read(), WAIT))[:12]
        finally:
            writer.close()

    # Accepted in one batch: the bound holds although none was told it is connected yet.
    answers = await asyncio.gather(*(one() for _ in range(4)))
    assert sorted(answers) == [b"HTTP/1.1 200"] * 3 + [b"HTTP/1.1 503"]


async def test_metrics_are_served_as_prometheus_client_serves_them() -> None:
    registry = CollectorRegistry()
    Counter("lattice_demo", "A demo counter.", registry=registry).inc(3)
    Counter("lattice_other", "Another.", registry=registry)
    limits = ConnectionLimits(header_timeout=1, idle_timeout=1, max_connections=2)
    runner = await serve_metrics(registry, "127.0.0.1", 0, limits)
    (site,) = runner.sites
    assert isinstance(site, BoundedSite)
    url = f"http://127.0.0.1:{site.bound_port}"
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as http:
            identity = {"Accept-Encoding": "identity"}  # aiohttp asks for gzip by default
            async with http.get(f"{url}/metrics", headers=identity) as r:
                plain = (r.status, r.headers["Content-Type"], await r.read())
            gzip_header = {"Accept-Encoding": "gzip"}
            async with http.get(f"{url}/metrics", headers=gzip_header) as r:
                zipped = (r.headers.get("Content-Encoding"), gzip.decompress(await r.read()))
            async with http.get(f"{url}/metrics?name[]=lattice_demo_total", headers=identity) as r:
                only = await r.read()
            openmetrics_header = {**identity, "Accept": "application/openmetrics-text"}
            async with http.get(url, headers=openmetrics_header) as r:
                openmetrics = (r.headers["Content-Type"], await r.read())
    finally:
        await runner.cleanup()
    assert plain == (200, "text/plain; version=0.0.4; charset=utf-8", generate_latest(registry))
    assert zipped == ("gzip", generate_latest(registry))
    assert b"lattice_demo_total 3.0" in only
    assert b"lattice_other" not in only
    assert openmetrics[0].startswith("application/openmetrics-text")
    assert openmetrics[1].endswith(b"# EOF\n")
