"""A policy decision is counted once per Intent and spec generation, however many passes
write it (a pass deciding on a view that lags behind the operator's own write)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

# The Intent daemon's counting step (_count_decision), driven without running kopf.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent_effects import count_decision
from lattice_operator.metrics import REGISTRY
from lattice_operator.policy.classify import Decision
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.intent_world import intent, policy, world


def _counts() -> tuple[float, float]:
    labels = {"policy": "p", "rule": "r", "outcome": "require_approval"}
    decided = REGISTRY.get_sample_value("lattice_policy_decisions_total", labels) or 0.0
    timed = REGISTRY.get_sample_value(
        "lattice_intent_decision_seconds_count", {"outcome": "require_approval"}
    )
    return decided, timed or 0.0


def test_a_decision_is_counted_once_per_generation() -> None:
    it = intent()
    born = datetime(2026, 1, 1, tzinfo=UTC)
    # A uid of its own: decisions are remembered process-wide by uid and generation, and
    # another test's Intent of the same name may have been counted in this process before.
    meta = {"creation_timestamp": born, "uid": str(uuid.uuid4())}
    it = it.model_copy(update={"metadata": it.metadata.model_copy(update=meta)})
    decision = reconcile_intent(world(it, policies=[policy("require_approval")])).decision
    assert isinstance(decision, Decision)
    ctx = OperatorContext()
    before = _counts()
    count_decision(ctx, it, decision)
    count_decision(ctx, it, decision)  # the same decision written again
    assert _counts() == (before[0] + 1, before[1] + 1)
    edited = it.model_copy(update={"metadata": it.metadata.model_copy(update={"generation": 2})})
    count_decision(ctx, edited, decision)  # a new spec: decided again
    assert _counts() == (before[0] + 2, before[1] + 2)
