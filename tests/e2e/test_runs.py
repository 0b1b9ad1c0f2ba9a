"""Runs end to end: a real process in a local sprite, its events in status, receipts as Events."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lattice_operator.protocol import RunEventsStatus, StreamCursor
from tests.support.admission_cases import build, sample
from tests.support.agents import agent
from tests.support.cluster import wait_for
from tests.support.e2e_runs import (
    apply_run,
    lattice,
    logged_receipts,
    ready_sprite,
    session_ids,
)
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _ends_with(event: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda receipts: bool(receipts) and receipts[-1]["event"] == event


def _condition(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Succeeded")


def test_plain_command_succeeds(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "hello", ["sh", "-c", "echo hello from $LATTICE_SPRITE_ID"])
    run = stack.wait_phase(namespace, "runs", "hello", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert _condition(run)["reason"] == "Exited"
    assert any("hello from" in line for line in run["status"]["logTail"])
    assert run["status"]["attempts"][0]["exitCode"] == 0
    assert run["status"]["sessionId"]


def test_exit_code_fails_and_retries_are_counted(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "fails", ["sh", "-c", "exit 3"], retries=1)
    run = stack.wait_phase(namespace, "runs", "fails", {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Failed"
    assert _condition(run)["reason"] == "ExitCode"
    assert [a["exitCode"] for a in status["attempts"]] == [3, 3]
    assert {a["failureClass"] for a in status["attempts"]} == {"internal_error"}


def test_cancel_kills_the_session(stack: Stack, namespace: str) -> None:
    sprite = ready_sprite(stack, namespace)
    apply_run(stack, namespace, "long", ["sleep", "600"])
    run = stack.wait_phase(namespace, "runs", "long", {"Running"})
    session = run["status"]["sessionId"]
    stack.cluster.kubectl(
        "patch", "run", "long", "-n", namespace, "--type", "merge", "-p", '{"spec":{"cancel":true}}'
    )
    run = stack.wait_phase(namespace, "runs", "long", {"Canceled"})
    assert _condition(run)["reason"] == "Canceled"
    assert session not in session_ids(stack, sprite)


def test_timeout_fails_the_run(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "slow", ["sleep", "600"], timeoutSeconds=2)
    run = stack.wait_phase(namespace, "runs", "slow", {"Failed"})
    assert _condition(run)["reason"] == "Timeout"
    assert len(run["status"]["attempts"]) == 1  # a timeout is never retried


def test_sample_agent_waits_resumes_and_completes(
    stack: Stack, namespace: str, tmp_path: Path
) -> None:
    sprite = ready_sprite(stack, namespace, "sample")
    doc = sample("agent-run.yaml")
    doc["spec"]["env"] = [{"name": "AGENT_PAUSE", "value": "0.05"}]
    stack.apply(namespace, doc)
    run = stack.wait_phase(namespace, "runs", "sample-agent", {"Waiting", "Failed"})
    status = run["status"]
    assert status["phase"] == "Waiting", status
    waiting = status["events"]["waiting"]
    assert waiting["expectedInputs"] == {"approved": "boolean", "comments": "array<string>"}
    assert waiting["checkpointId"] == status["resume"]["checkpointId"]

    outbox = stack.sprites.host_root(sprite) / ".lattice" / "outbox.jsonl"
    first_session = tmp_path / "outbox-1.jsonl"
    first_session.write_bytes(outbox.read_bytes())
    refused = lattice(
        stack, "resume", "sample-agent", "-n", namespace, "-i", "approved=maybe", check=False
    )
    assert refused.returncode == 2
    assert "approved" in refused.stderr

    lattice(
        stack,
        "resume",
        "sample-agent",
        "-n",
        namespace,
        "-i",
        "approved=true",
        "-i",
        'comments=["looks good"]',
    )
    run = stack.wait_phase(namespace, "runs", "sample-agent", {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["events"]["completion"]["status"] == "success"
    counts = status["events"]["counts"]
    for event_type in (
        "info",
        "phaseStarted",
        "phaseFinished",
        "actionRequest",
        "artifact",
        "waiting",
        "completed",
        "error",
        "environmentProposal",
    ):
        assert counts[event_type] >= 1, event_type

    again = lattice(
        stack,
        "resume",
        "sample-agent",
        "-n",
        namespace,
        "-i",
        "approved=true",
        "-i",
        'comments=["looks good"]',
        check=False,
    )
    assert again.returncode == 0
    assert "no-op" in again.stdout  # the same resume again changes nothing
    assert stack.get(namespace, "runs", "sample-agent")["status"]["resume"]["count"] == 1

    # Receipts: Events in sequence, without gaps (the last ones are posted just after the
    # final status write, which is what the test saw).
    receipts = logged_receipts(
        stack, namespace, "sample-agent", _ends_with("session.ended"), what="the last receipt"
    )
    sequences = [r["sequence"] for r in receipts]
    assert sequences == list(range(1, len(sequences) + 1))
    events = [r["event"] for r in receipts]
    assert events[0] == "session.starting"
    assert events.count("session.started") == 2  # first session, then the resume
    assert events[-1] == "session.ended"

    # The status equals what `lattice events replay` computes offline from the same outbox
    # (as each session left it: the resume restored the checkpoint taken before WAITING).
    second_session = tmp_path / "outbox-2.jsonl"
    second_session.write_bytes(outbox.read_bytes())
    replay = json.loads(
        lattice(
            stack,
            "events",
            "replay",
            "--sprite-id",
            sprite,
            "--work-item",
            "sample-issue-1",
            "--outbox",
            str(first_session),
            "--outbox",
            str(second_session),
            "--json",
        ).stdout
    )
    live = RunEventsStatus.model_validate(status["events"])
    # The operator answered the NOTIFY_USER request (refused: no Intent grants this Run
    # anything); offline, the replay leaves it pending. Everything else is equal.
    [notify] = live.action_requests
    assert (notify.action.value, notify.state) == ("NOTIFY_USER", "Refused")
    assert "no Intent governs this Run" in (notify.message or "")
    pending = notify.model_copy(update={"state": "Pending", "resolved_at": None, "message": None})
    live = live.model_copy(update={"action_requests": [pending]})
    assert RunEventsStatus.model_validate(replay["status"]) == live
    assert StreamCursor.model_validate(replay["cursor"]) == StreamCursor.model_validate(
        status["cursor"]
    )


BAD_OUTPUT = agent(
    r"""
