"""The CLI's edge: every error a command lets through becomes one line and an exit code.

Commands raise `CliError` for what they know to be the user's input; everything else that
reaches `main()` is translated here by type, so no input ever produces a traceback.
`LATTICE_DEBUG=1` shows the traceback too, for bug reports.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback

from lattice_operator.cli._format import safe
from lattice_operator.errors import LatticeError


class CliError(LatticeError):
    """A command cannot do what was asked; `message` says why in one line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def describe(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for an error that reached the CLI's edge."""
    import aiohttp

    from lattice_adapters.kube import InvalidName, KubeApiError, KubeConfigError

    if isinstance(exc, CliError):
        return str(exc), exc.exit_code
    if isinstance(exc, InvalidName):
        return str(exc), 2
    if isinstance(exc, KubeConfigError):
        return str(exc), 1
    if isinstance(exc, KubeApiError):
        return f"the API server answered {exc.status} {exc.reason}: {exc.message}", 1
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or str(exc.os_error)
        return f"cannot reach the API server at {exc.host}:{exc.port}: {reason}", 1
    if isinstance(exc, aiohttp.ClientError):
        return f"talking to the API server failed: {type(exc).__name__}: {exc}", 1
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "the API server did not answer in time", 1
    if isinstance(exc, LatticeError):
        return str(exc), 1
    if isinstance(exc, RecursionError):
        return "input nested too deeply", 2
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}", 1
    return f"unexpected error ({type(exc).__name__}): {exc}", 70


def report(exc: BaseException) -> int:
    """Print the error's line on stderr (traceback only when LATTICE_DEBUG is set)."""
    message, code = describe(exc)
    if os.environ.get("LATTICE_DEBUG"):
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(f"lattice: {safe(message)}\n")
    return code
