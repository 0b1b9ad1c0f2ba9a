"""Run modes in the driver: exec_post runs through the HTTP exec and is never run twice."""

from __future__ import annotations

import asyncio

from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import Harness


async def test_exec_post_runs_through_the_http_exec(harness: Harness) -> None:
    harness.doc["spec"]["mode"] = "exec_post"

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "posted"})
        p.event("COMPLETED", {"status": "success", "summary": "done"})

    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 2
    assert status["sessionId"].startswith("post-")
    assert len(harness.backend.called("exec_post")) == 1
    assert harness.backend.called("exec") == []


async def test_a_lost_exec_post_answer_fails_and_is_never_run_again(harness: Harness) -> None:
    harness.doc["spec"].update(mode="exec_post", retries=2)
    go_on = asyncio.Event()

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "started"})
        await go_on.wait()
        p.drop_sockets()  # the answer is lost before its exit frame
        await asyncio.Event().wait()

    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    go_on.set()
    status = await harness.finished()
    assert status["phase"] == "Failed"
    assert harness.condition()["reason"] == "ExitUnknown"
    assert "not run again" in harness.condition()["message"]
    assert len(status["attempts"]) == 1  # retries allowed, none taken
    assert len(harness.backend.called("exec_post")) == 1
    assert harness.backend.called("attach") == []  # an HTTP exec cannot be attached


async def test_an_exec_post_in_flight_across_a_restart_is_judged_from_disk(
    harness: Harness,
) -> None:
    harness.doc["spec"]["mode"] = "exec_post"
    go_on = asyncio.Event()

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "first"})
        await go_on.wait()
        p.event("COMPLETED", {"status": "success"})

    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    await harness.stop()
    go_on.set()  # it finishes while no operator listens: its exit file says how
    await harness.until(lambda: not harness.backend.running())
    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 2
    assert len(harness.backend.called("exec_post")) == 1
