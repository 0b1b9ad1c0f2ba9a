"""`lattice mcp --sprite`: the sprite protocol v1 as tools, for an agent inside a sprite.

Every event is built from the protocol's own payload models and validated by the engine's
EVENT_ADAPTER before it is written, with the identity the operator put in the environment
(LATTICE_SPRITE_ID, LATTICE_WORK_ITEM_ID): an agent cannot emit a malformed or spoofed event
through these tools. Each event goes to the outbox first (durable) and then, best effort,
as a LATTICE_EVENT line to the session's stdout (the agent's own stdout: ours is the MCP
channel). The WAITING discipline (checkpoint, event, stop) is one tool; after WAITING or
COMPLETED every event tool refuses, so nothing can follow them by mistake.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, JsonValue, ValidationError

from lattice_operator.clock import Clock
from lattice_operator.mcp.errors import ToolError
from lattice_operator.mcp.tool_input import Tool, ToolInput, number, tool
from lattice_operator.protocol import models as pm

LATTICE_DIR = "/workspace/.lattice"
CHECKPOINT_TIMEOUT_S = 120.0


def _stdout_copy_path() -> str | None:
    """The session's stdout: our parent's fd 1, unless that is our own MCP channel."""
    explicit = os.environ.get("LATTICE_EVENT_STDOUT")
    if explicit is not None:
        return explicit or None
    parent = f"/proc/{os.getppid()}/fd/1"
    try:
        target = os.stat(parent)
        ours = {(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (0, 1)}
    except OSError:
        return None
    return None if (target.st_dev, target.st_ino) in ours else parent


def take_checkpoint(comment: str) -> str:
    """`sprite-checkpoint --comment …` (the sprite's own CLI); its last word is the ID."""
    try:
        out = subprocess.run(
            ["sprite-checkpoint", "--comment", comment],
            capture_output=True,
            text=True,
            timeout=CHECKPOINT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolError(
            "CHECKPOINT_FAILED",
            f"sprite-checkpoint could not run: {err}",
            "Retry; nothing was emitted",
        ) from None
    words = out.stdout.split()
    if out.returncode != 0 or not words:
        raise ToolError(
            "CHECKPOINT_FAILED",
            f"sprite-checkpoint failed ({out.returncode}): {out.stderr.strip()[:300]}",
            "Retry; nothing was emitted",
        )
    return words[-1]


@dataclass
class SpriteSession:
    """One agent session's emitter: identity, where events go, and whether it has ended."""

    sprite_id: str
    work_item_id: str
    clock: Clock
    lattice_dir: Path = Path(LATTICE_DIR)
    stdout_path: str | None = None
    checkpoint: Callable[[str], str] = take_checkpoint
    ended_by: str | None = None
    emitted: list[str] = field(default_factory=list)

    @classmethod
    def from_environment(cls, clock: Clock) -> SpriteSession:
        missing = [
            n for n in ("LATTICE_SPRITE_ID", "LATTICE_WORK_ITEM_ID") if not os.environ.get(n)
        ]
        if missing:
            raise ToolError(
                "NOT_IN_A_SPRITE",
                f"{' and '.join(missing)} not set",
                "Run `lattice mcp --sprite` inside a sprite session started by the operator",
            )
        return cls(
            sprite_id=os.environ["LATTICE_SPRITE_ID"],
            work_item_id=os.environ["LATTICE_WORK_ITEM_ID"],
            clock=clock,
            lattice_dir=Path(os.environ.get("LATTICE_DIR", LATTICE_DIR)),
            stdout_path=_stdout_copy_path(),
        )

    def emit(self, event_type: pm.EventType, payload: Mapping[str, Any]) -> dict[str, Any]:
        if self.ended_by is not None:
            raise ToolError(
                "SESSION_ENDED",
                f"This session already emitted {self.ended_by}; no event may follow it",
                "Stop working and exit; Lattice resumes you when there is input",
            )
        event = {
            "protocol_version": pm.PROTOCOL_VERSION,
            "event_type": str(event_type),
            "sprite_id": self.sprite_id,
            "work_item_id": self.work_item_id,
            "timestamp": self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "payload": dict(payload),
        }
        line = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        try:
            pm.EVENT_ADAPTER.validate_json(line)
        except ValidationError as err:
            raise _invalid(err) from None
        self.lattice_dir.mkdir(parents=True, exist_ok=True)
        with (self.lattice_dir / "outbox.jsonl").open("a", encoding="utf-8") as outbox:
            outbox.write(line + "\n")
        if self.stdout_path is not None:
            try:
                with open(self.stdout_path, "a", encoding="utf-8") as stdout:
                    stdout.write("LATTICE_EVENT " + line + "\n")
            except OSError:
                self.stdout_path = None  # the outbox alone is a complete record
        self.emitted.append(str(event_type))
        if event_type in (pm.EventType.WAITING, pm.EventType.COMPLETED):
            self.ended_by = str(event_type)
        return event


def _invalid(err: ValidationError) -> ToolError:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if p not in ("payload",))
    return ToolError(
        "INVALID_ARGUMENT",
        f"{where or 'event'}: {first['msg']}",
        "Check the tool's input schema with tools/list",
    )


def _payload(model: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a payload with the protocol's model; keep only the fields that were given."""
    given = {k: v for k, v in data.items() if v is not None}
    try:
        model.model_validate_json(json.dumps(given))
    except ValidationError as err:
        raise _invalid(err) from None
    return given


def _wait(session: SpriteSession, reason: str, expected: Any, comment: str) -> dict[str, Any]:
    _payload(
        pm.WaitingPayload, {"reason": reason, "checkpoint_id": "chk", "expected_inputs": expected}
    )
    checkpoint_id = session.checkpoint(comment)
    session.emit(
        pm.EventType.WAITING,
        _payload(
            pm.WaitingPayload,
            {"reason": reason, "checkpoint_id": checkpoint_id, "expected_inputs": expected},
        ),
    )
    return {
        "checkpoint_id": checkpoint_id,
        "instruction": "WAITING emitted. Stop now and exit; Lattice resumes you with the "
        "inputs (read them with lattice_sprite_resume_inputs).",
    }


Json = dict[str, JsonValue]
_EXPECTED = Field(
    default=None,
    description="Name → type of each input needed on resume: string, integer, boolean, "
    "map, array<T>",
)
_PERCENT, _UNIT = number(0, 100), number(0, 1)


class InfoInput(ToolInput):
    message: str
    kind: str | None = None
    metadata: Json | None = None


class ProgressInput(ToolInput):
    message: str
    percent: Annotated[int | float | None, _PERCENT[0], _PERCENT[1]] = None
    phase: str | None = None


class PhaseInput(ToolInput):
    phase: str
    state: Literal["started", "finished"]
    success: bool | None = Field(default=None, description="Required when finished")


class ArtifactInput(ToolInput):
    kind: str
    ref: str | None = None
    url: str | None = None
    metadata: Json | None = None


class RequestActionInput(ToolInput):
    action: pm.ActionName
    parameters: Json | None = None
    blocking: bool = False
    reason: str | None = None
    expected_inputs: dict[str, str] | None = _EXPECTED


class EnvironmentChangeInput(ToolInput):
    observed_failure: Json
    adjustment_type: pm.AdjustmentType
    details: Json | None = None
    confidence: Annotated[int | float, _UNIT[0], _UNIT[1]]
    evidence: list[str]
    scope: Literal["repo_specific", "global_candidate"]


class WaitInput(ToolInput):
    reason: str
    expected_inputs: dict[str, str] | None = _EXPECTED


class NoInput(ToolInput):
    pass


class CompleteInput(ToolInput):
    status: Literal["success", "failure"]
    summary: str | None = None


class ErrorInput(ToolInput):
    message: str
    details: Json | None = None


def info(s: SpriteSession, a: InfoInput) -> dict[str, Any]:
    p = _payload(pm.InfoPayload, a.model_dump(mode="json"))
    return {"emitted": s.emit(pm.EventType.INFO, p)["event_type"]}


def progress(s: SpriteSession, a: ProgressInput) -> dict[str, Any]:
    metadata = {k: v for k, v in (("percent", a.percent), ("phase", a.phase)) if v is not None}
    p = _payload(pm.InfoPayload, {"message": a.message, "kind": "progress", "metadata": metadata})
    return {"emitted": s.emit(pm.EventType.INFO, p)["event_type"]}


def phase(s: SpriteSession, a: PhaseInput) -> dict[str, Any]:
    if a.state == "started":
        p = _payload(pm.PhaseStartedPayload, {"phase": a.phase})
        return {"emitted": s.emit(pm.EventType.PHASE_STARTED, p)["event_type"]}
    p = _payload(pm.PhaseFinishedPayload, {"phase": a.phase, "success": a.success})
    return {"emitted": s.emit(pm.EventType.PHASE_FINISHED, p)["event_type"]}


def artifact(s: SpriteSession, a: ArtifactInput) -> dict[str, Any]:
    p = _payload(pm.ArtifactPayload, a.model_dump(mode="json"))
    return {"emitted": s.emit(pm.EventType.ARTIFACT, p)["event_type"]}


def request_action(s: SpriteSession, a: RequestActionInput) -> dict[str, Any]:
    action = str(a.action)
    p = _payload(
        pm.ActionRequestPayload,
        {"action": action, "parameters": a.parameters or {}, "blocking": a.blocking},
    )
    if a.blocking:
        # Validate the WAITING part before anything is emitted: the pair is all or nothing.
        reason = a.reason or f"ACTION_{action}"
        _payload(
            pm.WaitingPayload,
            {"reason": reason, "checkpoint_id": "chk", "expected_inputs": a.expected_inputs},
        )
        s.emit(pm.EventType.ACTION_REQUEST, p)
        return {
            "emitted": "ACTION_REQUEST",
            **_wait(s, reason, a.expected_inputs, f"blocking {action}"),
        }
    return {"emitted": s.emit(pm.EventType.ACTION_REQUEST, p)["event_type"]}


def propose_environment_change(s: SpriteSession, a: EnvironmentChangeInput) -> dict[str, Any]:
    p = _payload(
        pm.EnvironmentProposalPayload,
        {
            "observed_failure": a.observed_failure,
            "suggested_adjustment": {"type": str(a.adjustment_type), "details": a.details or {}},
            "confidence": a.confidence,
            "evidence": a.evidence,
            "scope": a.scope,
        },
    )
    return {"emitted": s.emit(pm.EventType.ENVIRONMENT_PROPOSAL, p)["event_type"]}


def wait_for_approval(s: SpriteSession, a: WaitInput) -> dict[str, Any]:
    return {"emitted": "WAITING", **_wait(s, a.reason, a.expected_inputs, "before WAITING")}


def resume_inputs(s: SpriteSession, a: NoInput) -> dict[str, Any]:
    path = s.lattice_dir / "resume.json"
    if not path.exists():
        return {"resumed": False}
    try:
        resume = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ToolError(
            "INVALID_RESUME", f"resume.json is unreadable: {err}", "Report it"
        ) from None
    checkpoint_id = str(resume.get("checkpoint_id", ""))
    marker = s.lattice_dir / f"resumed-{checkpoint_id}"
    replay = marker.exists()
    if not replay:
        s.emit(
            pm.EventType.INFO,
            {"message": f"resumed from {checkpoint_id}", "kind": "note"},
        )
        marker.touch()
    return {
        "resumed": True,
        "replay": replay,
        "checkpoint_id": checkpoint_id,
        "inputs": resume.get("inputs", {}),
        "context": resume.get("context", {}),
    }


def complete(s: SpriteSession, a: CompleteInput) -> dict[str, Any]:
    p = _payload(pm.CompletedPayload, a.model_dump(mode="json"))
    s.emit(pm.EventType.COMPLETED, p)
    return {"emitted": "COMPLETED", "instruction": "Done: exit now."}


def error(s: SpriteSession, a: ErrorInput) -> dict[str, Any]:
    p = _payload(pm.ErrorPayload, a.model_dump(mode="json"))
    checkpoint_id = None
    # Recommended before ERROR, not required: a failed checkpoint does not hide the error.
    with contextlib.suppress(ToolError):
        checkpoint_id = s.checkpoint("before ERROR")
    s.emit(pm.EventType.ERROR, p)
    return {"emitted": "ERROR", "checkpoint_id": checkpoint_id}


SPRITE_TOOLS: tuple[Tool[SpriteSession, dict[str, Any]], ...] = (
    tool(
        "lattice_sprite_info",
        "Emit an INFO event (observation, assumption, note).",
        InfoInput,
        info,
    ),
    tool(
        "lattice_sprite_progress", "Report progress (INFO, kind progress).", ProgressInput, progress
    ),
    tool("lattice_sprite_phase", "Report that a phase started or finished.", PhaseInput, phase),
    tool(
        "lattice_sprite_artifact",
        "Declare a work product (branch, commit, file, pr_url, ...).",
        ArtifactInput,
        artifact,
    ),
    tool(
        "lattice_sprite_request_action",
        "Ask Lattice to act (OPEN_PR, POST_COMMENT, LABEL_ISSUE, NOTIFY_USER, FETCH_CREDENTIAL). "
        "blocking=true also checkpoints and emits WAITING: stop after it.",
        RequestActionInput,
        request_action,
    ),
    tool(
        "lattice_sprite_propose_environment_change",
        "Propose an environment fix (never apply it yourself); applies to future runs.",
        EnvironmentChangeInput,
        propose_environment_change,
    ),
    tool(
        "lattice_sprite_wait_for_approval",
        "Checkpoint, emit WAITING with the checkpoint, then stop: exit after this call.",
        WaitInput,
        wait_for_approval,
    ),
    tool(
        "lattice_sprite_resume_inputs",
        "On start: whether this session is a resume, and its inputs (acknowledged once).",
        NoInput,
        resume_inputs,
    ),
    tool(
        "lattice_sprite_complete",
        "Emit COMPLETED (success or failure); exit after it.",
        CompleteInput,
        complete,
    ),
    tool(
        "lattice_sprite_error",
        "Checkpoint (best effort) and emit ERROR for an unrecoverable failure.",
        ErrorInput,
        error,
    ),
)

__all__ = ["SPRITE_TOOLS", "SpriteSession", "take_checkpoint"]
