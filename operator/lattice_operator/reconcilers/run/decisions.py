"""The Run driver's decisions, as pure functions over models (no I/O, no clock).

How an attempt ended and what that means (failure class, retry or not, phase), which
resume the spec asks for and whether it is acceptable, what a blocking request's answer
resumes with, what an action request gets, where a new Run's outbox begins. The driver
and its effects only carry these decisions out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lattice_operator.api.v1alpha1 import Run, RunStatus
from lattice_operator.api.v1alpha1.run import ActionResult, ResumeStatus
from lattice_operator.lifeloop.classes import FailureClass, RetryClass
from lattice_operator.lifeloop.mapping import RunTransition
from lattice_operator.ports import Grants
from lattice_operator.protocol.inputs import validate_resume_inputs
from lattice_operator.protocol.projection import (
    ActionRequestStatus,
    RunEventsStatus,
    WaitingStatus,
)
from lattice_operator.reconcilers.grants import GrantDecision
from lattice_operator.reconcilers.run.reasons import EndReason, Reason

FORGE_ACTIONS = frozenset({"OPEN_PR", "POST_COMMENT", "LABEL_ISSUE"})
CREDENTIALS_DIR = "/dev/shm/lattice/credentials"
"""Memory, not disk: never captured by a checkpoint, gone when the sprite stops (the operator
delivers again after a resume restores a checkpoint)."""

OUTBOX_PATH = "/workspace/.lattice/outbox.jsonl"
RESUME_PATH = "/workspace/.lattice/resume.json"
PREVIOUS_RESUME_PATH = "/workspace/.lattice/resume.previous.json"
"""Where a new Run moves the resume file an earlier Run left (never read by the operator)."""

# The wrapper records the command's exit status on disk: the backend cannot tell the
# exit status of a session that ended while nobody was attached. On a Run's first session
# ("claim") it first makes the protocol files the Run's own, in the sprite, before the
# command runs, with no round trip of the operator's on the way to the exec: an earlier
# Run's resume file is moved aside, and the outbox's length is written next to the exit
# file (`<exit file>.start`), from where this Run's lines begin. Before anything else it
# takes the session's marker (`<exit file>.began`, created only if absent): a second start of
# the same attempt and session — an exec whose answer was lost and that the backend started
# late, or one started again after a crash that lost the status write — runs nothing and
# exits with ALREADY_BEGUN, and the operator then follows the first (`SessionRunner`).
BEGUN_SUFFIX = ".began"
"""`<exit file>.began`: the session's marker, taken by the wrapper before the command runs."""
ALREADY_BEGUN = 75
"""The wrapper's exit status when the session's marker was taken already (nothing ran). An
agent may exit 75 too: its wrapper writes the exit file, a refusing one does not."""
_WRAPPER = (
    'f="$1"; k="$2"; shift 2; mkdir -p "$(dirname "$f")"; '
    f'if ! (set -C; : > "$f{BEGUN_SUFFIX}") 2>/dev/null; then '
    f'echo "lattice-run: $f has begun already; not run again" >&2; exit {ALREADY_BEGUN}; fi; '
    'if [ "$k" = claim ]; then '
    f"if [ -e {RESUME_PATH} ]; then mv -f {RESUME_PATH} {PREVIOUS_RESUME_PATH}; fi; "
    f"s=0; if [ -f {OUTBOX_PATH} ]; then s=$(wc -c < {OUTBOX_PATH}); fi; "
    'printf "%s\\n" "$s" > "$f.start.tmp" && mv "$f.start.tmp" "$f.start"; fi; '
    '"$@"; c=$?; '
    'printf "%s\\n" "$c" > "$f.tmp" && mv "$f.tmp" "$f"; exit "$c"'
)
START_SUFFIX = ".start"
"""`<exit file>.start`: the outbox's length when a Run's first session began."""

