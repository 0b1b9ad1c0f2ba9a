"""Classify an Intent with IntentPolicy rules: the first matching rule decides."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lattice_operator.api.v1alpha1.intentpolicy import GateOutcome, IntentPolicySpec, RiskClass
from lattice_operator.policy.rules import CompiledRule, EvaluationError, PolicyInvalid, RuleError
from lattice_operator.policy.samples import sample_intents


@dataclass(frozen=True)
class CompiledPolicy:
    name: str
    spec: IntentPolicySpec
    rules: tuple[CompiledRule, ...]


@dataclass(frozen=True)
class Decision:
    """What the gate decided for an Intent, and which rule decided it."""

    risk: RiskClass
    outcome: GateOutcome
    approvers: int
    policy: str | None
    rule: str
    message: str
    evaluation_errors: tuple[str, ...] = ()


DEFAULT_DECISION = Decision(
    risk="controlled",
    outcome="require_approval",
    approvers=1,
    policy=None,
    rule="default",
    message="no policy rule matched: controlled, approval required",
)


def compile_policy(name: str, spec: IntentPolicySpec) -> CompiledPolicy:
    """Compile every rule (refusing any whose worst-case cost is above the limit) and
    type-check it against a sample Intent of every kind, all within one step budget."""
    # cel-python loads here, with the first policy (policy/rules.py says why).
    from lattice_operator.policy.cel import compile_rule, evaluate
    from lattice_operator.policy.cost import Meter

    errors: list[RuleError] = []
    compiled: list[CompiledRule] = []
    for index, rule in enumerate(spec.rules):
        try:
            compiled.append(compile_rule(index, rule.name, rule.match))
        except PolicyInvalid as exc:
            errors.extend(exc.errors)
    meter = Meter()
    for program in compiled:
        for intent in sample_intents():
            try:
                evaluate(program, intent, meter)
            except EvaluationError as exc:
                if exc.over_budget:
                    errors.append(
                        RuleError(
                            program.index,
                            program.name,
                            f"checking the rules against the sample Intents ran out of steps "
                            f"here ({exc}); make the rules cheaper",
                        )
                    )
                    raise PolicyInvalid(errors) from exc
                if exc.type_error:
                    kind = intent["spec"]["kind"]
                    errors.append(
                        RuleError(program.index, program.name, f"type error (kind {kind}): {exc}")
                    )
                    break
    if errors:
        raise PolicyInvalid(sorted(errors, key=lambda e: e.index))
    return CompiledPolicy(name, spec, tuple(compiled))


def widens_egress(intent: dict[str, Any]) -> bool:
    """Whether the Intent (its policy document) is an environment_change that adds network
    access to a Sprite (`enable_network_access`)."""
    spec = intent.get("spec") or {}
    if spec.get("kind") != "environment_change":
        return False
    params = (spec.get("params") or {}).get("environmentChange") or {}
    return bool((params.get("suggestedAdjustment") or {}).get("type") == "enable_network_access")


def _network_floor(intent: dict[str, Any], decision: Decision) -> Decision:
    # Egress is the sandbox's boundary: a rule that lets environment changes through unasked
    # (installs, pre-steps) does not let a sprite widen where it may send data.
    if decision.outcome != "allow" or not widens_egress(intent):
        return decision
    return replace(
        decision,
        risk="dangerous" if decision.risk == "dangerous" else "controlled",
        outcome="require_approval",
        approvers=max(1, decision.approvers),
        message=f"{decision.message}; enable_network_access widens the Sprite's egress: "
        "approval required even where policy allows",
    )


def classify(
    intent: dict[str, Any],
    policies: Sequence[CompiledPolicy],
    default: CompiledPolicy | None = None,
) -> Decision:
    """Policies in order (then the cluster default); the first matching rule decides, except
    that an `enable_network_access` change is never allowed without an approval.

    A rule that cannot be evaluated for this Intent (say, a missing field not guarded
    with has()) fails closed: evaluation stops there and the Intent needs approval (at
    least as many approvers as that rule asks), with the rule and the error in the
    message. Skipping it instead would let a later, laxer rule decide for an Intent
    that an erroring deny rule was meant to stop.
    """
    from lattice_operator.policy.cel import evaluate
    from lattice_operator.policy.cost import Meter

    chain: Iterable[CompiledPolicy] = [*policies, *([default] if default else [])]
    meter = Meter()  # one budget for the whole chain: a later rule gets what is left
    for policy in chain:
        for rule in policy.rules:
            spec_rule = policy.spec.rules[rule.index]
            try:
                matched = evaluate(rule, intent, meter)
            except EvaluationError as exc:
                error = f"{policy.name}/{rule.name}: {exc}"
                return Decision(
                    risk="dangerous" if spec_rule.risk == "dangerous" else "controlled",
                    outcome="require_approval",
                    approvers=spec_rule.approvers,
                    policy=policy.name,
                    rule=rule.name,
                    message=f"rule {policy.name}/{rule.name} could not be evaluated ({exc}); "
                    "failing closed: approval required",
                    evaluation_errors=(error,),
                )
            if matched:
                return _network_floor(
                    intent,
                    Decision(
                        risk=spec_rule.risk,
                        outcome=spec_rule.outcome,
                        approvers=spec_rule.approvers
                        if spec_rule.outcome == "require_approval"
                        else 0,
                        policy=policy.name,
                        rule=rule.name,
                        message=spec_rule.message or f"rule {policy.name}/{rule.name} matched",
                    ),
                )
    return DEFAULT_DECISION


# Off the event loop: an evaluation takes up to its step budget (a second or two), and the
# loop that calls these also answers admission requests and the liveness probe. The budget,
# not a timeout, ends a costly evaluation: a worker thread cannot be stopped from outside.


async def compile_policy_off_loop(name: str, spec: IntentPolicySpec) -> CompiledPolicy:
    """compile_policy in a worker thread."""
    return await asyncio.to_thread(compile_policy, name, spec)


async def classify_off_loop(
    intent: dict[str, Any],
    policies: Sequence[CompiledPolicy],
    default: CompiledPolicy | None = None,
) -> Decision:
    """classify in a worker thread."""
    return await asyncio.to_thread(classify, intent, policies, default)
