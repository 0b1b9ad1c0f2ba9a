"""The Sprite's environment in the Run driver: its steps run before the agent's command, in
order, once per environment (the marker); a failing step fails the Run (EnvironmentFailed),
not retried, and the agent never starts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.ports import SpriteView
from lattice_operator.reconcilers.run.environment import environment_digest, marker_path
from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness, run_doc

STEPS = (
    EnvironmentStep(name="deps", type="add_preinstall_step", command="make deps"),
    EnvironmentStep(name="smoke", type="adjust_smoke_command", command="check"),
)


def with_environment(h: Harness, steps: tuple[EnvironmentStep, ...]) -> list[str]:
    """The Sprite states `steps`; what ran in the sprite, in order ("agent" for the agent).
    A step whose command starts with `fail` exits 3 with a line of output."""
    h.directory.view = SpriteView(ready=True, backend_name=BACKEND_SPRITE, environment=steps)
    ran: list[str] = []

    @h.backend.program("sh")
    async def step(p: FakeProcess) -> None:
        ran.append(p.argv[2])
        if p.argv[2].startswith("fail"):
            p.stdout("E: Unable to locate package nope\n")
            p.exit(3)

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        ran.append("agent")
        p.event("COMPLETED", {"status": "success", "summary": "done"})

    return ran


async def test_steps_run_before_the_agent_and_are_in_the_status(harness: Harness) -> None:
    ran = with_environment(harness, STEPS)
    harness.start()
    status = await harness.finished()
    assert ran == ["make deps", "check", "agent"]
    assert status["phase"] == "Succeeded"
    digest = environment_digest(STEPS)
    assert status["environment"] == {
        "digest": digest,
        "state": "Applied",
        "steps": [
            {"name": "deps", "exitCode": 0, "output": None},
            {"name": "smoke", "exitCode": 0, "output": None},
        ],
        "message": "2 step(s) applied before the agent's command",
        "clusterSteps": None,  # no cluster-wide Environment
    }
    assert harness.backend.read(BACKEND_SPRITE, marker_path(digest)) is not None


async def test_the_next_run_of_the_same_environment_runs_no_step() -> None:
    first = Harness(run_doc("first"))
    ran = with_environment(first, STEPS)
    first.start()
    await first.finished()
    second = Harness(run_doc("second"), backend=first.backend)
    again = with_environment(second, STEPS)
    second.start()
    try:
        status = await second.finished()
    finally:
        await second.close()
    assert ran == ["make deps", "check", "agent"]
    assert again == ["agent"]
    assert status["environment"]["state"] == "AlreadyApplied"
    assert status["environment"].get("steps", []) == []
    # A changed environment is a new digest: applied again, whole.
    third = Harness(run_doc("third"), backend=first.backend)
    changed = with_environment(third, (*STEPS, STEPS[0].model_copy(update={"name": "more"})))
    third.start()
    try:
        assert (await third.finished())["environment"]["state"] == "Applied"
    finally:
        await third.close()
    assert changed == ["make deps", "check", "make deps", "agent"]


async def test_a_failing_step_fails_the_run_with_its_reason_and_no_retry() -> None:
    h = Harness(run_doc(retries=3))
    steps = (STEPS[0], EnvironmentStep(name="pkg", type="add_system_package", command="fail"))
    ran = with_environment(h, (*steps, STEPS[1]))
    h.start()
    try:
        status = await h.finished()
    finally:
        await h.close()
    assert ran == ["make deps", "fail"]  # neither the later step nor the agent
    assert status["phase"] == "Failed"
    condition = h.condition()
    assert condition["reason"] == "EnvironmentFailed"
    assert condition["message"] == "environment step pkg (add_system_package) exited 3: fail"
    assert len(status["attempts"]) == 1
    assert status["environment"]["state"] == "Failed"
    assert status["environment"]["steps"][-1] == {
        "name": "pkg",
        "exitCode": 3,
        "output": "E: Unable to locate package nope\n",
    }
    digest = environment_digest((*steps, STEPS[1]))
    assert h.backend.read(BACKEND_SPRITE, marker_path(digest)) is None


async def test_a_sprite_without_an_environment_runs_the_agent_alone(harness: Harness) -> None:
    ran = with_environment(harness, ())
    harness.start()
    status = await harness.finished()
    assert ran == ["agent"]
    assert status.get("environment") is None


async def test_a_step_cut_off_is_a_lost_attempt_and_the_retry_applies_it_again() -> None:
    h = Harness(run_doc(retries=1))
    h.directory.view = SpriteView(ready=True, backend_name=BACKEND_SPRITE, environment=STEPS)
    ran: list[str] = []

    @h.backend.program("sh")
    async def step(p: FakeProcess) -> None:
        ran.append(p.argv[2])
        if len(ran) == 1:
            p.drop_sockets()
            await asyncio.Event().wait()  # still running where nobody sees it

    @h.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        ran.append("agent")

    h.start()
    try:
        status = await h.finished()
    finally:
        await h.close()
    assert ran == ["make deps", "make deps", "check", "agent"]
    assert status["phase"] == "Succeeded"
    first, second = status["attempts"]
    assert (first["outcome"], second["outcome"]) == ("Failed", "Succeeded")
    assert first["message"].startswith("could not apply the Sprite's environment: ")
    assert status["environment"]["state"] == "Applied"


def env_receipts(h: Harness) -> list[tuple[str, str, dict[str, object] | None]]:
    """(transition or event, status, the status.environment stored when it was posted) of the
    receipts posted, in order; the environment's receipts are watched at their post."""
    seen: list[tuple[str, str, dict[str, object] | None]] = []
    publish = h.publisher.publish

    async def watching(regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]) -> None:
        receipts = list(receipts)
        for r in receipts:
            transition = r.telemetry_summary.get("transition")
            name = str(transition) if transition else str(r.event)
            seen.append((name, str(r.status), h.status.get("environment")))
        await publish(regarding, receipts)

    h.publisher.publish = watching  # type: ignore[method-assign]
    return seen


