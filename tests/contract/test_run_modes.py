"""The endpoints behind the Run modes exec_post and service: the HTTP exec endpoint
(`POST /v1/sprites/{name}/exec`) and a service's followed log, held to the SDKs' wire forms
(sprites-js `exec.ts`/`services.ts`, the reference's §4.7 and §7), through raw HTTP and
through the adapter; the service's definition through the official sprites-py SDK."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable

import aiohttp
import httpx
import pytest
import sprites

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1 import SpriteService
from lattice_operator.ports import (
    ExecOutput,
    ExitStatusUnknown,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    ServiceEvent,
)
from lattice_operator.reconcilers.run.decisions import wrapped_command
from lattice_operator.reconcilers.run.service_mode import (
    ServiceSession,
    service_definition,
    service_name,
)
from tests.support.contract_target import Target
from tests.support.sprites_server import LocalSprites

pytestmark = pytest.mark.contract


@pytest.fixture
def sprite(adapter_sprite: str) -> str:
    """One sprite per test, through our adapter (these tests pick their client themselves)."""
    return adapter_sprite


def _headers(target: Target) -> dict[str, str]:
    return {"Authorization": f"Bearer {target.credentials.token.get_secret_value()}"}


async def _raw_chunks(
    target: Target, sprite: str, params: list[tuple[str, str]], body: bytes = b""
) -> tuple[int, str, list[bytes]]:
    """Status, content type and the HTTP chunks of an HTTP exec, as the wire has them."""
    url = f"{target.credentials.api_url}/v1/sprites/{sprite}/exec"
    async with (
        aiohttp.ClientSession(trust_env=False) as http,
        http.post(url, params=params, data=body, headers=_headers(target)) as response,
    ):
        chunks: list[bytes] = []
        buffer = b""
        async for data, end in response.content.iter_chunks():
            buffer += data
            if end and buffer:
                chunks.append(buffer)
                buffer = b""
        return response.status, response.headers.get("Content-Type", ""), chunks


async def test_http_exec_streams_one_frame_per_chunk(target: Target, sprite: str) -> None:
    script = "echo out; echo err >&2; echo more; exit 3"
    status, kind, chunks = await _raw_chunks(
        target, sprite, [("cmd", "sh"), ("cmd", "-c"), ("cmd", script), ("path", "sh")]
    )
    assert status == 200
    assert kind == "application/octet-stream"
    # [id][payload], no length prefix: 1 stdout, 2 stderr, the last 3 + the status byte.
    assert chunks[-1] == bytes([3, 3])
    frames = chunks[:-1]
    assert {c[0] for c in frames} <= {1, 2}
    stdout = b"".join(c[1:] for c in frames if c[0] == 1)
    stderr = b"".join(c[1:] for c in frames if c[0] == 2)
    assert (stdout, stderr) == (b"out\nmore\n", b"err\n")


async def test_http_exec_takes_stdin_from_the_body(target: Target, sprite: str) -> None:
    status, _, chunks = await _raw_chunks(
        target, sprite, [("cmd", "cat"), ("path", "cat"), ("stdin", "true")], b"piped\n"
    )
    assert status == 200
    assert b"".join(c[1:] for c in chunks if c[0] == 1) == b"piped\n"
    assert chunks[-1] == bytes([3, 0])


@pytest.mark.parametrize("refused", ["tty", "id", "detachable", "cc"])
async def test_http_exec_refuses_what_needs_a_socket(
    target: Target, sprite: str, refused: str
) -> None:
    status, _, _ = await _raw_chunks(target, sprite, [("cmd", "true"), (refused, "true")])
    assert status == 400


async def test_http_exec_refuses_stdin_over_ten_mib(target: Target, sprite: str) -> None:
    url = f"{target.credentials.api_url}/v1/sprites/{sprite}/exec"
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.post(
            url,
            params=[("cmd", "cat"), ("stdin", "true")],
            content=b"x" * (10 * 1024 * 1024 + 1),
            headers=_headers(target),
        )
    assert response.status_code == 413


async def test_adapter_http_exec_runs_to_its_exit(adapter: SpritesAdapter, sprite: str) -> None:
    session = await adapter.exec_post(
        sprite, ["sh", "-c", 'echo "$GREETING"; echo oops >&2; exit 4'], env={"GREETING": "hi"}
    )
    assert session.session_id.startswith("post-")
    out: dict[str, bytes] = {"stdout": b"", "stderr": b""}
    async for chunk in session:
        out[chunk.stream] += chunk.data
    assert session.exit_code == 4
    assert out == {"stdout": b"hi\n", "stderr": b"oops\n"}


async def test_adapter_http_exec_refuses_a_too_large_stdin(
    adapter: SpritesAdapter, sprite: str
) -> None:
    with pytest.raises((InvalidRequest, PayloadTooLarge)):
        await adapter.exec_post(sprite, ["cat"], stdin=b"x" * (10 * 1024 * 1024 + 1))


async def test_closing_an_http_exec_stops_its_command(local_sprites: LocalSprites) -> None:
    """The command belongs to the request (a process check: the local server only)."""
    async with SpritesAdapter(local_sprites.credentials) as adapter:
        sprite = f"ct-post-{secrets.token_hex(4)}"
        await adapter.create_sprite(sprite)
        session = await adapter.exec_post(sprite, ["sh", "-c", "echo up; exec sleep 600"])
        async for chunk in session:
            assert chunk.data == b"up\n"
            break
        await session.detach()
        for _ in range(100):
            if not local_sprites.describe(sprite).get("sessions"):
                break
            await asyncio.sleep(0.1)
        assert not local_sprites.describe(sprite).get("sessions")
        with pytest.raises(ExitStatusUnknown):
            await session.wait()
        await adapter.delete_sprite(sprite)


async def test_service_log_is_followed(adapter: SpritesAdapter, sprite: str) -> None:
    script = "echo one; sleep 0.5; echo two; sleep 600"
    await adapter.put_service(sprite, SpriteService(name="talker", cmd="sh", args=["-c", script]))
    seen: list[ServiceEvent] = []
    async for event in adapter.service_logs(sprite, "talker", lines=0, follow=3.0):
        seen.append(event)
        if event.data == "two\n":
            break
    assert "two\n" in [e.data for e in seen]
    # Buffered lines only, no follow: the last `lines`, then `complete`.
    events = [e async for e in adapter.service_logs(sprite, "talker", lines=1)]
    assert [(e.type, e.data) for e in events] == [("stdout", "two\n"), ("complete", None)]
    info = await adapter.get_service(sprite, "talker")
    assert (info.spec.name, info.status) == ("talker", "running")
    await adapter.delete_service(sprite, "talker")


async def test_service_log_through_the_js_wire_form(target: Target, sprite: str) -> None:
    """sprites-js getServiceLogs: GET …/logs?lines=N&duration=<Go duration>, NDJSON lines
    with `type`, `data`, `timestamp`; the definition through the official Python SDK."""
    async with sprites.AsyncSpritesClient(
        target.credentials.token.get_secret_value(), base_url=target.credentials.api_url
    ) as client:
        handle = client.sprite(sprite)
        await handle.create_service("chatty", "sh", ["-c", "echo hello; sleep 600"])
        got = await handle.get_service("chatty")
        assert got.name == "chatty"
        url = f"{target.credentials.api_url}/v1/sprites/{sprite}/services/chatty/logs"
        async with httpx.AsyncClient(trust_env=False) as http:
            for _ in range(50):
                response = await http.get(
                    url, params={"lines": "10", "duration": "1s"}, headers=_headers(target)
                )
                if b"hello" in response.content:
                    break
                await asyncio.sleep(0.1)
        lines = [httpx.Response(200, content=line).json() for line in response.content.splitlines()]
        assert lines[0]["type"] == "stdout"
        assert lines[0]["data"] == "hello\n"
        assert isinstance(lines[0]["timestamp"], int)
        assert lines[-1]["type"] == "complete"
        await handle.delete_service("chatty")


def _exit_reader(
    adapter: SpritesAdapter, sprite: str, path: str
) -> Callable[[], Awaitable[int | None]]:
    async def read() -> int | None:
        try:
            return int((await adapter.read_file(sprite, path)).strip())
        except NotFound:
            return None

    return read


async def _follow(session: ServiceSession) -> list[ExecOutput]:
    async def collect() -> list[ExecOutput]:
        return [chunk async for chunk in session]

    return await asyncio.wait_for(collect(), 60)


async def test_a_run_service_runs_its_command_once_and_is_removed_at_its_end(
    adapter: SpritesAdapter, sprite: str
) -> None:
    """The service mode end to end at the API: log as stdout, exit file as the end."""
    exit_file = f"/workspace/.lattice/exit/ct-{secrets.token_hex(4)}"
    wrapped = wrapped_command(["sh", "-c", "echo one; echo two; exit 5"], {}, exit_file)
    name = service_name(exit_file)
    await adapter.put_service(sprite, service_definition(name, wrapped, exit_file, "/workspace"))
    session = ServiceSession(
        adapter,
        sprite,
        name,
        read_exit=_exit_reader(adapter, sprite, exit_file),
        poll=0.2,
        replay=True,
    )
    chunks = await _follow(session)
    assert session.exit_code == 5
    assert b"".join(c.data for c in chunks).endswith(b"one\ntwo\n")
    assert await adapter.list_services(sprite) == []  # stopped and removed at its end


async def test_a_service_that_fails_before_its_command_ends_unknown_and_is_removed(
    adapter: SpritesAdapter, sprite: str
) -> None:
    """No exit file and a service that keeps failing (the backend restarts it): the session
    ends, exit unknown, and the service is stopped for good rather than followed forever."""
    await adapter.put_service(sprite, SpriteService(name="broken", cmd="sh", args=["-c", "exit 2"]))
    session = ServiceSession(
        adapter,
        sprite,
        "broken",
        read_exit=_exit_reader(adapter, sprite, "/workspace/.lattice/exit/none"),
        poll=0.2,
        replay=False,
    )
    await _follow(session)
    assert session.exit_code is None
    assert await adapter.list_services(sprite) == []
