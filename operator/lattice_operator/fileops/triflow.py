"""The TriFlow domain operations over `state.json`, `todo.md` and `plan_log.md`, purely.

The protocol names the operations and their effects but not the files' formats; ours
(docs/fileops.md):

    state.json  {"taskName", "objective", "context", "constraints": [..], "finalDone": [..],
                 "steps": [{"title", "status", "attempts", "verification", "splits",
                            "substeps": [{"title", "status", "attempts", "verification"}]}],
                 "current": {"type": "step"|"substep"|"none", "stepIndex", "subIndex"},
                 "blockedReason"}
    todo.md     the checklist rendered from the state (never edited by hand)
    plan_log.md one line appended per change: "- <UTC time> <event>: <detail>"

Each operation takes the state as read and returns what to write and report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lattice_operator.fileops.errors import StateRefused

MAX_SPLITS = 2
"""A step may be split once, and refined once more (the guardrails' "1 retry")."""

ItemStatus = Literal["todo", "doing", "done", "blocked"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Substep(_Model):
    title: str = Field(min_length=1, max_length=1024)
    status: ItemStatus = "todo"
    attempts: int = Field(default=0, ge=0)
    verification: str | None = None


class Step(Substep):
    splits: int = Field(default=0, ge=0)
    substeps: list[Substep] = Field(default_factory=list)


class Current(_Model):
    type: Literal["step", "substep", "none"]
    step_index: int | None = Field(default=None, alias="stepIndex")
    sub_index: int | None = Field(default=None, alias="subIndex")


class State(_Model):
    task_name: str = Field(alias="taskName", min_length=1)
    objective: str = ""
    context: str = ""
    constraints: list[str] = Field(default_factory=list)
    final_done: list[str] = Field(default_factory=list, alias="finalDone")
    steps: list[Step] = Field(default_factory=list)
    current: Current
    blocked_reason: str | None = Field(default=None, alias="blockedReason")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


@dataclass
class Outcome:
    """What an operation decided."""

    state: State | None
    """The state to write (None: unchanged)."""
    log: list[str] = field(default_factory=list)
    """Lines for plan_log.md."""
    data: dict[str, Any] = field(default_factory=dict)
    status: Literal["ok", "split", "ask"] = "ok"
    substeps: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    summary: str = ""


def load(text: str | None, path: str) -> State:
    if text is None:
        raise StateRefused(f"{path} does not exist", "initialise the plan with triflow_plan_init")
    try:
        return State.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StateRefused(
            f"{path} is not a TriFlow state ({where}: {first['msg']})",
            "repair it or initialise the plan again",
        ) from None


def plan_init(plan: dict[str, Any], existing: str | None, now: datetime) -> Outcome:
    if existing is not None:
        raise StateRefused(
            "state.json exists already: a plan is in progress",
            "finish it (triflow_state_finalize) or remove state.json first",
        )
    steps_in = plan.get("steps") or []
    titles = [s.get("title") if isinstance(s, dict) else s for s in steps_in]
    if not titles or not all(isinstance(t, str) and t.strip() for t in titles):
        raise StateRefused("plan.steps must list at least one step title", "give steps: [...]")
    try:
        state = State.model_validate(
            {
                "taskName": plan.get("taskName") or "",
                "objective": plan.get("objective") or "",
                "context": plan.get("context") or "",
                "constraints": _strings(plan.get("constraints")),
                "finalDone": _strings(plan.get("finalDone")),
                "steps": [{"title": t} for t in titles],
                "current": {"type": "step", "stepIndex": 0},
            }
        )
    except ValidationError:
        raise StateRefused("plan.taskName is required", "give the plan a taskName") from None
    state.steps[0].status = "doing"
    return Outcome(
        state,
        log=[_line(now, "plan", f"{state.task_name}: {len(titles)} steps")],
        summary=f"initialised {state.task_name} with {len(titles)} steps",
    )


def preflight(state: State, max_attempts: int, now: datetime) -> Outcome:
    cur = state.current
    if cur.type == "none":
        return Outcome(None, data={"taskComplete": True}, summary="every step is done")
    step, item = _current(state)
    context = _context(state)
    if item.status == "blocked":
        return Outcome(
            None,
            status="ask",
            questions=[
                f"'{item.title}' is blocked: {state.blocked_reason or 'no reason given'}. "
                "How should it proceed?"
            ],
            data={"stepContext": context},
            summary=f"{item.title} is blocked",
        )
    if item.attempts >= max_attempts:
        if cur.type == "step" and not step.substeps:
            return Outcome(
                None,
                status="split",
                data={"stepContext": context, "attempts": item.attempts},
                summary=f"{item.title}: {item.attempts} attempts used; split it into substeps",
            )
        raise StateRefused(
            f"'{item.title}' used its {max_attempts} attempts",
            "mark it blocked (triflow_state_mark_blocked) and ask for help",
        )
    item.attempts += 1
    item.status = "doing"
    if item is not step:
        step.status = "doing"
    return Outcome(
        state,
        log=[_line(now, "attempt", f"{item.title} (attempt {item.attempts}/{max_attempts})")],
        data={"stepContext": _context(state), "state": _summary(state)},
        summary=f"attempt {item.attempts} of {item.title}",
    )


def apply_split(state: State, step_index: int, substeps: list[str], now: datetime) -> Outcome:
    if not 3 <= len(substeps) <= 7:
        raise StateRefused("a split has 3 to 7 substeps", "give between 3 and 7 titles")
    if not 0 <= step_index < len(state.steps):
        raise StateRefused(f"there is no step {step_index}", "use the index of a step")
    step = state.steps[step_index]
    if step.status == "done":
        raise StateRefused(f"step {step_index} is done", "split a step that is not done")
    if step.splits >= MAX_SPLITS:
        raise StateRefused(
            f"step {step_index} was split {step.splits} times already",
            "mark it blocked and rethink the plan",
        )
    step.substeps = [Substep(title=t) for t in substeps]
    step.splits += 1
    step.status = "doing"
    step.substeps[0].status = "doing"
    state.current = Current(type="substep", stepIndex=step_index, subIndex=0)
    state.blocked_reason = None
    return Outcome(
        state,
        log=[_line(now, "split", f"{step.title} into {len(substeps)} substeps")],
        data={"state": _summary(state)},
        summary=f"split {step.title} into {len(substeps)} substeps",
    )


def finalize(state: State, verification: str, changed: list[str], now: datetime) -> Outcome:
    if state.current.type == "none":
        raise StateRefused("there is no current step to finalize", "the task is complete")
    step, item = _current(state)
    item.status = "done"
    item.verification = verification
    detail = f"{item.title} — {verification}"
    if changed:
        detail += f" (changed: {', '.join(changed[:20])})"
    log = [_line(now, "done", detail)]
    cur = state.current
    if cur.type == "substep":
        following = [i for i, s in enumerate(step.substeps) if s.status != "done"]
        if following:
            state.current = Current(type="substep", stepIndex=cur.step_index, subIndex=following[0])
            step.substeps[following[0]].status = "doing"
            return Outcome(state, log=log, data={"state": _summary(state)}, summary=detail)
        step.status = "done"
        step.verification = verification
        log.append(_line(now, "done", step.title))
    _advance(state)
    return Outcome(state, log=log, data={"state": _summary(state)}, summary=detail)


def mark_blocked(state: State, reason: str, now: datetime) -> Outcome:
    if state.current.type == "none":
        raise StateRefused("there is no current step to block", "the task is complete")
    step, item = _current(state)
    item.status = "blocked"
    if item is not step:
        step.status = "blocked"
    state.blocked_reason = reason
    return Outcome(
        state,
        log=[_line(now, "blocked", f"{item.title}: {reason}")],
        data={"state": _summary(state)},
        summary=f"{item.title} blocked",
    )


def append_steps(state: State, steps: list[str], max_allowed: int, now: datetime) -> Outcome:
    if state.current.type != "none":
        raise StateRefused(
            "steps can be appended only when the task is complete (current.type is none)",
            "finish the current step first",
        )
    if len(steps) > max_allowed:
        raise StateRefused(
            f"{len(steps)} steps asked, at most {max_allowed} may be appended",
            "create a follow-up task for the rest",
        )
    first = len(state.steps)
    state.steps.extend(Step(title=t) for t in steps)
    state.steps[first].status = "doing"
    state.current = Current(type="step", stepIndex=first)
    return Outcome(
        state,
        log=[_line(now, "appended", "; ".join(steps))],
        data={"state": _summary(state)},
        summary=f"appended {len(steps)} step(s)",
    )


def render_todo(state: State) -> str:
    marks = {"todo": " ", "doing": " ", "done": "x", "blocked": "!"}
    out = [f"# {state.task_name}", ""]
    if state.objective:
        out += [state.objective, ""]
    cur = state.current
    for i, step in enumerate(state.steps):
        here = cur.type == "step" and cur.step_index == i
        note = f" (blocked: {state.blocked_reason})" if step.status == "blocked" else ""
        out.append(
            f"- [{marks[step.status]}] {i + 1}. {step.title}{note}{'  ← current' if here else ''}"
        )
        for j, sub in enumerate(step.substeps):
            here = cur.type == "substep" and cur.step_index == i and cur.sub_index == j
            arrow = "  ← current" if here else ""
            out.append(f"  - [{marks[sub.status]}] {i + 1}.{j + 1} {sub.title}{arrow}")
    if state.final_done:
        out += ["", "## Done when", *(f"- {d}" for d in state.final_done)]
    return "\n".join(out) + "\n"


def _advance(state: State) -> None:
    for i, step in enumerate(state.steps):
        if step.status != "done":
            if step.substeps:
                j = next(k for k, s in enumerate(step.substeps) if s.status != "done")
                state.current = Current(type="substep", stepIndex=i, subIndex=j)
                step.substeps[j].status = "doing"
            else:
                state.current = Current(type="step", stepIndex=i)
            step.status = "doing" if step.status == "todo" else step.status
            return
    state.current = Current(type="none")


def _current(state: State) -> tuple[Step, Substep]:
    cur = state.current
    try:
        step = state.steps[cur.step_index or 0]
        if cur.type == "substep":
            return step, step.substeps[cur.sub_index or 0]
    except IndexError:
        raise StateRefused(
            f"current points at no step ({cur.model_dump(by_alias=True)})",
            "repair state.json's current",
        ) from None
    return step, step


def _context(state: State) -> str:
    if state.current.type == "none":
        return f"{state.task_name}: complete"
    step, item = _current(state)
    parts = [f"{state.task_name} — {state.objective}".rstrip(" —"), f"step: {step.title}"]
    if item is not step:
        parts.append(f"substep: {item.title}")
    parts.append(f"attempts: {item.attempts}")
    if state.constraints:
        parts.append("constraints: " + "; ".join(state.constraints))
    return "\n".join(parts)


def _summary(state: State) -> dict[str, Any]:
    done = sum(1 for s in state.steps if s.status == "done")
    return {
        "current": state.current.model_dump(by_alias=True),
        "stepsDone": done,
        "steps": len(state.steps),
    }


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _line(now: datetime, event: str, detail: str) -> str:
    return f"- {now.strftime('%Y-%m-%dT%H:%M:%SZ')} {event}: {detail}"


__all__ = [
    "Outcome",
    "State",
    "append_steps",
    "apply_split",
    "finalize",
    "load",
    "mark_blocked",
    "plan_init",
    "preflight",
    "render_todo",
]