for line in [
    "this is not json {",
    "[1, 2, 3]",
    envelope("INFO", {"message": "v2?"}, protocol_version="v2"),
    envelope("TELEPORT", {"message": "unknown type"}),
    envelope("INFO", {}),
    envelope("INFO", {"message": "spoofed"}, sprite_id="someone-else"),
    envelope("INFO", {"message": "wrong work"}, work_item_id="other-item"),
    envelope("INFO", {"message": "bad time"}, timestamp="yesterday"),
    envelope("INFO", {"message": "x" * 70000}),
    envelope("INFO", {"message": "still going"}),
    envelope("COMPLETED", {"status": "success", "summary": "done despite the noise"}),
    envelope("INFO", {"message": "after completion"}),
]:
    emit_raw(line)
"""
)


def test_bad_sprite_output_is_recorded_and_the_run_carries_on(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "noisy", ["python3", "-c", BAD_OUTPUT], workItemId="item-1")
    run = stack.wait_phase(namespace, "runs", "noisy", {"Succeeded", "Failed"})
    events = run["status"]["events"]
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert events["completion"]["summary"] == "done despite the noise"
    assert events["counts"]["info"] == 1
    assert events["violationCounts"]["spoofed_identity"] == 2
    categories = set(events["violationCounts"])
    for expected in (
        "not_json",
        "not_object",
        "wrong_protocol_version",
        "unknown_event_type",
        "invalid_field",
        "spoofed_identity",
        "bad_timestamp",
        "payload_too_large",
        "event_after_completed",
    ):
        assert expected in categories, (expected, categories)


MISSING_CHECKPOINT_AGENT = agent(
    r"""
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("INFO", {"message": "resumed"})  # the protocol: acknowledge the resume first
    inputs = json.load(open("/workspace/.lattice/resume.json"))["inputs"]
    emit("COMPLETED", {"status": "success", "summary": "got %s" % inputs["answer"]})
else:
    with open("/workspace/kept.txt", "w") as f:
        f.write("work before waiting")
    emit("WAITING", {"reason": "QUESTION", "checkpoint_id": "never-created",
                     "expected_inputs": {"answer": "integer"}})
