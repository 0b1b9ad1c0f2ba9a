"""spec.agent through the Run driver: negotiation before the exec, the context and the resume
payload placed, status.agent and the session.starting receipts."""

from __future__ import annotations

import json
from typing import Any

from lattice_operator.lifeloop.vocabulary import LifecycleEvent, ReceiptStatus
from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness, run_doc

RESUME = "/workspace/.lattice/resume.json"
CONTEXT = "/workspace/.lattice/context"


def _harness(command: list[str], agent: dict[str, Any], **spec: Any) -> Harness:
    return Harness(run_doc(command=command, agent=agent, **spec))


async def test_a_required_capability_unsupported_fails_before_the_exec() -> None:
    h = _harness(
        ["codex", "exec", "fix it"],
        {"adapter": "codex", "capabilities": [{"name": "supervisor.tick"}]},
        retries=3,
    )
    try:
        h.start()
        status = await h.finished()
        assert status["phase"] == "Failed"
        assert h.condition()["reason"] == "CapabilityUnsupported"
        assert h.backend.called("exec") == []  # no exec at all, and no retry
        [attempt] = status["attempts"]
        assert (attempt["failureClass"], attempt["retryClass"]) == (
            "capability_unsupported",
            "do_not_retry",
        )
        assert status["agent"]["outcome"] == "refused"
        [receipt] = h.publisher.posted
        assert (receipt.event, receipt.status, receipt.adapter_id) == (
            LifecycleEvent.SESSION_STARTING,
            ReceiptStatus.FAILED,
            "codex",
        )
    finally:
        await h.close()


async def test_a_required_placement_unavailable_fails_before_the_exec() -> None:
    h = _harness(
        ["sh", "-c", "codex exec hi"],
        {
            "adapter": "codex",
            "context": {"body": "ctx", "placements": [{"placement": "pre_prompt_frame"}]},
        },
    )
    try:
        h.start()
        status = await h.finished()
        assert h.condition()["reason"] == "PlacementUnavailable"
        assert "does not run codex directly" in h.condition()["message"]
        assert h.backend.called("exec") == []
        [placed] = status["agent"]["placements"]
        assert (placed["payload"], placed.get("placement"), placed["status"]) == (
            "context",
            None,
            "failed",
        )
    finally:
        await h.close()


async def test_the_context_is_placed_and_the_exec_unchanged_otherwise() -> None:
    h = _harness(
        ["claude", "-p", "fix it"],
        {
            "adapter": "claude",
            "capabilities": [{"name": "session.started"}, {"name": "identity.harness_run_id"}],
            "context": {
                "body": "issue #17",
                "placements": [{"placement": "developer_equivalent_frame"}],
            },
        },
    )
    seen: list[list[str]] = []

    @h.backend.program("claude")
    async def claude(p: FakeProcess) -> None:
        seen.append(p.argv)
        p.event("COMPLETED", {"status": "success", "summary": "done"})

    try:
        h.start()
        status = await h.finished()
        assert status["phase"] == "Succeeded", status
        assert seen == [["claude", "--append-system-prompt", "issue #17", "-p", "fix it"]]
        assert status["agent"]["outcome"] == "satisfied"
        assert status["agent"]["placements"] == [
            {"payload": "context", "placement": "developer_equivalent_frame", "status": "delivered"}
        ]
        posted = h.publisher.posted
        assert posted[0].status is ReceiptStatus.DELIVERED
        assert {r.adapter_id for r in posted} == {"claude"}
        assert len({r.invocation_id for r in posted}) == 1
    finally:
        await h.close()


async def test_the_resume_payload_goes_into_the_continuation_prompt() -> None:
    h = _harness(
        ["claude", "-p", "start"],
        {
            "adapter": "claude",
            "resumePlacements": [
                {"placement": "pre_prompt_frame", "requirement": "preferred"},
                {"placement": "side_channel_context"},
            ],
        },
        continuationCommand=["claude", "-p", "continue"],
    )
    seen: list[tuple[list[str], dict[str, str]]] = []

    @h.backend.program("claude")
    async def claude(p: FakeProcess) -> None:
        seen.append((p.argv, dict(p.env)))
        if p.env["LATTICE_SESSION"] == "1":
            checkpoint = h.backend.take_checkpoint(p.sprite)
            p.event(
                "WAITING",
                {"reason": "R", "checkpoint_id": checkpoint, "expected_inputs": {"ok": "boolean"}},
            )
            return
        p.event("INFO", {"message": "resumed"})
        p.event("COMPLETED", {"status": "success"})

    try:
        h.start()
        await h.until_phase("Waiting")
        h.edit_spec(resume={"checkpointId": "v1", "inputs": {"ok": True}})
        status = await h.finished()
        assert status["phase"] == "Succeeded", status
        argv, env = seen[1]
        body = (h.backend.read(BACKEND_SPRITE, RESUME) or b"").decode()
        assert json.loads(body)["inputs"] == {"ok": True}  # resume.json, as ever
        assert argv[:2] == ["claude", "-p"]
        assert argv[2] == f"{body}\n\ncontinue"  # and in the prompt
        assert "LATTICE_RESUME_FILE" not in env
        assert status["agent"]["placements"] == [
            {"payload": "resume", "placement": "pre_prompt_frame", "status": "delivered"}
        ]
        resumed = [
            r
            for r in h.publisher.posted
            if r.event is LifecycleEvent.SESSION_STARTING and r.payload_receipts
        ]
        assert [r.payload_receipts[0].payload_kind for r in resumed] == ["resume"]
    finally:
        await h.close()


async def test_the_resume_payload_falls_back_to_the_file() -> None:
    h = _harness(
        ["agent"],
        {
            "adapter": "codex",
            "context": {"body": "ctx"},
            "resumePlacements": [
                {"placement": "pre_prompt_frame", "requirement": "preferred"},
                {"placement": "side_channel_context"},
            ],
        },
    )
    seen: list[dict[str, str]] = []

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        seen.append(dict(p.env))
        if p.env["LATTICE_SESSION"] == "1":
            checkpoint = h.backend.take_checkpoint(p.sprite)
            p.event("WAITING", {"reason": "R", "checkpoint_id": checkpoint})
            return
        p.event("INFO", {"message": "resumed"})
        p.event("COMPLETED", {"status": "success"})

    try:
        h.start()
        await h.until_phase("Waiting")
        assert seen[0]["LATTICE_CONTEXT_FILE"] == CONTEXT
        assert h.backend.read(BACKEND_SPRITE, CONTEXT) == b"ctx"
        h.edit_spec(resume={"checkpointId": "v1", "inputs": {}})
        status = await h.finished()
        assert status["phase"] == "Succeeded", status
        assert seen[1]["LATTICE_RESUME_FILE"] == RESUME
        assert status["agent"]["outcome"] == "degraded"
        assert "does not run codex directly" in status["agent"]["message"]
        assert sorted(p["payload"] for p in status["agent"]["placements"]) == ["context", "resume"]
    finally:
        await h.close()
