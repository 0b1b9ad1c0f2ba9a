"""Whose grants a Run gets: only the Run its Intent created, while the Intent executes.

`spec.intentRef` is a field anyone who can create a Run may set; it must never be enough.
"""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent, Run
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.builders import run_for_intent
from lattice_operator.ports import Grants
from lattice_operator.reconcilers.grants import (
    GRANTING_PHASES,
    adoption_refusal,
    controller_uid,
    decide_grants,
)
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.intent_world import advance, intent, policy, world

SECRET = {"token": ("forge-token", "token")}


def grants(*, uid: str = "u", phase: str = "Executing", run: str | None = "i-run") -> Grants:
    return Grants(
        intent="i",
        allowed_actions=frozenset({"FETCH_CREDENTIAL"}),
        credentials=dict(SECRET),
        uid=uid,
        phase=phase,
        run=run,
    )


def template(it: Intent) -> RunTemplate:
    params = it.spec.kind_params()
    assert isinstance(params, RunTemplate)
    return params


def own_run(**changes: Any) -> dict[str, Any]:
    """The Run the Intent `i` (uid u) creates, as the API server stores it."""
    it = intent()
    doc = run_for_intent(it, template(it))
    doc.update(changes)
    return doc


def user_run(*, name: str = "mine", owner_uid: str | None = None, **spec: Any) -> Run:
    """A Run a user made, pointing spec.intentRef at Intent `i`."""
    doc = own_run()
    doc["metadata"] = {"name": name, "namespace": "ns"}
    if owner_uid is not None:
        doc["metadata"]["ownerReferences"] = [
            {"apiVersion": "lattice.dev/v1alpha1", "kind": "Intent", "name": "i", "uid": owner_uid}
            | {"controller": True}
        ]
    doc["spec"] = {**doc["spec"], **spec}
    return Run.model_validate(doc)


# -- the grant decision ------------------------------------------------------------------------


@pytest.mark.parametrize("phase", sorted(GRANTING_PHASES))
def test_the_intents_own_run_gets_the_grants_while_it_executes(phase: str) -> None:
    run = Run.model_validate(own_run())
    assert controller_uid(run) == "u"
    decision = decide_grants(run, grants(phase=phase))
    assert decision.grants is not None
    assert decision.grants.credentials == SECRET


def test_intent_ref_alone_grants_nothing() -> None:
    decision = decide_grants(user_run(), grants())
    assert decision.grants is None
    assert decision.reason == "not_intent_run"
    assert "not the one its Intent created" in decision.message


def test_a_forged_owner_reference_is_not_enough_without_run_ref() -> None:
    # ownerReferences are written by whoever creates the Run: status.runRef is the operator's.
    decision = decide_grants(user_run(name="mine", owner_uid="u"), grants(run="i-run"))
    assert decision.grants is None
    assert decision.reason == "not_intent_run"


def test_the_right_name_without_the_owner_reference_is_not_enough() -> None:
    decision = decide_grants(user_run(name="i-run"), grants(run="i-run"))
    assert decision.grants is None
    assert decision.reason == "not_intent_run"


def test_an_owner_with_another_uid_is_not_enough() -> None:
    # A same-named Intent recreated: the Run belongs to the old one.
    decision = decide_grants(Run.model_validate(own_run()), grants(uid="other"))
    assert decision.grants is None


def test_no_run_ref_yet_grants_nothing() -> None:
    decision = decide_grants(Run.model_validate(own_run()), grants(run=None))
    assert decision.grants is None
    assert "none yet" in decision.message


@pytest.mark.parametrize(
    "phase",
    ["Proposed", "Classified", "AwaitingApproval", "Rejected", "Failed", "Succeeded", "Canceled"],
)
def test_an_intent_not_approved_and_executing_grants_nothing(phase: str) -> None:
    decision = decide_grants(Run.model_validate(own_run()), grants(phase=phase))
    assert decision.grants is None
    assert decision.reason == "intent_not_approved"
    assert phase in decision.message


def test_no_intent_grants_nothing() -> None:
    decision = decide_grants(Run.model_validate(own_run()), None)
    assert (decision.grants, decision.reason) == (None, "no_intent")
    doc = own_run()
    del doc["spec"]["intentRef"]
    assert decide_grants(Run.model_validate(doc), grants()).reason == "no_intent"


# -- adoption ----------------------------------------------------------------------------------


def test_the_intent_adopts_its_own_run() -> None:
    it = intent()
    assert adoption_refusal(it, template(it), Run.model_validate(own_run())) is None


def test_a_run_made_under_the_intents_name_is_not_adopted() -> None:
    it = intent()
    taken = user_run(name="i-run", command=["sh", "-c", "cat /dev/shm/lattice/credentials/*"])
    refusal = adoption_refusal(it, template(it), taken)
    assert refusal is not None
    assert "i-run" in refusal
    assert "not created by this Intent" in refusal


def test_a_forged_owner_reference_with_another_command_is_not_adopted() -> None:
    it = intent()
    forged = user_run(name="i-run", owner_uid="u", command=["sh", "-c", "exfiltrate"])
    refusal = adoption_refusal(it, template(it), forged)
    assert refusal is not None
    assert "approved to run" in refusal


def test_pipeline_fails_with_run_name_taken_and_never_executes() -> None:
    allow = [policy("allow")]
    taken = user_run(name="i-run", command=["sh", "-c", "steal"])
    plan = reconcile_intent(world(intent(), policies=allow, run=taken))
    assert plan.phase == "Failed"
    assert plan.create == []
    assert plan.run_patch is None
    assert plan.status.run_ref is None
    cond = next(c for c in plan.status.conditions if c.type == "Succeeded")
    assert cond.reason == "RunNameTaken"
    assert "i-run" in cond.message
    # Terminal: the next pass does nothing either.
    again = reconcile_intent(world(advance(intent(), plan), policies=allow, run=taken))
    assert again.phase == "Failed"
    assert again.create == []


def test_cancel_does_not_touch_a_run_the_intent_does_not_own() -> None:
    it = intent()
    canceled = it.model_copy(update={"spec": it.spec.model_copy(update={"cancel": True})})
    plan = reconcile_intent(world(canceled, run=user_run(name="i-run")))
    assert plan.phase == "Canceled"
    assert plan.run_patch is None
