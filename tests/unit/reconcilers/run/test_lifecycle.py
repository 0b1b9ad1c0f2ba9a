"""The Run driver from start to end: start, stream, endings, retries by class, cancel, timeout.

Characterisation tests: they pin what the driver does today, through its ports only.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lattice_operator.lifeloop.vocabulary import LifecycleEvent
from lattice_operator.ports import Grants, SpriteView
from lattice_operator.ports.errors import InvalidRequest, TransportError
from tests.support.fake_backend import OUTBOX, FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness, run_doc


def _events(h: Harness) -> list[LifecycleEvent]:
    return [r.event for r in h.publisher.posted]


async def queued_behind(harness: Harness, holder: str) -> None:
    """Start a Run (a command that exits at once) on a Sprite `holder` has; back once the Run
    says it waits."""
    harness.directory.held_by = holder

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        pass

    harness.start()
    await harness.until(lambda: harness.status.get("conditions"))


async def test_a_command_that_completes_succeeds_with_its_summary(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.stdout("building...\n")
        p.event("INFO", {"message": "hi"})
        p.event("COMPLETED", {"status": "success", "summary": "all done"})

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert harness.condition()["reason"] == "Completed"
    assert harness.condition()["message"] == "all done"
    assert status["events"]["eventCount"] == 2
    assert status["events"]["completion"]["summary"] == "all done"
    [attempt] = status["attempts"]
    assert (attempt["outcome"], attempt["exitCode"]) == ("Succeeded", 0)
    assert status["spriteName"] == BACKEND_SPRITE
    assert status["sessionId"] == "s1"
    # Start, started, ended: every lifecycle moment has its receipt, in order.
    assert _events(harness) == [
        LifecycleEvent.SESSION_STARTING,
        LifecycleEvent.SESSION_STARTED,
        LifecycleEvent.SESSION_ENDING,
        LifecycleEvent.SESSION_ENDED,
    ]
    assert [r.sequence for r in harness.publisher.posted] == [1, 2, 3, 4]


async def test_the_command_runs_wrapped_with_the_protocol_environment(harness: Harness) -> None:
    harness.doc["spec"]["env"] = [{"name": "MODE", "value": "fast"}]
    harness.doc["spec"]["command"] = ["agent", "--flag"]
    seen: list[FakeProcess] = []

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        seen.append(p)

    harness.start()
    await harness.finished()
    [p] = seen
    assert p.argv == ["agent", "--flag"]
    assert p.env == {
        "LATTICE_SPRITE_ID": BACKEND_SPRITE,
        "LATTICE_WORK_ITEM_ID": "job",
        "LATTICE_RUN": "job",
        "LATTICE_SESSION": "1",
        "MODE": "fast",
    }
    assert p.exit_file == "/workspace/.lattice/exit/uid-job-a1-s1"
    assert harness.condition()["reason"] == "Exited"  # exit 0 without COMPLETED


async def test_status_is_written_before_its_receipts_are_published(harness: Harness) -> None:
    """A receipt is never posted before the ledger state that produced it is stored."""
    order: list[tuple[str, int]] = []
    writer, publisher = harness.write_run_status, harness.publisher.publish

    async def write(namespace: str, name: str, status: dict[str, object]) -> None:
        ledger = status["receipts"]["state"]["ledger"]  # type: ignore[index]
        order.append(("write", ledger["sequence"]))
        await writer(namespace, name, status)

    async def publish(regarding: object, receipts: object) -> None:
        batch = list(receipts)  # type: ignore[call-overload]
        order.append(("publish", max(r.sequence for r in batch)))
        await publisher(regarding, batch)  # type: ignore[arg-type]

    harness.write_run_status = write  # type: ignore[method-assign]
    harness.publisher.publish = publish  # type: ignore[method-assign]

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    await harness.finished()
    stored = 0
    for kind, sequence in order:
        if kind == "write":
            stored = max(stored, sequence)
        else:
            assert sequence <= stored, order
    assert any(kind == "publish" for kind, _ in order)


async def test_a_quick_start_is_the_exec_and_one_status_write_after_it(
    harness: Harness,
) -> None:
    """No round trip to the sprite comes before the exec: the exec is the Run's first call
    to it. Confirmed within `starting_write_after`, it is stored by one write, `Running`
    with the attempt, its session and the start time (no `Starting` write of its own); the
    starting and started receipts are published after that write. Where the Run's outbox
    lines begin comes from the wrapper (`.start` beside the exit file), written before the
    command ran, and is stored after: the earlier Run's line is not this Run's."""
    harness.backend.append(BACKEND_SPRITE, OUTBOX, b'{"old": "line"}\n')

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert harness.backend.calls[0].method == "exec"
    first = harness.writes[0]
    assert first["phase"] == "Running"
    assert "Starting" not in [w["phase"] for w in harness.writes]
    [attempt] = first["attempts"]
    assert attempt["sessionId"] == first["sessionId"]
    assert first["startTime"]
    assert status["outboxStart"] == len(b'{"old": "line"}\n')
    assert status["events"]["eventCount"] == 1  # type: ignore[index]
    [exec_call] = harness.backend.called("exec")
    exit_file = exec_call.args[1][exec_call.args[1].index("lattice-run") + 1]
    assert harness.backend.read(BACKEND_SPRITE, f"{exit_file}.start") == b"16\n"
    assert _events(harness)[:2] == [LifecycleEvent.SESSION_STARTING, LifecycleEvent.SESSION_STARTED]


async def test_a_slow_start_writes_the_attempt_and_starting_beside_the_exec(
    harness: Harness,
) -> None:
    """An exec not confirmed within `starting_write_after` (a cold sprite, say): the attempt
    and `Starting` are written while it goes on, and the starting receipt is published after
    that write, before the session exists."""
    harness.timings = harness.timings.model_copy(update={"starting_write_after": 0.01})
    exec_of = harness.backend.exec
    posted_while_starting: list[list[LifecycleEvent]] = []

    async def slow_exec(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.3)
        posted_while_starting.append(_events(harness))
        return await exec_of(*args, **kwargs)

    harness.backend.exec = slow_exec  # type: ignore[method-assign]

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    await harness.finished()
    first = harness.writes[0]
    assert first["phase"] == "Starting"
    assert len(first["attempts"]) == 1
    assert first.get("sessionId") is None
    assert harness.writes[1]["phase"] == "Running"
    assert posted_while_starting == [[LifecycleEvent.SESSION_STARTING]]


async def test_a_nonzero_exit_fails_the_run(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "trying"})
        p.exit(3)

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Failed"
    assert harness.condition()["reason"] == "ExitCode"
    assert harness.condition()["message"] == "the command exited with status 3"
    [attempt] = status["attempts"]
    assert (attempt["exitCode"], attempt["failureClass"]) == (3, "internal_error")


async def test_completed_failure_wins_over_exit_status_zero(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "failure", "summary": "tests red"})

    harness.start()
    await harness.finished()
    assert (harness.phase, harness.condition()["reason"]) == ("Failed", "CompletedFailure")
    assert harness.condition()["message"] == "tests red"


async def test_an_error_event_fails_the_run_with_its_message(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("ERROR", {"message": "disk full"})

    harness.start()
    await harness.finished()
    assert harness.condition()["reason"] == "SpriteError"
    assert "disk full" in harness.condition()["message"]


async def test_completed_with_a_nonzero_exit_is_a_failure(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})
        p.exit(1)

    harness.start()
    await harness.finished()
    assert harness.condition()["reason"] == "ExitCode"


async def test_outbox_only_event_is_counted_once_and_reported(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "both"})
        p.event("INFO", {"message": "outbox only"}, stdout=False)
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert status["events"]["eventCount"] == 3
    assert [e["summary"] for e in status["events"]["recent"]][:2] == ["both", "outbox only"]
    # The protocol asks for both copies: the one never printed is reported, like the reverse.
    [violation] = status["events"]["violations"]
    assert violation["category"] == "outbox_only_event"
    assert violation["source"] == "outbox"


async def test_an_invalid_line_is_a_violation_and_processing_continues(harness: Harness) -> None:
    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        harness.backend.append(p.sprite, OUTBOX, b'{"not": "an event"}\n')
        p.stdout('LATTICE_EVENT {"not": "an event"}\n')
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["violationCount"] >= 1


async def test_a_sprite_that_is_not_ready_holds_the_run_pending(harness: Harness) -> None:
    harness.directory.view = SpriteView(ready=False, backend_name=None, reason="creating")

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    await harness.until(lambda: harness.status.get("conditions"))
    assert harness.phase == "Pending"
    assert harness.condition()["reason"] == "SpriteNotReady"
    assert "creating" in harness.condition()["message"]
    assert not harness.backend.called("exec")
    harness.directory.view = SpriteView(ready=True, backend_name=BACKEND_SPRITE)
    await harness.finished()
    assert harness.phase == "Succeeded"


async def test_a_sprite_held_by_another_run_holds_the_run_pending(harness: Harness) -> None:
    await queued_behind(harness, "first")
    assert harness.condition()["reason"] == "SpriteBusy"
    assert "Run first" in harness.condition()["message"]
    harness.directory.held_by = None
    await harness.finished()
    assert harness.phase == "Succeeded"


async def test_a_queued_run_is_not_rewritten_each_time_its_sprite_changes_hands(
    harness: Harness,
) -> None:
    """Runs queued on a Sprite wake whenever it changes hands; the first holder named stays
    named, so a queue of n Runs costs n writes, not one per Run per hand-over."""
    await queued_behind(harness, "first")
    assert "Run first" in harness.condition()["message"]
    written = len(harness.writes)
    for holder in ("second", "third"):
        harness.directory.held_by = holder
        harness.sprite_changed.set()
        await asyncio.sleep(0.1)
        assert harness.phase == "Pending"
    assert len(harness.writes) == written
    assert "Run first" in harness.condition()["message"]
    harness.directory.held_by = None
    harness.sprite_changed.set()
    await harness.finished(limit=5.0)
    assert harness.phase == "Succeeded"


async def test_a_run_waiting_for_its_sprite_starts_when_woken_not_at_its_next_poll(
    harness: Harness,
) -> None:
    harness.timings = harness.timings.model_copy(update={"sprite_wait": 60.0})
    await queued_behind(harness, "first")
    assert harness.condition()["reason"] == "SpriteBusy"
    await asyncio.sleep(0.2)
    assert harness.phase == "Pending"  # holding: no poll for a minute
    harness.directory.held_by = None
    harness.sprite_changed.set()  # the first Run ended: its watch event wakes the waiters
    await harness.finished(limit=5.0)
    assert harness.phase == "Succeeded"


async def test_a_run_waiting_unwoken_looks_again_less_and_less_often(harness: Harness) -> None:
    """The poll is only a safety net behind the wake-ups: 30 Runs queued on a Sprite must not
    each look every `sprite_wait` while it is busy."""
    harness.timings = harness.timings.model_copy(
        update={"sprite_wait": 0.02, "sprite_wait_max": 0.16}
    )
    await queued_behind(harness, "first")
    await asyncio.sleep(1.0)
    # 0.02 s apart it would have looked ~50 times; doubling to 0.16 s, 3 + ~6
    assert 4 <= harness.directory.looks <= 15
    harness.directory.held_by = None
    harness.sprite_changed.set()
    await harness.finished(limit=5.0)
    assert harness.phase == "Succeeded"


async def test_a_short_command_costs_one_outbox_read_at_its_end(harness: Harness) -> None:
    """A session just started cannot have written to the outbox: the first read waits for
    `outbox_interval`, an event line or the end, whichever comes first."""
    harness.timings = harness.timings.model_copy(update={"outbox_interval": 5.0})

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        pass

    harness.start()
    await harness.finished(limit=5.0)
    assert harness.phase == "Succeeded"
    outbox_reads = [c for c in harness.backend.called("read_file") if c.args[1] == OUTBOX]
    assert len(outbox_reads) == 1


async def test_an_intent_only_sprite_refuses_a_hand_made_run(harness: Harness) -> None:
    harness.directory.view = SpriteView(
        ready=True, backend_name=BACKEND_SPRITE, run_policy="IntentOnly"
    )
    harness.start()
    await harness.finished()
    assert (harness.phase, harness.condition()["reason"]) == ("Failed", "RunPolicy")
    assert not harness.backend.called("exec")


def _intent_owned(api_version: str, uid: str) -> Harness:
    """A Run on an IntentOnly Sprite whose controller reference says Intent `work`; the Intent
    index knows `work` with uid `uid-intent`."""
    doc = run_doc(intentRef={"name": "work"})
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": "Intent", "name": "work", "uid": uid}
        | {"controller": True}
    ]
    h = Harness(doc)
    h.actions.granted["work"] = Grants(
        intent="work", allowed_actions=frozenset(), credentials={}, uid="uid-intent"
    )
    h.directory.view = SpriteView(ready=True, backend_name=BACKEND_SPRITE, run_policy="IntentOnly")
    return h


@pytest.mark.parametrize(
    ("api_version", "uid"),
    [
        # Any other group: the reference names no Intent of ours, whatever its uid.
        ("evil.example/v1", "uid-intent"),
        ("lattice.dev.evil.example/v1alpha1", "uid-intent"),
        ("v1", "uid-intent"),
        # Our group, but no such Intent (the uid names none the index has).
        ("lattice.dev/v1alpha1", "uid-forged"),
    ],
)
async def test_an_intent_only_sprite_refuses_a_run_whose_intent_is_not_real(
    api_version: str, uid: str
) -> None:
    h = _intent_owned(api_version, uid)
    h.start()
    await h.finished()
    assert (h.phase, h.condition()["reason"]) == ("Failed", "RunPolicy")
    assert not h.backend.called("exec")


async def test_an_intent_only_sprite_runs_the_run_its_intent_created() -> None:
    h = _intent_owned("lattice.dev/v1alpha1", "uid-intent")

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    h.start()
    await h.finished()
    assert h.phase == "Succeeded"


async def test_a_start_refused_by_the_backend_is_not_retried(harness: Harness) -> None:
    harness.doc["spec"]["retries"] = 2
    harness.backend.fail("exec", InvalidRequest("bad command"))
    harness.start()
    await harness.finished()
    assert (harness.phase, harness.condition()["reason"]) == ("Failed", "StartFailed")
    [attempt] = harness.status["attempts"]
    assert (attempt["failureClass"], attempt["retryClass"]) == ("invalid_request", "do_not_retry")


async def test_a_dropped_start_is_retried_within_retries(harness: Harness) -> None:
    harness.doc["spec"]["retries"] = 1
    harness.backend.fail("exec", TransportError("connection reset"))

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    first, second = status["attempts"]
    assert (first["outcome"], first["failureClass"], first["retryClass"]) == (
        "Failed",
        "transport_error",
        "safe_retry",
    )
    assert second["outcome"] == "Succeeded"
    assert len(harness.backend.called("exec")) == 2


async def test_retries_run_out(harness: Harness) -> None:
    harness.doc["spec"]["retries"] = 1
    runs: list[str] = []

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        runs.append(p.session_id)
        p.exit(2)

    harness.start()
    status = await harness.finished()
    assert runs == ["s1", "s2"]  # internal_error: retry_after_reread, so one retry
    assert [a["outcome"] for a in status["attempts"]] == ["Failed", "Failed"]
    assert harness.condition()["reason"] == "ExitCode"
    # Each attempt has its own exit file.
    assert [p.exit_file.rsplit("/", 1)[1] for p in harness.backend.processes] == [
        "uid-job-a1-s1",
        "uid-job-a2-s1",
    ]


async def test_cancel_kills_the_session_and_ends_canceled(harness: Harness) -> None:
    release = asyncio.Event()

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "working"})
        await release.wait()

    harness.start()
    await harness.until_phase("Running")
    harness.edit_spec(cancel=True)
    status = await harness.finished()
    assert (status["phase"], harness.condition()["reason"]) == ("Canceled", "Canceled")
    assert [c.args[1] for c in harness.backend.called("kill_session")] == ["s1"]
    assert status["attempts"][-1]["outcome"] == "Canceled"
    assert status["completionTime"]


async def test_cancel_before_start_runs_nothing(harness: Harness) -> None:
    harness.doc["spec"]["cancel"] = True
    harness.start()
    await harness.finished()
    assert harness.phase == "Canceled"
    assert not harness.backend.called("exec")


async def test_timeout_kills_the_session_and_is_never_retried(harness: Harness) -> None:
    harness.doc["spec"].update(timeoutSeconds=60, retries=3)

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        await asyncio.Event().wait()

    harness.start()
    await harness.until_phase("Running")
    harness.clock.advance(61)
    status = await harness.finished()
    assert (status["phase"], harness.condition()["reason"]) == ("Failed", "Timeout")
    assert "timeoutSeconds (60) elapsed" in harness.condition()["message"]
    assert len(harness.backend.called("exec")) == 1
    assert harness.backend.called("kill_session")
    assert status["attempts"][-1]["failureClass"] == "timeout"
    assert any(r.failure_class == "timeout" for r in harness.publisher.posted)


async def test_a_run_already_done_is_left_alone() -> None:
    h = Harness(run_doc())
    h.doc["status"] = {
        "phase": "Succeeded",
        "conditions": [
            {
                "type": "Succeeded",
                "status": "True",
                "reason": "Completed",
                "message": "done",
                "lastTransitionTime": "2026-01-15T10:00:00Z",
            }
        ],
    }
    try:
        h.start()
        await h.finished()
        assert h.backend.calls == []
    finally:
        await h.close()
