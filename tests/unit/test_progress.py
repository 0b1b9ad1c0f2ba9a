"""hack/progress.py: what a newcomer sees while a long set-up step runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PROGRESS = Path(__file__).resolve().parents[2] / "hack" / "progress.py"

SCRIPT = """
import sys, time
print("go: downloading x", file=sys.stderr, flush=True)
print("build-tools: building kube-apiserver", file=sys.stderr, flush=True)
time.sleep(1.5)
print("build-tools: building kubectl", file=sys.stderr, flush=True)
print("/cache/bin")
"""


def run(code: str, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(PROGRESS), "tools", *options, "--", sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_steps_are_numbered_timed_and_silence_is_reported() -> None:
    done = run(SCRIPT, "--steps", "2", "--heartbeat", "0.2")
    assert done.returncode == 0
    assert done.stdout == "/cache/bin\n"  # the script's result passes through untouched
    lines = done.stderr.splitlines()
    # Silence lines come whenever the machine is slow (even before the script's first line);
    # one must come in the step's 1.5 s of silence, and the rest keep their order.
    assert any(
        line.startswith("[tools 1/2] building kube-apiserver: still running") for line in lines
    )
    err = [line for line in lines if ": still running" not in line]
    assert err[0] == "[tools] go: downloading x"
    assert err[1] == "[tools 1/2] building kube-apiserver"
    assert re.fullmatch(r"\[tools 1/2\] building kube-apiserver: done in \d+ s", err[2]), err
    assert err[3] == "[tools 2/2] building kubectl"
    assert err[-1].startswith("[tools] done in ")


def test_a_warm_cache_prints_nothing() -> None:
    done = run("print('/cache/bin')")
    assert (done.returncode, done.stdout, done.stderr) == (0, "/cache/bin\n", "")


def test_a_failure_keeps_its_exit_code_and_says_so() -> None:
    done = run("import sys; print('boom', file=sys.stderr); sys.exit(3)")
    assert done.returncode == 3
    assert done.stderr.splitlines() == ["[tools] boom", "[tools] FAILED (exit 3) in 0 s"]
