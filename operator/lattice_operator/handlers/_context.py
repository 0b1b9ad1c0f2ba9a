"""What handlers get from `lattice run` through kopf's memo."""

from __future__ import annotations

from dataclasses import dataclass, field

from lattice_operator.ports import Clock, SystemClock
from lattice_operator.settings import OperatorSettings


@dataclass
class OperatorContext:
    """Shared by every handler of one operator process."""

    settings: OperatorSettings = field(default_factory=OperatorSettings)
    clock: Clock = field(default_factory=SystemClock)


def context_of(memo: object) -> OperatorContext:
    """The OperatorContext stored in kopf's memo (a default one when run bare under kopf)."""
    ctx = getattr(memo, "lattice", None)
    if isinstance(ctx, OperatorContext):
        return ctx
    ctx = OperatorContext()
    setattr(memo, "lattice", ctx)  # noqa: B010 - kopf.Memo is an attribute bag
    return ctx
