"""The Intent work loop without kopf or a cluster: a plan written onto a changed spec is
decided again at once on the stored Intent, a bounded number of times in a row; a terminal
Intent ends the loop; the world a pass reads comes from the reads and the injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.policy import CompiledPolicy, Decision
from lattice_operator.reconcilers.intent import IntentPlan, reconcile_intent
from lattice_operator.reconcilers.intent_created_runs import CreatedRuns
from lattice_operator.reconcilers.intent_loop import (
    MAX_QUICK_REDECISIONS,
    drive_intent,
    observe,
)
from lattice_operator.reconcilers.intent_policies import IndexedPolicy, PolicySource
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_world import (
    BOX,
    allowing,
    intent,
    policies_in,
    policy,
    policy_object,
    remediation_world,
)


@dataclass
class Reads:
    policies: PolicySource = field(default_factory=lambda: allowing(FakeClusterWriter()))
    runs: Mapping[Any, Any] = field(default_factory=dict)
    sprites: Mapping[Any, Any] = field(default_factory=dict)
    claims: Mapping[Any, Any] | None = None
    default_policy: CompiledPolicy | None = None
    forge_ready: bool = False
    fly_ready: bool = False


class Effects:
    """Every write refused as decided on an outdated spec (or all accepted)."""

    def __init__(self, stored: dict[str, Any], *, accept: bool) -> None:
        self.stored, self.accept = stored, accept
        self.applied: list[str] = []
        self.reads = 0
        self.decisions: list[Decision] = []

    async def apply(self, intent: Intent, plan: IntentPlan, created: CreatedRuns) -> bool:
        self.applied.append(plan.phase)
        if self.accept:
            self.stored["status"] = plan.status.to_wire()
        return self.accept

    def decided(self, intent: Intent, decision: Decision) -> None:
        self.decisions.append(decision)

    async def read(self, intent: Intent) -> Mapping[str, Any]:
        self.reads += 1
        return self.stored

    async def exists(self, intent: Intent) -> bool:
        return True

    async def fileops(self, *_: Any) -> None:
        raise AssertionError("no work in these passes")

    forge = remediate = fly = restore = fileops


class Passes:
    def __init__(self, count: int) -> None:
        self.left = count

    def __bool__(self) -> bool:
        self.left -= 1
        return self.left < 0


def _doc() -> dict[str, Any]:
    return intent().model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_a_conflict_is_decided_again_at_once_a_bounded_number_of_times() -> None:
    doc = _doc()
    effects = Effects(doc, accept=False)
    passes = MAX_QUICK_REDECISIONS + 2
    await drive_intent(
        doc,
        Intent.model_validate,
        Passes(passes),
        asyncio.Event(),
        Reads(),
        effects,
        FakeClock(),
        safety_poll=0.001,
    )
    assert len(effects.applied) == passes  # every pass decided and tried to write
    assert effects.reads == MAX_QUICK_REDECISIONS  # then it waits for a change instead
    assert effects.decisions == []  # nothing written: nothing counted


async def test_a_written_decision_is_counted_and_the_same_status_not_written_twice() -> None:
    doc = _doc()
    effects = Effects(doc, accept=True)
    await drive_intent(
        doc,
        Intent.model_validate,
        Passes(3),
        asyncio.Event(),
        Reads(),
        effects,
        FakeClock(),
        safety_poll=0.001,
    )
    assert effects.applied[0] == "Executing"
    assert len(effects.decisions) == 1
    assert effects.decisions[0].outcome == "allow"


async def test_a_pass_reads_its_world_at_the_injected_clock() -> None:
    clock = FakeClock()
    it = intent()
    reads = Reads()
    world = await observe(it, _doc(), reads, CreatedRuns(), clock)
    assert world.now == clock.now()
    assert list(world.policies) == await reads.policies.listed("ns")  # the version listed
    assert world.decision is not None  # classified off the loop: due on a new Intent
    assert world.run is None


async def test_a_pass_with_no_classification_due_reads_no_policies() -> None:
    writer = FakeClusterWriter()
    reads = Reads(policies=allowing(writer))
    classified = {
        "type": "Classified",
        "status": "True",
        "reason": "RuleMatched",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    world = await observe(
        intent(conditions=[classified]), _doc(), reads, CreatedRuns(), FakeClock()
    )
    assert (list(world.policies), world.decision) == ([], None)
    assert writer.verbs() == []


class Gone(Effects):
    """The Intent was deleted and no watch event said so: nothing is carried out."""

    def __init__(self, stored: dict[str, Any]) -> None:
        super().__init__(stored, accept=True)
        self.asked: list[str] = []

    async def exists(self, intent: Intent) -> bool:
        self.asked.append(intent.metadata.name)
        return False


async def test_a_remediation_left_from_an_earlier_pass_waits_for_a_deleted_intent() -> None:
    """Executing was written by an earlier pass whose remediation was not carried out; the
    Intent is then deleted with no watch event to say so. Woken (its Sprite changed, say),
    the pass plans the remediation again with no write before it: the loop asks whether the
    Intent is still there and ends, the Sprite left alone."""
    world = remediation_world("recreate_sprite", spriteRef={"name": "box"})
    first = reconcile_intent(replace(world, sprite=BOX))
    assert first.remediation is not None
    doc = world.intent.to_wire()
    doc["status"] = first.status.to_wire()  # the earlier pass's write
    effects = Gone(doc)
    await drive_intent(
        doc,
        Intent.model_validate,
        Passes(3),
        asyncio.Event(),
        Reads(sprites={("ns", "box"): [BOX]}),
        effects,
        FakeClock(),
        safety_poll=0.001,
    )
    assert effects.asked == ["i"]  # asked once, found gone: no remediation (it would raise)
    assert effects.applied == []


# -- the policies a classification reads ---------------------------------------------------


async def _decided(reads: Reads, passes: int = 3) -> tuple[Effects, dict[str, Any]]:
    doc = _doc()
    effects = Effects(doc, accept=True)
    await drive_intent(
        doc,
        Intent.model_validate,
        Passes(passes),
        asyncio.Event(),
        reads,
        effects,
        FakeClock(),
        safety_poll=0.001,
    )
    return effects, doc


async def test_an_intent_is_decided_by_a_policy_its_index_has_not_caught_up_with() -> None:
    """`kubectl apply -f dir/` with an IntentPolicy and an Intent: the Intent's event is
    handled before the policy's index has it. It is classified by that policy (allow), not
    by the default (approval required, for good)."""
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("allow", version="7"))
    effects, doc = await _decided(Reads(policies=policies_in(writer, [])))
    assert [d.policy for d in effects.decisions] == ["p"]
    assert effects.decisions[0].outcome == "allow"
    assert doc["status"]["classification"]["policy"] == "p"
    assert effects.applied[0] == "Executing"
    assert writer.verbs() == ["list"]  # one read for the one classification, none per pass


async def test_a_policy_deleted_but_still_indexed_does_not_decide() -> None:
    writer = FakeClusterWriter()  # the API server lists none
    gone = IndexedPolicy("p", "3", policy("allow"))
    effects, _ = await _decided(Reads(policies=policies_in(writer, [gone])))
    assert [d.rule for d in effects.decisions] == ["default"]
    assert effects.applied[0] == "AwaitingApproval"


async def test_an_invalid_policy_is_skipped_and_waited_for_by_no_one() -> None:
    """An invalid policy (one the webhook did not see) is listed but never compiles: the
    Intent is classified by the others at once, in its first pass."""
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("deny", name="a-broken", match="intent.nope("))
    writer.put("intentpolicies", policy_object("allow", name="b-fine", version="2"))
    effects, _ = await _decided(Reads(policies=policies_in(writer, [])), passes=1)
    assert [d.policy for d in effects.decisions] == ["b-fine"]
    assert effects.decisions[0].outcome == "allow"


async def test_a_pass_reading_the_intent_from_before_its_classification_lists_nothing() -> None:
    """The watch behind the loop's own write (the body still unclassified): the passes
    take the classification the loop wrote, with no second read or decision."""
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("require_approval"))
    doc = _doc()
    stale = dict(doc)  # the body the watch has: never updated in this test
    effects = Effects(doc, accept=True)
    await drive_intent(
        stale,
        Intent.model_validate,
        Passes(4),
        asyncio.Event(),
        Reads(policies=policies_in(writer, [])),
        effects,
        FakeClock(),
        safety_poll=0.001,
    )
    assert effects.applied == ["AwaitingApproval"]  # written once, the same plan after
    assert writer.verbs() == ["list"]
