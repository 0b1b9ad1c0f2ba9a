"""`lattice watch` ends on Ctrl-C (SIGINT, exit 130) and SIGTERM (exit 143) in each state it
can be in, without a traceback, also when it was started with SIGINT ignored, as a
non-interactive shell's background job (and `make soak`'s runner) starts it.

Against the operator's stream server, in this process on 127.0.0.1; `lattice watch` runs as
the console script, as a user runs it."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import pytest
from aiohttp.test_utils import TestServer

from lattice_operator.stream.access import AccessCache, Identity
from lattice_operator.stream.envelope import StreamEvent, Subject
from lattice_operator.stream.hub import EventHub
from lattice_operator.stream.server import build_app
from tests.support.clock import FakeClock
from tests.support.processes import SIGINT_IGNORED

LATTICE = str(Path(sys.executable).parent / "lattice")
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
WAIT = 60.0
"""Bound on each wait for the command (a hang fails the test, a slow machine does not)."""


class Viewer:
    """The one token the stream knows, allowed to see everything."""

    async def authenticate(self, token: str) -> Identity | None:
        return Identity(user="viewer") if token == "viewer-token" else None

    async def may_get(self, who: Identity, subject: Subject) -> bool:
        return True


@dataclass
class Stream:
    hub: EventHub
    url: str
    loop: asyncio.AbstractEventLoop

    def publish(self, count: int = 1, line: str = "alpha") -> None:
        async def publish() -> None:
            for n in range(count):
                self.hub.publish(
                    StreamEvent(
                        type="run.output",
                        ts=datetime(2026, 1, 1, tzinfo=UTC),
                        trace_id="t",
                        run_id="r",
                        payload={"namespace": "ns", "name": "r", "phase": "Running",
                                 "events": n, "lines": [line]},
                        subject=Subject(namespace="ns", resource="runs", name="r"),
                    )
                )  # fmt: skip

        asyncio.run_coroutine_threadsafe(publish(), self.loop).result(WAIT)


@pytest.fixture
def stream() -> Iterator[Stream]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    hub = EventHub(buffer=100, queue=10_000)
    app = build_app(
        hub, AccessCache(Viewer(), FakeClock()), FakeClock(), keepalive=0.2, write_timeout=WAIT
    )
    server = TestServer(app, host="127.0.0.1")
    asyncio.run_coroutine_threadsafe(server.start_server(), loop).result(WAIT)
    try:
        yield Stream(hub, str(server.make_url("")).rstrip("/"), loop)
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        loop.close()


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT:.0f}s: {what}"
        time.sleep(0.05)


def start(
    stream: Stream, *, launcher: list[str], stdout: int | IO[bytes]
) -> subprocess.Popen[bytes]:
    args = [LATTICE, "watch", "--stream", stream.url, "--token", "viewer-token", "-n", "ns"]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([*launcher, *args], stdout=stdout, stderr=subprocess.PIPE, env=env)
    until(lambda: stream.hub.subscribers == 1 or proc.poll() is not None, "subscribed")
    assert proc.poll() is None, proc.communicate()
    return proc


def read_line(pipe: IO[bytes]) -> bytes:
    ready, _, _ = select.select([pipe], [], [], WAIT)
    assert ready, f"no line within {WAIT:.0f}s"
    return pipe.readline()


def writing_blocked(proc: subprocess.Popen[bytes]) -> bool:
    """The command's main thread is asleep in a write to its full stdout pipe."""
    return "pipe_write" in Path(f"/proc/{proc.pid}/wchan").read_text()


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"lattice watch ignored {sig.name}: {err.decode()}") from None
    return proc.returncode, err.decode()


STATES = ("connected, no event yet", "waiting for the next event", "blocked printing an event")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize("state", STATES)
def test_watch_ends_on_the_signal_in_each_state(
    stream: Stream, state: str, sig: signal.Signals
) -> None:
    watch = start(stream, launcher=SIGINT_IGNORED, stdout=subprocess.PIPE)
    assert watch.stdout is not None
    if state == "waiting for the next event":
        stream.publish()
        assert b"ns/r Running events=0 | alpha" in read_line(watch.stdout)
    elif state == "blocked printing an event":
        # Nobody reads its stdout: ~400 KiB of lines fill the pipe and it sleeps in a write.
        stream.publish(count=400, line="x" * 1000)
        until(lambda: writing_blocked(watch), "lattice watch blocked writing")
    code, err = stop(watch, sig)
    assert code == EXIT_CODES[sig], err
    assert "Traceback" not in err, err


def test_watch_started_as_usual_ends_on_ctrl_c_with_130(stream: Stream) -> None:
    watch = start(stream, launcher=[], stdout=subprocess.PIPE)
    assert watch.stdout is not None
    stream.publish()
    assert b"alpha" in read_line(watch.stdout)
    code, err = stop(watch, signal.SIGINT)
    assert (code, err) == (130, "")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_the_live_view_ends_on_the_signal_and_gives_the_cursor_back(
    stream: Stream, sig: signal.Signals
) -> None:
    controller, terminal = pty.openpty()
    shown = bytearray()
    try:
        watch = start(stream, launcher=SIGINT_IGNORED, stdout=terminal)
        os.close(terminal)
        terminal = -1

        def drained() -> bool:
            # The view redraws on the terminal; read it so that it never waits on a full one.
            if select.select([controller], [], [], 0.05)[0]:
                shown.extend(os.read(controller, 65536))
            return b"alpha" in shown

        stream.publish()
        until(drained, "the Run shown in the live view")
        reader = threading.Thread(target=lambda: _drain(controller, shown), daemon=True)
        reader.start()
        code, err = stop(watch, sig)
        reader.join(WAIT)
    finally:
        if terminal != -1:
            os.close(terminal)
        os.close(controller)
    assert code == EXIT_CODES[sig], err
    assert "Traceback" not in err, err
    # Rich hid the cursor for the live view; its exit shows it again, last.
    assert shown.rstrip().endswith(b"\x1b[?25h"), bytes(shown[-200:])


def _drain(controller: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the command closed its side of the terminal
            return
        if not chunk:
            return
        into.extend(chunk)