"""
)


def test_a_checkpoint_listing_failure_is_not_blamed_on_the_sprite(
    stack: Stack, namespace: str
) -> None:
    sprite = ready_sprite(stack, namespace)
    # The listing gets a 429 whose Retry-After is beyond the adapter's retry deadline.
    stack.sprites.set_faults(
        rate_limit={
            "remaining": 1,
            "retry_after": 600,
            "method": "GET",
            "path_prefix": f"/v1/sprites/{sprite}/checkpoints",
        }
    )
    try:
        apply_run(
            stack,
            namespace,
            "unlisted",
            ["python3", "-c", MISSING_CHECKPOINT_AGENT],
            workItemId="q-2",
        )
        status = stack.wait_phase(namespace, "runs", "unlisted", {"Waiting", "Failed"})["status"]
        faults = stack.sprites.set_faults()
    finally:
        stack.sprites.reset_faults()
    assert faults["rate_limit"]["remaining"] == 0, "the listing was tried and refused"
    assert status["phase"] == "Waiting", status
    # A resume stays possible, and the sprite is not charged with a violation.
    assert status["resume"]["synthesized"] is True
    assert "checkpoint_missing" not in (status["events"].get("violationCounts") or {})
    receipts = json.loads(
        lattice(stack, "logs", "unlisted", "-n", namespace, "--receipts", "--json").stdout
    )
    assert any("could not be listed" in json.dumps(r) for r in receipts)


def test_a_run_waiting_when_the_operator_restarts_is_resumed_by_the_next_one(
    stack: Stack, namespace: str
) -> None:
    ready_sprite(stack, namespace, "sample")
    doc = sample("agent-run.yaml")
    doc["spec"]["env"] = [{"name": "AGENT_PAUSE", "value": "0.05"}]
    stack.apply(namespace, doc)
    waiting = stack.wait_phase(namespace, "runs", "sample-agent", {"Waiting", "Failed"})
    assert waiting["status"]["phase"] == "Waiting", waiting["status"]
    stack.crash_and_restart()  # the operator that saw the WAITING is gone
    lattice(
        stack,
        "resume",
        "sample-agent",
        "-n",
        namespace,
        "-i",
        "approved=true",
        "-i",
        'comments=["after a restart"]',
    )
    run = stack.wait_phase(namespace, "runs", "sample-agent", {"Succeeded", "Failed"}, timeout=60)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["resume"]["count"] == 1
    assert status["events"]["violationCount"] == 0, status["events"]["violations"]


def test_missing_checkpoint_is_synthesized_and_resume_works(stack: Stack, namespace: str) -> None:
    sprite = ready_sprite(stack, namespace)
    apply_run(
        stack, namespace, "asks", ["python3", "-c", MISSING_CHECKPOINT_AGENT], workItemId="q-1"
    )
    run = stack.wait_phase(namespace, "runs", "asks", {"Waiting", "Failed"})
    status = run["status"]
    assert status["phase"] == "Waiting", status
    assert status["resume"]["synthesized"] is True
    assert status["resume"]["checkpointId"].startswith("v")
    assert status["events"]["violationCounts"]["checkpoint_missing"] == 1

    # Wrong input types are refused, with the field named, and nothing is resumed.
    bad = {"spec": {"resume": {"checkpointId": "never-created", "inputs": {"answer": "42"}}}}
    stack.cluster.kubectl(
        "patch", "run", "asks", "-n", namespace, "--type", "merge", "-p", json.dumps(bad)
    )

    def refused() -> str | None:
        message = (stack.get(namespace, "runs", "asks")["status"].get("resume") or {}).get(
            "message"
        )
        return message if message else None

    message = wait_for(refused, timeout=30, what="the resume refusal")
    assert "answer" in message
    assert stack.get(namespace, "runs", "asks")["status"]["phase"] == "Waiting"

    good = {"spec": {"resume": {"checkpointId": "never-created", "inputs": {"answer": 42}}}}
    stack.cluster.kubectl(
        "patch", "run", "asks", "-n", namespace, "--type", "merge", "-p", json.dumps(good)
    )
    run = stack.wait_phase(namespace, "runs", "asks", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["events"]["completion"]["summary"] == "got 42"
    assert (stack.sprites.host_root(sprite) / "kept.txt").read_text() == "work before waiting"


def _scrape(stack: Stack) -> str:
    import httpx

    return httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False).text


def _sample_value(text: str, name: str, labels: dict[str, str]) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return 0.0


def test_metrics_have_no_per_run_labels(stack: Stack, namespace: str) -> None:
    run_ok = {"kind": "Run", "outcome": "ok"}
    before = _sample_value(_scrape(stack), "lattice_reconcile_total", run_ok)
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "measured", ["sh", "-c", "echo measured"])
    stack.wait_phase(namespace, "runs", "measured", {"Succeeded"})

    # The Run's daemon pass is counted once the daemon has ended, just after the phase.
    def run_counted() -> str | None:
        text = _scrape(stack)
        return text if _sample_value(text, "lattice_reconcile_total", run_ok) > before else None

    text = wait_for(run_counted, timeout=30, what="the Run reconcile to be counted")
    assert _sample_value(text, "lattice_reconcile_duration_seconds_count", {"kind": "Run"}) > 0
    for series in (
        'lattice_runs{phase="Succeeded"}',
        'lattice_reconcile_total{kind="Sprite",outcome="ok"}',
        'lattice_reconcile_total{kind="Run",outcome="ok"}',
        'lattice_reconcile_duration_seconds_count{kind="Sprite"}',
        'lattice_backend_call_duration_seconds_count{operation="exec"}',
        'lattice_backend_call_duration_seconds_count{operation="list_sprites"}',
        'lattice_status_patches_total{kind="Run"}',
        "lattice_outbox_lag_bytes",
        'lattice_receipts_total{event="session.started",status="observed"}',
    ):
        assert series in text, series
    labelled = [line for line in text.splitlines() if "{" in line and not line.startswith("#")]
    assert labelled
    assert not any("measured" in line or namespace in line for line in labelled)


def test_runs_on_one_sprite_take_turns(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "first", ["sh", "-c", "sleep 3; echo first"])
    stack.wait_phase(namespace, "runs", "first", {"Running"})
    apply_run(stack, namespace, "second", ["sh", "-c", "echo second"])

    def queued() -> dict[str, Any] | None:
        run = stack.get(namespace, "runs", "second")
        cond = next((c for c in (run.get("status") or {}).get("conditions", [])), None)
        return cond if cond and cond["reason"] == "SpriteBusy" else None

    cond = wait_for(queued, timeout=30, what="the second Run to queue")
    assert "first" in cond["message"]
    first = stack.wait_phase(namespace, "runs", "first", {"Succeeded"})
    second = stack.wait_phase(namespace, "runs", "second", {"Succeeded"})
    assert second["status"]["startTime"] >= first["status"]["completionTime"]


def test_deleting_a_running_run_kills_its_session(stack: Stack, namespace: str) -> None:
    sprite = ready_sprite(stack, namespace)
    apply_run(stack, namespace, "doomed", ["sleep", "600"])
    run = stack.wait_phase(namespace, "runs", "doomed", {"Running"})
    session = run["status"]["sessionId"]
    assert run["metadata"]["finalizers"] == ["lattice.dev/finalizer"]
    assert session in session_ids(stack, sprite)
    stack.cluster.kubectl(
        "delete", "run", "doomed", "-n", namespace, "--wait=true", "--timeout=60s"
    )
    assert session not in session_ids(stack, sprite)


def test_a_throttled_exec_start_is_classed_by_the_adapter_and_retried(
    stack: Stack, namespace: str
) -> None:
    sprite = ready_sprite(stack, namespace)
    # The exec gets a 429 whose Retry-After is beyond the adapter's own retry deadline.
    stack.sprites.set_faults(
        rate_limit={
            "remaining": 1,
            "retry_after": 600,
            "method": "GET",
            "path_prefix": f"/v1/sprites/{sprite}/exec",
        }
    )
    try:
        apply_run(stack, namespace, "throttled", ["sh", "-c", "echo started"], retries=1)
        run = stack.wait_phase(namespace, "runs", "throttled", {"Succeeded", "Failed"})
        faults = stack.sprites.set_faults()
    finally:
        stack.sprites.reset_faults()
    assert faults["rate_limit"]["remaining"] == 0, "the exec was tried and refused"
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    first, second = status["attempts"]
    assert (first["outcome"], first["failureClass"], first["retryClass"]) == (
        "Failed",
        "transport_error",
        "safe_retry",
    )
    assert second["exitCode"] == 0


def test_a_finished_run_is_deleted_after_its_ttl(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "brief", ["true"], ttlSecondsAfterFinished=1)
    apply_run(stack, namespace, "kept", ["true"])
    stack.wait_phase(namespace, "runs", "kept", {"Succeeded", "Failed"})

    def gone() -> bool:
        out = stack.cluster.kubectl("get", "runs", "-n", namespace, "-o", "name", check=False)
        return "run.lattice.dev/brief" not in out.stdout

    wait_for(gone, timeout=60, what="the Run with ttlSecondsAfterFinished deleted")
    assert stack.get(namespace, "runs", "kept")["status"]["phase"] == "Succeeded"


def test_a_run_naming_an_agent_is_negotiated_before_its_exec(stack: Stack, namespace: str) -> None:
    """spec.agent (issue 32 §2): an unknown adapter is refused at admission naming the field;
    a required capability the adapter does not have fails the Run before any exec, with
    its reason in status and a failed session.starting receipt; a preferred one missing
    and a preferred placement the command cannot take run degraded, recorded as such."""
    sprite = ready_sprite(stack, namespace)
    doc = build("run.yaml", "agent-unknown", {"spec.command": ["true"]})
    doc["spec"]["spriteRef"]["name"] = "box"
    doc["spec"]["agent"] = {"adapter": "gpt-9"}
    refused = stack.cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False
    )
    assert refused.returncode != 0
    assert "spec.agent.adapter" in refused.stderr, refused.stderr

    marker = stack.sprites.host_root(sprite) / "ran-refused"
    apply_run(
        stack,
        namespace,
        "agent-refused",
        ["sh", "-c", "touch /workspace/ran-refused"],
        agent={
            "adapter": "codex",
            "capabilities": [{"name": "context.compacted", "requirement": "required"}],
        },
    )
    run = stack.wait_phase(namespace, "runs", "agent-refused", {"Succeeded", "Failed"})
    status = run["status"]
    assert _condition(run)["reason"] == "CapabilityUnsupported", status
    assert "context.compacted" in _condition(run)["message"]
    assert status.get("sessionId") is None  # no exec was made
    assert not marker.exists()
    assert status["agent"]["outcome"] == "refused"
    assert status["agent"]["capabilities"] == [
        {
            "name": "context.compacted",
            "requirement": "required",
            "support": "unavailable",
            "outcome": "unsupported",
        }
    ]
    assert status["attempts"][0]["failureClass"] == "capability_unsupported"

    def receipts_of(name: str, last: str) -> list[dict[str, Any]]:
        return logged_receipts(
            stack, namespace, name, _ends_with(last), what=f"the receipt {last} of {name}"
        )

    (starting,) = receipts_of("agent-refused", "session.starting")
    assert (starting["status"], starting["failure_class"], starting["retry_class"]) == (
        "failed",
        "capability_unsupported",
        "do_not_retry",
    )
    assert starting["adapter_id"] == "codex"

    apply_run(
        stack,
        namespace,
        "agent-degraded",
        ["sh", "-c", 'echo "got: $(cat "$LATTICE_CONTEXT_FILE")"'],
        agent={
            "adapter": "claude",
            "capabilities": [
                {"name": "session.started", "requirement": "required"},
                {"name": "context_pressure", "requirement": "preferred"},
            ],
            "context": {
                "body": "the issue to fix is #17",
                "placements": [
                    {"placement": "developer_equivalent_frame", "requirement": "preferred"},
                    {"placement": "side_channel_context", "requirement": "required"},
                ],
            },
        },
    )
    run = stack.wait_phase(namespace, "runs", "agent-degraded", {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert "got: the issue to fix is #17" in status["logTail"]
    agent_status = status["agent"]
    assert agent_status["outcome"] == "degraded"
    assert [c["outcome"] for c in agent_status["capabilities"]] == ["satisfied", "unsupported"]
    assert agent_status["placements"] == [
        {"payload": "context", "placement": "side_channel_context", "status": "degraded"}
    ]
    receipts = receipts_of("agent-degraded", "session.ended")
    first = receipts[0]
    assert (first["event"], first["status"], first["adapter_id"]) == (
        "session.starting",
        "degraded",
        "claude",
    )
    assert first["payload_receipts"][0]["placement"] == "side_channel_context"
    assert any("context_pressure" in w for w in first["warnings"])
    assert any("does not run claude directly" in w for w in first["warnings"])
    # One exec, one invocation: every receipt of the session shares it, chained in order.
    assert {r["invocation_id"] for r in receipts} == {first["invocation_id"]}
    assert [r["parent_receipt_id"] for r in receipts] == [
        None,
        *[r["receipt_id"] for r in receipts[:-1]],
    ]


MODE_AGENT = agent(
    r"""
