"""Exec conformance: output, exit codes, signals, stdin, TTY, detach/attach, kill, sessions."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.contract_drivers import Driver
from tests.support.contract_drivers import http_status as _status

pytestmark = pytest.mark.contract


async def test_echo(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["echo", "hello sprite"])
    assert result.exit_code == 0
    assert result.stdout == b"hello sprite\n"
    assert result.stderr == b""


async def test_stderr_is_a_separate_stream(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["sh", "-c", "echo out; echo err >&2; echo out2"])
    assert result.stdout == b"out\nout2\n"
    assert result.stderr == b"err\n"


@pytest.mark.parametrize("code", [0, 1, 255])
async def test_exit_codes(driver: Driver, sprite: str, code: int) -> None:
    result = await driver.run(sprite, ["sh", "-c", f"exit {code}"])
    assert result.exit_code == code


@pytest.mark.parametrize(("signal", "code"), [("TERM", 143), ("KILL", 137), ("INT", 130)])
async def test_signal_death_is_128_plus_signal(
    driver: Driver, sprite: str, signal: str, code: int
) -> None:
    result = await driver.run(sprite, ["sh", "-c", f"kill -{signal} $$; sleep 5"])
    assert result.exit_code == code


async def test_stdin_then_eof(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["sh", "-c", "cat; echo done"], stdin=b"abc\x00\xffdef")
    assert result.exit_code == 0
    assert result.stdout == b"abc\x00\xffdefdone\n"


async def test_command_without_stdin_sees_eof(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["sh", "-c", "wc -c"])
    assert result.stdout.strip() == b"0"


async def test_tty_size_is_applied(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["stty", "size"], tty=True, rows=33, cols=101)
    assert result.exit_code == 0
    assert result.stdout.strip() == b"33 101"


async def test_env_replaces_the_default_environment(driver: Driver, sprite: str) -> None:
    result = await driver.run(
        sprite, ["/usr/bin/env"], env={"ONLY": "this", "PATH": "/usr/bin:/bin"}
    )
    lines = sorted(result.stdout.decode().splitlines())
    assert lines == ["ONLY=this", "PATH=/usr/bin:/bin"]


async def test_working_directory(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["pwd"], workdir="/tmp")
    assert result.stdout == b"/tmp\n"


async def test_missing_command_exits_127(driver: Driver, sprite: str) -> None:
    result = await driver.run(sprite, ["no-such-command-here"])
    assert result.exit_code == 127
    assert b"not found" in result.stdout + result.stderr


async def test_detach_and_reattach_replays_scrollback(driver: Driver, sprite: str) -> None:
    session_id = await driver.start_detached(
        sprite, ["sh", "-c", "echo before-detach; sleep 1.5; echo after-attach"]
    )
    output = await driver.attach_output(sprite, session_id)
    # The replay carries what was printed before the attach, then the live rest follows.
    assert output == b"before-detach\nafter-attach\n"


async def test_session_list_shape(driver: Driver, sprite: str) -> None:
    session_id = await driver.start_detached(sprite, ["sleep", "30"])
    try:
        sessions = await driver.list_sessions(sprite)
        mine = [s for s in sessions if str(s["id"]) == session_id]
        assert len(mine) == 1
        assert "sleep" in str(mine[0]["command"])
        assert mine[0]["tty"] is False
        assert isinstance(mine[0]["workdir"], str)
    finally:
        await driver.kill(sprite, session_id)


async def test_kill_ends_the_session(driver: Driver, sprite: str) -> None:
    session_id = await driver.start_detached(sprite, ["sleep", "60"])
    code = await driver.kill(sprite, session_id)
    if driver.kind == "adapter":
        assert code == 143  # SIGTERM
    for _ in range(50):
        if all(str(s["id"]) != session_id for s in await driver.list_sessions(sprite)):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("killed session still listed")


async def test_attach_to_unknown_session_is_not_found(driver: Driver, sprite: str) -> None:
    with pytest.raises(driver.errors.attach_missing) as caught:
        await driver.attach_output(sprite, "999999")
    assert _status(caught.value) == 404
