"""A sprite's ACTION_REQUESTs and proposals, as the Run driver answers them (characterisation)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from lattice_operator.ports import Grants
from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness, run_doc

SECRET = b"ghp_s3cret-value"
CREDENTIAL = "/dev/shm/lattice/credentials/gh"
RESUME = "/workspace/.lattice/resume.json"


def _intent_run(**grants: Any) -> Harness:
    """The Run an approved Intent `work` created, with `grants` (allowed actions, credentials)."""
    doc = run_doc(intentRef={"name": "work"})
    doc["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "name": "work",
            "uid": "uid-intent",
            "controller": True,
        }
    ]
    h = Harness(doc)
    h.actions.granted["work"] = Grants(
        intent="work",
        allowed_actions=frozenset(grants.get("actions", ())),
        credentials=grants.get("credentials", {}),
        uid="uid-intent",
        phase=grants.get("phase", "Executing"),
        run="job",
    )
    h.actions.secrets[("tokens", "gh")] = SECRET
    return h


@pytest.fixture
async def granted() -> Any:
    h = _intent_run(
        actions=["FETCH_CREDENTIAL", "NOTIFY_USER", "POST_COMMENT"],
        credentials={"gh": ("tokens", "gh")},
    )
    try:
        yield h
    finally:
        await h.close()


def _fetches_and_echoes(h: Harness, *, then_exit: int = 0) -> None:
    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ACTION_REQUEST",
            {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"}, "blocking": False},
        )
        for _ in range(400):
            value = h.backend.read(p.sprite, CREDENTIAL)
            if value is not None:
                break
            await asyncio.sleep(0.005)
        assert value is not None
        p.stdout(f"echo: {value.decode()}\n")
        p.event("INFO", {"message": f"the token is {value.decode()}"})
        p.exit(then_exit)


async def test_a_granted_credential_is_written_then_removed_and_never_shown(
    granted: Harness,
) -> None:
    _fetches_and_echoes(granted)
    granted.start()
    status = await granted.finished()
    assert status["phase"] == "Succeeded"
    [result] = status["actionResults"]
    assert (result["status"], result["path"]) == ("fulfilled", CREDENTIAL)
    writes = [c for c in granted.backend.called("write_file") if c.args[1] == CREDENTIAL]
    assert len(writes) == 1
    assert granted.backend.modes[(BACKEND_SPRITE, CREDENTIAL)] == 0o600
    # Removed before the end was written; the value is in no status and no receipt.
    assert granted.backend.read(BACKEND_SPRITE, CREDENTIAL) is None
    assert [c.args[1] for c in granted.backend.called("delete_file")] == [CREDENTIAL]
    for written in granted.writes:
        assert SECRET.decode() not in json.dumps(written)
    for receipt in granted.publisher.posted:
        assert SECRET.decode() not in receipt.model_dump_json()
    assert any("[redacted]" in json.dumps(w) for w in granted.writes)


async def test_a_credential_is_removed_when_the_run_fails(granted: Harness) -> None:
    _fetches_and_echoes(granted, then_exit=4)
    granted.start()
    await granted.finished()
    assert granted.phase == "Failed"
    assert granted.backend.read(BACKEND_SPRITE, CREDENTIAL) is None


async def test_a_credential_is_removed_when_the_run_is_canceled(granted: Harness) -> None:
    @granted.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ACTION_REQUEST",
            {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"}, "blocking": False},
        )
        await asyncio.Event().wait()

    granted.start()
    await granted.until(lambda: granted.backend.read(BACKEND_SPRITE, CREDENTIAL) is not None)
    granted.edit_spec(cancel=True)
    await granted.finished()
    assert granted.phase == "Canceled"
    assert granted.backend.read(BACKEND_SPRITE, CREDENTIAL) is None


@pytest.mark.parametrize(
    ("grants", "parameters", "reason"),
    [
        ({}, {"name": "gh"}, "FETCH_CREDENTIAL is not in Intent work's allowedActions"),
        (
            {"actions": ["FETCH_CREDENTIAL"]},
            {"name": "gh"},
            "credential 'gh' is not granted by Intent work",
        ),
        (
            {"actions": ["FETCH_CREDENTIAL"], "credentials": {"gh": ("other", "gh")}},
            {"name": "gh"},
            "Secret other has no key gh",
        ),
        (
            {"actions": ["FETCH_CREDENTIAL"], "phase": "Proposed"},
            {"name": "gh"},
            "Intent work is Proposed",
        ),
    ],
)
async def test_requests_outside_the_grants_are_refused(
    grants: dict[str, Any], parameters: dict[str, Any], reason: str
) -> None:
    h = _intent_run(**grants)

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ACTION_REQUEST",
            {"action": "FETCH_CREDENTIAL", "parameters": parameters, "blocking": False},
        )
        await asyncio.sleep(0.1)
        p.event("COMPLETED", {"status": "success"})

    try:
        h.start()
        status = await h.finished()
        [result] = status["actionResults"]
        assert result["status"] == "refused"
        assert reason in result["reason"]
        assert h.backend.read(BACKEND_SPRITE, CREDENTIAL) is None
        [request] = status["events"]["actionRequests"]
        assert request["state"] == "Refused"
    finally:
        await h.close()


async def test_a_run_without_an_intent_is_granted_nothing(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ACTION_REQUEST",
            {"action": "NOTIFY_USER", "parameters": {"message": "hi"}, "blocking": False},
        )
        await asyncio.sleep(0.1)

    harness.start()
    status = await harness.finished()
    [result] = status["actionResults"]
    assert result["status"] == "refused"
    assert "no Intent governs this Run" in result["reason"]
    assert harness.actions.notices == []


async def test_notify_user_reaches_the_intent(granted: Harness) -> None:
    @granted.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ACTION_REQUEST",
            {"action": "NOTIFY_USER", "parameters": {"message": "look"}, "blocking": False},
        )
        await asyncio.sleep(0.1)

    granted.start()
    status = await granted.finished()
    assert granted.actions.notices == [("work", "job", "look")]
    assert status["actionResults"][0]["status"] == "fulfilled"


async def test_forge_actions_are_queued(granted: Harness) -> None:
    @granted.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ACTION_REQUEST",
            {"action": "POST_COMMENT", "parameters": {"body": "x"}, "blocking": False},
        )
        await asyncio.sleep(0.1)

    granted.start()
    status = await granted.finished()
    [result] = status["actionResults"]
    assert result["status"] == "queued"
    assert status["events"]["actionRequests"][0]["state"] == "Pending"


async def test_a_blocking_request_answered_resumes_the_sprite(granted: Harness) -> None:
    @granted.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        if p.env["LATTICE_SESSION"] == "1":
            p.event(
                "ACTION_REQUEST",
                {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"}, "blocking": True},
            )
            checkpoint = granted.backend.take_checkpoint(p.sprite)
            p.event(
                "WAITING",
                {
                    "reason": "FETCH_CREDENTIAL",
                    "checkpoint_id": checkpoint,
                    "expected_inputs": {"path": "string"},
                },
            )
            return
        resume = json.loads(
            granted.backend.read(p.sprite, "/workspace/.lattice/resume.json") or b""
        )
        p.event("INFO", {"message": "resumed"})
        p.event("COMPLETED", {"status": "success", "summary": json.dumps(resume["inputs"])})

    granted.start()
    status = await granted.finished()
    assert status["phase"] == "Succeeded"
    assert json.loads(granted.condition()["message"]) == {"path": CREDENTIAL}
    assert status["resume"]["answer"] == status["actionResults"][0]["requestId"]
    assert status["actionResults"][0]["resumed"] is True


async def test_a_proposal_becomes_one_intent(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event(
            "ENVIRONMENT_PROPOSAL",
            {
                "observed_failure": {"phase": "bootstrap", "exit_code": 127, "stderr_hint": "x"},
                "suggested_adjustment": {"type": "runtime_install", "details": {"runtime": "n"}},
                "confidence": 0.8,
                "evidence": ["package.json"],
                "scope": "repo_specific",
            },
        )
        await asyncio.sleep(0.2)
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert len(harness.actions.proposed) == 1
    name = harness.actions.proposed[0]["metadata"]["name"]
    assert status["proposals"] == [name]


async def test_a_credential_is_never_in_a_checkpoint_and_comes_back_after_a_restore(
    granted: Harness,
) -> None:
    seen: list[bytes | None] = []

    @granted.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        if p.env["LATTICE_SESSION"] == "1":
            p.event(
                "ACTION_REQUEST",
                {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"}, "blocking": True},
            )
            for _ in range(400):  # the answer arrives while the sprite still runs
                if granted.backend.read(p.sprite, CREDENTIAL) is not None:
                    break
                await asyncio.sleep(0.005)
            checkpoint = granted.backend.take_checkpoint(p.sprite)
            p.event("WAITING", {"reason": "R", "checkpoint_id": checkpoint})
            return
        seen.append(granted.backend.read(p.sprite, CREDENTIAL))
        p.event("INFO", {"message": "resumed"})
        p.event("COMPLETED", {"status": "success"})

    granted.start()
    status = await granted.finished()
    assert status["phase"] == "Succeeded"
    assert CREDENTIAL.startswith("/dev/shm/")
    for _, snapshot in granted.backend.checkpoints[BACKEND_SPRITE]:
        assert CREDENTIAL not in snapshot  # memory is never in a checkpoint
    assert seen == [SECRET]  # delivered again after the restore, before the continuation
    writes = [c for c in granted.backend.called("write_file") if c.args[1] == CREDENTIAL]
    assert len(writes) == 2
    assert granted.backend.read(BACKEND_SPRITE, CREDENTIAL) is None  # and removed at the end
