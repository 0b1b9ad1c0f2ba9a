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


def _service_run(harness: Harness) -> asyncio.Event:
    """`agent` as a service: one event, waits for the returned event, then completes."""
    harness.doc["spec"]["mode"] = "service"
    go_on = asyncio.Event()

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        p.event("INFO", {"message": "first"})
        await go_on.wait()
        p.event("COMPLETED", {"status": "success", "summary": "done"})

    return go_on


async def test_a_service_run_follows_its_log_and_removes_the_service_at_its_end(
    harness: Harness,
) -> None:
    go_on = _service_run(harness)
    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    go_on.set()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert status["events"]["eventCount"] == 2
    assert status["sessionId"].startswith("service:lattice-run-")
    assert len(harness.backend.called("put_service")) == 1
    assert harness.backend.called("exec") == []
    assert harness.backend.services == {}  # stopped and removed


async def test_a_service_put_before_a_lost_status_write_is_followed_not_put_again(
    harness: Harness,
) -> None:
    go_on = _service_run(harness)
    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    await harness.stop()
    # The operator died before any status write named the service: the next one starts the
    # same attempt again and finds that attempt's service already there.
    harness.writes.clear()
    harness.doc.pop("status", None)
    harness.start()
    await harness.until(lambda: len(harness.backend.called("list_services")) == 2)
    go_on.set()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert len(harness.backend.called("put_service")) == 1  # the command ran once
    assert [p.session_id for p in harness.backend.processes] == ["svc-1"]


async def test_cancel_of_a_service_run_stops_and_removes_the_service(harness: Harness) -> None:
    _service_run(harness)
    harness.start()
    await harness.until(lambda: (harness.status.get("events") or {}).get("eventCount") == 1)
    harness.edit_spec(cancel=True)
    status = await harness.finished()
    assert status["phase"] == "Canceled"
    assert len(harness.backend.called("stop_service")) == 1
    assert harness.backend.services == {}
    assert harness.backend.running() == []
