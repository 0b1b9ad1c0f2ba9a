"""`lattice ARGS` in the test process: the console script's own function, no interpreter start.

A `lattice` process costs half a second of CPU (1-2 s of wall on a loaded machine) before it
does anything a test checks. Where the process start is not what a test is about, the test
runs `lattice_operator.cli.main` (its one-line error edge included) here instead, with the
given environment as the whole environment, the given working directory and no terminal on
stdin, for the call only. The API server answers as it does to the process; a test whose
subject is the entry point itself keeps a real process (tests/support/e2e_runs.lattice).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


def run_lattice(
    args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run([lattice, *args], env=env, cwd=cwd, capture_output=True,
    text=True)` returns, run in this process."""
    from typer.testing import CliRunner

    from lattice_operator.cli import main

    environment: dict[str, str | None] = {**dict.fromkeys(os.environ), **env}  # None: unset
    before, argv = Path.cwd(), sys.argv
    with CliRunner().isolation(env=environment) as (out, err, _):
        sys.argv = ["lattice", *args]
        os.chdir(cwd)
        try:
            main()
            code: object = 0
        except SystemExit as done:
            code = done.code
        finally:
            os.chdir(before)
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    if isinstance(code, str):  # what the interpreter does with SystemExit("message")
        stderr, code = f"{stderr}{code}\n", 1
    returncode = code if isinstance(code, int) else 0 if code is None else 1
    return subprocess.CompletedProcess(["lattice", *args], returncode, stdout, stderr)


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    """`lattice ARGS` through `main` in this process, its output taken from pytest's capture
    (unit tests: the environment and working directory as they are)."""
    from lattice_operator.cli import main

    argv = sys.argv
    sys.argv = ["lattice", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)
