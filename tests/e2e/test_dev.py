"""`make dev` (lattice dev) brings the whole stack up and drives the sample to completion."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_lattice_dev_drives_the_sample_agent_to_completion(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lattice_operator", "dev", "--exit", "--state-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "control plane ready" in out
    assert "the agent waits (PLAN_APPROVAL" in out
    assert "Run sample-agent Succeeded: Completed: sample agent done (success)" in out
    assert re.search(r"run\.lattice\.dev/sample-agent\s+Succeeded", out)
    # The governed path: an Intent waits for approval, is approved, and completes.
    assert "Intent gated-task is AwaitingApproval" in out
    assert "gated-task: approve recorded as" in out
    assert "Intent gated-task Succeeded" in out
    assert "AwaitingApproval → Approved" in out
    assert not (tmp_path / "cluster" / "state.json").exists(), "the stack stopped what it started"
