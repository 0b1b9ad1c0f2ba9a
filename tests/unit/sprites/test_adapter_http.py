"""The adapter over a fake HTTP transport: guard rails, error hooks, gap-filling calls."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from lattice_adapters.sprites import RetryPolicy, SpritesAdapter, SpritesCredentials

# The adapter's HTTP client (private to lattice_adapters.sprites), tested below SpritesAdapter.
from lattice_adapters.sprites._http import RedactingLogger, build_http_client
from lattice_operator.api.v1alpha1 import NetworkRule, SpriteService
from lattice_operator.ports import errors

TOKEN = "org/7/unit-secret"
BASE = "http://sprites.test:8080"
SPRITE = {
    "id": "sprite-1",
    "name": "box",
    "organization": "org",
    "url": "https://box.example",
    "url_settings": {"auth": "public"},
    "status": "warm",
    "labels": ["a"],
    "created_at": "2026-01-13T10:30:00Z",
    "updated_at": "2026-01-13T10:30:00Z",
}

Handler = Callable[[httpx.Request], httpx.Response]


def creds() -> SpritesCredentials:
    return SpritesCredentials(token=SecretStr(TOKEN), api_url=BASE)


def adapter_for(handler: Handler, **kwargs: object) -> tuple[SpritesAdapter, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return SpritesAdapter(creds(), transport=httpx.MockTransport(record), **kwargs), seen  # type: ignore[arg-type]


async def test_only_the_configured_origin_is_contacted() -> None:
    calls: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200)

    client = build_http_client(creds(), timeout=5, transport=httpx.MockTransport(answer))
    async with client:
        with pytest.raises(errors.InvalidRequest, match="only the configured"):
            await client.get("http://elsewhere.test/v1/sprites")
        with pytest.raises(errors.InvalidRequest):
            await client.get("http://sprites.test:9999/v1/sprites")
        await client.get(f"{BASE}/v1/sprites")
    assert [str(c.url) for c in calls] == [f"{BASE}/v1/sprites"]


async def test_rest_calls_go_through_our_client() -> None:
    adapter, seen = adapter_for(lambda r: httpx.Response(200, json=SPRITE))
    async with adapter:
        info = await adapter.get_sprite("box")
    assert (info.name, info.status, info.url_auth, info.labels) == ("box", "warm", "public", ("a",))
    [request] = seen
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["User-Agent"].startswith("lattice-operator")
    assert not [h for h in request.headers if h.lower().startswith("fly-client")]


async def test_429_is_retried_after_retry_after() -> None:
    answers = iter(
        [
            httpx.Response(429, headers={"Retry-After": "2"}, json={"error": "slow down"}),
            httpx.Response(200, json=SPRITE),
        ]
    )
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    adapter, seen = adapter_for(lambda r: next(answers), sleep=sleep, rng=random.Random(0))
    async with adapter:
        assert (await adapter.get_sprite("box")).name == "box"
    assert len(seen) == 2
    assert 2 <= waits[0] <= 2 + RetryPolicy().base_delay


async def test_create_is_not_retried_after_a_reset() -> None:
    def reset(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("connection reset", request=request)

    adapter, seen = adapter_for(reset)
    async with adapter:
        with pytest.raises(errors.TransportError):
            await adapter.create_sprite("box")
    assert len(seen) == 1


async def test_get_is_retried_after_a_reset() -> None:
    answers: list[httpx.Response | None] = [None, httpx.Response(200, json=SPRITE)]

    def flaky(request: httpx.Request) -> httpx.Response:
        answer = answers.pop(0)
        if answer is None:
            raise httpx.ReadError("connection reset", request=request)
        return answer

    async def sleep(seconds: float) -> None:
        return None

    adapter, seen = adapter_for(flaky, sleep=sleep)
    async with adapter:
        assert (await adapter.get_sprite("box")).name == "box"
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("status", "body", "offset", "expected"),
    [
        (206, b"tail", 6, b"tail"),
        (200, b"head: tail", 6, b"tail"),  # Range ignored: sliced client-side
        (416, b"", 10, b""),
    ],
)
async def test_read_from_offset(status: int, body: bytes, offset: int, expected: bytes) -> None:
    adapter, seen = adapter_for(lambda r: httpx.Response(status, content=body))
    async with adapter:
        assert await adapter.read_file("box", "/workspace/f", offset=offset) == expected
    assert seen[0].headers["Range"] == f"bytes={offset}-"
    assert seen[0].url.params["path"] == "/workspace/f"


@pytest.mark.parametrize(
    ("status", "body", "offset", "expected"),
    [
        (206, b"0123", 0, b"0123"),
        (200, b"0123456789" * 1000, 0, b"0123"),  # Range ignored: read no further than 4
        (200, b"0123456789" * 1000, 6, b"6789"),
        (416, b"", 10, b""),
    ],
)
async def test_read_at_most_a_limit(status: int, body: bytes, offset: int, expected: bytes) -> None:
    adapter, seen = adapter_for(lambda r: httpx.Response(status, content=body))
    async with adapter:
        assert await adapter.read_file("box", "/workspace/f", offset=offset, limit=4) == expected
    assert seen[0].headers["Range"] == f"bytes={offset}-{offset + 3}"


async def test_lstat_describes_a_link_from_its_directory_listing() -> None:
    def listing(request: httpx.Request) -> httpx.Response:
        path = request.url.params["path"]
        entries = {
            "/workspace/src": [
                {"name": "out", "path": "/workspace/src/out", "type": "symlink", "size": 7},
                {"name": "a.txt", "path": "/workspace/src/a.txt", "type": "file", "size": 3},
            ],
            # A file's listing is the file itself: "/workspace/f/f" must not be taken for it.
            "/workspace/f": [{"name": "f", "path": "/workspace/f", "type": "file", "size": 1}],
        }[path]
        return httpx.Response(200, json={"path": path, "count": len(entries), "entries": entries})

    adapter, seen = adapter_for(listing)
    async with adapter:
        link = await adapter.lstat("box", "/workspace/src/out")
        file = await adapter.lstat("box", "/workspace/src/a.txt")
        with pytest.raises(errors.NotFound):
            await adapter.lstat("box", "/workspace/src/none")
        with pytest.raises(errors.NotFound):
            await adapter.lstat("box", "/workspace/f/f")
    assert (link.is_symlink, link.is_dir, file.is_symlink, file.size) == (True, False, False, 3)
    assert [r.url.params["path"] for r in seen] == ["/workspace/src"] * 3 + ["/workspace/f"]


async def test_stat_of_a_file_and_of_a_directory() -> None:
    def listing(request: httpx.Request) -> httpx.Response:
        path = request.url.params["path"]
        if path.endswith(".txt"):
            entries = [{"name": "a.txt", "path": path, "size": 3, "mode": "0600", "isDir": False}]
        else:
            entries = [{"name": "a.txt", "path": f"{path}/a.txt", "size": 3, "isDir": False}]
        return httpx.Response(200, json={"path": path, "count": 1, "entries": entries})

    adapter, _ = adapter_for(listing)
    async with adapter:
        file = await adapter.stat("box", "/workspace/a.txt")
        directory = await adapter.stat("box", "/workspace/dir")
    assert (file.size, file.mode, file.is_dir) == (3, "0600", False)
    assert (directory.path, directory.is_dir) == ("/workspace/dir", True)


def ndjson(*events: dict[str, object]) -> httpx.Response:
    return httpx.Response(200, content=b"".join(json.dumps(e).encode() + b"\n" for e in events))


async def test_error_line_in_a_checkpoint_stream_is_raised() -> None:
    adapter, _ = adapter_for(
        lambda r: ndjson(
            {"type": "info", "data": "Creating"}, {"type": "error", "error": "disk full"}
        )
    )
    async with adapter:
        with pytest.raises(errors.OperationFailed, match="disk full"):
            await adapter.create_checkpoint("box")


async def test_checkpoint_id_comes_from_the_complete_line_or_the_listing() -> None:
    listing = [{"id": "v4", "create_time": "2026-01-05T10:30:00Z", "comment": "c"}]

    def with_id(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return ndjson({"type": "complete", "data": "Checkpoint v4 created"})
        return httpx.Response(200, json=listing)

    def without_id(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return ndjson({"type": "complete", "data": "done"})
        return httpx.Response(200, json=listing)

    for handler in (with_id, without_id):
        adapter, _ = adapter_for(handler)
        async with adapter:
            checkpoint = await adapter.create_checkpoint("box", "c")
        assert (checkpoint.id, checkpoint.comment) == ("v4", "c")


async def test_truncated_restore_stream_is_a_protocol_error() -> None:
    adapter, _ = adapter_for(lambda r: ndjson({"type": "info", "data": "Restoring"}))
    async with adapter:
        with pytest.raises(errors.ProtocolError):
            await adapter.restore_checkpoint("box", "v1")


async def test_kill_sends_query_parameters_and_reads_the_exit_code() -> None:
    adapter, seen = adapter_for(
        lambda r: ndjson(
            {"type": "signal", "message": "Signaling SIGINT"},
            {"type": "exited", "message": "Process exited"},
            {"type": "complete", "exit_code": 130},
        )
    )
    async with adapter:
        result = await adapter.kill_session("box", "77", signal="SIGINT", grace=2.5)
    assert result.exit_code == 130
    assert [e.type for e in result.events] == ["signal", "exited", "complete"]
    assert seen[0].url.path == "/v1/sprites/box/exec/77/kill"
    assert dict(seen[0].url.params) == {"signal": "SIGINT", "timeout": "2500ms"}


async def test_unknown_sprite_status_is_a_protocol_error() -> None:
    adapter, _ = adapter_for(lambda r: httpx.Response(200, json={**SPRITE, "status": "melting"}))
    async with adapter:
        with pytest.raises(errors.ProtocolError, match="melting"):
            await adapter.get_sprite("box")


async def test_error_answers_never_carry_the_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    adapter, _ = adapter_for(
        lambda r: httpx.Response(401, json={"error": f"token {TOKEN} revoked"}),
        retry=RetryPolicy(max_attempts=1),
    )
    async with adapter:
        with pytest.raises(errors.Unauthorized) as caught:
            await adapter.get_sprite("box")
    assert TOKEN not in str(caught.value)
    assert TOKEN not in repr(caught.value)
    assert TOKEN not in caplog.text


def test_websocket_logger_masks_the_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="unit.ws")
    logger = RedactingLogger(logging.getLogger("unit.ws"), TOKEN)
    logger.debug("> %s: %s", "Authorization", f"Bearer {TOKEN}")
    assert caplog.records
    assert TOKEN not in caplog.text
    assert "Authorization: Bearer ***" in caplog.text


async def test_requests_have_the_sdks_wire_form() -> None:
    """Bodies, queries and timeouts as sprites-py 0.7.2 sent them (the contract suite holds
    the answers to the wire; this holds what the adapter sends where the server is lenient)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/services/web"):
            return ndjson({"type": "started"}, {"type": "complete"})
        if request.url.path == "/v1/sprites" and request.method == "POST":
            return httpx.Response(201, json=SPRITE)
        if request.url.path == "/v1/sprites/box" and request.method == "PUT":
            return httpx.Response(200, json=SPRITE)
        return httpx.Response(200, json={})

    adapter, seen = adapter_for(answer)
    async with adapter:
        await adapter.create_sprite("box", url_auth="public", labels=["a"])
        await adapter.create_sprite("box")
        await adapter.update_sprite("box", labels=[])
        await adapter.put_service(
            "box", SpriteService(name="web", cmd="srv", args=["-p"], http_port=8080)
        )
        await adapter.set_network_policy(
            "box", [NetworkRule(domain="x.dev", action="allow"), NetworkRule(include="defaults")]
        )
        await adapter.write_file("box", "w/./f", b"data", mode=0o600, atomic=False)
        await adapter.rename("box", "/w/f", "g")
        await adapter.delete_file("box", "/w/g")
    bodies = [
        json.loads(r.content) if r.url.path != "/v1/sprites/box/fs/write" else None
        for r in seen[:7]
    ]
    assert bodies[0] == {"name": "box", "url_settings": {"auth": "public"}, "labels": ["a"]}
    assert bodies[1] == {"name": "box", "url_settings": {"auth": "sprite"}}
    assert bodies[2] == {"labels": []}
    assert bodies[3] == {"cmd": "srv", "args": ["-p"], "http_port": 8080, "env": {}}
    assert bodies[4] == {"rules": [{"domain": "x.dev", "action": "allow"}, {"include": "defaults"}]}
    write = seen[5]
    assert (write.method, write.url.path, write.content) == (
        "PUT",
        "/v1/sprites/box/fs/write",
        b"data",
    )
    assert dict(write.url.params) == {
        "path": "/w/f",
        "workingDir": "/",
        "mode": "0600",
        "mkdirParents": "true",
    }
    assert write.headers["Content-Type"] == "application/octet-stream"
    assert bodies[6] == {"source": "/w/f", "dest": "/w/g", "workingDir": "/"}
    assert dict(seen[7].url.params) == {"path": "/w/g", "workingDir": "/", "recursive": "false"}
    assert [r.extensions["timeout"]["read"] for r in seen[:5]] == [120, 120, 30, 120, 30]


async def test_listings_in_either_wire_shape() -> None:
    service = {"name": "web", "cmd": "srv", "state": {"status": "running", "pid": 7}}
    shapes: list[object] = [[service], {"services": [service]}]

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/services"):
            return httpx.Response(200, json=shapes.pop(0))
        return httpx.Response(
            200, json={"count": 1, "sessions": [{"id": 42, "command": "sh", "tty": True}]}
        )

    adapter, _ = adapter_for(answer)
    async with adapter:
        [listed] = await adapter.list_services("box")
        assert [listed] == await adapter.list_services("box")
        [session] = await adapter.list_sessions("box")
    assert (listed.spec.name, listed.status, listed.pid) == ("web", "running", 7)
    assert (session.id, session.tty, session.created) == ("42", True, None)


async def test_a_success_that_is_not_json_is_a_protocol_error() -> None:
    adapter, _ = adapter_for(lambda r: httpx.Response(200, content=b"<html>"))
    async with adapter:
        with pytest.raises(errors.ProtocolError):
            await adapter.get_sprite("box")
        with pytest.raises(errors.ProtocolError):
            await adapter.list_checkpoints("box")
