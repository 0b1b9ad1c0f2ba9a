"""One executor per Intent kind: what a pass reads for it, what it plans once the Intent is
approved, and what its Run is granted beyond the spec's grants.

`executor_for` matches every kind (mypy checks it: a kind added to `IntentKind` without an
executor fails typecheck at `assert_never`); `execute` looks the kind up in `EXECUTORS` and
ends an Intent of a kind it does not know Failed (`InvalidSpec`, naming it) instead of
raising: admission refuses such a kind, but the operator must not crash on one that got past.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, assert_never, cast

from lattice_operator.api.v1alpha1 import INTENT_KINDS, Intent
from lattice_operator.api.v1alpha1.intent import IntentKind
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_kinds.checkpoint_restore import (
    CheckpointRestore,
    restore_sprite,
)
from lattice_operator.reconcilers.intent_kinds.environment import EnvironmentChange
from lattice_operator.reconcilers.intent_kinds.fileops import FileOps, fileops_sprite
from lattice_operator.reconcilers.intent_kinds.fly import FlyMachines
from lattice_operator.reconcilers.intent_kinds.forge import Forge
from lattice_operator.reconcilers.intent_kinds.remediation import (
    HealthRemediate,
    remediation_sprite,
)
from lattice_operator.reconcilers.intent_kinds.run import HealthDetect, SpriteTaskExec
from lattice_operator.reconcilers.intent_kinds.sprite_create import SpriteCreate
from lattice_operator.reconcilers.intent_pass import IntentPass
from lattice_operator.reconcilers.intent_reasons import IntentReason


class Executor(Protocol):
    """How the pipeline carries out one kind of approved Intent."""

    def sprite(self, intent: Intent) -> str | None:
        """The Sprite a pass reads for it while status.spriteRef names none (None: none)."""
        ...

    def grant(self, intent: Intent) -> ForgeGrant | None:
        """Where its Run may act on the forge (allowedActions and credentials are the
        spec's, the same for every kind)."""
        ...

    def plan(self, step: IntentPass) -> None:
        """Decide this pass: the Succeeded condition, the status, and the writes or the
        work the handler carries out after writing it."""
        ...


def executor_for(kind: IntentKind) -> Executor:
    match kind:
        case "sprite_task_exec":
            return SpriteTaskExec()
        case "health_detect":
            return HealthDetect()
        case "health_remediate":
            return HealthRemediate()
        case "sprite_create":
            return SpriteCreate()
        case "fileops":
            return FileOps()
        case (
            "issue_triage" | "issue_plan_approve" | "pr_create_from_plan" | "pr_fixup_from_feedback"
        ):
            return Forge()
        case "environment_change":
            return EnvironmentChange()
        case "fly_machines":
            return FlyMachines()
        case "checkpoint_restore":
            return CheckpointRestore()
        case _:
            assert_never(kind)


EXECUTORS: Mapping[str, Executor] = {
    kind: executor_for(cast(IntentKind, kind)) for kind in INTENT_KINDS
}
"""Every kind's executor, by the kind's name."""


def execute(step: IntentPass) -> None:
    """Carry out an approved Intent: its kind's executor plans this pass."""
    kind = step.intent.spec.kind
    executor = EXECUTORS.get(kind)
    if executor is None:
        known = ", ".join(INTENT_KINDS)
        step.fail(
            IntentReason.INVALID_SPEC,
            f"spec.kind {kind!r} is not a kind this operator carries out (it knows {known})",
        )
        return
    executor.plan(step)


def sprite_to_read(intent: Intent) -> str | None:
    """The Sprite a pass over this Intent reads, when status.spriteRef names none."""
    executor = EXECUTORS.get(intent.spec.kind)
    return executor.sprite(intent) if executor is not None else None


def forge_grant_of(intent: Intent) -> ForgeGrant | None:
    """Where the Run of this Intent may act on the forge, by its kind's executor."""
    executor = EXECUTORS.get(intent.spec.kind)
    return executor.grant(intent) if executor is not None else None


__all__ = [
    "EXECUTORS",
    "Executor",
    "execute",
    "executor_for",
    "fileops_sprite",
    "forge_grant_of",
    "remediation_sprite",
    "restore_sprite",
    "sprite_to_read",
]
