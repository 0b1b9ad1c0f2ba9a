"""environment_change: approved changes wait for the environment manager (not in this
version): recorded as Waiting with a reason, never silently succeeded."""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_pass import IntentPass
from lattice_operator.reconcilers.intent_reasons import IntentReason


class EnvironmentChange:
    """environment_change: waits with NoEnvironmentManager."""

    def sprite(self, intent: Intent) -> str | None:
        return None

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        step.set(
            "Succeeded",
            "Unknown",
            IntentReason.NO_ENVIRONMENT_MANAGER,
            "approved environment changes wait for the "
            "environment manager, which is not enabled in this version",
        )


__all__ = ["EnvironmentChange"]
