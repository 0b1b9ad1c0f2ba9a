"""`lattice mcp --sprite`, checked by the real protocol engine: a whole session through the SDK's
stdio client to the real process, the other cases on the same server object in process (what
`run_sprite` serves, the sprite's environment set for the test)."""

from __future__ import annotations

import json
import os
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from mcp import Client

from lattice_operator.clock import SystemClock
from lattice_operator.mcp.entry import sprite_server
from lattice_operator.mcp.sprite_tools import SpriteSession
from lattice_operator.protocol.engine import RunEventEngine
from tests.support.mcp_client import call, error_code, in_process, lattice_mcp

SPRITE, WORK = "sprite-42", "issue-17"
# The sprite's own checkpoint CLI (as in the local Sprites server's /.sprite/bin), which this
# unit test cannot reach: it records each call, so the test sees checkpoints were taken.
CHECKPOINT_CLI = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
n=$(wc -l < "$(dirname "$0")/calls")
echo "created checkpoint chk-$n"
"""


@pytest.fixture
def sprite_env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "sprite-checkpoint"
    cli.write_text(CHECKPOINT_CLI)
    cli.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LATTICE_SPRITE_ID": SPRITE,
        "LATTICE_WORK_ITEM_ID": WORK,
        "LATTICE_DIR": str(tmp_path / "lattice"),
        "LATTICE_EVENT_STDOUT": str(tmp_path / "stdout.log"),
    }


def _served(
    sprite_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> AbstractAsyncContextManager[Client]:
    for name, value in sprite_env.items():
        monkeypatch.setenv(name, value)
    return in_process(sprite_server(SpriteSession.from_environment(SystemClock())))


def _engine_verdict(tmp_path: Path) -> tuple[list[str], list[str]]:
    engine = RunEventEngine(SPRITE, WORK)
    stdout = (tmp_path / "stdout.log").read_bytes()
    outbox = (tmp_path / "lattice" / "outbox.jsonl").read_bytes()
    result = engine.feed_stdout(stdout)
    committed = [e.event.event_type for e in result.committed]
    violations = [v.category for v in result.violations]
    final = engine.feed_outbox(outbox, 0, final=True)
    committed += [str(e.event.event_type) for e in final.committed]
    violations += [str(v.category) for v in final.violations]
    ended = engine.end_session(0)
    violations += [str(v.category) for v in ended.violations]
    return committed, violations


async def test_a_whole_session_through_the_tools_has_no_violation(
    tmp_path: Path, sprite_env: dict[str, str]
) -> None:
    async with lattice_mcp("--sprite", env=sprite_env) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        fresh = await call(session, "lattice_sprite_resume_inputs")
        steps = [
            await call(
                session, "lattice_sprite_info", message='starting $(x) `y` "z"\n', kind="note"
            ),
            await call(session, "lattice_sprite_phase", phase="implement", state="started"),
            await call(
                session, "lattice_sprite_progress", message="half", percent=50, phase="implement"
            ),
            await call(session, "lattice_sprite_artifact", kind="file", ref="/workspace/x.txt"),
            await call(
                session,
                "lattice_sprite_request_action",
                action="NOTIFY_USER",
                parameters={"message": "plan ready"},
            ),
            await call(
                session,
                "lattice_sprite_propose_environment_change",
                observed_failure={"phase": "bootstrap", "exit_code": 127},
                adjustment_type="runtime_install",
                details={"runtime": "node", "version": "20"},
                confidence=0.8,
                evidence=["package.json present"],
                scope="repo_specific",
            ),
            await call(
                session, "lattice_sprite_phase", phase="implement", state="finished", success=True
            ),
        ]
        waited = await call(
            session,
            "lattice_sprite_wait_for_approval",
            reason="PLAN_APPROVAL",
            expected_inputs={"approved": "boolean", "comments": "array<string>"},
        )
        after = await error_code(session, "lattice_sprite_info", message="one more")
    assert len(tools) == 10
    assert fresh == {"resumed": False}
    assert all("error" not in s for s in steps)
    assert waited["checkpoint_id"] == "chk-1"
    assert "Stop now" in waited["instruction"]
    assert after == "SESSION_ENDED"
    assert (tmp_path / "bin" / "calls").read_text() == "--comment before WAITING\n"
    committed, violations = _engine_verdict(tmp_path)
    assert violations == []
    assert committed[-1] == "WAITING"
    lines = (tmp_path / "lattice" / "outbox.jsonl").read_text().splitlines()
    assert len(lines) == 8
    assert {json.loads(line)["sprite_id"] for line in lines} == {SPRITE}
    assert json.loads(lines[-1])["payload"]["checkpoint_id"] == "chk-1"


async def test_resume_then_blocking_action_then_complete(
    tmp_path: Path, sprite_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lattice = tmp_path / "lattice"
    lattice.mkdir()
    (lattice / "resume.json").write_text(
        json.dumps({"work_item_id": WORK, "checkpoint_id": "chk-0", "inputs": {"approved": True}})
    )
    async with _served(sprite_env, monkeypatch) as session:
        first = await call(session, "lattice_sprite_resume_inputs")
        replay = await call(session, "lattice_sprite_resume_inputs")
        blocking = await call(
            session,
            "lattice_sprite_request_action",
            action="OPEN_PR",
            parameters={"title": "t", "head": "h", "base": "main"},
            blocking=True,
            expected_inputs={"pr_url": "string"},
        )
    assert (first["resumed"], first["replay"], first["inputs"]) == (True, False, {"approved": True})
    assert replay["replay"] is True
    assert blocking["emitted"] == "ACTION_REQUEST"
    assert blocking["checkpoint_id"] == "chk-1"
    events = [json.loads(x) for x in (lattice / "outbox.jsonl").read_text().splitlines()]
    assert [e["event_type"] for e in events] == ["INFO", "ACTION_REQUEST", "WAITING"]
    assert events[2]["payload"]["expected_inputs"] == {"pr_url": "string"}
    _, violations = _engine_verdict(tmp_path)
    assert violations == []
    (lattice / "resume.json").write_text(
        json.dumps({"work_item_id": WORK, "checkpoint_id": "chk-1", "inputs": {"pr_url": "u"}})
    )
    async with _served(sprite_env, monkeypatch) as session:
        resumed = await call(session, "lattice_sprite_resume_inputs")
        done = await call(session, "lattice_sprite_complete", status="success", summary="ok")
        after = await error_code(session, "lattice_sprite_phase", phase="x", state="started")
    assert resumed["inputs"] == {"pr_url": "u"}
    assert done["emitted"] == "COMPLETED"
    assert after == "SESSION_ENDED"


async def test_invalid_events_are_refused_and_nothing_is_written(
    tmp_path: Path, sprite_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _served(sprite_env, monkeypatch) as session:
        codes = [
            await error_code(session, "lattice_sprite_phase", phase="x", state="finished"),
            await error_code(session, "lattice_sprite_phase", phase="", state="started"),
            await error_code(session, "lattice_sprite_request_action", action="DEPLOY"),
            await error_code(session, "lattice_sprite_complete", status="done"),
            await error_code(session, "lattice_sprite_progress", message="m", percent=101),
            await error_code(
                session,
                "lattice_sprite_propose_environment_change",
                observed_failure={},
                adjustment_type="runtime_install",
                confidence=1.5,
                evidence=[],
                scope="repo_specific",
            ),
            await error_code(
                session,
                "lattice_sprite_wait_for_approval",
                reason="r",
                expected_inputs={"a": "float"},
            ),
            await error_code(
                session,
                "lattice_sprite_request_action",
                action="OPEN_PR",
                blocking=True,
                expected_inputs={"a": "float"},
            ),
        ]
    assert set(codes) == {"INVALID_ARGUMENT"}
    assert not (tmp_path / "lattice" / "outbox.jsonl").exists()
    assert not (tmp_path / "bin" / "calls").exists()


async def test_a_failed_checkpoint_emits_no_waiting(
    tmp_path: Path, sprite_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin" / "sprite-checkpoint").write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    async with _served(sprite_env, monkeypatch) as session:
        code = await error_code(session, "lattice_sprite_wait_for_approval", reason="r")
        still_open = await call(session, "lattice_sprite_info", message="retrying")
    assert code == "CHECKPOINT_FAILED"
    assert "error" not in still_open
    events = (tmp_path / "lattice" / "outbox.jsonl").read_text().splitlines()
    assert [json.loads(e)["event_type"] for e in events] == ["INFO"]


def test_outside_a_sprite_it_refuses_to_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("LATTICE_")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lattice"), "mcp", "--sprite"],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2
    assert "LATTICE_SPRITE_ID and LATTICE_WORK_ITEM_ID not set" in done.stderr
    assert "Traceback" not in done.stderr


async def test_error_checkpoints_first_and_an_unreadable_resume_is_reported(
    tmp_path: Path, sprite_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _served(sprite_env, monkeypatch) as session:
        failed = await call(
            session, "lattice_sprite_error", message="build failed", details={"exit_code": 1}
        )
        still_open = await call(session, "lattice_sprite_info", message="after the error")
        (tmp_path / "lattice" / "resume.json").write_text("{not json")
        unreadable = await error_code(session, "lattice_sprite_resume_inputs")
    assert failed == {"emitted": "ERROR", "checkpoint_id": "chk-1"}
    assert "error" not in still_open
    assert unreadable == "INVALID_RESUME"
    assert (tmp_path / "bin" / "calls").read_text() == "--comment before ERROR\n"
    events = [
        json.loads(x) for x in (tmp_path / "lattice" / "outbox.jsonl").read_text().splitlines()
    ]
    assert [e["event_type"] for e in events] == ["ERROR", "INFO"]
    assert events[0]["payload"] == {"message": "build failed", "details": {"exit_code": 1}}