# Failure reasons → Lifeloop failure class (one table). Retries happen only where the
# class's retry posture allows one (safe_retry, retry_after_reread).
FAILURE_CLASSES: Mapping[str, FailureClass] = {
    EndReason.EXIT_CODE: FailureClass.INTERNAL_ERROR,
    EndReason.COMPLETED_FAILURE: FailureClass.INTERNAL_ERROR,
    EndReason.SPRITE_ERROR: FailureClass.INTERNAL_ERROR,
    EndReason.EXIT_UNKNOWN: FailureClass.TRANSPORT_ERROR,
    EndReason.SESSION_LOST: FailureClass.TRANSPORT_ERROR,
    EndReason.START_FAILED: FailureClass.ADAPTER_UNAVAILABLE,  # unless the adapter says more
    EndReason.SPRITE_MISSING: FailureClass.ADAPTER_UNAVAILABLE,
    EndReason.TIMEOUT: FailureClass.TIMEOUT,
    EndReason.RESUME_FAILED: FailureClass.STATE_CONFLICT,
    EndReason.RUN_POLICY: FailureClass.INVALID_REQUEST,
    EndReason.ENVIRONMENT_FAILED: FailureClass.OPERATOR_REQUIRED,
}
RETRYABLE = frozenset({RetryClass.SAFE_RETRY, RetryClass.RETRY_AFTER_REREAD})
NOT_RETRIED = frozenset({EndReason.TIMEOUT})
"""A timeout is the Run's whole budget, not one attempt's: never retried."""

_UNKNOWN_PHASE_BY_REASON: dict[str, str] = {
    Reason.PENDING: "Pending",
    Reason.SPRITE_NOT_READY: "Pending",
    Reason.SPRITE_BUSY: "Pending",
    Reason.STARTING: "Starting",
    Reason.RUNNING: "Running",
    Reason.REATTACHING: "Running",
    Reason.WAITING: "Waiting",
    Reason.RESUMING: "Resuming",
}


def phase_of(status: RunStatus) -> str:
    """The phase, derived from the Succeeded condition (never the other way round)."""
    cond = next((c for c in status.conditions if c.type == "Succeeded"), None)
    if cond is None:
        return "Pending"
    if cond.status == "True":
        return "Succeeded"
    if cond.status == "False":
        return "Canceled" if cond.reason == Reason.CANCELED else "Failed"
    return _UNKNOWN_PHASE_BY_REASON.get(cond.reason, "Running")


def failure_class(reason: str, given: FailureClass | None = None) -> FailureClass:
    """The failure class of an ending: what the adapter said, else the table's."""
    return given or FAILURE_CLASSES.get(reason, FailureClass.INTERNAL_ERROR)


def retries_left(reason: str, failure: FailureClass, attempts: int, retries: int) -> bool:
    """Whether a failed attempt is tried again: a retryable class, not a timeout, and the
    Run's `retries` not used up."""
    return failure.default_retry in RETRYABLE and reason not in NOT_RETRIED and attempts <= retries


@dataclass(frozen=True)
class SessionEnd:
    """How a session ended, as the driver saw it."""

    exit_code: int | None
    lost: bool = False
    """The session could not be followed to its end (re-attach failed)."""
    killed_for: str | None = None
    """Canceled, Timeout or AfterWaiting when the operator stopped it."""


def judge(events: RunEventsStatus, end: SessionEnd) -> tuple[str | None, str]:
    """(failure reason, or None for success; message) of a session that ended.

    The terminal event decides: COMPLETED (success needs exit status 0 too), else an
    ERROR of this session, else the exit status. An unknown exit is never a success.
    """
    if end.lost:
        return EndReason.SESSION_LOST, (
            "the session could not be re-attached and its outcome is unknown"
        )
    completion = events.completion
    if completion is not None and completion.status == "failure":
        return EndReason.COMPLETED_FAILURE, completion.summary or "COMPLETED with status failure"
    if completion is None:
        errors = [e for e in events.errors if e.session == events.session]
        if errors:
            return EndReason.SPRITE_ERROR, f"the sprite reported an error: {errors[-1].message}"
    if end.exit_code is None:
        return EndReason.EXIT_UNKNOWN, "the session ended and its exit status is unknown"
    if end.exit_code != 0:
        return EndReason.EXIT_CODE, f"the command exited with status {end.exit_code}"
    if completion is not None:
        return None, completion.summary or "completed"
    return None, "the command exited with status 0 (no COMPLETED event)"


