"""From inside a sprite of the local server: the host, the server and other sprites are out
of reach, limits hold, and nothing a sprite starts outlives it.

Local only (the real service's sprites are VMs). Each test runs commands in a sprite through
the official SDK driver and checks from the host side what they could and could not do.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.contract_drivers import Driver, SdkDriver
from tests.support.contract_target import Target, local_target
from tests.support.processes import alive, host_pids
from tests.support.sprites_server import LocalSprites, sprites_server

pytestmark = pytest.mark.contract


@pytest.fixture
def target(local_sprites: LocalSprites) -> Target:
    return local_target(local_sprites)


async def _sh(driver: Driver, sprite: str, script: str) -> tuple[int, str]:
    result = await driver.run(sprite, ["sh", "-c", script])
    return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")


async def test_a_sprite_runs_as_its_own_unprivileged_user(driver: Driver, sprite: str) -> None:
    code, out = await _sh(driver, sprite, "id -u; grep NoNewPrivs /proc/self/status")
    assert code == 0, out
    uid, privs = out.split("\n", 1)
    assert int(uid) >= 200_000
    assert privs.split() == ["NoNewPrivs:", "1"]  # set-uid programs give nothing back


async def test_host_processes_and_the_servers_token_are_out_of_sight(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    server = local_sprites.process.pid
    _, listed = await _sh(driver, sprite, "ls /proc | grep -cE '^[0-9]+$'")
    assert int(listed) < 10, listed  # its own few processes, not the host's hundreds
    code, out = await _sh(driver, sprite, f"cat /proc/{server}/cmdline")
    assert code != 0
    assert "No such file" in out
    # Every argument and environment value of every process it can see, hashed: the token
    # itself never appears in the probe's own command line.
    probe = (
        "import glob, hashlib, sys\n"
        "seen = set()\n"
        "for path in glob.glob('/proc/[0-9]*/cmdline') + glob.glob('/proc/[0-9]*/environ'):\n"
        "    try: items = open(path, 'rb').read().split(b'\\0')\n"
        "    except OSError: continue\n"
        "    for item in items:\n"
        "        for part in (item, item.partition(b'=')[2], item.rpartition(b' ')[2]):\n"
        "            seen.add(hashlib.sha256(part).hexdigest())\n"
        "print(sys.argv[1] in seen)\n"
    )
    digest = hashlib.sha256(local_sprites.token.encode()).hexdigest()
    result = await driver.run(sprite, ["python3", "-c", probe, digest])
    found = result.stdout.decode()
    assert found.strip() == "False"  # the token appears in nothing the sprite can read


async def test_another_sprites_files_and_the_hosts_private_files_are_unreachable(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    other = f"ct-other-{secrets.token_hex(4)}"
    await driver.create_sprite(other)
    try:
        marker = f"marker-{secrets.token_hex(6)}"
        assert (await _sh(driver, other, f"echo hidden > /workspace/{marker}"))[0] == 0
        other_file = local_sprites.host_root(other) / marker
        assert await asyncio.to_thread(other_file.exists)
        _, out = await _sh(
            driver,
            sprite,
            f"cat {other_file}; ls {local_sprites.state_dir}; "
            f"timeout 60 find / -xdev -name {marker} 2>/dev/null",
        )
        assert "hidden" not in out
        assert str(other_file) not in out.replace(f"cat: {other_file}", "")  # find did not
        # The state directory is out of sight (under the host's /tmp here) or closed.
        assert out.count("No such file") + out.count("Permission denied") == 2, out
        _, homes = await _sh(driver, sprite, "ls -A /home; ls -A /root/.cache /root/.kube")
        # The host's homes are empty here (only the Python shared to run `lattice` shows).
        assert homes.count("No such file") == 2, homes
        assert "lattice-operator" not in homes
    finally:
        await driver.delete_sprite(other)


async def test_a_sprite_cannot_signal_processes_outside_itself(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    server = local_sprites.process.pid
    _, out = await _sh(driver, sprite, f"kill -9 {server} 1; echo tried $?")
    assert "tried 1" in out or "tried 2" in out, out
    assert alive(server)
    assert (await driver.run(sprite, ["true"])).exit_code == 0


async def test_a_process_that_left_its_session_does_not_outlive_its_sprite(
    driver: Driver, local_sprites: LocalSprites
) -> None:
    name = f"ct-setsid-{secrets.token_hex(4)}"
    await driver.create_sprite(name)
    _, out = await _sh(driver, name, "setsid sleep 300 < /dev/null > /dev/null 2>&1 & echo $!")
    (pid,) = host_pids(local_sprites.describe(name), [int(out.strip())])
    assert alive(pid)
    await driver.delete_sprite(name)
    for _ in range(100):
        if not alive(pid):
            break
        await asyncio.sleep(0.05)
    assert not alive(pid)


# -- a server of the test's own: small limits, and one to kill ----------------------------


@pytest.fixture
def tight(tmp_path: Path) -> Iterator[LocalSprites]:
    args = ["--sprite-pids", "64", "--sprite-memory", "96", "--sprite-cpus", "0.5"]
    with sprites_server(tmp_path / "tight", extra=args) as server:
        yield server


@pytest.fixture
async def tight_driver(tight: LocalSprites) -> AsyncIterator[Driver]:
    driver = SdkDriver(tight.credentials)
    try:
        yield driver
    finally:
        await driver.aclose()


FORK_BOMB = """
import os, sys, time
made = 0
for _ in range(300):              # bounded: at most 300 children, each gone in 20 s
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    made += 1
print(made, flush=True)
"""

MEMORY_HOG = """
chunks = []
for _ in range(64):               # bounded: 512 MiB at most
    chunks.append(bytearray(8 * 1024 * 1024))
