"""Sessions that drop, operators that restart, Sprites that earlier Runs used (characterisation)."""

from __future__ import annotations

import asyncio

from lattice_operator.lifeloop.vocabulary import LifecycleEvent
from lattice_operator.ports.errors import TransportError
from tests.support.fake_backend import OUTBOX, FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness, run_doc

RESUME = "/workspace/.lattice/resume.json"


def _two_halves(h: Harness) -> asyncio.Event:
    """`agent` emits one event, waits for the returned event, emits a second and completes."""
    go_on = asyncio.Event()

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "first"})
        await go_on.wait()
        p.event("INFO", {"message": "second"})
        p.event("COMPLETED", {"status": "success", "summary": "done"})

    return go_on


async def test_a_restarted_operator_reattaches_and_counts_each_event_once(
    harness: Harness,
) -> None:
    go_on = _two_halves(harness)
    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    await harness.stop()
    assert harness.backend.running()  # the session outlives the operator
    harness.start()
    await harness.until(lambda: harness.backend.called("attach"))
    go_on.set()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 3
    assert [e["summary"] for e in status["events"]["recent"]] == [
        "first",
        "second",
        "success: done",
    ]
    assert status["events"]["violations"] == []  # stdout had a gap: nothing to hold against it
    assert len(harness.backend.called("exec")) == 1
    events = [r.event for r in harness.publisher.posted]
    assert LifecycleEvent.CAPABILITY_DEGRADED in events  # stdout lost with the old process
    assert [r.sequence for r in harness.publisher.posted] == list(
        range(1, len(harness.publisher.posted) + 1)
    )


async def test_a_session_that_ended_while_the_operator_was_away_is_judged_from_disk(
    harness: Harness,
) -> None:
    go_on = _two_halves(harness)
    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    await harness.stop()
    go_on.set()
    await harness.until(lambda: not harness.backend.running())
    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 3  # the rest came from the outbox
    assert status["attempts"][-1]["exitCode"] == 0  # from the exit file
    assert not harness.backend.called("attach")


async def test_an_unknown_exit_is_never_a_success(harness: Harness) -> None:
    go_on = _two_halves(harness)
    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    await harness.stop()
    go_on.set()
    await harness.until(lambda: not harness.backend.running())
    process = harness.backend.processes[0]
    del harness.backend.files[(BACKEND_SPRITE, process.exit_file)]
    harness.start()
    await harness.finished()
    assert (harness.phase, harness.condition()["reason"]) == ("Failed", "ExitUnknown")


async def test_a_dropped_socket_is_reattached_without_duplicates(harness: Harness) -> None:
    go_on = asyncio.Event()

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "first"})
        await go_on.wait()
        p.drop_sockets()
        p.event("INFO", {"message": "while nobody listened"})
        await asyncio.sleep(0.05)
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    go_on.set()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 3
    assert status["events"]["violationCount"] == 0
    degraded = [
        r.status.value
        for r in harness.publisher.posted
        if r.event == LifecycleEvent.CAPABILITY_DEGRADED
    ]
    assert degraded == ["degraded", "observed"]  # stdout lost, then restored
    assert len(harness.backend.called("exec")) == 1
    assert len(harness.backend.called("attach")) == 1


async def test_a_socket_lost_before_the_end_charges_no_event_as_outbox_only(
    harness: Harness,
) -> None:
    """The socket drops, the command prints and writes its last events and ends before the
    driver looks again: what it printed meanwhile was nobody's to see, so the outbox's lines
    owe no stdout copy (under load this charged well-behaved agents by the thousand)."""

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "first"})
        p.drop_sockets()
        for i in range(5):
            p.event("INFO", {"message": f"while nobody listened {i}"})
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 7
    assert status["events"]["violations"] == []
    assert not harness.backend.called("attach")  # it had ended: judged from its exit file


async def test_a_session_that_cannot_be_reattached_is_lost_then_retried(harness: Harness) -> None:
    harness.doc["spec"]["retries"] = 1
    lost = asyncio.Event()

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        if p.session_id == "s1":
            p.drop_sockets()
            lost.set()
            await asyncio.Event().wait()
        p.event("COMPLETED", {"status": "success"})

    harness.backend.fail("list_sessions", *[TransportError("unreachable")] * 200)
    harness.start()
    await lost.wait()
    await harness.until(lambda: harness.backend.called("list_sessions"))
    harness.clock.advance(120)  # past reattach_deadline
    await harness.until(lambda: len(harness.backend.called("exec")) == 2)
    harness.backend._faults.clear()
    status = await harness.finished()
    first, second = status["attempts"]
    assert (first["outcome"], first["failureClass"]) == ("Failed", "transport_error")
    assert "could not be re-attached" in first["message"]
    assert second["outcome"] == "Succeeded"
    # Never two copies at once: the lost session was killed before the retry.
    assert [c.args[1] for c in harness.backend.called("kill_session")] == ["s1"]


async def test_a_new_run_starts_after_the_outbox_of_earlier_runs(harness: Harness) -> None:
    earlier = (
        b'{"protocol_version":"v1","event_type":"COMPLETED","sprite_id":"x",'
        b'"work_item_id":"job","timestamp":"2026-01-15T10:30:00Z",'
        b'"payload":{"status":"success"}}\n'
    )
    harness.backend.files[(BACKEND_SPRITE, OUTBOX)] = earlier
    harness.backend.files[(BACKEND_SPRITE, RESUME)] = b'{"inputs": {"old": 1}}'

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        assert harness.backend.read(p.sprite, RESUME) is None  # never the earlier Run's
        p.event("INFO", {"message": "mine"})
        p.event("COMPLETED", {"status": "success", "summary": "mine"})

    harness.start()
    status = await harness.finished()
    assert status["outboxStart"] == len(earlier)
    assert status["events"]["eventCount"] == 2
    assert status["events"]["violationCount"] == 0
    assert harness.condition()["message"] == "mine"
    assert harness.backend.read(BACKEND_SPRITE, "/workspace/.lattice/resume.previous.json")


async def test_an_unterminated_last_line_of_an_earlier_run_is_this_runs_problem(
    harness: Harness,
) -> None:
    harness.backend.files[(BACKEND_SPRITE, OUTBOX)] = b"line one\npartial"

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    status = await harness.finished()
    assert status["outboxStart"] == len(b"line one\n")
    # "partial" and this Run's first line make one bad line, reported (never skipped).
    categories = [v["category"] for v in status["events"]["violations"]]
    assert categories == ["not_json", "stdout_only_event", "missing_terminal_event"]
    assert status["events"]["violations"][0]["excerpt"].startswith("partial{")


async def test_receipts_handed_out_but_never_posted_are_reported_after_a_restart() -> None:
    h = Harness(run_doc())
    go_on = _two_halves(h)
    try:
        h.start()
        await h.until(lambda: (h.status.get("events") or {}).get("eventCount") == 1)
        await h.stop()
        handed_out = h.status["receipts"]["state"]["ledger"]["sequence"]
        h.publisher.kept = {1}  # the rest were lost in the crash
        h.start()
        go_on.set()
        await h.finished()
        gaps = [r for r in h.publisher.posted if r.event == LifecycleEvent.RECEIPT_GAP_DETECTED]
        assert len(gaps) == 1
        assert handed_out >= 2
    finally:
        await h.close()
