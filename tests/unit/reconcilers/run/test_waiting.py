"""WAITING → checkpoint → resume, as the Run driver does it today (characterisation)."""

from __future__ import annotations

import asyncio
import json

from lattice_operator.lifeloop.vocabulary import LifecycleEvent
from lattice_operator.ports.errors import TransportError
from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness

RESUME = "/workspace/.lattice/resume.json"


def _waits(
    h: Harness, *, own_checkpoint: bool = True, inputs: dict[str, str] | None = None
) -> None:
    """`agent` checkpoints and WAITs; the continuation reads resume.json and completes."""

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        if p.env["LATTICE_SESSION"] == "1":
            p.event("INFO", {"message": "need a decision"})
            checkpoint = h.backend.take_checkpoint(p.sprite) if own_checkpoint else "chk_gone"
            p.event(
                "WAITING",
                {
                    "reason": "PLAN_REVIEW",
                    "checkpoint_id": checkpoint,
                    "expected_inputs": inputs if inputs is not None else {"approved": "boolean"},
                },
            )
            return
        resume = json.loads(h.backend.read(p.sprite, RESUME) or b"{}")
        p.event("INFO", {"message": f"resumed with {json.dumps(resume['inputs'])}"})
        p.event("COMPLETED", {"status": "success", "summary": "after resume"})


async def test_waiting_then_resume_then_completed(harness: Harness) -> None:
    _waits(harness)
    harness.start()
    await harness.until_phase("Waiting")
    status = harness.status
    assert status["resume"]["checkpointId"] == "v1"
    assert status["resume"]["synthesized"] is False
    assert status["events"]["waiting"]["reason"] == "PLAN_REVIEW"
    assert status["attempts"][-1]["outcome"] == "Waiting"

    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": True}})
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert harness.condition()["message"] == "after resume"
    assert status["sessionSegment"] == 2
    assert status["resume"]["count"] == 1
    assert status["resume"]["appliedDigest"] == status["resume"]["requestedDigest"]
    assert [c.args[1] for c in harness.backend.called("restore_checkpoint")] == ["v1"]
    # resume.json, as the protocol says; the continuation saw its inputs.
    payload = json.loads(harness.backend.read(BACKEND_SPRITE, RESUME) or b"")
    assert payload["checkpoint_id"] == "v1"
    assert payload["inputs"] == {"approved": True}
    assert payload["context"] == {"run": "job", "session": 2}
    assert status["events"]["recent"][-2]["summary"] == 'resumed with {"approved": true}'
    # One attempt: a resume continues the attempt that reached WAITING.
    [attempt] = status["attempts"]
    assert attempt["outcome"] == "Succeeded"
    events = [r.event for r in harness.publisher.posted]
    assert events.count(LifecycleEvent.SESSION_STARTED) == 2


async def test_a_resume_with_wrong_inputs_is_refused_and_the_run_keeps_waiting(
    harness: Harness,
) -> None:
    _waits(harness)
    harness.start()
    await harness.until_phase("Waiting")
    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": "yes"}})
    await harness.until(lambda: (harness.status.get("resume") or {}).get("refusedDigest"))
    assert harness.phase == "Waiting"
    assert "approved" in harness.status["resume"]["message"]
    assert harness.status["resume"]["message"].startswith("resume refused: ")
    assert len(harness.backend.called("exec")) == 1

    harness.edit_spec(resume={"checkpointId": "v9", "inputs": {"approved": True}})
    await harness.until(lambda: "not the one" in (harness.status["resume"].get("message") or ""))
    assert harness.phase == "Waiting"

    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": False}})
    await harness.finished()
    assert harness.phase == "Succeeded"


async def test_a_missing_checkpoint_is_synthesized_and_reported(harness: Harness) -> None:
    _waits(harness, own_checkpoint=False)
    harness.start()
    await harness.until_phase("Waiting")
    status = harness.status
    assert status["resume"] == status["resume"] | {"checkpointId": "v1", "synthesized": True}
    assert [v["category"] for v in status["events"]["violations"]] == ["checkpoint_missing"]
    assert harness.backend.called("create_checkpoint")
    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": True}})
    await harness.finished()
    assert harness.phase == "Succeeded"


