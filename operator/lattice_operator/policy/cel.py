"""CEL rule compilation and evaluation (cel-python), with errors that name the rule."""

from __future__ import annotations

import functools
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from lattice_operator.policy.cost import (
    BudgetExceeded,
    CostError,
    Meter,
    MeteredEvaluator,
    check_cost,
)
from lattice_operator.policy.rules import CompiledRule, EvaluationError, PolicyInvalid, RuleError

__all__ = [
    "CompiledRule",
    "EvaluationError",
    "PolicyInvalid",
    "RuleError",
    "compile_rule",
    "evaluate",
]


@functools.cache
def _environment() -> celpy.Environment:
    # Built on first use, not at import: its parser costs ~0.3 s of CPU, paid otherwise by every
    # `lattice` command and operator start that never compiles a rule.
    return celpy.Environment()


def compile_rule(index: int, name: str, source: str) -> CompiledRule:
    """Parse one rule; a syntax error raises PolicyInvalid naming the rule's index."""
    try:
        environment = _environment()
        ast = environment.compile(source)
        program = environment.program(ast)
    except Exception as exc:  # celpy raises several parser exception types
        raise PolicyInvalid([RuleError(index, name, f"syntax error: {_first_line(exc)}")]) from exc
    try:
        cost = check_cost(ast)
    except CostError as exc:
        raise PolicyInvalid([RuleError(index, name, str(exc))]) from exc
    return CompiledRule(index, name, source, program, cost)


def evaluate(rule: CompiledRule, intent: dict[str, Any], meter: Meter | None = None) -> bool:
    """Whether the rule matches the Intent document ({"metadata": …, "spec": …}), within
    the steps `meter` has left (a budget of its own when None)."""
    activation = {"intent": json_to_cel(intent)}
    evaluator = MeteredEvaluator(rule.program.ast, rule.program.new_activation(), meter or Meter())
    try:
        result = evaluator.evaluate(activation)
    except BudgetExceeded as exc:
        raise EvaluationError(str(exc), type_error=False, over_budget=True) from exc
    except CELEvalError as exc:
        raise EvaluationError(_first_line(exc), type_error=_is_type_error(exc)) from exc
    if isinstance(result, CELEvalError):
        raise EvaluationError(_first_line(result), type_error=_is_type_error(result))
    if not isinstance(result, celtypes.BoolType):
        raise EvaluationError(
            f"match must be a bool, got {type(result).__name__.removesuffix('Type').lower()}",
            type_error=True,
        )
    return bool(result)


def _is_type_error(exc: BaseException) -> bool:
    # Missing fields depend on the Intent (guard them with has()); overload and conversion
    # failures are wrong whatever the Intent, so they are type errors.
    text = str(exc)
    return "no matching overload" in text or ("TypeError" in text and "no such" not in text)


def _first_line(exc: BaseException) -> str:
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
