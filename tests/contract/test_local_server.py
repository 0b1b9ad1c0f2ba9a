"""What only the local server can show: real processes, isolation, confinement, status.

Local only (these look at host processes and directories), so no `real` variant exists.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1 import SpriteService
from lattice_operator.ports import errors
from tests.support.contract_drivers import Driver
from tests.support.contract_target import Target, local_target
from tests.support.processes import alive, host_pids
from tests.support.sprites_server import LocalSprites, sprites_server

pytestmark = pytest.mark.contract


@pytest.fixture
def target(local_sprites: LocalSprites) -> Target:
    return local_target(local_sprites)


async def _wait_dead(pids: list[int], within: float = 10.0) -> None:
    for _ in range(int(within / 0.05)):
        if not any(alive(p) for p in pids):
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"still alive: {[p for p in pids if alive(p)]}")


async def test_new_sprite_is_cold_and_runs_while_used(driver: Driver) -> None:
    name = f"ct-status-{secrets.token_hex(4)}"
    assert (await driver.create_sprite(name)).status == "cold"
    try:
        await driver.run(name, ["true"])
        assert (await driver.get_sprite(name)).status == "running"
    finally:
        await driver.delete_sprite(name)


async def test_processes_see_their_directory_as_workspace(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    await asyncio.to_thread(
        (local_sprites.host_root(sprite) / "from-host.txt").write_text, "host side"
    )
    result = await driver.run(
        sprite, ["sh", "-c", "pwd; cat /workspace/from-host.txt; echo made > /workspace/made.txt"]
    )
    assert result.stdout == b"/workspace\nhost side"
    assert (local_sprites.host_root(sprite) / "made.txt").read_text() == "made\n"
    # The host's mount point stays an empty directory.
    assert os.listdir("/workspace") == []


async def test_sprites_do_not_see_each_other(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    other = f"ct-other-{secrets.token_hex(4)}"
    await driver.create_sprite(other)
    try:
        await driver.run(other, ["sh", "-c", "echo secret > /workspace/mine.txt"])
        result = await driver.run(sprite, ["ls", "-A", "/workspace"])
        assert b"mine.txt" not in result.stdout
    finally:
        await driver.delete_sprite(other)


async def test_delete_kills_the_whole_process_group(target: Target) -> None:
    name = f"ct-group-{secrets.token_hex(4)}"
    async with SpritesAdapter(target.credentials) as adapter:
        await adapter.create_sprite(name)
        session = await adapter.exec(
            name,
            ["sh", "-c", "sleep 300 & echo $!; sleep 300 & echo $!; echo $$; wait"],
            max_run_after_disconnect=0,
        )
        output = b""
        while output.count(b"\n") < 3:
            output += (await session.__anext__()).data
        assert target.local is not None
        pids = host_pids(target.local.describe(name), [int(p) for p in output.split()])
        await session.detach()
        assert all(alive(p) for p in pids)
        await adapter.delete_sprite(name)
        await _wait_dead(pids)


async def test_max_run_after_disconnect(target: Target, sprite: str) -> None:
    async with SpritesAdapter(target.credentials) as adapter:
        short = await adapter.exec(sprite, ["sleep", "60"], max_run_after_disconnect=0.3)
        forever = await adapter.exec(sprite, ["sleep", "60"], max_run_after_disconnect=0)
        await short.detach()
        await forever.detach()
        # Until the short one is reaped (0.3 s after the detach), not a fixed 1.5 s.
        for _ in range(100):  # 10 s at most
            ids = [s.id for s in await adapter.list_sessions(sprite)]
            if short.session_id not in ids:
                break
            await asyncio.sleep(0.1)
        assert short.session_id not in ids
        assert forever.session_id in ids  # detached as long, and kept
        await adapter.kill_session(sprite, forever.session_id, signal="KILL", grace=5)


async def test_session_ids_are_never_reused(target: Target, sprite: str) -> None:
    async with SpritesAdapter(target.credentials) as adapter:
        ids = set()
        for _ in range(5):
            session = await adapter.exec(sprite, ["true"])
            await session.wait()
            ids.add(session.session_id)
        assert len(ids) == 5


async def test_in_band_signal_and_resize(target: Target, sprite: str) -> None:
    async with SpritesAdapter(target.credentials) as adapter:
        session = await adapter.exec(
            sprite, ["sh", "-c", "read x; stty size; sleep 60"], tty=True, rows=24, cols=80
        )
        await session.resize(120, 40)
        await session.write_stdin(b"go\r")
        output = b""
        while b"40 120" not in output:
            output += (await session.__anext__()).data
        await session.signal("TERM")
        assert await session.wait() == 143


async def test_checkpoint_from_inside_the_sprite(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    result = await driver.run(
        sprite, ["sh", "-c", "echo state > /workspace/s.txt; sprite-checkpoint --comment waiting"]
    )
    assert result.exit_code == 0, result.stderr
    checkpoint_id = result.stdout.decode().strip()
    assert checkpoint_id.startswith("v")
    assert checkpoint_id in await driver.list_checkpoints(sprite)
    await driver.run(sprite, ["sh", "-c", "echo changed > /workspace/s.txt"])
    await driver.restore(sprite, checkpoint_id)
    assert await driver.read(sprite, "/workspace/s.txt") == b"state\n"


CHURN = """
import os, time
for i in range(300):
    open("/workspace/keep%d" % i, "w").write("x" * 100)
