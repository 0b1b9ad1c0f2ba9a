"""Hostile requests to the local server's own APIs (which run as root on the host).

Each test is a request that, before the fix, escaped the sprite (a host file written or
read) or crashed a handler (a 500 and a traceback); each must now get a 4xx with a reason,
and the host must be untouched. Local only: they look at host files.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.support.sprites_server import LocalSprites

pytestmark = pytest.mark.contract


@pytest.fixture
async def api(local_sprites: LocalSprites) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=local_sprites.base_url,
        headers={"Authorization": f"Bearer {local_sprites.token}"},
        timeout=60,
        trust_env=False,
    ) as client:
        yield client


@pytest.fixture
async def box(api: httpx.AsyncClient) -> AsyncIterator[str]:
    name = f"ct-hostile-{secrets.token_hex(4)}"
    (await api.post("/v1/sprites", json={"name": name})).raise_for_status()
    try:
        yield name
    finally:
        await api.delete(f"/v1/sprites/{name}")


async def _write(api: httpx.AsyncClient, box: str, path: str, data: bytes, **query: str) -> int:
    params = {"path": path, **query}
    response = await api.put(f"/v1/sprites/{box}/fs/write", params=params, content=data)
    return response.status_code


@pytest.fixture(autouse=True)
def no_traceback(local_sprites: LocalSprites) -> Iterator[None]:
    """Whatever the request, the server logs no traceback for it."""
    start = local_sprites.log_path.stat().st_size
    yield
    with local_sprites.log_path.open("rb") as log:
        log.seek(start)
        assert b"Traceback" not in log.read()


async def test_copy_never_writes_through_a_symlink_destination(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("host data")
    victim_dir = tmp_path / "victim-dir"
    victim_dir.mkdir()
    root = local_sprites.host_root(box)
    (root / "link-file").symlink_to(victim)
    (root / "link-dir").symlink_to(victim_dir)
    assert await _write(api, box, "/workspace/src.txt", b"sprite data") == 200
    await api.put(f"/v1/sprites/{box}/fs/write", params={"path": "/workspace/d/x"}, content=b"x")

    copied = await api.post(
        f"/v1/sprites/{box}/fs/copy",
        json={"source": "/workspace/src.txt", "dest": "/workspace/link-file"},
    )
    assert copied.status_code == 200, copied.text
    assert victim.read_text() == "host data"  # the link was replaced, not followed
    assert (root / "link-file").read_text() == "sprite data"
    assert not (root / "link-file").is_symlink()

    tree = await api.post(
        f"/v1/sprites/{box}/fs/copy",
        json={"source": "/workspace/src.txt", "dest": "/workspace/link-dir/x", "recursive": True},
    )
    assert tree.status_code in (400, 403), tree.text
    assert list(victim_dir.iterdir()) == []


async def test_writes_race_a_directory_swapped_for_a_symlink_and_never_land_outside(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = local_sprites.host_root(box)
    (root / "real").mkdir()
    swapping = True

    def swap() -> None:
        # What a sprite can do in a loop: its directory and a symlink out, in turns.
        link = root / "spot"
        while swapping:
            for make in (lambda: link.symlink_to(outside), lambda: link.mkdir()):
                try:
                    if link.is_symlink():
                        link.unlink()
                    elif link.is_dir():
                        for child in link.iterdir():
                            child.unlink()
                        link.rmdir()
                    make()
                except OSError:
                    pass

    swapper = asyncio.get_running_loop().run_in_executor(None, swap)
    answers: dict[int, int] = {}
    deadline = time.monotonic() + 60
    try:
        for i in range(3000):
            if time.monotonic() > deadline:
                break
            status = await _write(api, box, f"/workspace/spot/f{i}", b"x")
            answers[status] = answers.get(status, 0) + 1
    finally:
        swapping = False
        await swapper
    assert list(outside.iterdir()) == []  # not one write landed outside the sprite
    assert set(answers) <= {200, 400, 403, 404, 409}, answers
    assert answers.get(200, 0) > 0  # the writes that found the directory did land


async def test_service_names_never_become_host_paths(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    target = tmp_path / "planted"
    evil = quote(f"../../../../../../../../..{target}", safe="")
    put = await api.put(f"/v1/sprites/{box}/services/{evil}", json={"cmd": "true"})
    assert put.status_code == 400, put.text
    assert "invalid service name" in put.json()["error"]
    assert not await asyncio.to_thread(Path(f"{target}.log").exists)
    logs = await api.get(f"/v1/sprites/{box}/services/{quote('../../x', safe='')}/logs")
    assert logs.status_code == 400


async def test_a_service_log_planted_as_a_symlink_is_not_followed(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.log"
    victim.write_text("host log\n")
    logs = local_sprites.state_dir / "sprites" / box / "dot" / "logs" / "services"
    if not logs.parent.parent.exists():  # the per-sprite directory's layout
        pytest.fail(f"unexpected state layout under {local_sprites.state_dir}")
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "web.log").symlink_to(victim)
    await api.put(f"/v1/sprites/{box}/services/web", json={"cmd": "echo", "args": ["out"]})
    shown = await api.get(f"/v1/sprites/{box}/services/web/logs")
    assert shown.status_code == 200
    assert "host log" not in shown.text
    await asyncio.sleep(0.5)
    assert victim.read_text() == "host log\n"


async def test_a_long_legal_name_is_written_and_an_over_long_one_refused(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites
) -> None:
    name = "n" * 250
    assert await _write(api, box, f"/workspace/{name}", b"ok") == 200
    assert (local_sprites.host_root(box) / name).read_bytes() == b"ok"
    too_long = await api.put(
        f"/v1/sprites/{box}/fs/write", params={"path": "/workspace/" + "m" * 300}, content=b"x"
    )
    assert too_long.status_code == 400
    assert too_long.json()["code"] == "ENAMETOOLONG"
    listing = await api.get(
        f"/v1/sprites/{box}/fs/list", params={"path": "/workspace/" + "m" * 300}
    )
    assert listing.status_code == 400


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("4755", "set-uid"),
        ("2755", "set-gid"),
        ("7" * 40, "between"),
        ("-1", "between"),
    ],
)
async def test_dangerous_or_impossible_modes_are_refused(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites, mode: str, why: str
) -> None:
    written = await api.put(
        f"/v1/sprites/{box}/fs/write",
        params={"path": "/workspace/tool", "mode": mode},
        content=b"#!/bin/sh\n",
    )
    assert written.status_code == 400, written.text
    assert why in written.json()["error"]
    assert not (local_sprites.host_root(box) / "tool").exists()
    assert await _write(api, box, "/workspace/tool", b"#!/bin/sh\n") == 200
    changed = await api.post(
        f"/v1/sprites/{box}/fs/chmod", json={"path": "/workspace/tool", "mode": mode}
    )
    assert changed.status_code == 400, changed.text
    assert (local_sprites.host_root(box) / "tool").stat().st_mode & 0o6000 == 0


async def test_a_non_utf8_authorization_header_is_unauthorized(
    local_sprites: LocalSprites,
) -> None:
    async with httpx.AsyncClient(base_url=local_sprites.base_url, trust_env=False) as client:
        response = await client.get(
            "/v1/sprites", headers=[(b"Authorization", b"Bearer \xff\xfe\xfd")]
        )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "query",
    [
        {"cmd": "ec\x00ho"},
        {"cmd": "echo", "env": "A=b\x00c"},
        {"cmd": "echo", "dir": "/work\x00space"},
        {"cmd": "echo", "path": "/bin\x00"},
    ],
)
async def test_nul_bytes_in_exec_parameters_are_refused(
    api: httpx.AsyncClient, box: str, local_sprites: LocalSprites, query: dict[str, str]
) -> None:
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    response = await api.get(f"/v1/sprites/{box}/exec", params=query, headers=upgrade)
    assert response.status_code == 400, response.text
    assert "NUL" in response.json()["error"]


async def test_deeply_nested_json_to_the_fault_switches_is_refused(
    api: httpx.AsyncClient, local_sprites: LocalSprites
) -> None:
    body = "[" * 100_000 + "]" * 100_000
    response = await api.post(
        "/_local/faults", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
