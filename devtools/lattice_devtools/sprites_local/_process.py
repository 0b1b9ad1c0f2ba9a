"""Asyncio plumbing for processes started outside asyncio's subprocess machinery.

The launcher forks with a child-setup hook, which asyncio's subprocess API cannot take
together with its own pipes for PTYs; these helpers attach the pipes and the exit to the
running loop: reads through `StreamReader`s, writes with flow control, exit through a pidfd
(no watcher threads).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from typing import IO, Any


def exit_status(returncode: int) -> int:
    """Shell-style status 0-255: 128+n for death by signal n, out-of-range clamped to 255."""
    if returncode < 0:
        return min(128 - returncode, 255)
    return returncode if returncode <= 255 else 255


async def reader_for(
    pipe: IO[bytes], *, limit: int = 1 << 20
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """A StreamReader fed from `pipe` (a pipe or PTY master); the transport owns the file."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return reader, transport


class _WriteProtocol(asyncio.BaseProtocol):
    def __init__(self) -> None:
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.lost = False

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._can_write.set()

    async def drain(self) -> None:
        await self._can_write.wait()


class PipeWriter:
    """Writes to a process's stdin (pipe or PTY master) without blocking the loop."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: _WriteProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    @classmethod
    async def open(cls, pipe: IO[bytes]) -> PipeWriter:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(_WriteProtocol, pipe)
        return cls(transport, protocol)

    @property
    def closed(self) -> bool:
        return self._protocol.lost or self._transport.is_closing()

    async def write(self, data: bytes) -> None:
        """Write and wait for room; a process that stopped reading just loses the data."""
        if self.closed:
            return
        self._transport.write(data)
        await self._protocol.drain()

    def close(self) -> None:
        if not self._transport.is_closing():
            self._transport.close()


class ExitWatch:
    """Resolves when the process exits, via a pidfd on the loop; reaps it."""

    def __init__(self, proc: subprocess.Popen[Any]) -> None:
        self._proc = proc
        self._loop = asyncio.get_running_loop()
        self.done = asyncio.Event()
        self._fd = os.pidfd_open(proc.pid)
        self._loop.add_reader(self._fd, self._ready)

    def _ready(self) -> None:
        if self._proc.poll() is None:
            return
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1
        self.done.set()

    def close(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal a process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


__all__ = ["ExitWatch", "PipeWriter", "exit_status", "kill_group", "reader_for"]
