"""SpriteCheckpoints, pure: what taking and deleting one's backend checkpoint comes to.

A backend checkpoint is not idempotent to take (a second create is a second checkpoint), so
its comment carries a marker with the object's uid: a take retried after a crash (before the
status recorded the id) finds the checkpoint it took instead of taking another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from lattice_operator.api.v1alpha1 import Sprite, find_condition, set_condition
from lattice_operator.api.v1alpha1.conditions import ConditionStatus
from lattice_operator.api.v1alpha1.sprite import CHECKPOINTS_SHOWN, SpriteCheckpointEntry
from lattice_operator.api.v1alpha1.spritecheckpoint import (
    CheckpointPhase,
    SpriteCheckpoint,
    SpriteCheckpointStatus,
)
from lattice_operator.ports.sprites import CheckpointInfo

COMMENT_CHARS = 1024
_READY: dict[CheckpointPhase, ConditionStatus] = {
    "Ready": "True",
    "Failed": "False",
    "Pending": "Unknown",
    "Deleting": "False",
}
_MARK = "[lattice:{uid}]"


def marker(uid: str) -> str:
    """The tag a SpriteCheckpoint's backend checkpoint carries in its comment."""
    return _MARK.format(uid=uid)


def backend_comment(checkpoint: SpriteCheckpoint) -> str:
    """The comment stored at the backend: the spec's, then the object's marker."""
    tag = marker(checkpoint.metadata.uid or "")
    text = checkpoint.spec.comment[: COMMENT_CHARS - len(tag) - 1]
    return f"{text} {tag}" if text else tag


def user_comment(comment: str) -> str:
    """A backend comment without a SpriteCheckpoint marker."""
    start = comment.rfind("[lattice:")
    if start >= 0 and comment.endswith("]"):
        return comment[:start].rstrip()
    return comment


def taken_before(listed: Iterable[CheckpointInfo], uid: str) -> CheckpointInfo | None:
    """The backend checkpoint an earlier attempt took for the object `uid`, if any."""
    tag = marker(uid)
    return next((c for c in listed if c.comment.endswith(tag)), None)


@dataclass(frozen=True)
class TakeDecision:
    """Take now (`sprite` is the backend name), or wait / fail with a reason."""

    action: Literal["take", "wait", "fail", "done"]
    sprite: str | None = None
    reason: str = ""
    message: str = ""


def decide_take(checkpoint: SpriteCheckpoint, sprite: Sprite | None) -> TakeDecision:
    """Whether this pass takes the backend checkpoint."""
    if checkpoint.status.checkpoint_id:
        return TakeDecision("done")
    name = checkpoint.spec.sprite_ref.name
    if sprite is None:
        return TakeDecision("wait", reason="SpriteNotFound", message=f"no Sprite {name}")
    if sprite.metadata.deletion_timestamp is not None:
        return TakeDecision("fail", reason="SpriteDeleting", message=f"Sprite {name} is deleted")
    ready = find_condition(sprite.status.conditions, "Ready")
    backend = sprite.status.sprite_name
    if ready is None or ready.status != "True" or not backend:
        return TakeDecision(
            "wait", reason="SpriteNotReady", message=f"waiting for Sprite {name} to be Ready"
        )
    return TakeDecision("take", sprite=backend)


def with_phase(
    checkpoint: SpriteCheckpoint,
    phase: CheckpointPhase,
    reason: str,
    message: str,
    now: datetime,
    *,
    taken: CheckpointInfo | None = None,
    sprite: str | None = None,
) -> SpriteCheckpointStatus:
    """The status after a pass: phase, the Ready condition, the backend checkpoint."""
    status = checkpoint.status.model_copy(deep=True)
    status.conditions = set_condition(
        status.conditions,
        type="Ready",
        status=_READY[phase],
        reason=reason,
        message=message[:1024],
        observed_generation=checkpoint.metadata.generation,
        now=now,
    )
    status.phase = phase
    status.observed_generation = checkpoint.metadata.generation
    if taken is not None:
        status.checkpoint_id = taken.id
        status.create_time = taken.create_time or now
        status.sprite_name = sprite
    return status


def deletes_backend(checkpoint: SpriteCheckpoint) -> bool:
    """Deleting the object deletes its backend checkpoint."""
    return checkpoint.spec.deletion_policy == "Delete" and bool(checkpoint.status.checkpoint_id)


def to_prune(checkpoints: Sequence[SpriteCheckpoint], retention: int | None) -> list[str]:
    """The SpriteCheckpoint objects (names) past a Sprite's retention: the oldest Ready ones
    beyond the newest `retention`, never a Retain one (it does not count either)."""
    if retention is None:
        return []
    held = [
        c
        for c in checkpoints
        if c.status.phase == "Ready"
        and c.spec.deletion_policy == "Delete"
        and c.metadata.deletion_timestamp is None
    ]
    held.sort(key=_newest_first)
    return [c.metadata.name for c in held[retention:]]


def _newest_first(checkpoint: SpriteCheckpoint) -> tuple[float, str]:
    when = checkpoint.status.create_time or checkpoint.metadata.creation_timestamp
    return (-(when.timestamp() if when else 0.0), checkpoint.metadata.name)


def sprite_entries(
    listed: Sequence[CheckpointInfo], objects: Sequence[SpriteCheckpoint]
) -> list[SpriteCheckpointEntry]:
    """The newest backend checkpoints for a Sprite's status, each with its object if any
    (Runs' checkpoints and the backend's own are listed too)."""
    by_id = {c.status.checkpoint_id: c.metadata.name for c in objects if c.status.checkpoint_id}
    ordered = sorted(
        listed, key=lambda c: c.create_time.timestamp() if c.create_time else 0.0, reverse=True
    )
    return [
        SpriteCheckpointEntry(
            id=c.id,
            create_time=c.create_time,
            comment=user_comment(c.comment)[:COMMENT_CHARS],
            object=by_id.get(c.id),
        )
        for c in ordered[:CHECKPOINTS_SHOWN]
    ]


__all__ = [
    "TakeDecision",
    "backend_comment",
    "decide_take",
    "deletes_backend",
    "marker",
    "sprite_entries",
    "taken_before",
    "to_prune",
    "user_comment",
    "with_phase",
]
