"""The design's event envelope (control-plane-design.md, "Event envelope")."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EventKind = Literal[
    "intent.updated", "run.output", "sprite.updated", "github.updated", "system.alert", "gap"
]


class Subject(BaseModel):
    """The object an event is about: who may see it is who may `get` it."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    resource: str
    """The plural of the lattice.dev kind: intents, runs, sprites."""
    name: str


class SpriteName(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str


class StreamEvent(BaseModel):
    """One event as subscribers receive it (`subject` stays on the operator's side)."""

    model_config = ConfigDict(frozen=True)

    type: EventKind
    ts: datetime
    trace_id: str
    """The Intent's uid when there is one (every event of its pipeline shares it), else the
    object's own uid."""
    intent_id: str | None = None
    run_id: str | None = None
    sprite: SpriteName | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    subject: Subject | None = Field(default=None, exclude=True)
    snapshot_payload: dict[str, Any] | None = Field(default=None, exclude=True)
    """What a subscriber that starts from a snapshot needs instead of `payload` (a Run's
    whole log tail rather than the lines new in this event)."""

    def as_snapshot(self) -> StreamEvent:
        """The event as the first sight of its object for a new subscriber."""
        if self.snapshot_payload is None:
            return self
        return self.model_copy(update={"payload": self.snapshot_payload})

    def wire(self) -> str:
        """The JSON a subscriber reads."""
        return self.model_dump_json(exclude_none=False)


__all__ = ["EventKind", "SpriteName", "StreamEvent", "Subject"]
