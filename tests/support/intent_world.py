"""Intent pipeline fixtures for unit tests: policies, Intents, worlds, approvals, passes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Run, Sprite
from lattice_operator.api.v1alpha1.intent import ApprovalRecord
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.policy import compile_policy
from lattice_operator.reconcilers.approvals import spec_digest
from lattice_operator.reconcilers.intent import IntentWorld
from lattice_operator.reconcilers.intent_policies import IndexedPolicy, PolicySource
from tests.support.admission_cases import sample
from tests.support.cluster_writer import FakeClusterWriter

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def policy_spec(outcome: str, approvers: int = 1, match: str = "true") -> dict[str, Any]:
    """One rule `r` matching every Intent (unless told `match`) with that outcome."""
    rule = {
        "name": "r",
        "match": match,
        "risk": "controlled",
        "outcome": outcome,
        "approvers": approvers,
    }
    return {"rules": [rule]}


def policy(outcome: str, approvers: int = 1, name: str = "p") -> Any:
    return compile_policy(name, IntentPolicySpec.model_validate(policy_spec(outcome, approvers)))


def policy_object(
    outcome: str, *, name: str = "p", version: str = "1", match: str = "true"
) -> dict[str, Any]:
    """An IntentPolicy in namespace ns as the API server lists it."""
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "IntentPolicy",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        "spec": policy_spec(outcome, match=match),
    }


def policies_in(writer: FakeClusterWriter, indexed: Iterable[IndexedPolicy] = ()) -> PolicySource:
    """Namespace ns's policies: `indexed` in the index, the writer's as listed."""
    return PolicySource({"ns": list(indexed)}, lambda: writer)


def allowing(writer: FakeClusterWriter) -> PolicySource:
    """Policy p allowing everything, stored and indexed (the index caught up)."""
    writer.put("intentpolicies", policy_object("allow"))
    return policies_in(writer, [IndexedPolicy("p", "1", policy("allow"))])


def intent(**status: Any) -> Intent:
    doc = sample("intent-sprite-task-exec.yaml")
    doc["metadata"] = {"name": "i", "namespace": "ns", "uid": "u", "generation": 1}
    doc["status"] = status
    return Intent.model_validate(doc)


def world(
    it: Intent,
    *,
    policies: Any = (),
    approvals: Any = (),
    run: Run | None = None,
    now: datetime = NOW,
) -> IntentWorld:
    return IntentWorld(
        intent=it,
        policies=list(policies),
        default_policy=None,
        approvals=list(approvals),
        run=run,
        sprite=None,
        now=now,
    )


def approval(user: str, decision: str = "approve", digest: str | None = None) -> ApprovalRecord:
    """A record as the webhook writes it: for the sample spec unless told otherwise."""
    return ApprovalRecord(
        user=user,
        decision=decision,  # type: ignore[arg-type]
        reason="",
        time=NOW,
        spec_digest=digest or spec_digest(intent().spec),
    )


def advance(it: Intent, plan: Any) -> Intent:
    return it.model_copy(update={"status": plan.status})


BOX = Sprite.model_validate(
    {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Sprite",
        "metadata": {"name": "box", "namespace": "ns", "uid": "s"},
        "spec": {},
    }
)
"""The Sprite a remediation acts on (not Ready: no status)."""


def remediation_world(remediation: str, *, forge_ready: bool = True, **params: Any) -> Any:
    """A health_remediate Intent of `remediation` (its params), allowed by the policy."""
    doc = intent().to_wire()
    doc["spec"] = {
        "kind": "health_remediate",
        "summary": "remedy",
        "params": {"healthRemediate": {"remediation": remediation, **params}},
    }
    doc["status"] = {}
    base = world(Intent.model_validate(doc), policies=[policy("allow")])
    return replace(base, forge_ready=forge_ready)
