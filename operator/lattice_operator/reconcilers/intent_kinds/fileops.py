"""fileops: the operator carries the FileOpsREQ out in the Intent's Sprite (the handler
does, after the attempt is counted); the FileOpsRES it records ends the Intent."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Intent, LocalObjectReference, find_condition
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.api.v1alpha1.fileops_response import StoredFileOpsResponse
from lattice_operator.api.v1alpha1.intent import FileOpsStatus, IntentResult
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_limits import SUMMARY_CHARS
from lattice_operator.reconcilers.intent_pass import FileOpsWork, IntentPass
from lattice_operator.reconcilers.intent_reasons import IntentReason

ANSWERED = frozenset({"ok", "split", "ask"})
"""Outcomes that end the Intent Succeeded: split and ask are answers for the planner."""


def fileops_sprite(intent: Intent) -> str | None:
    """The Sprite a fileops Intent works in (its subject)."""
    subject = intent.spec.subject
    return subject.ref if subject is not None and subject.type == "sprite" else None


class FileOps:
    """fileops: the request of params.fileops, in the Sprite of spec.subject."""

    def sprite(self, intent: Intent) -> str | None:
        return fileops_sprite(intent)

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        request = step.intent.spec.params.fileops
        if request is None:
            step.missing_params()
            return
        name = fileops_sprite(step.intent)
        if name is None:
            step.fail(
                IntentReason.FILEOPS_NO_SPRITE,
                "a fileops Intent names its Sprite: subject {type: sprite, ref: NAME}",
            )
            return
        step.status.sprite_ref = LocalObjectReference(name=name)
        done = step.status.fileops
        if done is not None and done.response is not None:
            _answered(step, done.response)
            return
        _attempt(step, request, name, done.attempts if done is not None else 0)


def _answered(step: IntentPass, recorded: dict[str, Any]) -> None:
    try:
        response = StoredFileOpsResponse.model_validate(recorded)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "(response)"
        step.fail(
            IntentReason.FILEOPS_FAILED,
            f"status.fileops.response is not a FileOpsRES: {where}: {problem['msg']}",
        )
        return
    summary = _summary(response)
    message = f"FileOps {response.status}: {summary}"
    if response.status in ANSWERED:
        step.status.result = IntentResult(status="success", summary=summary[:SUMMARY_CHARS])
        step.set("Succeeded", "True", IntentReason.COMPLETED, message)
    else:
        step.status.result = IntentResult(status="failure", summary=summary[:SUMMARY_CHARS])
        step.set("Succeeded", "False", IntentReason.FILEOPS_FAILED, message)


def _summary(response: StoredFileOpsResponse) -> str:
    """One line for the result: what changed, why it failed, what it asks."""
    if response.status == "ok":
        changed = ", ".join(response.changed_files or []) or "nothing"
        return f"{len(response.ops or [])} ops done; changed: {changed}"
    if response.fail is not None:
        return response.fail.reason
    if response.split is not None:
        return "the step needs substeps"
    if response.ask is not None:
        return "; ".join(response.ask.questions)
    return "; ".join(f"{e.field}: {e.error}" for e in response.errors or [])


def _attempt(step: IntentPass, request: FileOpsRequest, name: str, attempts: int) -> None:
    """Count an attempt and hand it to the handler, once the Sprite is Ready (bounded by
    constraints.max_attempts: an operator that stopped mid-way leaves one counted)."""
    limit = request.constraints.max_attempts
    if attempts >= limit:
        step.fail(
            IntentReason.FILEOPS_FAILED,
            f"the request was started {attempts} times and never finished "
            f"(constraints.max_attempts is {limit})",
        )
        return
    sprite = step.world.sprite
    ready = find_condition(sprite.status.conditions, "Ready") if sprite is not None else None
    backend_name = sprite.status.sprite_name or sprite.backend_name() if sprite else None
    if ready is None or ready.status != "True" or not backend_name:
        step.set(
            "Succeeded",
            "Unknown",
            IntentReason.SPRITE_NOT_READY,
            f"waiting for Sprite {name} to be Ready",
        )
        return
    step.status.fileops = FileOpsStatus(attempts=attempts + 1, started_at=step.world.now)
    step.plan.fileops = FileOpsWork(request=request, sprite=backend_name, attempt=attempts + 1)
    step.set(
        "Succeeded",
        "Unknown",
        IntentReason.EXECUTING,
        f"carrying out {len(request.ops)} ops in Sprite {name} (attempt {attempts + 1})",
    )


__all__ = ["FileOps", "fileops_sprite"]