open("/workspace/churning", "w").close()
end = time.monotonic() + 60
while time.monotonic() < end and not os.path.exists("/workspace/stop"):
    for i in range(50):
        path = "/workspace/tmp%d" % i
        open(path, "w").write("y" * 1000)
        os.unlink(path)
"""


async def test_a_checkpoint_taken_while_files_come_and_go_succeeds(
    driver: Driver, sprite: str
) -> None:
    """What a WAITING agent meets: the operator's git bundles the branch in the same sprite
    while the agent checkpoints, and git's temporary files vanish under the copy."""
    churn = asyncio.create_task(driver.run(sprite, ["python3", "-c", CHURN]))
    try:
        for _ in range(200):
            if (await driver.run(sprite, ["test", "-e", "/workspace/churning"])).exit_code == 0:
                break
            await asyncio.sleep(0.05)
        result = await driver.run(
            sprite,
            ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sprite-checkpoint -m c$i || exit 1; done"],
        )
        assert result.exit_code == 0, result.stderr
        assert len(result.stdout.decode().split()) == 8
    finally:
        await driver.run(sprite, ["touch", "/workspace/stop"])
        assert (await churn).exit_code == 0
    # The files that stayed are in the snapshot.
    newest = (await driver.list_checkpoints(sprite))[0]
    await driver.run(sprite, ["rm", "/workspace/keep7"])
    await driver.restore(sprite, newest)
    assert await driver.read(sprite, "/workspace/keep7") == b"x" * 100


async def test_in_sprite_tasks_api_holds_the_sprite(driver: Driver, sprite: str) -> None:
    result = await driver.run(
        sprite,
        [
            "curl",
            "-s",
            "--unix-socket",
            "/.sprite/api.sock",
            "-X",
            "PUT",
            "-d",
            '{"expire":"5m"}',
            "http://sprite/v1/tasks/agent",
        ],
    )
    assert result.exit_code == 0
    listed = await driver.run(
        sprite, ["curl", "-s", "--unix-socket", "/.sprite/api.sock", "http://sprite/v1/tasks"]
    )
    assert b'"name": "agent"' in listed.stdout or b'"name":"agent"' in listed.stdout


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "/workspace/../etc/passwd", "relative/../../etc/passwd", "/.sprite/api.sock"],
)
async def test_paths_outside_the_sprite_are_refused(driver: Driver, sprite: str, path: str) -> None:
    with pytest.raises(driver.errors.refused_path):
        await driver.read(sprite, path)
    with pytest.raises(driver.errors.refused_path):
        await driver.write(sprite, path, b"x")


async def test_symlink_escapes_are_refused(driver: Driver, sprite: str) -> None:
    await driver.run(
        sprite,
        [
            "sh",
            "-c",
            "mkdir -p /workspace/d && echo inside > /workspace/d/real.txt"
            " && ln -s /etc /workspace/etc-link && ln -s ../../.. /workspace/d/up"
            " && ln -s /workspace/d/real.txt /workspace/alias",
        ],
    )
    for path in ("/workspace/etc-link/passwd", "/workspace/d/up/etc/passwd"):
        with pytest.raises(driver.errors.refused_path):
            await driver.read(sprite, path)
        with pytest.raises(driver.errors.refused_path):
            await driver.write(sprite, path, b"x")
    # A link that stays inside, even written as an absolute sprite path, is followed.
    assert await driver.read(sprite, "/workspace/alias") == b"inside\n"


async def test_token_never_appears_in_logs_errors_or_repr(
    target: Target, sprite: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = target.credentials.token.get_secret_value()
    caplog.set_level(logging.DEBUG)
    async with SpritesAdapter(target.credentials) as adapter:
        session = await adapter.exec(sprite, ["echo", "x"])
        await session.wait()
        with pytest.raises(errors.NotFound) as missing:
            await adapter.read_file(sprite, "/workspace/none.txt")
        texts = [repr(adapter), repr(target.credentials), str(missing.value), repr(session)]
    assert caplog.records, "expected debug logs from httpx/websockets"
    assert token not in caplog.text
    assert all(token not in text for text in texts)


@pytest.fixture(scope="module")
def quick_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSprites]:
    """A server whose sprites turn warm after 0.4 s and cold after 1.2 s of idleness."""
    with sprites_server(tmp_path_factory.mktemp("quick"), warm_after=0.4, cold_after=1.2) as server:
        yield server