emit("INFO", {"message": "mode %s" % os.environ["RUN_MODE"]})
emit("COMPLETED", {"status": "success", "summary": "done in %s" % os.environ["RUN_MODE"]})
"""
)


def _receipt_events(stack: Stack, namespace: str, name: str) -> list[str]:
    got = logged_receipts(
        stack, namespace, name, _ends_with("session.ended"), what=f"the last receipt of {name}"
    )
    return [r["event"] for r in got]


@pytest.mark.parametrize(("mode", "prefix"), [("exec_post", "post-"), ("service", "service:")])
def test_a_sample_agent_completes_in_each_run_mode(
    stack: Stack, namespace: str, mode: str, prefix: str
) -> None:
    sprite = ready_sprite(stack, namespace)
    name = f"mode-{mode.replace('_', '-')}"
    env = [{"name": "RUN_MODE", "value": mode}]
    apply_run(stack, namespace, name, ["python3", "-c", MODE_AGENT], mode=mode, env=env)
    run = stack.wait_phase(namespace, "runs", name, {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert _condition(run)["reason"] == "Completed"
    assert status["sessionId"].startswith(prefix)
    assert status["events"]["completion"]["summary"] == f"done in {mode}"
    assert status["events"]["counts"]["info"] == 1
    assert status["attempts"][0]["exitCode"] == 0
    events = _receipt_events(stack, namespace, name)
    assert events[0] == "session.starting"
    assert events.count("session.started") == 1
    # A service is stopped and removed once its command ended.
    assert stack.sprites.describe(sprite)["services"] == {}


def test_cancel_of_a_service_run_stops_the_service(stack: Stack, namespace: str) -> None:
    sprite = ready_sprite(stack, namespace)
    apply_run(stack, namespace, "served", ["sh", "-c", "echo serving; sleep 600"], mode="service")
    stack.wait_phase(namespace, "runs", "served", {"Running"})
    wait_for(
        lambda: any(stack.sprites.describe(sprite)["services"].values()) or None,
        timeout=30,
        interval=0.2,
        what="the Run's service running",
    )
    stack.cluster.kubectl(
        "patch",
        "run",
        "served",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"spec":{"cancel":true}}',
    )
    run = stack.wait_phase(namespace, "runs", "served", {"Canceled"})
    assert _condition(run)["reason"] == "Canceled"
    assert stack.sprites.describe(sprite)["services"] == {}


GATED_AGENT = agent(
    r"""