def ending_transition(events: RunEventsStatus, end: SessionEnd) -> RunTransition:
    """The receipt of a session's end: exited, exited without announcing it, or lost."""
    if end.lost:
        return RunTransition.SESSION_LOST
    if events.completion is None and not events.errors and events.waiting is None:
        return RunTransition.EXEC_EXITED_UNANNOUNCED
    return RunTransition.EXEC_EXITED


def resume_digest(checkpoint_id: str, inputs: Mapping[str, Any]) -> str:
    """Identity of a resume request: the same checkpoint and inputs are the same resume."""
    canonical = json.dumps({"c": checkpoint_id, "i": inputs}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def requested_resume(run: Run, state: ResumeStatus | None) -> str | None:
    """The digest of the resume `spec.resume` asks for, if it is new (neither applied nor
    already refused)."""
    resume = run.spec.resume
    if resume is None or not resume.checkpoint_id:
        return None
    digest = resume_digest(resume.checkpoint_id, resume.inputs)
    if state is not None and digest in (state.applied_digest, state.refused_digest):
        return None
    return digest


def resume_problems(run: Run, state: ResumeStatus, waiting: WaitingStatus | None) -> list[str]:
    """Why `spec.resume` cannot be applied (empty: it can): the checkpoint must be the one
    the Run waits on, and the inputs must match the WAITING's expected inputs."""
    resume = run.spec.resume
    assert resume is not None
    problems: list[str] = []
    expected_ids = {state.checkpoint_id, waiting.checkpoint_id if waiting else None}
    if resume.checkpoint_id not in expected_ids:
        problems.append(
            f"checkpointId {resume.checkpoint_id!r} is not the one the Run waits on "
            f"({state.checkpoint_id!r})"
        )
    if waiting is not None:
        problems += [
            f"{p.field}: {p.reason}"
            for p in validate_resume_inputs(waiting.expected_inputs, resume.inputs)
        ]
    return problems


@dataclass(frozen=True)
class AutoResume:
    """A resume the operator starts itself: the answer to the blocking request it waits on."""

    request_id: str
    inputs: dict[str, Any]
    digest: str


def auto_resume(events: RunEventsStatus, results: list[ActionResult]) -> AutoResume | None:
    """The resume due when the sprite waits on a blocking request the operator answered."""
    waiting = events.waiting
    if waiting is None:
        return None
    # The blocking request this WAITING follows (the projection links it only while the
    # request is still pending; the operator may have answered it before WAITING came).
    request_id = waiting.request_id or next(
        (
            r.request_id
            for r in reversed(events.action_requests)
            if r.blocking and r.session == waiting.session and r.line < waiting.line
        ),
        None,
    )
    if request_id is None:
        return None
    result = next((r for r in results if r.request_id == request_id), None)
    if result is None or result.status == "queued" or result.resumed:
        return None
    answer = {
        "status": result.status,
        "reason": result.reason,
        "path": result.path,
        "url": result.url,
        "number": result.number,
    }
    inputs = {k: v for k, v in answer.items() if k in waiting.expected_inputs and v is not None}
    digest = resume_digest(waiting.checkpoint_id, {"answer": result.request_id, **inputs})
    return AutoResume(result.request_id, inputs, digest)


@dataclass(frozen=True)
class ActionDecision:
    """What an ACTION_REQUEST gets: refused (with a metric label), queued, a notice, or a
    credential to deliver."""

    kind: Literal["refuse", "queue", "notify", "fetch", "forge"]
    reason: str = ""
    """Refusals: the metric label."""
    message: str = ""
    """Refusals: why (shown to the sprite); notices: the text."""
    credential: str = ""
    secret: tuple[str, str] = ("", "")
    """fetch: (Secret name, key)."""


def decide_action(
    request: ActionRequestStatus, decision: GrantDecision, intent: str | None
) -> ActionDecision:
    """An action request checked against the Intent's grants (intentRef alone grants
    nothing)."""
    action = request.action.value
    grants: Grants | None = decision.grants
    if grants is None:
        return ActionDecision("refuse", decision.reason, decision.message)
    if action not in grants.allowed_actions:
        return ActionDecision(
            "refuse", "not_granted", f"{action} is not in Intent {intent}'s allowedActions"
        )
    if action in FORGE_ACTIONS:
        return ActionDecision("forge")
    parameters = request.parameters or {}
    if action == "NOTIFY_USER":
        text = str(parameters.get("message") or parameters.get("body") or "")[:1000]
        return ActionDecision("notify", message=text)
    name = parameters.get("name") or parameters.get("credential")
    if not isinstance(name, str) or name not in grants.credentials:
        return ActionDecision(
            "refuse",
            "credential_not_granted",
            f"credential {name!r} is not granted by Intent {intent}",
        )
    return ActionDecision("fetch", credential=name, secret=grants.credentials[name])


def credential_path(name: str) -> str:
    return f"{CREDENTIALS_DIR}/{name}"


def delivered_credentials(results: list[ActionResult]) -> list[str]:
    """Paths of the credentials written into the sprite for this Run."""
    return [
        r.path
        for r in results
        if r.action == "FETCH_CREDENTIAL" and r.status == "fulfilled" and r.path
    ]


def outbox_start(size: int, tail: bytes, offset: int) -> int:
    """Where a new Run's outbox lines begin: after the last complete line of what earlier
    Runs wrote (`tail`: the file's bytes from `offset` to `size`). An unterminated last
    line is left to this Run: whatever is appended to it is then one bad line, reported,
    rather than silently skipped."""
    if not size:
        return 0
    newline = tail.rfind(b"\n")
    return offset + newline + 1 if newline >= 0 or offset == 0 else size


def wrapped_command(
    argv: list[str], env: Mapping[str, str], exit_file: str, *, claim: bool = False
) -> list[str]:
    """argv run under `env` (added to the sprite's own environment) and the exit wrapper;
    `claim`: the Run's first session, which makes the protocol files the Run's own first."""
    assignments = [f"{k}={v}" for k, v in env.items()]
    mode = "claim" if claim else "-"
    return ["env", *assignments, "sh", "-c", _WRAPPER, "lattice-run", exit_file, mode, *argv]


def resume_context(
    run_name: str, segment: int, answer: str | None, results: list[ActionResult]
) -> tuple[dict[str, Any], list[ActionResult]]:
    """resume.json's `context`, and the answers it delivers: the answer the resume is for,
    and every answer the sprite has not been given yet (refusals of non-blocking requests
    included: a resume is the only way the operator can reach a running program)."""
    context: dict[str, Any] = {"run": run_name, "session": segment + 1}
    if answer is not None:
        result = next((r for r in results if r.request_id == answer), None)
        if result is not None:
            context["action_result"] = result.to_wire()
    undelivered = [r for r in results if not r.resumed]
    if undelivered:
        context["action_results"] = [r.to_wire() for r in undelivered]
    return context, undelivered


__all__ = [
    "ALREADY_BEGUN",
    "BEGUN_SUFFIX",
    "CREDENTIALS_DIR",
    "FAILURE_CLASSES",
    "FORGE_ACTIONS",
    "NOT_RETRIED",
    "OUTBOX_PATH",
    "PREVIOUS_RESUME_PATH",
    "RESUME_PATH",
    "RETRYABLE",
    "START_SUFFIX",
    "ActionDecision",
    "AutoResume",
    "SessionEnd",
    "auto_resume",
    "credential_path",
    "decide_action",
    "delivered_credentials",
    "ending_transition",
    "failure_class",
    "judge",
    "outbox_start",
    "phase_of",
    "requested_resume",
    "resume_context",
    "resume_digest",
    "resume_problems",
    "retries_left",
    "wrapped_command",
]
