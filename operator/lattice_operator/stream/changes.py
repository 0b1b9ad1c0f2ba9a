"""From watch events to stream events: what changed in an Intent, a Run or a Sprite.

Pure over the objects as the API server sends them (camelCase dicts), with a small memory of
the last state seen per object (its uid), forgotten when the object is deleted: a Run's new
log lines are sent once, a phase change is announced once, whatever else the object's many
status writes changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice_operator.api.v1alpha1.resources import GROUP
from lattice_operator.stream.envelope import SpriteName, StreamEvent, Subject

_MAX_LINES = 20
"""A Run's status keeps its last 20 log lines; a burst beyond that is not re-sent."""


@dataclass
class _Seen:
    phase: str | None = None
    lines: tuple[str, ...] = ()
    events: int = 0
    violations: int = 0
    progress: tuple[Any, ...] = ()
    forge: tuple[Any, ...] = ()


class ChangeFeed:
    """Turns successive versions of objects into stream events."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    @property
    def tracked(self) -> int:
        return len(self._seen)

    def observe(
        self, resource: str, kind: str, body: dict[str, Any], now: datetime
    ) -> list[StreamEvent]:
        """`kind` is the watch event's type (ADDED, MODIFIED, DELETED, or None for a listing)."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return []
        if kind == "DELETED":
            self._seen.pop(uid, None)
            return [self._event(resource, body, now, "deleted", {"phase": "Deleted"})]
        seen = self._seen.setdefault(uid, _Seen())
        if resource == "runs":
            return self._run(body, seen, now)
        if resource == "intents":
            return self._intent(body, seen, now)
        if resource == "sprites":
            return self._sprite(body, seen, now)
        return []

    # -- per kind -------------------------------------------------------------------------
    def _run(self, body: dict[str, Any], seen: _Seen, now: datetime) -> list[StreamEvent]:
        status = body.get("status") or {}
        events = status.get("events") or {}
        phase = status.get("phase") or "Pending"
        lines = tuple(str(x) for x in status.get("logTail") or [])
        progress = events.get("progress") or {}
        progress_key = (progress.get("percent"), progress.get("message"))
        count = int(events.get("eventCount") or 0)
        violations = int(events.get("violationCount") or 0)
        out: list[StreamEvent] = []
        new_lines = _new_lines(seen.lines, lines)
        changed = (
            phase != seen.phase
            or new_lines
            or progress_key != seen.progress
            or count != seen.events
        )
        if changed:
            payload: dict[str, Any] = {
                "phase": phase,
                "events": count,
                "currentPhase": events.get("currentPhase"),
                "progress": progress or None,
                "lines": list(new_lines),
            }
            if phase != seen.phase:
                payload["previousPhase"] = seen.phase
            event = self._event("runs", body, now, "run.output", payload)
            # A subscriber starting now sees the whole (bounded) tail, not just this delta.
            whole = {**event.payload, "lines": list(lines), "snapshot": True}
            whole.pop("previousPhase", None)
            out.append(event.model_copy(update={"snapshot_payload": whole}))
        if violations > seen.violations:
            out.append(
                self._event(
                    "runs",
                    body,
                    now,
                    "system.alert",
                    {
                        "severity": "warning",
                        "reason": "ProtocolViolation",
                        "message": f"{violations - seen.violations} new protocol violation(s)",
                        "violations": violations,
                    },
                )
            )
        if phase == "Failed" and seen.phase != "Failed":
            out.append(
                self._event(
                    "runs",
                    body,
                    now,
                    "system.alert",
                    {"severity": "error", "reason": "RunFailed", "message": _message(status)},
                )
            )
        seen.phase, seen.lines, seen.events = phase, lines, count
        seen.violations, seen.progress = violations, progress_key
        return out

    def _intent(self, body: dict[str, Any], seen: _Seen, now: datetime) -> list[StreamEvent]:
        status = body.get("status") or {}
        spec = body.get("spec") or {}
        phase = status.get("phase") or "Proposed"
        out = self._forge(body, seen, now)
        if phase == seen.phase:
            return out
        classification = status.get("classification") or {}
        proposed = spec.get("proposedBy") or {}
        payload = {
            "phase": phase,
            "previousPhase": seen.phase,
            "kind": spec.get("kind"),
            "summary": spec.get("summary"),
            "proposedBy": {k: proposed.get(k) for k in ("type", "name") if proposed.get(k)},
            "risk": classification.get("risk"),
            "approversRequired": classification.get("approversRequired"),
            "approvals": len(status.get("approvals") or []),
            "run": (status.get("runRef") or {}).get("name"),
        }
        seen.phase = phase
        out.insert(0, self._event("intents", body, now, "intent.updated", payload))
        if phase in ("Failed", "Rejected") and payload["previousPhase"] is not None:
            out.append(
                self._event(
                    "intents",
                    body,
                    now,
                    "system.alert",
                    {
                        "severity": "warning",
                        "reason": f"Intent{phase}",
                        "message": _message(status),
                    },
                )
            )
        return out

    def _forge(self, body: dict[str, Any], seen: _Seen, now: datetime) -> list[StreamEvent]:
        """github.updated: what an Intent did on GitHub changed (a branch pushed, a pull
        request opened, issues created, the forge side finished, or why it waits)."""
        forge = (body.get("status") or {}).get("forge")
        if not isinstance(forge, dict):
            return []
        pull = forge.get("pullRequest") or {}
        payload: dict[str, Any] = {
            "kind": (body.get("spec") or {}).get("kind"),
            "repo": forge.get("repo"),
            "pullRequest": {"number": pull.get("number"), "url": pull.get("url")} if pull else None,
            "issues": list(forge.get("issues") or []),
            "pushedSha": forge.get("pushedSha"),
            "followup": forge.get("followup"),
            "finished": bool(forge.get("finished")),
            "problem": forge.get("problem"),
        }
        # Keyed on what a person sees on GitHub, not on attempts or retry times.
        key = tuple(str(v) for k, v in sorted(payload.items()) if k != "kind")
        if key == seen.forge:
            return []
        seen.forge = key
        return [self._event("intents", body, now, "github.updated", payload)]

    def _sprite(self, body: dict[str, Any], seen: _Seen, now: datetime) -> list[StreamEvent]:
        status = body.get("status") or {}
        phase = str(status.get("phase") or status.get("backendStatus") or "Pending")
        ready = _condition(status, "Ready")
        key = f"{phase}/{ready}"
        if key == seen.phase:
            return []
        seen.phase = key
        payload = {
            "phase": phase,
            "ready": ready,
            "backendStatus": status.get("backendStatus"),
            "message": _message(status, "Ready"),
        }
        return [self._event("sprites", body, now, "sprite.updated", payload)]

    # -- envelope -------------------------------------------------------------------------
    def _event(
        self,
        resource: str,
        body: dict[str, Any],
        now: datetime,
        kind: str,
        payload: dict[str, Any],
    ) -> StreamEvent:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        uid = str(meta.get("uid") or "")
        name = str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "")
        intent = None
        run = None
        sprite = None
        if resource == "intents":
            intent = uid
            run_ref = ((body.get("status") or {}).get("runRef") or {}).get("name")
            run = run_ref
            sprite_name = ((body.get("status") or {}).get("spriteRef") or {}).get("name")
            sprite = SpriteName(name=sprite_name) if sprite_name else None
        elif resource == "runs":
            run = name
            intent = _controller_intent(meta)
            sprite_name = (spec.get("spriteRef") or {}).get("name")
            sprite = SpriteName(name=sprite_name) if sprite_name else None
        else:
            sprite = SpriteName(name=name)
        if kind == "deleted":
            kind = {"runs": "run.output", "intents": "intent.updated"}.get(
                resource, "sprite.updated"
            )
        return StreamEvent.model_validate(
            {
                "type": kind,
                "ts": now,
                "trace_id": intent or uid,
                "intent_id": intent,
                "run_id": run,
                "sprite": sprite,
                "payload": {"namespace": namespace, "name": name, **payload},
                "subject": Subject(namespace=namespace, resource=resource, name=name),
            }
        )


def _new_lines(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[str, ...]:
    """The lines of `after` that follow what `before` ended with (a sliding tail)."""
    if not before:
        return after
    for overlap in range(min(len(before), len(after)), 0, -1):
        if before[-overlap:] == after[:overlap]:
            return after[overlap:]
    return after


def _controller_intent(meta: dict[str, Any]) -> str | None:
    # Our group only: a controller of kind Intent elsewhere may carry a real Intent's uid.
    for ref in meta.get("ownerReferences") or []:
        ours = str(ref.get("apiVersion") or "").split("/")[0] == GROUP
        if ours and ref.get("kind") == "Intent" and ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


def _condition(status: dict[str, Any], kind: str) -> str | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def _message(status: dict[str, Any], kind: str | None = None) -> str:
    for cond in status.get("conditions") or []:
        mine = isinstance(cond, dict) and (kind is None or cond.get("type") == kind)
        if mine and (cond.get("message") or cond.get("reason")):
            return f"{cond.get('reason') or ''}: {cond.get('message') or ''}".strip(": ")
    return ""


__all__ = ["ChangeFeed"]
