"""Hostile policy rules: a worst case above the limit is refused when the rule is compiled;
an evaluation that runs out of its step budget fails closed, off the event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import celpy
import pytest

from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.policy import (
    PolicyInvalid,
    classify_off_loop,
    compile_policy,
    intent_document,
)
from lattice_operator.policy.cost import EVALUATION_BUDGET, RULE_COST_LIMIT, estimate

TWELVE = "[1,2,3,4,5,6,7,8,9,10,11,12]"
TEN = "[1,2,3,4,5,6,7,8,9,10]"
# The reported rule's shape: nested comprehensions over literal lists, ~120 characters.
HOSTILE = f"{TWELVE}.all(a,{TWELVE}.all(b,{TWELVE}.all(c,a+b+c>0)))"


def _rule(name: str, match: str) -> dict[str, Any]:
    return {"name": name, "match": match, "risk": "safe", "outcome": "allow"}


def _spec(*rules: dict[str, Any]) -> IntentPolicySpec:
    return IntentPolicySpec.model_validate({"rules": list(rules)})


def _cost(source: str) -> int:
    return estimate(celpy.Environment().compile(source))


def test_nested_comprehensions_are_refused_when_compiled_naming_the_rule() -> None:
    spec = _spec(_rule("fine", "intent.spec.kind == 'fileops'"), _rule("hostile", HOSTILE))
    with pytest.raises(PolicyInvalid) as info:
        compile_policy("p", spec)
    [error] = info.value.errors
    assert str(error).startswith("spec.rules[1] (hostile): too costly"), str(error)
    assert f"the limit is {RULE_COST_LIMIT:,}" in str(error)


def test_one_comprehension_over_the_intent_is_allowed_two_nested_are_not() -> None:
    ops = "intent.spec.params.fileops.ops"
    one = f"{ops}.exists(o, o.op == 'write_file' && o.path.startsWith('.github/'))"
    two = f"{ops}.exists(o, {ops}.exists(p, o.path == p.path && o != p))"
    compile_policy("p", _spec(_rule("one", one)))
    with pytest.raises(PolicyInvalid, match=r"spec.rules\[0\] \(two\): too costly"):
        compile_policy("p", _spec(_rule("two", two)))


def test_strings_doubled_in_a_chain_are_refused() -> None:
    # No loop, but each step doubles the string: the size bound follows the concatenations.
    doubling = "[intent.spec.summary]" + "".join(
        f".map({v}, {v} + {v})" for v in "abcdefghijklmnop"
    )
    assert _cost(doubling) > RULE_COST_LIMIT
    with pytest.raises(PolicyInvalid, match="too costly"):
        compile_policy("p", _spec(_rule("doubling", f"size({doubling}) > 0")))


def test_cel_python_extensions_without_a_bound_are_refused() -> None:
    with pytest.raises(PolicyInvalid, match=r"reduce\(\) is not CEL"):
        compile_policy("p", _spec(_rule("r", "[1, 2].reduce(r, i, 0, r + i) > 0")))


def test_checking_a_policy_is_bounded_by_one_budget_for_all_its_rules() -> None:
    # Under the per-rule limit, but evaluated against the ten sample Intents it needs more
    # steps than checking one policy may take: refused at the rule where they ran out.
    nested = f"{TEN}.all(a,{TEN}.all(b,{TEN}.all(c,a+b+c>0)))"
    assert _cost(nested) <= RULE_COST_LIMIT < 10 * _cost(nested) - EVALUATION_BUDGET
    with pytest.raises(PolicyInvalid, match=r"spec.rules\[0\] \(nested\): checking the rules"):
        compile_policy("p", _spec(_rule("nested", nested)))


async def test_a_costly_evaluation_fails_closed_off_the_event_loop() -> None:
    # Within the estimate's assumptions the rule is cheap; this Intent has far more labels
    # than the estimate assumes, so evaluating it runs out of steps.
    policy = compile_policy(
        "p",
        _spec(
            {**_rule("label-scan", "intent.metadata.labels.exists(k, k.startsWith('zz'))")},
            _rule("lax", "true"),
        ),
    )
    labels = {f"l{i}": "v" for i in range(20_000)}
    intent = intent_document({"name": "i", "namespace": "n", "labels": labels}, {"kind": "x"})
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        decision = await classify_off_loop(intent, [policy])
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
    # The loop kept running other tasks while the rule was evaluated.
    assert ticks > 0
    # Failed closed at the costly rule: the lax rule after it did not decide.
    assert (decision.rule, decision.outcome) == ("label-scan", "require_approval")
    assert f"evaluation stopped after {EVALUATION_BUDGET:,} steps" in decision.message
    [error] = decision.evaluation_errors
    assert error.startswith("p/label-scan: evaluation stopped")
