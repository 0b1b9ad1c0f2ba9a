"""The change feed: one event per real change, new log lines once, alerts on trouble."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lattice_operator.stream.changes import ChangeFeed

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def run(
    phase: str,
    lines: list[str],
    count: int = 0,
    violations: int = 0,
    api_version: str = "lattice.dev/v1alpha1",
) -> dict[str, Any]:
    owner = {"apiVersion": api_version, "kind": "Intent", "uid": "intent-uid", "controller": True}
    return {
        "metadata": {"name": "r1", "namespace": "ns", "uid": "run-uid", "ownerReferences": [owner]},
        "spec": {"spriteRef": {"name": "s1"}},
        "status": {
            "phase": phase,
            "logTail": lines,
            "events": {"eventCount": count, "violationCount": violations},
        },
    }


def test_a_controller_of_kind_intent_in_another_group_links_the_run_to_no_intent() -> None:
    # It may carry a real Intent's uid: the Run's output must not show under that Intent.
    [event] = ChangeFeed().observe(
        "runs", "ADDED", run("Running", ["a"], 1, api_version="x.io/v1"), NOW
    )
    assert event.intent_id is None


def test_a_runs_new_lines_are_sent_once_with_its_phase() -> None:
    feed = ChangeFeed()
    first = feed.observe("runs", "ADDED", run("Running", ["a", "b"], 2), NOW)
    assert [e.type for e in first] == ["run.output"]
    assert first[0].payload["lines"] == ["a", "b"]
    assert first[0].intent_id == "intent-uid"
    assert first[0].trace_id == "intent-uid"
    assert first[0].run_id == "r1"
    assert first[0].sprite is not None
    assert first[0].sprite.name == "s1"
    again = feed.observe("runs", "MODIFIED", run("Running", ["a", "b"], 2), NOW)
    assert again == []  # a status write that changed nothing we show
    more = feed.observe("runs", "MODIFIED", run("Running", ["b", "c", "d"], 4), NOW)
    assert more[0].payload["lines"] == ["c", "d"]
    done = feed.observe("runs", "MODIFIED", run("Succeeded", ["b", "c", "d"], 5), NOW)
    assert done[0].payload["phase"] == "Succeeded"
    assert done[0].payload["previousPhase"] == "Running"


def test_violations_and_failures_raise_alerts() -> None:
    feed = ChangeFeed()
    feed.observe("runs", "ADDED", run("Running", [], 1), NOW)
    out = feed.observe("runs", "MODIFIED", run("Failed", [], 1, violations=2), NOW)
    alerts = [e for e in out if e.type == "system.alert"]
    assert [a.payload["reason"] for a in alerts] == ["ProtocolViolation", "RunFailed"]
    assert alerts[0].payload["violations"] == 2


def test_an_intents_phase_changes_are_announced_with_what_was_asked() -> None:
    feed = ChangeFeed()
    body: dict[str, Any] = {
        "metadata": {"name": "i1", "namespace": "ns", "uid": "intent-uid"},
        "spec": {
            "kind": "sprite_task_exec",
            "summary": "run the tests",
            "proposedBy": {"type": "agent", "name": "bot"},
        },
        "status": {
            "phase": "AwaitingApproval",
            "classification": {"risk": "controlled", "approversRequired": 1},
        },
    }
    (event,) = feed.observe("intents", "ADDED", body, NOW)
    assert event.type == "intent.updated"
    assert event.payload["summary"] == "run the tests"
    assert event.payload["proposedBy"] == {"type": "agent", "name": "bot"}
    assert event.payload["approversRequired"] == 1
    assert feed.observe("intents", "MODIFIED", body, NOW) == []
    body["status"]["phase"] = "Rejected"
    out = feed.observe("intents", "MODIFIED", body, NOW)
    assert [e.type for e in out] == ["intent.updated", "system.alert"]


def test_deletion_is_announced_and_forgotten() -> None:
    feed = ChangeFeed()
    feed.observe("runs", "ADDED", run("Running", []), NOW)
    assert feed.tracked == 1
    (gone,) = feed.observe("runs", "DELETED", run("Running", []), NOW)
    assert gone.payload["phase"] == "Deleted"
    assert feed.tracked == 0


def test_a_subscriber_starting_late_sees_the_whole_tail_of_a_run() -> None:
    from lattice_operator.stream.hub import EventHub

    feed, hub = ChangeFeed(), EventHub()
    for status in (run("Running", ["alpha"], 1), run("Succeeded", ["alpha", "omega"], 2)):
        for event in feed.observe("runs", "MODIFIED", status, NOW):
            hub.publish(event)
    live, replay = hub.subscribe(allow=lambda e: True, last_event_id=0, now=NOW)
    late, snapshot = hub.subscribe(allow=lambda e: True, last_event_id=None, now=NOW)
    assert [e.payload["lines"] for _, e in replay] == [["alpha"], ["omega"]]
    ((_, first),) = snapshot
    # Deltas for those following along; the whole tail for one who starts from the snapshot.
    assert first.payload["lines"] == ["alpha", "omega"]
    assert first.payload["phase"] == "Succeeded"
    assert first.payload["snapshot"] is True
    assert "previousPhase" not in first.payload
    live.close()
    late.close()


def forge_intent(phase: str, forge: dict[str, Any], uid: str = "intent-uid") -> dict[str, Any]:
    return {
        "metadata": {"name": "plan-app-7", "namespace": "ns", "uid": uid},
        "spec": {"kind": "pr_create_from_plan", "summary": "implement the plan"},
        "status": {"phase": phase, "runRef": {"name": "plan-app-7-run"}, "forge": forge},
    }


def test_what_an_intent_did_on_github_is_sent_as_github_updated_once_per_change() -> None:
    feed = ChangeFeed()
    first = feed.observe(
        "intents", "ADDED", forge_intent("Executing", {"repo": "example/app"}), NOW
    )
    assert [e.type for e in first] == ["intent.updated", "github.updated"]
    started = first[1]
    assert started.payload["repo"] == "example/app"
    assert started.payload["pullRequest"] is None
    assert started.intent_id == started.trace_id == "intent-uid"
    assert started.subject is not None
    assert started.subject.resource == "intents"  # who may get the Intent may see it
    # A retry's bookkeeping (attempts, retryAt) is not a change on GitHub.
    retried = forge_intent("Executing", {"repo": "example/app", "attempts": 2})
    assert feed.observe("intents", "MODIFIED", retried, NOW) == []
    pr = {"number": 12, "url": "https://github.com/example/app/pull/12"}
    opened = forge_intent(
        "Executing", {"repo": "example/app", "pushedSha": "abc", "pullRequest": pr}
    )
    [event] = feed.observe("intents", "MODIFIED", opened, NOW)
    assert event.type == "github.updated"
    assert event.payload["pullRequest"] == pr
    assert event.payload["pushedSha"] == "abc"
    assert event.payload["kind"] == "pr_create_from_plan"
    assert event.run_id == "plan-app-7-run"
    assert feed.observe("intents", "MODIFIED", opened, NOW) == []
    done = forge_intent(
        "Succeeded",
        {"repo": "example/app", "pushedSha": "abc", "pullRequest": pr, "finished": True},
    )
    out = feed.observe("intents", "MODIFIED", done, NOW)
    assert [e.type for e in out] == ["intent.updated", "github.updated"]
    assert out[1].payload["finished"] is True
    assert '"type":"github.updated"' in out[1].wire()


def test_an_intent_that_never_touched_github_sends_no_github_updated() -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "i1", "namespace": "ns", "uid": "u1"},
        "spec": {"kind": "sprite_task_exec"},
        "status": {"phase": "Executing"},
    }
    out = ChangeFeed().observe("intents", "ADDED", body, NOW)
    assert [e.type for e in out] == ["intent.updated"]