async def test_the_environment_is_a_receipt_posted_after_its_status(harness: Harness) -> None:
    with_environment(harness, STEPS)
    seen = env_receipts(harness)
    harness.start()
    await harness.finished()
    name, status, stored = seen[0]
    assert (name, status) == ("environment_applied", "observed")
    assert stored is not None
    assert stored["state"] == "Applied"
    assert seen[1][0] == "exec_starting"  # then the session, in the Run's one sequence
    [receipt] = [
        r
        for r in harness.publisher.posted
        if r.telemetry_summary.get("transition") == "environment_applied"
    ]
    assert receipt.sequence == 1
    assert receipt.parent_receipt_id is None
    assert receipt.telemetry_summary == {
        "transition": "environment_applied",
        "digest": environment_digest(STEPS)[:12],
        "steps": ["deps", "smoke"],
        "cluster_steps": [],
    }


async def test_an_environment_already_applied_or_failing_says_so_in_its_receipt() -> None:
    first = Harness(run_doc("first"))
    with_environment(first, STEPS)
    first.start()
    await first.finished()
    second = Harness(run_doc("second"), backend=first.backend)
    with_environment(second, STEPS)
    seen = env_receipts(second)
    second.start()
    try:
        await second.finished()
    finally:
        await second.close()
    assert seen[0][:2] == ("environment_already_applied", "skipped")

    failing = Harness(run_doc("failing"))
    step = EnvironmentStep(name="pkg", type="add_system_package", command="fail")
    with_environment(failing, (STEPS[0], step))
    seen = env_receipts(failing)
    failing.start()
    try:
        await failing.finished()
    finally:
        await failing.close()
    assert seen[0][:2] == ("environment_failed", "failed")
    [receipt] = [
        r
        for r in failing.publisher.posted
        if r.telemetry_summary.get("transition") == "environment_failed"
    ]
    assert (receipt.failure_class, receipt.telemetry_summary["failed_step"]) == (
        FailureClass.OPERATOR_REQUIRED,
        "pkg",
    )
    assert receipt.telemetry_summary["exit_code"] == 3
    assert receipt.warnings == ["environment step pkg (add_system_package) exited 3: fail"]


async def test_the_cluster_wide_steps_run_first_and_are_named(harness: Harness) -> None:
    ran = with_environment(harness, STEPS)
    everywhere = EnvironmentStep(name="everywhere", type="add_preinstall_step", command="ca")
    # A Sprite step promoted into both is the cluster-wide one, run once.
    shared = STEPS[1].model_copy(update={"command": "check everywhere"})
    harness.directory.view = SpriteView(
        ready=True,
        backend_name=BACKEND_SPRITE,
        environment=STEPS,
        cluster_environment=(everywhere, shared),
    )
    harness.start()
    status = await harness.finished()
    assert ran == ["ca", "check everywhere", "make deps", "agent"]
    environment = status["environment"]
    assert environment["clusterSteps"] == ["everywhere", "smoke"]
    assert [s["name"] for s in environment["steps"]] == ["everywhere", "smoke", "deps"]
    assert environment["digest"] == environment_digest((everywhere, shared, STEPS[0]))
    [receipt] = [
        r
        for r in harness.publisher.posted
        if r.telemetry_summary.get("transition") == "environment_applied"
    ]
    assert receipt.telemetry_summary["cluster_steps"] == ["everywhere", "smoke"]
    assert receipt.telemetry_summary["steps"] == ["deps"]
