"""The egress proxy on the host's loopback (no namespace needed): a slow reader holds the
relay back instead of filling memory, and an idle tunnel is closed."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest

# The local server's egress proxy (its private _egress and _netpolicy) is the unit under test.
from lattice_devtools.sprites_local._egress import EgressProxy, EgressSettings
from lattice_devtools.sprites_local._netpolicy import NetworkPolicy, parse_networks
from tests.support.loopback_server import LoopbackServer

SOURCE_BYTES = 512 * 1024 * 1024


@pytest.fixture(scope="module")
def origin() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@contextlib.asynccontextmanager
async def _proxy(idle: float = 600.0) -> AsyncIterator[tuple[EgressProxy, int]]:
    settings = EgressSettings(allow_private=parse_networks(["127.0.0.1"]), idle_timeout=idle)
    proxy = EgressProxy("unit", settings, lambda: NetworkPolicy([]))
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.setblocking(False)
        proxy.serve(sock)
        try:
            yield proxy, int(sock.getsockname()[1])
        finally:
            proxy.close()
            await asyncio.sleep(0.05)  # the cancelled relays finish


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[EgressProxy, int]]:
    async with _proxy() as made:
        yield made


async def _tunnel(port: int, target: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    return reader, writer


async def test_a_slow_reader_holds_the_relay_back(
    proxy: tuple[EgressProxy, int], origin: LoopbackServer
) -> None:
    server, port = proxy
    reader, writer = await _tunnel(port, f"localhost:{origin.port}")
    writer.write(f"SOURCE {SOURCE_BYTES}\n".encode())  # 512 MiB the client never reads
    await writer.drain()
    [conn] = list(server._conns)
    samples: list[int] = []
    for _ in range(40):  # until the flow stops (at most 10 s on a busy machine)
        await asyncio.sleep(0.25)
        samples.append(conn.bytes_down)
        if len(samples) >= 3 and samples[-1] == samples[-3]:
            break
    # Socket buffers on both sides plus the relay's own: a few MiB, and no growth at
    # the end; without backpressure it would race through the 512 MiB.
    assert 0 < samples[-1] < 64 * 1024 * 1024, samples
    assert samples[-1] == samples[-3], samples
    # Reading resumes the flow.
    got = 0
    while got < 128 * 1024 * 1024:
        got += len(await reader.read(1024 * 1024))
    assert conn.bytes_down > samples[-1]
    writer.transport.abort()


async def test_an_idle_tunnel_is_closed(origin: LoopbackServer) -> None:
    async with _proxy(idle=0.5) as (server, port):
        reader, writer = await _tunnel(port, f"localhost:{origin.port}")
        writer.write(b"PING\n")
        assert await reader.readline() == b"PING\n"
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the proxy
        assert 0.3 < time.monotonic() - started < 5
        assert server.open_connections == 0
        writer.close()


async def test_close_drops_open_tunnels(
    proxy: tuple[EgressProxy, int], origin: LoopbackServer
) -> None:
    server, port = proxy
    reader, writer = await _tunnel(port, f"localhost:{origin.port}")
    writer.write(b"HOLD\n")
    assert await reader.readline() == b"held\n"
    server.close()
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(reader.readexactly(1), 10)
    writer.close()
