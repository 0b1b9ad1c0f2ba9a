"""Policy rules: first match wins, no match is controlled + approval, bad rules are refused."""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.policy import (
    DEFAULT_DECISION,
    PolicyInvalid,
    classify,
    compile_policy,
    intent_document,
)
from lattice_operator.policy.samples import sample_intents


def _policy(*rules: dict[str, Any], name: str = "p") -> Any:
    return compile_policy(name, IntentPolicySpec.model_validate({"rules": list(rules)}))


def _intent(kind: str, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return intent_document({"name": "i", "namespace": namespace}, {"kind": kind, **spec})


RULES = (
    {
        "name": "team-a-exec",
        "match": "intent.spec.kind == 'sprite_task_exec' && intent.metadata.namespace == 'team-a'",
        "risk": "safe",
        "outcome": "allow",
    },
    {
        "name": "any-exec",
        "match": "intent.spec.kind == 'sprite_task_exec'",
        "risk": "controlled",
        "outcome": "require_approval",
        "approvers": 2,
    },
    {
        "name": "no-env",
        "match": "intent.spec.kind == 'environment_change'",
        "risk": "dangerous",
        "outcome": "deny",
        "message": "environment changes are reviewed by the platform team",
    },
)


def test_first_matching_rule_wins() -> None:
    policy = _policy(*RULES)
    decision = classify(_intent("sprite_task_exec"), [policy])
    assert (decision.rule, decision.outcome, decision.risk) == ("team-a-exec", "allow", "safe")
    decision = classify(_intent("sprite_task_exec", namespace="team-b"), [policy])
    assert (decision.rule, decision.outcome, decision.approvers) == (
        "any-exec",
        "require_approval",
        2,
    )


def test_deny_carries_the_rule_and_message() -> None:
    decision = classify(_intent("environment_change"), [_policy(*RULES)])
    assert decision.outcome == "deny"
    assert decision.policy == "p"
    assert "platform team" in decision.message


def test_no_match_is_controlled_and_needs_approval() -> None:
    decision = classify(_intent("fileops"), [_policy(*RULES)])
    assert decision == DEFAULT_DECISION
    assert (decision.risk, decision.outcome, decision.approvers) == (
        "controlled",
        "require_approval",
        1,
    )


def test_policies_are_tried_in_order_then_the_default() -> None:
    first = _policy({"name": "r", "match": "false", "risk": "safe", "outcome": "allow"}, name="a")
    default = _policy(
        {"name": "all", "match": "true", "risk": "safe", "outcome": "allow"}, name="d"
    )
    decision = classify(_intent("fileops"), [first], default)
    assert (decision.policy, decision.rule) == ("d", "all")


def test_a_rule_that_cannot_be_evaluated_fails_closed() -> None:
    policy = _policy(
        {
            "name": "needs-field",
            "match": "intent.spec.params.fileops.id == 'x'",
            "risk": "dangerous",
            "outcome": "deny",
            "approvers": 2,
        },
        {"name": "later-allow", "match": "true", "risk": "safe", "outcome": "allow"},
    )
    decision = classify(_intent("sprite_task_exec", params={}), [policy])
    # The erroring deny rule is not skipped for the later allow rule: evaluation stops.
    assert (decision.policy, decision.rule) == ("p", "needs-field")
    assert (decision.outcome, decision.risk, decision.approvers) == (
        "require_approval",
        "dangerous",
        2,
    )
    assert "p/needs-field could not be evaluated" in decision.message
    assert "failing closed" in decision.message
    [error] = decision.evaluation_errors
    assert error.startswith("p/needs-field: ")


@pytest.mark.parametrize(
    ("match", "fragment"),
    [
        ("intent.spec.kind ==", "syntax error"),
        ("intent.spec.kind + 1 == 2", "type error"),
        ("intent.spec.kind", "must be a bool"),
        ("size(intent.spec.kind) > 'a'", "type error"),
    ],
)
def test_bad_rules_are_refused_with_their_index(match: str, fragment: str) -> None:
    with pytest.raises(PolicyInvalid) as info:
        _policy(
            {"name": "fine", "match": "true", "risk": "safe", "outcome": "allow"},
            {"name": "broken", "match": match, "risk": "safe", "outcome": "allow"},
        )
    [error] = info.value.errors
    assert error.index == 1
    assert error.name == "broken"
    assert fragment in error.message
    assert str(error).startswith("spec.rules[1] (broken)")


def test_guarded_kind_specific_rules_are_accepted() -> None:
    policy = _policy(
        {
            "name": "small-fileops",
            "match": "intent.spec.kind == 'fileops' && size(intent.spec.params.fileops.ops) < 5",
            "risk": "safe",
            "outcome": "allow",
        }
    )
    assert (
        classify(_intent("fileops", params={"fileops": {"ops": [1, 2]}}), [policy]).outcome
        == "allow"
    )


def test_samples_cover_every_kind_and_hide_status() -> None:
    from lattice_operator.api.v1alpha1 import INTENT_KINDS

    docs = sample_intents()
    assert {d["spec"]["kind"] for d in docs} == set(INTENT_KINDS)
    assert all(set(d) == {"metadata", "spec"} for d in docs)


def test_shipped_sample_policy_compiles_and_decides() -> None:
    from tests.support.admission_cases import sample

    doc = sample("intentpolicy.yaml")
    policy = compile_policy("default", IntentPolicySpec.model_validate(doc["spec"]))
    exec_intent = sample("intent-sprite-task-exec.yaml")
    decision = classify(intent_document(exec_intent["metadata"], exec_intent["spec"]), [policy])
    assert (decision.rule, decision.outcome) == ("safe-sprite-tasks", "allow")
    env_intent = sample("intent-environment-change.yaml")
    decision = classify(intent_document(env_intent["metadata"], env_intent["spec"]), [policy])
    assert (decision.rule, decision.approvers) == ("environment-changes", 2)


def _environment_change(kind: str) -> dict[str, Any]:
    params = {"environmentChange": {"suggestedAdjustment": {"type": kind, "details": {}}}}
    return _intent("environment_change", params=params)


def test_network_access_needs_an_approval_where_policy_allows_environment_changes() -> None:
    allow_env = {
        "name": "env-ok",
        "match": "intent.spec.kind == 'environment_change'",
        "risk": "safe",
        "outcome": "allow",
    }
    policy = _policy(allow_env)
    installs = classify(_environment_change("add_system_package"), [policy])
    assert (installs.outcome, installs.approvers, installs.risk) == ("allow", 0, "safe")
    network = classify(_environment_change("enable_network_access"), [policy])
    assert (network.outcome, network.approvers, network.risk, network.rule) == (
        "require_approval",
        1,
        "controlled",
        "env-ok",
    )
    assert "enable_network_access widens the Sprite's egress" in network.message
    # A stricter rule stands as it is: denied stays denied, two approvers stay two.
    deny = classify(_environment_change("enable_network_access"), [_policy(RULES[2])])
    assert (deny.outcome, deny.rule) == ("deny", "no-env")
    two = {**allow_env, "outcome": "require_approval", "approvers": 2, "risk": "dangerous"}
    strict = classify(_environment_change("enable_network_access"), [_policy(two)])
    assert (strict.outcome, strict.approvers, strict.risk) == ("require_approval", 2, "dangerous")
