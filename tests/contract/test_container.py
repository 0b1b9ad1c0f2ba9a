"""Each sprite of the local server is a runc container: a Debian root of its own, its own
PID, IPC, UTS and mount namespaces, and a writable layer that checkpoints keep.

Local only. Each test runs commands in a sprite through the official SDK driver and checks,
from the host side too, what the sprite sees.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.contract_drivers import Driver
from tests.support.contract_target import Target, local_target
from tests.support.sprites_server import LocalSprites

pytestmark = pytest.mark.contract
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def target(local_sprites: LocalSprites) -> Target:
    return local_target(local_sprites)


async def _sh(driver: Driver, sprite: str, script: str) -> tuple[int, str]:
    result = await driver.run(sprite, ["sh", "-c", script])
    return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")


async def test_a_sprite_has_a_debian_root_of_its_own_with_the_tools_agents_expect(
    driver: Driver, sprite: str
) -> None:
    code, out = await _sh(
        driver,
        sprite,
        ". /etc/os-release; echo $ID $VERSION_CODENAME; "
        "git --version; python3 --version; curl --version | head -n1; bash --version | head -n1",
    )
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "debian bookworm"
    assert lines[1].startswith("git version ")
    assert lines[2].startswith("Python 3.11")
    assert lines[3].startswith("curl ")
    assert "GNU bash" in lines[4]


async def test_the_hosts_files_are_not_in_the_sprites_root(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    # What the sandbox isolation still showed (world-readable host files): the clone's
    # local state (kubeconfigs), the binary cache, the server's state directory.
    cache = Path(os.environ.get("LATTICE_CACHE") or Path.home() / ".cache" / "lattice-operator")
    places = [REPO / ".lattice", REPO / "hack", REPO / "Makefile", cache, local_sprites.state_dir]
    checks = "; ".join(f"test -e {p} && echo SEEN {p}" for p in places)
    code, out = await _sh(driver, sprite, f"{checks}; echo done")
    assert code == 0, out
    assert out.strip() == "done", out
    assert any(p.exists() for p in places[:3])  # they exist on the host


async def test_namespaces_of_its_own(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    kinds = ("pid", "ipc", "uts", "mnt")
    code, out = await _sh(
        driver,
        sprite,
        "hostname; cat /proc/1/cmdline | tr '\\0' ' '; echo; "
        + "; ".join(f"readlink /proc/self/ns/{k}" for k in kinds),
    )
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == sprite  # UTS: the sprite's name
    assert lines[1].startswith("/usr/bin/tini")  # PID 1 is the container's init
    inside = dict(zip(kinds, lines[2:], strict=True))
    for kind in kinds:
        assert inside[kind] != os.readlink(f"/proc/self/ns/{kind}"), kind
    described = local_sprites.describe(sprite)["container"]
    init = described["init_pid"]
    assert os.readlink(f"/proc/{init}/ns/pid") == inside["pid"]


async def test_two_sprites_do_not_share_a_namespace(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    other = f"ct-other-{secrets.token_hex(4)}"
    await driver.create_sprite(other)
    try:
        script = "readlink /proc/self/ns/pid /proc/self/ns/ipc /proc/self/ns/mnt; ps -e | wc -l"
        _, mine = await _sh(driver, sprite, script)
        _, theirs = await _sh(driver, other, script)
        assert set(mine.splitlines()[:3]).isdisjoint(theirs.splitlines()[:3])
        assert int(mine.splitlines()[3]) < 8  # header, tini, sleep, sh, ps, wc
    finally:
        await driver.delete_sprite(other)


async def test_no_capabilities(driver: Driver, sprite: str) -> None:
    code, out = await _sh(driver, sprite, "grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status")
    assert code == 0, out
    for line in out.splitlines():
        assert line.split()[1] == "0000000000000000", line


async def test_the_rest_of_the_filesystem_is_the_sprites_own_and_checkpointed(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    # Outside /workspace: the writable layer, kept across cold and in checkpoints.
    assert (await _sh(driver, sprite, "echo one > /var/tmp/layer.txt"))[0] == 0
    checkpoint = await driver.checkpoint(sprite, "with layer.txt")
    assert (await _sh(driver, sprite, "echo two > /var/tmp/layer.txt; touch /tmp/later"))[0] == 0
    local_sprites.go_cold(sprite)
    _, out = await _sh(driver, sprite, "cat /var/tmp/layer.txt")
    assert out == "two\n"  # the layer outlives the container
    await driver.restore(sprite, checkpoint)
    code, out = await _sh(driver, sprite, "cat /var/tmp/layer.txt; test -e /tmp/later; echo $?")
    assert code == 0, out
    assert out.splitlines() == ["one", "1"]


async def test_the_sprites_own_state_directory_holds_its_layer_not_the_host(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    marker = f"marker-{secrets.token_hex(4)}"
    assert (await _sh(driver, sprite, f"echo x > /var/tmp/{marker}"))[0] == 0
    layer = local_sprites.host_root(sprite).parent / "fs" / "upper" / "var" / "tmp" / marker
    assert await asyncio.to_thread(layer.is_file)
    assert not await asyncio.to_thread(Path(f"/var/tmp/{marker}").exists)


def _start(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPRITES_LOCAL_TOKEN": "t", "LATTICE_SPRITE_ROOTFS": ""}
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "lattice"),
            "sprites-local",
            "--port",
            "0",
            "--state-dir",
            str(state),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_no_root_filesystem_means_no_start(tmp_path: Path) -> None:
    done = _start("--rootfs", str(tmp_path / "nowhere"), state=tmp_path / "state")
    assert done.returncode == 2, done
    assert "make sprite-rootfs" in done.stderr
    assert "--isolation" in done.stderr  # the way out is named
    assert "Traceback" not in done.stderr


def test_no_runc_means_no_start(tmp_path: Path) -> None:
    done = _start("--runc", str(tmp_path / "no-runc"), state=tmp_path / "state")
    assert done.returncode == 2, done
    assert "runc" in done.stderr
    assert "--isolation" in done.stderr
    assert "Traceback" not in done.stderr
