"""The sprite protocol's hard rules, enforced by the operator rather than asked of the sprite."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.e2e_runs import lattice, session_ids
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

RESUMES_WITHOUT_ACK = agent(
    r"""
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("COMPLETED", {"status": "success", "summary": "done, no acknowledgement"})
else:
    emit("WAITING", {"reason": "QUESTION", "checkpoint_id": checkpoint("before asking"),
                     "expected_inputs": {"go": "boolean"}})
"""
)

KEEPS_WORKING_AFTER_WAITING = agent(
    r"""
emit("WAITING", {"reason": "QUESTION", "checkpoint_id": checkpoint("before asking"),
                 "expected_inputs": {"go": "boolean"}})
time.sleep(300)  # the protocol says stop; this one does not
"""
)


def setup_namespace(stack: Stack, namespace: str, name: str, program: str) -> None:
    stack.apply(namespace, build("sprite.yaml", "box", {"spec.networkPolicy": {"rules": []}}))
    stack.wait_sprite_ready(namespace, "box")
    doc = build(
        "run.yaml",
        name,
        {"spec.command": ["python3", "-c", program], "spec.spriteRef.name": "box"},
    )
    doc["spec"].pop("retries", None)
    stack.apply(namespace, doc)


def _violations(run: dict[str, Any]) -> dict[str, int]:
    return dict(run["status"]["events"].get("violationCounts") or {})


def test_rule_a_resume_is_acknowledged_first(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace, "silent", RESUMES_WITHOUT_ACK)
    stack.wait_phase(namespace, "runs", "silent", {"Waiting"})
    assert "resume_not_acknowledged" not in _violations(stack.get(namespace, "runs", "silent"))
    lattice(stack, "resume", "silent", "-n", namespace, "-i", "go=true")
    run = stack.wait_phase(namespace, "runs", "silent", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]  # recorded, not fatal
    assert _violations(run).get("resume_not_acknowledged") == 1
    [violation] = [
        v
        for v in run["status"]["events"]["violations"]
        if v["category"] == "resume_not_acknowledged"
    ]
    assert "first event was COMPLETED" in violation["reason"]


def test_rule_no_work_after_waiting(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace, "busy", KEEPS_WORKING_AFTER_WAITING)
    run = stack.wait_phase(namespace, "runs", "busy", {"Waiting", "Failed"}, timeout=90)
    status = run["status"]
    assert status["phase"] == "Waiting", status
    assert _violations(run).get("work_after_waiting") == 1
    # It was stopped, not left running in the background.
    assert status["sessionId"] not in session_ids(stack, str(status["spriteName"]))


TRUNCATES_ITS_OUTBOX = agent(
    r"""
emit("INFO", {"message": "one"})
emit("INFO", {"message": "two"})
time.sleep(2)  # the operator has read both by now
_outbox.truncate(0)  # events are append-only: this one erases them
time.sleep(2)
"""
)


def test_rule_events_are_append_only(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace, "eraser", TRUNCATES_ITS_OUTBOX)
    run = stack.wait_phase(namespace, "runs", "eraser", {"Succeeded", "Failed"})
    assert _violations(run).get("outbox_rewritten") == 1, run["status"]["events"]
    [violation] = [
        v for v in run["status"]["events"]["violations"] if v["category"] == "outbox_rewritten"
    ]
    assert "truncated behind the operator" in violation["reason"]
    assert run["status"]["events"]["eventCount"] == 2  # what was read stays counted


WRITES_ONE_EVENT_ONLY_TO_THE_OUTBOX = agent(
    r"""
emit("INFO", {"message": "on both"})
_outbox.write(envelope("INFO", {"message": "only in the outbox"}) + "\n")
_outbox.flush()
emit("COMPLETED", {"status": "success", "summary": "done"})
"""
)


def test_rule_every_event_is_printed_on_stdout_too(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace, "quiet", WRITES_ONE_EVENT_ONLY_TO_THE_OUTBOX)
    run = stack.wait_phase(namespace, "runs", "quiet", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]  # recorded, not fatal
    assert run["status"]["events"]["eventCount"] == 3  # counted once, from the outbox
    assert _violations(run) == {"outbox_only_event": 1}
    [violation] = run["status"]["events"]["violations"]
    assert violation["source"] == "outbox"
    assert "only in the outbox" in violation["excerpt"] or violation["excerpt"].endswith("…")
