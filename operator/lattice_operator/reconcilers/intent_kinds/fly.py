"""fly_machines: a deployment hook on Fly (create, start or stop a machine of an app),
carried out once by the handler through the Fly port after policy and approval let it run;
the handler records the outcome in status.result and status.fly, from which a pass decides.
Without a Fly token the Intent waits (NoFlyConfigured) and nothing is sent."""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import FlyMachinesParams, FlyStatus
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_pass import FlyWork, IntentPass, Notice
from lattice_operator.reconcilers.intent_reasons import IntentReason

MAX_ATTEMPTS = 3
"""Executions started without an outcome recorded (an operator that stopped mid-way) before
the Intent ends Failed."""

DONE_EVENT = "FlyActionDone"
FAILED_EVENT = "FlyActionFailed"


def machine_name(intent: Intent, params: FlyMachinesParams) -> str:
    """The name a create gives its machine: the spec's, else the Intent's."""
    if params.machine is not None and params.machine.name:
        return params.machine.name
    return intent.metadata.name[:63]


def describe(params: FlyMachinesParams) -> str:
    what = f"machine {params.machine_id}" if params.machine_id else "a machine"
    return f"{params.action} {what} of Fly app {params.app}"


class FlyMachines:
    """fly_machines, by params.flyMachines.action."""

    def sprite(self, intent: Intent) -> str | None:
        return None

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return None

    def plan(self, step: IntentPass) -> None:
        params = step.intent.spec.params.fly_machines
        if params is None:
            step.missing_params()
            return
        fly = step.status.fly
        done = step.status.result
        if fly is not None and fly.finished and done is not None:
            # An Event on the Intent says what happened on Fly (kubectl describe, lattice logs).
            if done.status == "success":
                step.set("Succeeded", "True", IntentReason.COMPLETED, done.summary)
                step.plan.notices.append(Notice(DONE_EVENT, done.summary))
            else:
                step.set("Succeeded", "False", IntentReason.FLY_FAILED, done.summary)
                step.plan.notices.append(Notice(FAILED_EVENT, done.summary, warning=True))
            return
        if not step.world.fly_ready:
            step.set(
                "Succeeded",
                "Unknown",
                IntentReason.NO_FLY_CONFIGURED,
                f"{describe(params)} waits: Fly is not configured for the operator "
                "(settings fly.token_secret)",
            )
            return
        attempts = fly.attempts if fly is not None else 0
        if attempts >= MAX_ATTEMPTS:
            step.status.fly = (fly or FlyStatus(app=params.app, action=params.action)).model_copy(
                update={"finished": True}
            )
            step.fail(
                IntentReason.FLY_FAILED,
                f"{describe(params)}: {attempts} attempts started without an outcome; "
                "giving up (look at the app's machines before trying again)",
            )
            return
        step.status.fly = FlyStatus(
            app=params.app,
            action=params.action,
            machine_id=fly.machine_id if fly is not None else params.machine_id,
            attempts=attempts + 1,
        )
        step.plan.fly = FlyWork(
            params=params, attempt=attempts + 1, machine_name=machine_name(step.intent, params)
        )
        step.set("Succeeded", "Unknown", IntentReason.EXECUTING, describe(params))


__all__ = [
    "DONE_EVENT",
    "FAILED_EVENT",
    "MAX_ATTEMPTS",
    "FlyMachines",
    "describe",
    "machine_name",
]
