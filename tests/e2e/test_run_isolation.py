"""A Run is its own: several Runs in turn on one Sprite each see exactly their own events."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

# Each Run says who it is, checks that no earlier Run's resume file is waiting for it, and
# leaves one behind for the next (as a Run resumed from a checkpoint would).
TURN = agent(
    r"""
me = os.environ["LATTICE_RUN"]
stale = os.path.exists("/workspace/.lattice/resume.json")
emit("INFO", {"message": f"{me} starting"})
if stale:
    emit("ERROR", {"code": "STALE_RESUME", "message": "found an earlier Run's resume.json",
                   "retryable": False})
    sys.exit(1)
with open("/workspace/.lattice/resume.json", "w") as f:
    json.dump({"checkpoint_id": "chk_" + me, "inputs": {}}, f)
emit("COMPLETED", {"status": "success", "summary": f"{me} done"})
"""
)


def _run(stack: Stack, namespace: str, name: str, work_item: str) -> dict[str, Any]:
    doc = build(
        "run.yaml",
        name,
        {"spec.command": ["python3", "-c", TURN], "spec.spriteRef.name": "box"},
    )
    doc["spec"].pop("retries", None)
    doc["spec"]["workItemId"] = work_item
    stack.apply(namespace, doc)
    return stack.wait_phase(namespace, "runs", name, {"Succeeded", "Failed"})


def test_runs_in_turn_on_one_sprite_see_only_their_own_events(stack: Stack, namespace: str) -> None:
    stack.apply(namespace, build("sprite.yaml", "box", {"spec.networkPolicy": {"rules": []}}))
    stack.wait_sprite_ready(namespace, "box")
    # Two Runs on the same work item: the later must not take the earlier one's COMPLETED.
    for name, work_item in (("first", "item-a"), ("second", "item-b"), ("third", "item-a")):
        run = _run(stack, namespace, name, work_item)
        status = run["status"]
        events = status["events"]
        assert status["phase"] == "Succeeded", (name, status)
        assert events["completion"]["summary"] == f"{name} done", (name, events)
        assert events["eventCount"] == 2, (name, events)
        assert events.get("violationCount", 0) == 0, (name, events.get("violations"))
        assert status["cursor"]["lineCount"] == 2, (name, status["cursor"])
