"""The Sprites client's transport: at most `slots` requests in httpcore's pool at once, the
rest waiting in order, each slot held until its response is closed."""

from __future__ import annotations

import asyncio

import httpx
import pytest

# The adapter's HTTP transport (private to lattice_adapters.sprites), tested on its own.
from lattice_adapters.sprites._http import OneQueue


class Counting(httpx.AsyncBaseTransport):
    """Answers after `delay`; counts the requests inside it and the bodies still open."""

    def __init__(self, delay: float = 0.0, fail: int = 0) -> None:
        self.delay, self.fail = delay, fail
        self.inside = self.most = 0
        self.order: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.order.append(request.url.path)
        self.inside += 1
        self.most = max(self.most, self.inside)
        await asyncio.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            self.inside -= 1
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, stream=Body(self), request=request)


class Body(httpx.AsyncByteStream):
    def __init__(self, owner: Counting) -> None:
        self._owner = owner

    async def __aiter__(self):  # type: ignore[override]
        yield b"ok"

    async def aclose(self) -> None:
        self._owner.inside -= 1


def client(inner: Counting, slots: int, **timeouts: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=OneQueue(inner, slots),
        base_url="http://sprites.test",
        timeout=httpx.Timeout(5.0, **timeouts),
    )


async def test_at_most_slots_requests_are_inside_and_the_rest_go_in_order() -> None:
    inner = Counting(delay=0.01)
    async with client(inner, 3) as http:
        answers = await asyncio.gather(*(http.get(f"/r{i}") for i in range(30)))
    assert [a.text for a in answers] == ["ok"] * 30
    assert inner.most == 3
    assert inner.order == [f"/r{i}" for i in range(30)]
    assert inner.inside == 0


async def test_a_streamed_body_holds_its_slot_until_it_is_closed() -> None:
    inner = Counting()
    async with client(inner, 1) as http:
        async with http.stream("GET", "/long") as response:
            waiting = asyncio.create_task(http.get("/next"))
            await asyncio.sleep(0.05)
            assert inner.order == ["/long"]  # the next one waits for the slot
            assert await response.aread() == b"ok"
        assert (await waiting).text == "ok"
    assert inner.order == ["/long", "/next"]


async def test_a_request_waits_no_longer_than_its_pool_timeout() -> None:
    inner = Counting()
    async with client(inner, 1, pool=0.05) as http:
        async with http.stream("GET", "/long"):
            with pytest.raises(httpx.PoolTimeout):
                await http.get("/next")
        # The slot came back when the body was closed; the timed-out one took none.
        assert (await http.get("/after")).text == "ok"


async def test_a_failed_request_gives_its_slot_back() -> None:
    inner = Counting(fail=2)
    async with client(inner, 1, pool=0.5) as http:
        for _ in range(2):
            with pytest.raises(httpx.ConnectError):
                await http.get("/refused")
        assert (await http.get("/ok")).text == "ok"


async def test_a_cancelled_wait_takes_no_slot() -> None:
    inner = Counting()
    async with client(inner, 1) as http:
        async with http.stream("GET", "/long"):
            waiting = asyncio.create_task(http.get("/cancelled"))
            await asyncio.sleep(0.02)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        assert (await http.get("/after")).text == "ok"
    assert inner.order == ["/long", "/after"]
