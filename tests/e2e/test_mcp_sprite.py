"""A Run whose agent speaks only through `lattice mcp --sprite`: waits, resumes, completes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.admission_cases import sample
from tests.support.e2e_runs import lattice, ready_sprite
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
LATTICE = Path(sys.executable).parent / "lattice"


def test_sample_mcp_agent_completes_without_violations(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace, "sample")
    doc = sample("agent-mcp-run.yaml")
    doc["spec"]["env"] = [{"name": "LATTICE_BIN", "value": str(LATTICE)}]
    stack.apply(namespace, doc)
    run = stack.wait_phase(namespace, "runs", "sample-mcp-agent", {"Waiting", "Failed"})
    status = run["status"]
    assert status["phase"] == "Waiting", status
    waiting = status["events"]["waiting"]
    assert waiting["expectedInputs"] == {"approved": "boolean", "comments": "array<string>"}
    assert waiting["checkpointId"] == status["resume"]["checkpointId"]

    lattice(
        stack,
        "resume",
        "sample-mcp-agent",
        "-n",
        namespace,
        "-i",
        "approved=true",
        "-i",
        'comments=["ok"]',
    )
    run = stack.wait_phase(namespace, "runs", "sample-mcp-agent", {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    events = status["events"]
    assert events["completion"]["status"] == "success"
    assert events.get("violationCount", 0) == 0, events.get("violations")
    assert not events.get("violations")
    for event_type in (
        "info",
        "phaseStarted",
        "phaseFinished",
        "actionRequest",
        "artifact",
        "waiting",
        "completed",
        "error",
        "environmentProposal",
    ):
        assert events["counts"][event_type] >= 1, event_type
