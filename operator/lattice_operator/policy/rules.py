"""What compiling and evaluating policy rules yields, without the CEL machinery: the handlers
and the classifier import these at start-up, and cel-python (its parser, lark) loads only
when a rule is first compiled (~0.15 s of CPU an operator start that never sees a policy
does not pay)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lattice_operator.errors import LatticeError


@dataclass(frozen=True)
class RuleError:
    """Why rule `index` of a policy cannot be used."""

    index: int
    name: str
    message: str

    def __str__(self) -> str:
        return f"spec.rules[{self.index}] ({self.name}): {self.message}"


class PolicyInvalid(LatticeError):
    """A policy has rules that do not compile or do not type-check."""

    def __init__(self, errors: list[RuleError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class CompiledRule:
    index: int
    name: str
    source: str
    program: Any  # celpy.Runner; untyped upstream
    cost: int = 0
    """Its worst-case estimate (evaluation steps)."""


class EvaluationError(LatticeError):
    """A rule could not be evaluated for an Intent (a type error, a missing field, or it
    ran out of its step budget)."""

    def __init__(self, message: str, *, type_error: bool, over_budget: bool = False) -> None:
        super().__init__(message)
        self.type_error = type_error
        self.over_budget = over_budget
