"""The shell a service-mode Run runs in: the command once, then parked quietly until stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from lattice_operator.reconcilers.run.service_mode import service_definition


def test_a_parked_service_stopped_by_a_group_signal_adds_nothing_to_the_log(
    tmp_path: Path,
) -> None:
    """Stopping a service signals its process group; the parked shell's sleep dies of it,
    and sh used to report that ("Terminated") into the log the Run shows as stdout."""
    marker = tmp_path / "exit.service"  # service_definition: the exit file + .service
    done = tmp_path / "done"
    definition = service_definition(
        "s", ["sh", "-c", f"echo one; echo two; : > {done}"], str(tmp_path / "exit"), "/"
    )
    for _ in range(5):  # the report depended on which process the signal reached first
        marker.unlink(missing_ok=True)
        done.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [definition.cmd, *definition.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # parked: in its sleep
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert out == b"one\ntwo\n"
        assert proc.returncode == 0
