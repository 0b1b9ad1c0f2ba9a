"""The API client under a burst: requests queued behind its connection pool wait for a
connection, untimed and in order; the total timeout bounds each request once it has one, and
only connecting to the server is timed as a connect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from lattice_adapters.kube import KubeClient, KubeConfig
from tests.support.local_http import serving


@pytest.fixture
async def slow_server() -> AsyncIterator[str]:
    """An API-server stand-in on 127.0.0.1 that takes 0.3 s per answer."""

    async def answer(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        return web.json_response({"kind": "Thing", "path": request.path})

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    async with serving(app) as url:
        yield url


async def test_requests_queued_behind_the_pool_wait_instead_of_failing(slow_server: str) -> None:
    # One connection, a connect timeout far shorter than the queue: the 4th request waits
    # ~0.9 s for the connection, which is not a connect timeout.
    async with KubeClient(
        KubeConfig(server=slow_server), connections=1, connect_timeout=0.1, total_timeout=10
    ) as kube:
        answers = await asyncio.gather(*(kube.get(f"/api/v1/things/{i}") for i in range(4)))
    assert [a["path"] for a in answers] == [f"/api/v1/things/{i}" for i in range(4)]


async def test_the_total_timeout_bounds_a_request_not_its_wait_for_a_connection(
    slow_server: str,
) -> None:
    # 0.3 s per answer, one connection: the 3rd request waits 0.6 s, longer than the total
    # timeout, and is still answered; a request slower than the total timeout is not.
    async with KubeClient(
        KubeConfig(server=slow_server), connections=1, connect_timeout=0.1, total_timeout=0.5
    ) as kube:
        answers = await asyncio.gather(*(kube.get(f"/api/v1/things/{i}") for i in range(3)))
    assert [a["path"] for a in answers] == [f"/api/v1/things/{i}" for i in range(3)]
    async with KubeClient(
        KubeConfig(server=slow_server), connections=1, connect_timeout=0.1, total_timeout=0.2
    ) as kube:
        with pytest.raises(TimeoutError):
            await kube.get("/api/v1/things/slow")
