"""An open Intent's work loop: decide a pass, hand its plan to the effects, sleep until what
it reads changes.

The Intent's handler runs it (one task per open Intent, reconcilers.intent_workers) and gives
it the body the watch events keep current, its indexes as plain mappings, a wake-up the
watch events set, and the effects that write the plan and carry out its work. Nothing here
knows kopf or the API server: a pass reads the Intent (or the object the API server
answered after a write), the policies, its Run and its Sprite, decides with
`reconcile_intent`, and:

- classifies the Intent (once per spec generation) against the IntentPolicies the API server
  lists then, not only those the index has caught up with (reconcilers.intent_policies);

- writes the plan when its status differs from what is stored and from the last write; the
  work announced with it (FileOps, a forge step, a remediation, a Fly action, a restore) is
  carried out after that write, and the next pass decides on the Intent as stored then;
- decides again at once, on the stored spec, when the write found the spec changed since
  the pass read it (up to MAX_QUICK_REDECISIONS in a row, then it waits for a change);
- sleeps until woken (the Intent, its Run or its Sprite changed), or SAFETY_POLL at most.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lattice_operator.api.v1alpha1 import Intent, Run, Sprite
from lattice_operator.builders import run_name as run_name_of
from lattice_operator.clock import Clock
from lattice_operator.errors import LatticeError
from lattice_operator.metrics import reconcile_timer
from lattice_operator.policy import CompiledPolicy, Decision, classify_off_loop
from lattice_operator.reconcilers.approvals import parse_records
from lattice_operator.reconcilers.intent import (
    TERMINAL,
    IntentPlan,
    IntentWorld,
    classification_due,
    policy_document,
    reconcile_intent,
)
from lattice_operator.reconcilers.intent_created_runs import CreatedRuns
from lattice_operator.reconcilers.intent_forge import ForgeWork
from lattice_operator.reconcilers.intent_kinds import sprite_to_read
from lattice_operator.reconcilers.intent_pass import FlyWork, RemediationWork, RestoreWork
from lattice_operator.reconcilers.intent_policies import PolicySource
from lattice_operator.reconcilers.sprite_claims import DONE, RunClaim

SAFETY_POLL = 10.0
"""Seconds a pass sleeps at most: the watch events wake it; this is only a safety net."""
MAX_QUICK_REDECISIONS = 5
"""Conflicts in a row decided again at once; after that, the pass waits for a change."""


class IntentGone(LatticeError):
    """The Intent is not there any more (found so before an effect no Intent write would
    have refused): its loop ends."""


Stored = Mapping[str, Any]
"""An Intent as the API server answered a write or a read (or as kopf's body has it)."""


class Stopped(Protocol):
    """True once the loop is to end (kopf's DaemonStopped)."""

    def __bool__(self) -> bool: ...


class IntentReads(Protocol):
    """What a pass reads besides the Intent, from memory (the handler's indexes, and what
    this operator is configured with now)."""

    @property
    def policies(self) -> PolicySource:
        """The namespaces' compiled IntentPolicies (the index, or listed for a
        classification)."""
        ...

    @property
    def runs(self) -> Mapping[tuple[str, str], Iterable[Run]]:
        """Runs an Intent may have made, by (namespace, name)."""
        ...

    @property
    def sprites(self) -> Mapping[tuple[str, str], Iterable[Sprite]]: ...

    @property
    def claims(self) -> Mapping[tuple[str, str], Iterable[RunClaim]] | None:
        """Runs holding or waiting for each Sprite (None: not indexed in this process)."""
        ...

    @property
    def default_policy(self) -> CompiledPolicy | None: ...

    @property
    def forge_ready(self) -> bool: ...

    @property
    def fly_ready(self) -> bool: ...


class IntentEffects(Protocol):
    """What the handler does with a pass's plan: its writes and the work it announces. Each
    work step records its outcome and returns the Intent as stored after it (None: nothing
    was done or recorded)."""

    async def apply(self, intent: Intent, plan: IntentPlan, created: CreatedRuns) -> bool:
        """Write the plan; False: the spec changed since the pass read it, nothing written."""
        ...

    def decided(self, intent: Intent, decision: Decision) -> None:
        """The policies' decision of a pass was written (counted in the metrics)."""
        ...

    async def read(self, intent: Intent) -> Stored:
        """The Intent as the API server has it now."""
        ...

    async def exists(self, intent: Intent) -> bool:
        """Whether the Intent (this object, by uid) is still there: asked before an effect
        that no write of the Intent precedes, which a deleted Intent would refuse with 404."""
        ...

    async def fileops(self, intent: Intent, plan: IntentPlan) -> Stored | None: ...

    async def forge(self, intent: Intent, work: ForgeWork, run: Run | None) -> Stored | None: ...

    async def remediate(self, intent: Intent, work: RemediationWork) -> Stored | None: ...

    async def fly(self, intent: Intent, work: FlyWork) -> Stored | None: ...

    async def restore(self, intent: Intent, work: RestoreWork) -> Stored | None: ...


def sprite_holder(
    intent: Intent,
    namespace: str,
    sprite: str | None,
    claims: Mapping[tuple[str, str], Iterable[RunClaim]] | None,
) -> str | None:
    """The Run that holds (or waits in line for) the Sprite of a checkpoint_restore Intent."""
    if intent.spec.kind != "checkpoint_restore" or sprite is None or claims is None:
        return None
    active = sorted(
        (c for c in claims.get((namespace, sprite), []) if c.phase not in DONE),
        key=lambda c: c.name,
    )
    return active[0].name if active else None


def _one(entries: Iterable[Any] | None) -> Any:
    return next(iter(entries)) if entries else None


@dataclass(frozen=True)
class Classified:
    """A classification this loop wrote, for the passes that still read the Intent as it
    was before that write (the watch behind): decided once, not listed and decided again."""

    generation: int | None
    policies: Sequence[CompiledPolicy]
    decision: Decision


async def observe(
    intent: Intent,
    source: Stored,
    reads: IntentReads,
    created: CreatedRuns,
    clock: Clock,
    classified: Classified | None = None,
) -> IntentWorld:
    """What a pass decides on: the Intent and what it reads. When a classification is due,
    the policies the API server lists now (one read) and their decision, made off the event
    loop; none otherwise (nothing else reads them)."""
    namespace = intent.metadata.namespace or ""
    status = intent.status
    # Before runRef is set, by the deterministic name: a Run someone else made under that
    # name is seen, and refused.
    run_name = status.run_ref.name if status.run_ref else run_name_of(intent)
    sprite_name = status.sprite_ref.name if status.sprite_ref else sprite_to_read(intent)
    indexed = _one(reads.runs.get((namespace, run_name))) if run_name else None
    decision: Decision | None = None
    in_force: Sequence[CompiledPolicy]
    if not classification_due(intent):
        in_force = ()  # only a classification reads them
    elif classified is not None and classified.generation == intent.metadata.generation:
        in_force, decision = classified.policies, classified.decision
    else:
        in_force = await reads.policies.listed(namespace)
        decision = await classify_off_loop(policy_document(intent), in_force, reads.default_policy)
    annotations = (source.get("metadata") or {}).get("annotations") or {}
    return IntentWorld(
        intent=intent,
        policies=in_force,
        default_policy=reads.default_policy,
        decision=decision,
        approvals=parse_records(dict(annotations)),
        run=created.view(run_name, indexed, clock.monotonic()) if run_name else None,
        sprite=_one(reads.sprites.get((namespace, sprite_name))) if sprite_name else None,
        now=clock.now(),
        forge_ready=reads.forge_ready,
        fly_ready=reads.fly_ready,
        sprite_holder=sprite_holder(intent, namespace, sprite_name, reads.claims),
    )


async def drive_intent(
    body: Stored,
    parse: Callable[[Stored], Intent],
    stopped: Stopped,
    wakeup: asyncio.Event,
    reads: IntentReads,
    effects: IntentEffects,
    clock: Clock,
    *,
    invalid: tuple[type[BaseException], ...] = (),
    safety_poll: float | None = None,
) -> None:
    """Passes over the Intent until it is terminal, gone or `stopped`. `body` is the Intent
    as the watch keeps it current; `parse` raises one of `invalid` for an Intent the models
    refuse (a blocked pass in the metrics). It sleeps `safety_poll` (SAFETY_POLL) at most.

    A deleted Intent's loop may still be running (no watch event told it): `effects.apply`
    raises IntentGone rather than create anything with no Intent write before it, and a
    remediation or restore left from an earlier pass is carried out only while the Intent
    exists (the garbage collector deleting its Run, say, wakes it)."""
    with contextlib.suppress(IntentGone):
        await _passes(body, parse, stopped, wakeup, reads, effects, clock, invalid, safety_poll)


async def _passes(
    body: Stored,
    parse: Callable[[Stored], Intent],
    stopped: Stopped,
    wakeup: asyncio.Event,
    reads: IntentReads,
    effects: IntentEffects,
    clock: Clock,
    invalid: tuple[type[BaseException], ...],
    safety_poll: float | None,
) -> None:
    written: dict[str, Any] | None = None
    # After a write or a conflict, the object as the API server has it now (the watch may
    # lag behind).
    fresh: Stored | None = None
    conflicts = 0
    # Runs this loop created, as the API server answered, until the Run index shows them:
    # a pass woken by the Intent's own status write (its watch event often comes before the
    # Run's) would otherwise create the Run again, to be refused as already there.
    created = CreatedRuns()
    classified: Classified | None = None
    while not stopped:
        wakeup.clear()
        source, fresh = fresh or body, None
        # Each pass is one kind="Intent" reconcile in the metrics.
        with reconcile_timer("Intent", blocked=invalid):
            intent = parse(source)
            world = await observe(intent, source, reads, created, clock, classified)
            plan = reconcile_intent(world)
            snapshot = plan.status.to_patch()
            if snapshot != written and snapshot != intent.status.to_patch():
                if await effects.apply(intent, plan, created):
                    written, conflicts = snapshot, 0
                    if plan.decision is not None:
                        effects.decided(intent, plan.decision)
                        classified = Classified(
                            intent.metadata.generation, world.policies, plan.decision
                        )
                    if plan.fileops is not None:
                        # The attempt is recorded: now carry it out, then decide again.
                        fresh = await effects.fileops(intent, plan)
                        continue
                    if plan.forge is not None:
                        fresh = await effects.forge(intent, plan.forge, world.run)
                        continue
                    if plan.remediation is not None:
                        fresh = await effects.remediate(intent, plan.remediation)
                        if fresh is not None:
                            continue
                    if plan.fly is not None:
                        fresh = await effects.fly(intent, plan.fly)
                        if fresh is not None:
                            continue
                    if plan.restore is not None:
                        fresh = await effects.restore(intent, plan.restore)
                        if fresh is not None:
                            continue
                elif conflicts < MAX_QUICK_REDECISIONS:
                    # Decided on an outdated spec: decide again at once on the stored one
                    # (the watch may not have delivered it yet).
                    conflicts += 1
                    fresh = await effects.read(intent)
                    continue
            elif plan.create or plan.run_patch:
                await effects.apply(intent, plan, created)
            elif plan.remediation is not None:
                # Executing was written by an earlier pass, whose remediation was not
                # carried out (no backend then, or a restart): do it now.
                if not await effects.exists(intent):
                    return
                fresh = await effects.remediate(intent, plan.remediation)
                if fresh is not None:
                    continue
            elif plan.restore is not None:
                # Executing was written by an earlier pass, whose restore was not carried
                # out (no backend then, or a restart): do it now.
                if not await effects.exists(intent):
                    return
                fresh = await effects.restore(intent, plan.restore)
                if fresh is not None:
                    continue
        if plan.phase in TERMINAL:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                wakeup.wait(), timeout=SAFETY_POLL if safety_poll is None else safety_poll
            )


__all__ = [
    "MAX_QUICK_REDECISIONS",
    "SAFETY_POLL",
    "Classified",
    "IntentEffects",
    "IntentGone",
    "IntentReads",
    "Stopped",
    "drive_intent",
    "observe",
    "sprite_holder",
]
