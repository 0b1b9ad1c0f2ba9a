"""A fly_machines Intent's action, carried out through the Fly port once the pipeline
(policy, approval) let it execute; the outcome goes to status.result and status.fly, from
which the next pass decides. A crash between the action and its record repeats it on the
next pass: start and stop leave a machine as they found it the second time, and a create
first looks for the machine this Intent made (by name and the Intent's uid in its metadata)."""

from __future__ import annotations

import logging
from typing import Any

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import FlyStatus, IntentResult
from lattice_operator.api.v1alpha1.resources import INTENTS
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.ports.errors import AdapterError, Conflict
from lattice_operator.ports.fly import (
    ACTIVE_STATES,
    FlyGuest,
    FlyMachine,
    FlyMachineConfig,
    FlyMachines,
    WaitState,
)
from lattice_operator.reconcilers.intent_kinds.fly import describe
from lattice_operator.reconcilers.intent_pass import FlyWork

log = logging.getLogger(__name__)

INTENT_UID_KEY = "lattice_intent_uid"
"""The machine metadata key naming the Intent that created it."""


async def fly_step(ctx: OperatorContext, intent: Intent, work: FlyWork) -> dict[str, Any] | None:
    """Carry the action out and record its outcome; the Intent as stored afterwards (None:
    Fly is not configured in this process, nothing was done)."""
    if ctx.fly is None:
        log.warning("fly_machines %s: %s", intent.metadata.name, ctx.fly_problem)
        return None
    params = work.params
    status = FlyStatus(
        app=params.app, action=params.action, machine_id=params.machine_id, attempts=work.attempt
    )
    try:
        machine = await carry_out(ctx.fly, intent, work)
    except AdapterError as exc:
        summary = f"{describe(params)} failed ({exc.failure_class}): {exc}"
        result = IntentResult(status="failure", summary=summary[:1024])
    else:
        status = status.model_copy(update={"machine_id": machine.id, "state": machine.state})
        verb = {"create": "created", "start": "started", "stop": "stopped"}[params.action]
        result = IntentResult(
            status="success",
            summary=f"{verb} machine {machine.id} of Fly app {params.app} (state {machine.state})",
            artifacts=[f"fly_machine: {params.app}/{machine.id}"],
        )
    status = status.model_copy(update={"finished": True})
    log.info("fly_machines %s: %s", intent.metadata.name, result.summary)
    return await ctx.require_writer().patch_status(
        INTENTS.gvp,
        intent.metadata.namespace or "",
        intent.metadata.name,
        {"result": result.to_wire(), "fly": status.to_wire()},
    )


async def carry_out(fly: FlyMachines, intent: Intent, work: FlyWork) -> FlyMachine:
    params = work.params
    app = params.app
    if params.action == "create":
        machine = await _created(fly, intent, work)
        target: WaitState = "started"
    else:
        assert params.machine_id is not None
        machine = await fly.get_machine(app, params.machine_id)
        target = "started" if params.action == "start" else "stopped"
        if machine.state != target:
            if params.action == "start":
                await fly.start_machine(app, machine.id)
            else:
                await fly.stop_machine(app, machine.id)
    if params.wait_seconds:
        await fly.wait_for_state(app, machine.id, target, timeout_seconds=params.wait_seconds)
        machine = await fly.get_machine(app, machine.id)
    return machine


async def _created(fly: FlyMachines, intent: Intent, work: FlyWork) -> FlyMachine:
    """The machine this Intent made before (a repeated pass), else a new one."""
    params = work.params
    spec = params.machine
    assert spec is not None
    uid = intent.metadata.uid or ""
    for machine in await fly.list_machines(params.app):
        if machine.name != work.machine_name or machine.state not in ACTIVE_STATES:
            continue
        made_by = machine.config.metadata.get(INTENT_UID_KEY) if machine.config else None
        if made_by != uid:
            raise Conflict(
                f"Fly app {params.app} has a machine named {work.machine_name} already "
                f"({machine.id}), not made by this Intent"
            )
        return machine
    guest = spec.guest
    config = FlyMachineConfig(
        image=spec.image,
        env=dict(spec.env),
        guest=FlyGuest(cpu_kind=guest.cpu_kind, cpus=guest.cpus, memory_mb=guest.memory_mb)
        if guest is not None
        else None,
        metadata={INTENT_UID_KEY: uid},
    )
    return await fly.create_machine(params.app, config, name=work.machine_name, region=spec.region)


__all__ = ["INTENT_UID_KEY", "carry_out", "fly_step"]
