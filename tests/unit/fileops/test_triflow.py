"""TriFlow state operations: a plan through attempts, a split, finalize, blocking, appends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lattice_operator.fileops import triflow
from lattice_operator.fileops.errors import StateRefused

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PLAN = {
    "taskName": "ship it",
    "objective": "release 1.0",
    "context": "a small service",
    "constraints": ["no network"],
    "steps": ["write code", {"title": "test it"}],
    "finalDone": ["released"],
}


def fresh() -> triflow.State:
    outcome = triflow.plan_init(PLAN, None, NOW)
    assert outcome.state is not None
    return outcome.state


def test_plan_init_makes_the_state_and_refuses_a_second_plan() -> None:
    state = fresh()
    assert state.current.type == "step"
    assert state.current.step_index == 0
    assert [s.title for s in state.steps] == ["write code", "test it"]
    todo = triflow.render_todo(state)
    assert "- [ ] 1. write code  ← current" in todo
    assert "## Done when\n- released" in todo
    with pytest.raises(StateRefused, match="exists already"):
        triflow.plan_init(PLAN, "{}", NOW)
    with pytest.raises(StateRefused, match="at least one step"):
        triflow.plan_init({"taskName": "x", "steps": []}, None, NOW)


def test_preflight_counts_attempts_then_asks_for_a_split() -> None:
    state = fresh()
    first = triflow.preflight(state, 2, NOW)
    assert first.status == "ok"
    assert state.steps[0].attempts == 1
    assert "step: write code" in first.data["stepContext"]
    triflow.preflight(state, 2, NOW)
    third = triflow.preflight(state, 2, NOW)
    assert third.status == "split"
    assert third.state is None  # nothing to write


def test_split_finalize_walks_substeps_then_steps_then_completes() -> None:
    state = fresh()
    triflow.apply_split(state, 0, ["a", "b", "c"], NOW)
    assert (state.current.type, state.current.sub_index) == ("substep", 0)
    for expected in (1, 2):
        triflow.finalize(state, "ok", [], NOW)
        assert state.current.sub_index == expected
    done = triflow.finalize(state, "all three", ["x.py"], NOW)
    assert state.steps[0].status == "done"
    assert (state.current.type, state.current.step_index) == ("step", 1)
    assert any("x.py" in line for line in done.log)
    triflow.finalize(state, "tested", [], NOW)
    assert state.current.type == "none"
    assert triflow.preflight(state, 2, NOW).data == {"taskComplete": True}
    with pytest.raises(StateRefused, match="no current step"):
        triflow.finalize(state, "again", [], NOW)


def test_splits_are_bounded_and_sized() -> None:
    state = fresh()
    with pytest.raises(StateRefused, match="3 to 7"):
        triflow.apply_split(state, 0, ["a", "b"], NOW)
    triflow.apply_split(state, 0, ["a", "b", "c"], NOW)
    triflow.apply_split(state, 0, ["a", "b", "c", "d"], NOW)
    with pytest.raises(StateRefused, match="split 2 times"):
        triflow.apply_split(state, 0, ["a", "b", "c"], NOW)


def test_a_blocked_step_makes_preflight_ask() -> None:
    state = fresh()
    triflow.mark_blocked(state, "needs a credential", NOW)
    asked = triflow.preflight(state, 2, NOW)
    assert asked.status == "ask"
    assert "needs a credential" in asked.questions[0]
    assert "(blocked: needs a credential)" in triflow.render_todo(state)


def test_appending_steps_only_when_complete_and_within_the_limit() -> None:
    state = fresh()
    with pytest.raises(StateRefused, match="only when the task is complete"):
        triflow.append_steps(state, ["more"], 2, NOW)
    triflow.finalize(state, "v", [], NOW)
    triflow.finalize(state, "v", [], NOW)
    with pytest.raises(StateRefused, match="at most 2") as refused:
        triflow.append_steps(state, ["a", "b", "c"], 2, NOW)
    assert "follow-up task" in refused.value.hint
    triflow.append_steps(state, ["polish"], 2, NOW)
    assert (state.current.type, state.current.step_index) == ("step", 2)


def test_an_unreadable_state_is_refused_with_where() -> None:
    with pytest.raises(StateRefused, match="does not exist"):
        triflow.load(None, "state.json")
    with pytest.raises(StateRefused, match="not a TriFlow state"):
        triflow.load('{"steps": []}', "state.json")