emit("INFO", {"message": "before the restart"})
while not os.path.exists("/workspace/go"):
    time.sleep(0.1)
emit("COMPLETED", {"status": "success", "summary": "after the restart"})
"""
)


def test_a_service_run_outlives_an_operator_restart(stack: Stack, namespace: str) -> None:
    """Services outlive connections: the next operator follows the same service again."""
    sprite = ready_sprite(stack, namespace)
    apply_run(stack, namespace, "kept", ["python3", "-c", GATED_AGENT], mode="service")
    wait_for(
        lambda: (
            (stack.get(namespace, "runs", "kept").get("status", {}).get("events") or {}).get(
                "eventCount"
            )
            == 1
        ),
        timeout=60,
        interval=0.2,
        what="the first event",
    )
    [service] = stack.sprites.describe(sprite)["services"]
    stack.crash_and_restart()
    (stack.sprites.host_root(sprite) / "go").write_text("")
    run = stack.wait_phase(namespace, "runs", "kept", {"Succeeded", "Failed"}, timeout=60)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["sessionId"] == f"service:{service}"  # the same service, followed again
    assert status["events"]["eventCount"] == 2
    assert status["events"]["completion"]["summary"] == "after the restart"
    assert len(status["attempts"]) == 1
    assert stack.sprites.describe(sprite)["services"] == {}
