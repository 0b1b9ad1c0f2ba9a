"""How a command that follows something until told to stop (`lattice watch`, `lattice logs -f`)
is told: Ctrl-C (SIGINT) ends it with exit code 130, SIGTERM with 143, without a traceback.

The handlers are installed whatever the process inherited. A process started with SIGINT
ignored (a non-interactive shell's `cmd &`, a CI step, a test runner started that way) keeps it
ignored: Python installs its KeyboardInterrupt handler only when SIGINT is not ignored at
start-up, so `kill -INT` did nothing and a follower ran until it was killed (found by
`make soak`, whose runner is started with SIGINT ignored).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import typer

INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a command Ctrl-C ended."""
TERMINATED = 143
"""128 + SIGTERM."""

_Handler = Callable[[int, FrameType | None], Any] | int | None


class Terminated(BaseException):
    """SIGTERM asked the command to stop (a BaseException, as KeyboardInterrupt, so that no
    library's `except Exception` takes it for an error of its own)."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM while the first one unwinds (a stuck close) ends the process outright.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated


@contextlib.contextmanager
def until_stopped() -> Iterator[None]:
    """Run the body until it ends or SIGINT/SIGTERM arrives; then exit 130 or 143.

    What the body opened is closed on the way out (its `with` blocks, a stream's connection,
    a live view restoring the terminal) before the exit."""
    previous: dict[signal.Signals, _Handler] = {
        sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    # Python's own SIGINT handler (KeyboardInterrupt), which asyncio.run also recognises and
    # turns into cancelling its task first.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
    except Terminated:
        raise typer.Exit(TERMINATED) from None
    finally:
        for sig, handler in previous.items():
            # None: a handler installed from C, which Python cannot reinstall.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
