"""checkpoint_restore Intent parameters: roll a Sprite's files back to a checkpoint."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from lattice_operator.api.v1alpha1._base import (
    CHECKPOINT_ID_PATTERN,
    DNS_SUBDOMAIN,
    ApiModel,
    cel,
)


class CheckpointRestoreParams(ApiModel):
    """Which Sprite, and which of its checkpoints: a backend id or a SpriteCheckpoint."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            {
                "rule": "has(self.checkpointId) != has(self.checkpoint)",
                "message": "exactly one of checkpointId or checkpoint must be set",
            }
        )
    )

    sprite: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    """The Sprite (same namespace) to roll back."""
    checkpoint_id: str | None = Field(
        default=None, min_length=1, max_length=128, pattern=CHECKPOINT_ID_PATTERN
    )
    """A backend checkpoint id (`v3`), as `lattice checkpoints list` shows."""
    checkpoint: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN
    )
    """A SpriteCheckpoint of that Sprite (same namespace), by name."""

    @model_validator(mode="after")
    def _one_of(self) -> CheckpointRestoreParams:
        if (self.checkpoint_id is None) == (self.checkpoint is None):
            raise ValueError("exactly one of checkpointId or checkpoint must be set")
        return self


__all__ = ["CheckpointRestoreParams"]