print("survived", flush=True)
"""


async def test_a_fork_bomb_stops_at_the_limit_and_others_are_served(
    tight: LocalSprites, tight_driver: Driver
) -> None:
    bomb, calm = f"ct-bomb-{secrets.token_hex(3)}", f"ct-calm-{secrets.token_hex(3)}"
    await tight_driver.create_sprite(bomb)
    await tight_driver.create_sprite(calm)
    try:
        result = await tight_driver.run(bomb, ["python3", "-c", FORK_BOMB])
        made = int(result.stdout.decode().strip() or "0")
        assert 0 < made < 64, result
        started = time.monotonic()
        assert (await tight_driver.run(calm, ["echo", "fine"])).stdout == b"fine\n"
        assert time.monotonic() - started < 30
    finally:
        await tight_driver.delete_sprite(bomb)
        await tight_driver.delete_sprite(calm)


async def test_a_memory_hog_is_killed_inside_its_sprite(
    tight: LocalSprites, tight_driver: Driver
) -> None:
    name = f"ct-hog-{secrets.token_hex(3)}"
    await tight_driver.create_sprite(name)
    try:
        result = await tight_driver.run(name, ["python3", "-c", MEMORY_HOG])
        assert b"survived" not in result.stdout
        assert result.exit_code == 128 + signal.SIGKILL, result
        assert (await tight_driver.run(name, ["echo", "after"])).stdout == b"after\n"
        assert tight.process.poll() is None
    finally:
        await tight_driver.delete_sprite(name)


async def test_grandchildren_die_with_a_killed_server_and_the_workspace_survives(
    tmp_path: Path,
) -> None:
    with sprites_server(tmp_path / "victim", keep_state=True) as server:
        driver = SdkDriver(server.credentials)
        try:
            name = f"ct-orphan-{secrets.token_hex(3)}"
            await driver.create_sprite(name)
            _, out = await _sh(
                driver,
                name,
                "echo kept > /workspace/kept.txt; "
                "(setsid sleep 300 < /dev/null > /dev/null 2>&1 & echo $!); "
                "(sleep 300 < /dev/null > /dev/null 2>&1 & echo $!)",
            )
            pids = host_pids(server.describe(name), [int(p) for p in out.split()])
            assert all(alive(p) for p in pids)
            os.kill(server.process.pid, signal.SIGKILL)  # no chance to clean up itself
            server.process.wait()
            for _ in range(150):
                if not any(alive(p) for p in pids):
                    break
                await asyncio.sleep(0.1)
            assert not any(alive(p) for p in pids)  # the reaper killed them
        finally:
            await driver.aclose()
    with sprites_server(tmp_path / "victim") as again:
        driver = SdkDriver(again.credentials)
        try:
            assert await driver.read(name, "/workspace/kept.txt") == b"kept\n"
            # The reaper stopped forks while it killed; the next server opens them again.
            code, out = await _sh(driver, name, "sh -c 'echo forked' & wait")
            assert (code, out) == (0, "forked\n")
        finally:
            await driver.aclose()
