"""An exec whose answer was lost: found and followed, never run twice, never left running unseen.

The WebSocket exec starts the command when the backend takes the request; if the handshake
(or the session's first frame) times out on the operator's side, the command may be running
all the same, with `max_run_after_disconnect=0` for ever. The driver looks for it by its exit
file before the attempt counts as failed, and the wrapper's marker stops a start that reaches
the sprite after the driver gave up on it.
"""

from __future__ import annotations

import asyncio

from lattice_operator.ports.errors import InvalidRequest, Timeout, TransportError
from lattice_operator.reconcilers.run.decisions import ALREADY_BEGUN, wrapped_command
from lattice_operator.reconcilers.run.files import EXIT_DIR
from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness

TIMED_OUT = "exec in 'lattice-box-1': timed out during opening handshake"


def _completing(h: Harness, runs: list[FakeProcess], gate: asyncio.Event | None = None) -> None:
    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        runs.append(p)
        p.event("INFO", {"message": "working"})
        if gate is not None:
            await gate.wait()
        p.event("COMPLETED", {"status": "success", "summary": "done"})


async def test_a_started_exec_whose_handshake_timed_out_is_followed_not_failed(
    harness: Harness,
) -> None:
    runs: list[FakeProcess] = []
    gate = asyncio.Event()
    _completing(harness, runs, gate)
    harness.backend.scrollback_bytes = 0  # what it printed before the attach is gone
    harness.backend.lose_exec_answer("started", Timeout(TIMED_OUT))
    # The sprite is slow to answer the first look too: the command prints meanwhile.
    harness.backend.fail("list_sessions", TransportError("sprite busy"))
    harness.start()
    await harness.until(lambda: harness.backend.called("attach"))
    gate.set()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert len(runs) == 1  # one command ran, and it is the one the Run followed
    assert len(harness.backend.called("exec")) == 1
    [attempt] = status["attempts"]
    assert attempt["outcome"] == "Succeeded"
    assert status["sessionId"] == runs[0].session_id == attempt["sessionId"]
    assert status["events"]["eventCount"] == 2
    # Its stdout before the attach is not the operator's to judge: no violation charged.
    assert status["events"]["violations"] == []
    assert not harness.backend.running()


async def test_an_exec_that_never_started_fails_the_attempt_and_a_late_start_runs_nothing(
    harness: Harness,
) -> None:
    runs: list[FakeProcess] = []
    _completing(harness, runs)
    harness.backend.lose_exec_answer("late", Timeout(TIMED_OUT))
    harness.start()
    status = await harness.finished()
    assert (status["phase"], harness.condition()["reason"]) == ("Failed", "StartFailed")
    assert TIMED_OUT in harness.condition()["message"]
    assert "it did not begin (looked for in the sprite)" in harness.condition()["message"]
    # The driver looked (the sessions, the exit file), marked the session begun, looked again.
    assert len(harness.backend.called("list_sessions")) == 2
    marker = harness.backend.called("write_file")[-1]
    assert marker.args[1].endswith(".began")
    # The backend starts the held exec now: its wrapper finds the marker and runs nothing.
    [late] = harness.backend.start_held()
    assert await late.wait() == ALREADY_BEGUN
    assert runs == []
    assert not harness.backend.running()


async def test_a_lost_answer_with_retries_runs_the_command_once(harness: Harness) -> None:
    harness.doc["spec"]["retries"] = 2
    runs: list[FakeProcess] = []
    _completing(harness, runs)
    harness.backend.lose_exec_answer("late", TransportError("connection reset"))
    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    first, second = status["attempts"]
    assert (first["outcome"], second["outcome"]) == ("Failed", "Succeeded")
    [late] = harness.backend.start_held()  # the first attempt's start, arriving after all
    assert await late.wait() == ALREADY_BEGUN
    assert len(runs) == 1


async def test_a_command_that_ended_before_it_was_found_is_judged_from_its_exit_file(
    harness: Harness,
) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "failure", "summary": "no"})
        p.exit(4)

    harness.backend.lose_exec_answer("started", Timeout(TIMED_OUT))
    harness.backend.fail("list_sessions", TransportError("sprite busy"))  # it ends meanwhile
    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Failed"
    [attempt] = status["attempts"]
    assert attempt["exitCode"] == 4
    assert status["events"]["completion"]["summary"] == "no"
    # Nobody saw its stdout: the outbox's events are not held against it.
    assert status["events"]["violations"] == []
    assert len(harness.backend.called("exec")) == 1


async def test_a_start_refused_outright_is_not_looked_for(harness: Harness) -> None:
    harness.backend.fail("exec", InvalidRequest("bad command"))
    harness.start()
    await harness.finished()
    assert harness.condition()["reason"] == "StartFailed"
    assert not harness.backend.called("list_sessions")


async def test_a_second_start_of_a_begun_session_follows_the_first(harness: Harness) -> None:
    """The crash window: the exec went out, the operator died before the status write, the
    next operator starts the same attempt again. Its wrapper refuses; the Run follows the
    command that runs already, to its end."""
    runs: list[FakeProcess] = []
    gate = asyncio.Event()
    _completing(harness, runs, gate)
    exit_file = f"{EXIT_DIR}/uid-job-a1-s1"
    env = {"LATTICE_SPRITE_ID": BACKEND_SPRITE, "LATTICE_WORK_ITEM_ID": "job"}
    first = await harness.backend.exec(
        BACKEND_SPRITE, wrapped_command(["agent"], env, exit_file, claim=True)
    )
    await harness.until(lambda: runs)
    harness.start()
    await harness.until(lambda: harness.backend.called("attach"))
    [refused] = [p for p in harness.backend.processes if p.refused]
    assert refused.exit_code == ALREADY_BEGUN
    await harness.until(lambda: harness.status.get("sessionId") == first.session_id)
    gate.set()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert len(runs) == 1
    [attempt] = status["attempts"]
    assert (attempt["outcome"], attempt["sessionId"]) == ("Succeeded", first.session_id)
    assert status["events"]["eventCount"] == 2


async def test_an_agent_that_exits_75_is_judged_by_its_own_exit_status(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.exit(ALREADY_BEGUN)

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Failed"
    [attempt] = status["attempts"]
    assert attempt["exitCode"] == ALREADY_BEGUN
    assert status["spriteName"] == BACKEND_SPRITE


async def test_a_sprite_that_does_not_answer_the_look_leaves_the_start_unknown(
    harness: Harness,
) -> None:
    harness.backend.lose_exec_answer("dropped", Timeout(TIMED_OUT))
    harness.backend.fail("list_sessions", *[TransportError("sprite unreachable")] * 200)
    harness.start()
    await harness.until(lambda: harness.backend.called("list_sessions"))
    harness.clock.advance(120)  # past reattach_deadline
    status = await harness.finished()
    assert (status["phase"], harness.condition()["reason"]) == ("Failed", "StartFailed")
    message = harness.condition()["message"]
    assert "whether it began is unknown: sprite unreachable" in message, message
    assert not harness.backend.called("write_file")  # no marker without an answer
