"""Sampling profiles of a running process with py-spy (pinned in the dev extras), for the
benchmarks: `record` samples while the block runs, then `summary` says where the CPU went,
by function, from py-spy's collapsed ("raw") stacks."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _pyspy() -> str:
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if found is None:
        raise RuntimeError("py-spy is not installed: make venv installs the dev extras")
    return found


@contextlib.contextmanager
def record(pid: int, output: Path, rate: int = 200) -> Iterator[None]:
    """py-spy samples `pid` (every thread, CPU only: idle frames are left out) into `output`
    as collapsed stacks until the block ends."""
    argv = [_pyspy(), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw"]
    proc = subprocess.Popen(
        [*argv, "--nonblocking", "--output", str(output)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes the file on SIGINT
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _frame_name(frame: str) -> str:
    # "function (path/to/file.py:123)" → "function (file.py)"
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    return f"{name} ({'/'.join(Path(file).parts[-2:])})" if file else name


def summary(collapsed: Path, top: int = 25) -> dict[str, Any]:
    """Samples in all; the functions most often on the stack (inclusive) and at its top (self),
    each as a share of all samples."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    if not collapsed.exists():
        return {"samples": 0, "note": f"{collapsed} was not written"}
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count

    def share(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "share": round(n / total, 3)} for name, n in counter.most_common(top)
        ]

    return {"samples": total, "inclusive": share(inclusive), "self": share(own)}


__all__ = ["record", "summary"]