async def test_status_goes_warm_then_cold_and_wakes(quick_server: LocalSprites) -> None:
    async with SpritesAdapter(quick_server.credentials) as adapter:
        name = f"ct-idle-{secrets.token_hex(4)}"
        await adapter.create_sprite(name)
        try:
            await adapter.write_file(name, "/workspace/kept.txt", b"kept")
            events = await adapter.put_service(name, _service("idler", "sleep", ["600"]))
            assert events[0].type == "started"
            service_pid = quick_server.describe(name)["services"]["idler"]
            assert service_pid
            assert alive(service_pid)

            session = await adapter.exec(name, ["sleep", "1.5"])
            await asyncio.sleep(0.8)  # longer than warm_after, but something runs
            assert (await adapter.get_sprite(name)).status == "running"
            assert await session.wait() == 0

            statuses = await _watch_status(adapter, name, until="cold", within=10)
            assert "warm" in statuses
            # Cold: processes killed, files kept.
            await _wait_dead([service_pid])
            assert (quick_server.host_root(name) / "kept.txt").read_bytes() == b"kept"

            # The next use wakes it, and the service comes back.
            session = await adapter.exec(name, ["cat", "/workspace/kept.txt"])
            output = b"".join([c.data async for c in session])
            assert output == b"kept"
            assert (await adapter.get_sprite(name)).status == "running"
            restarted = quick_server.describe(name)["services"]["idler"]
            assert restarted
            assert restarted != service_pid
            assert alive(restarted)
        finally:
            await adapter.delete_sprite(name)


async def test_a_request_within_cold_after_keeps_a_sprite_from_going_cold(
    quick_server: LocalSprites,
) -> None:
    """What spec.keepWarm relies on: a request forwarded to the sprite (its session list)
    wakes it, so one sent more often than the cold time keeps it from cold: its service
    process lives on; without them it goes cold."""
    async with SpritesAdapter(quick_server.credentials) as adapter:
        name = f"ct-keep-{secrets.token_hex(4)}"
        await adapter.create_sprite(name)
        try:
            await adapter.put_service(name, _service("idler", "sleep", ["600"]))
            service_pid = quick_server.describe(name)["services"]["idler"]
            seen: set[str] = set()
            for _ in range(6):  # 3.6 s: three times cold_after
                await adapter.list_sessions(name)
                await asyncio.sleep(0.6)  # longer than warm_after, shorter than cold_after
                seen.add((await adapter.get_sprite(name)).status)
            assert "cold" not in seen
            assert "warm" in seen  # it did idle between the requests
            assert quick_server.describe(name)["services"]["idler"] == service_pid
            assert alive(service_pid)
            statuses = await _watch_status(adapter, name, until="cold", within=10)
            assert statuses[-1] == "cold"
            await _wait_dead([service_pid])
        finally:
            await adapter.delete_sprite(name)


def _service(name: str, cmd: str, args: list[str]) -> SpriteService:
    return SpriteService(name=name, cmd=cmd, args=args)


async def _watch_status(
    adapter: SpritesAdapter, name: str, *, until: str, within: float
) -> list[str]:
    seen: list[str] = []
    for _ in range(int(within / 0.1)):
        status = (await adapter.list_sprites(prefix=name)).sprites[0].status
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == until:
            return seen
        await asyncio.sleep(0.1)
    pytest.fail(f"status never became {until}: {seen}")


def test_host_mount_points_exist_and_are_empty(local_sprites: LocalSprites) -> None:
    for point in ("/workspace", "/.sprite"):
        assert Path(point).is_dir()
        assert os.listdir(point) == []


async def test_restart_keeps_sprites_and_files_and_never_reuses_session_ids(
    tmp_path: Path,
) -> None:
    with sprites_server(tmp_path, keep_state=True) as server:
        async with SpritesAdapter(server.credentials) as adapter:
            await adapter.create_sprite("keeper")
            await adapter.write_file("keeper", "/workspace/notes.txt", b"remember me")
            session = await adapter.exec("keeper", ["true"])
            await session.wait()
            first_id = int(session.session_id)
    with sprites_server(tmp_path) as server:
        async with SpritesAdapter(server.credentials) as adapter:
            assert (await adapter.get_sprite("keeper")).status == "cold"
            assert await adapter.read_file("keeper", "/workspace/notes.txt") == b"remember me"
            assert [c.id for c in await adapter.list_checkpoints("keeper")] == ["v0"]
            session = await adapter.exec("keeper", ["true"])
            await session.wait()
            assert int(session.session_id) > first_id


async def test_the_checkpoint_the_files_are_on_is_not_deleted(target: Target, sprite: str) -> None:
    """The backend keeps the checkpoint last taken or restored: the adapter's Conflict, which
    lets a SpriteCheckpoint go without its backend checkpoint instead of holding it for ever."""
    async with SpritesAdapter(target.credentials) as adapter:
        older = await adapter.create_checkpoint(sprite, "older")
        newer = await adapter.create_checkpoint(sprite, "newer")
        with pytest.raises(errors.Conflict):
            await adapter.delete_checkpoint(sprite, newer.id)
        await adapter.restore_checkpoint(sprite, older.id)
        with pytest.raises(errors.Conflict):
            await adapter.delete_checkpoint(sprite, older.id)
        await adapter.delete_checkpoint(sprite, newer.id)  # no longer the one it is on
        assert newer.id not in [c.id for c in await adapter.list_checkpoints(sprite)]
        with pytest.raises(errors.NotFound):
            await adapter.delete_checkpoint(sprite, newer.id)