async def test_checkpoint_listing_failure_is_not_the_sprites_fault(harness: Harness) -> None:
    _waits(harness)
    harness.backend.fail("list_checkpoints", TransportError("down"))
    harness.start()
    await harness.until_phase("Waiting")
    assert harness.status["resume"]["synthesized"] is True
    assert harness.status["events"]["violations"] == []


async def test_work_after_waiting_is_stopped_and_recorded(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        checkpoint = harness.backend.take_checkpoint(p.sprite)
        p.event("WAITING", {"reason": "R", "checkpoint_id": checkpoint})
        await asyncio.Event().wait()  # goes on working

    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("waiting"))
    assert harness.phase == "Running"
    harness.clock.advance(31)
    await harness.until_phase("Waiting")
    categories = [v["category"] for v in harness.status["events"]["violations"]]
    assert categories == ["work_after_waiting"]
    assert harness.backend.called("kill_session")


async def test_a_resumed_session_must_acknowledge_with_info(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        if p.env["LATTICE_SESSION"] == "1":
            checkpoint = harness.backend.take_checkpoint(p.sprite)
            p.event("WAITING", {"reason": "R", "checkpoint_id": checkpoint})
            return
        p.event("COMPLETED", {"status": "success"})  # no INFO first

    harness.start()
    await harness.until_phase("Waiting")
    harness.edit_spec(resume={"checkpointId": "v1"})
    status = await harness.finished()
    categories = [v["category"] for v in status["events"]["violations"]]
    assert categories == ["resume_not_acknowledged"]


async def test_the_continuation_command_runs_on_resume(harness: Harness) -> None:
    harness.doc["spec"]["continuationCommand"] = ["carry-on", "x"]
    _waits(harness)
    seen: list[list[str]] = []

    @harness.backend.program("carry-on")
    async def carry_on(p: FakeProcess) -> None:
        seen.append(p.argv)
        p.event("INFO", {"message": "continuing"})
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    await harness.until_phase("Waiting")
    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": True}})
    await harness.finished()
    assert seen == [["carry-on", "x"]]
    assert harness.phase == "Succeeded"


async def test_a_failed_restore_fails_the_attempt(harness: Harness) -> None:
    from lattice_operator.ports.errors import InvalidRequest

    _waits(harness)
    harness.start()
    await harness.until_phase("Waiting")
    harness.backend.fail("restore_checkpoint", InvalidRequest("refused"))
    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": True}})
    await harness.finished()
    assert (harness.phase, harness.condition()["reason"]) == ("Failed", "ResumeFailed")
    assert harness.status["attempts"][-1]["failureClass"] == "state_conflict"


async def test_a_run_waiting_across_an_operator_restart_still_resumes(harness: Harness) -> None:
    _waits(harness)
    harness.start()
    await harness.until_phase("Waiting")
    await harness.stop()
    harness.start()
    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": True}})
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 4


async def test_a_resume_recorded_before_a_crash_is_applied_by_the_next_operator(
    harness: Harness,
) -> None:
    _waits(harness)
    harness.start()
    await harness.until_phase("Waiting")
    await harness.stop()
    # The previous operator recorded the resume (phase Resuming) and died before applying it.
    harness.edit_spec(resume={"checkpointId": "v1", "inputs": {"approved": True}})
    status = dict(harness.doc["status"])
    status["resume"] = {
        **status["resume"],
        "requestedDigest": "sha256:x",
        "inputs": {"approved": True},
    }
    for cond in status["conditions"]:
        if cond["type"] == "Succeeded":
            cond["reason"] = "Resuming"
    status["phase"] = "Resuming"
    harness.doc["status"] = status
    harness.start()
    final = await harness.finished()
    assert final["phase"] == "Succeeded", final
    assert final["resume"]["count"] == 1
