"""Kubernetes-style status conditions and the helper that sets them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import Field

from lattice_operator.api.v1alpha1._base import ApiModel, list_map

ConditionStatus = Literal["True", "False", "Unknown"]

REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


class Condition(ApiModel):
    """One aspect of an object's current state (Kubernetes API conventions)."""

    type: str = Field(max_length=316, pattern=TYPE_PATTERN)
    """Type of the condition, in CamelCase (for example Ready or Succeeded)."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: str = Field(min_length=1, max_length=1024, pattern=REASON_PATTERN)
    """A CamelCase reason for the last transition, from a closed list per condition type."""
    message: str = Field(default="", max_length=32768)
    """A human-readable explanation."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation the condition was set from."""
    last_transition_time: datetime
    """When the status last changed from one value to another."""


def set_condition(
    conditions: Sequence[Condition],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    observed_generation: int | None,
    now: datetime,
) -> list[Condition]:
    """Return a new list with the condition of `type` set.

    lastTransitionTime only moves when the status changes, so re-asserting the
    same status with a new reason or message keeps the original transition time.
    """
    result: list[Condition] = []
    replaced = False
    for existing in conditions:
        if existing.type != type:
            result.append(existing)
            continue
        transition = existing.last_transition_time if existing.status == status else now
        result.append(
            Condition(
                type=type,
                status=status,
                reason=reason,
                message=message,
                observed_generation=observed_generation,
                last_transition_time=transition,
            )
        )
        replaced = True
    if not replaced:
        result.append(
            Condition(
                type=type,
                status=status,
                reason=reason,
                message=message,
                observed_generation=observed_generation,
                last_transition_time=now,
            )
        )
    return result


def find_condition(conditions: Sequence[Condition], type: str) -> Condition | None:
    """The condition of `type`, or None."""
    return next((c for c in conditions if c.type == type), None)


CONDITIONS_LIST_SCHEMA = list_map("type")
"""Schema markers for a conditions list: merge by type (kubectl/SSA friendly)."""
