"""The stream over HTTP, in process: who may subscribe, what each one sees, resumption,
and a subscriber that never reads (it is cut off; the others and memory are unaffected)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from lattice_operator.stream.access import AccessCache, Identity, ReviewLimits
from lattice_operator.stream.envelope import StreamEvent, Subject
from lattice_operator.stream.hub import EventHub
from lattice_operator.stream.server import build_app
from tests.support.clock import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Reviews:
    """alice may get everything in namespace a; bob nothing."""

    async def authenticate(self, token: str) -> Identity | None:
        return {"alice-token": Identity(user="alice"), "bob-token": Identity(user="bob")}.get(token)

    async def may_get(self, who: Identity, subject: Subject) -> bool:
        return who.user == "alice" and subject.namespace == "a"


def event(name: str, namespace: str = "a", size: int = 0) -> StreamEvent:
    return StreamEvent(
        type="run.output",
        ts=NOW,
        trace_id="t",
        run_id=name,
        payload={"namespace": namespace, "name": name, "phase": "Running", "pad": "x" * size},
        subject=Subject(namespace=namespace, resource="runs", name=name),
    )


@pytest.fixture
async def served() -> AsyncIterator[tuple[EventHub, str]]:
    hub = EventHub(buffer=100, queue=20)
    app = build_app(
        hub,
        AccessCache(Reviews(), FakeClock()),
        FakeClock(),
        keepalive=0.2,
        write_timeout=0.5,
    )
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield hub, str(server.make_url(""))
    finally:
        await server.close()


async def frames(response: aiohttp.ClientResponse, count: int) -> list[dict[str, object]]:
    """The next `count` events (id, event, data) of an SSE response."""
    out: list[dict[str, object]] = []
    current: dict[str, object] = {}
    while len(out) < count:
        line = (await asyncio.wait_for(response.content.readline(), 10)).decode().rstrip("\n")
        if not line:
            if "data" in current:
                out.append(current)
            current = {}
        elif line.startswith("id: "):
            current["id"] = int(line[4:])
        elif line.startswith("event: "):
            current["event"] = line[7:]
        elif line.startswith("data: "):
            current["data"] = json.loads(line[6:])
    return out


async def test_no_token_or_a_bad_one_is_401_and_no_rights_is_403(
    served: tuple[EventHub, str],
) -> None:
    _, url = served
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/events") as r:
            assert r.status == 401
            assert "bearer token" in await r.text()
        async with http.get(f"{url}/events", headers={"Authorization": "Bearer nope"}) as r:
            assert r.status == 401
        headers = {"Authorization": "Bearer bob-token"}
        async with http.get(f"{url}/events?namespace=a", headers=headers) as r:
            assert r.status == 403
            assert "bob may not get" in await r.text()


async def test_garbage_tokens_from_one_address_get_429_not_a_review_each() -> None:
    class Counting(Reviews):
        asked = 0

        async def authenticate(self, token: str) -> Identity | None:
            Counting.asked += 1
            return await super().authenticate(token)

    access = AccessCache(Counting(), FakeClock(), limits=ReviewLimits(per_minute=6, burst=2))
    server = TestServer(build_app(EventHub(buffer=10, queue=10), access, FakeClock()))
    await server.start_server(host="127.0.0.1")
    statuses, answer = [], ""
    try:
        async with aiohttp.ClientSession() as http:
            for n in range(5):
                headers = {"Authorization": f"Bearer garbage-{n}"}
                async with http.get(server.make_url("/events"), headers=headers) as r:
                    statuses.append(r.status)
                    if r.status == 429:
                        answer, retry = await r.text(), r.headers.get("Retry-After")
    finally:
        await server.close()
    assert statuses == [401, 401, 429, 429, 429]
    assert Counting.asked == 2
    assert "too many unknown tokens from 127.0.0.1" in answer
    assert retry == "10"


async def test_a_subscriber_sees_only_what_it_may_get_and_can_resume(
    served: tuple[EventHub, str],
) -> None:
    hub, url = served
    headers = {"Authorization": "Bearer alice-token"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/events?namespace=a", headers=headers) as r:
            assert r.status == 200
            assert r.headers["Content-Type"] == "text/event-stream"
            hub.publish(event("hidden", namespace="b"))
            first = hub.publish(event("r1"))
            hub.publish(event("r2"))
            got = await frames(r, 2)
            assert [f["data"]["run_id"] for f in got] == ["r1", "r2"]  # type: ignore[index]
            assert got[0]["id"] == first
            assert got[0]["event"] == "run.output"
            assert "subject" not in got[0]["data"]  # type: ignore[operator]
        # Missed while away: r3; resumed from r1's id it gets r2 and r3, nothing else.
        hub.publish(event("r3"))
        resume = {**headers, "Last-Event-ID": str(first)}
        async with http.get(f"{url}/events?namespace=a", headers=resume) as r:
            got = await frames(r, 2)
            assert [f["data"]["run_id"] for f in got] == ["r2", "r3"]  # type: ignore[index]


async def test_a_subscriber_that_never_reads_is_cut_off_and_the_others_keep_up(
    served: tuple[EventHub, str],
) -> None:
    hub, url = served
    host, port = url.removeprefix("http://").split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"GET /events?namespace=a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token\r\n\r\n"
    )
    await writer.drain()
    headers = {"Authorization": "Bearer alice-token"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{url}/events?namespace=a", headers=headers) as r,
    ):
        for _ in range(100):  # both subscribed before publishing
            if hub.subscribers == 2:
                break
            await asyncio.sleep(0.02)
        assert hub.subscribers == 2
        total = 400
        received = 0
        for n in range(total):  # bounded: 400 events of ~64 KiB
            hub.publish(event(f"r{n}", size=64 * 1024))
            if n % 10 == 9:
                received += len(await frames(r, 10))
            await asyncio.sleep(0)
        assert received == total  # the reading subscriber missed nothing
        for _ in range(100):
            if hub.cut_off:
                break
            await asyncio.sleep(0.05)
        assert hub.cut_off == 1
        assert hub.subscribers == 1
    writer.close()
