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

    def wire(self) -> str:
        """The JSON a subscriber reads."""
        return self.model_dump_json(exclude_none=False)


__all__ = ["EventKind", "SpriteName", "StreamEvent", "Subject"]
