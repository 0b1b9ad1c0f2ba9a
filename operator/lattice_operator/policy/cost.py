"""What a policy rule may cost: a worst-case estimate made when the rule is compiled, and a
step budget enforced while it is evaluated.

cel-python has neither (cel-go's cost estimator and runtime cost limit have no counterpart
there), so both are ours, in the Kubernetes API server's manner: the cost of a comprehension
is the size bound of its list times the cost of its body, so nesting multiplies; strings and
lists cost in proportion to their length. The unit is one step of cel-python's tree-walking
evaluator (one node visited, a few microseconds), so the estimate and the budget compare.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import lark
from celpy.evaluation import Activation, Evaluator

from lattice_operator.errors import LatticeError

_Tree = lark.Tree[lark.Token]

RULE_COST_LIMIT = 50_000
"""The largest worst-case estimate a rule may have (steps): a rule above it is refused."""
EVALUATION_BUDGET = 100_000
"""Steps one classification of an Intent (every rule it tries), or one check of a policy
against the sample Intents, may take (a second or two); past it evaluation stops."""
DATA_ITEMS = 256
"""What the estimate assumes of a list or map read from the Intent: at most this many
entries (the Intent schema's bounds are at most 256 on its lists)."""
DATA_CHARS = 65_536
"""...and of a string read from the Intent: at most this many characters (the schema's
bound on its long texts)."""
CHARS_PER_STEP = 4096
"""Characters (or list entries) built, copied or compared per step."""

_COMPREHENSIONS = frozenset({"map", "filter", "all", "exists", "exists_one"})
_NOT_CEL = frozenset({"reduce", "min"})  # cel-python extensions: unbounded, and not CEL
_GROWS = frozenset({"addition", "member_dot_arg", "ident_arg", "list_lit", "map_lit"})


class CostError(LatticeError):
    """A rule's worst case is above the limit, or it uses what cannot be bounded."""


class BudgetExceeded(LatticeError):
    """An evaluation took more steps than its budget."""


# -- the estimate ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bound:
    """The largest a value may be: entries of a list or map, characters of a string."""

    items: int = 0
    chars: int = 0
    element: _Bound | None = None
    """A list's entries (a map's keys); None: anything read from the Intent."""

    def each(self) -> _Bound:
        return self.element if self.element is not None else _DATA


_DATA = _Bound(items=DATA_ITEMS, chars=DATA_CHARS)
_SCALAR = _Bound()


def _join(bounds: Iterable[_Bound]) -> _Bound:
    """A bound of whichever of `bounds` a value is."""
    found = list(bounds)
    if not found:
        return _SCALAR
    return _Bound(
        items=max(b.items for b in found),
        chars=max(b.chars for b in found),
        element=_elements(found),
    )


def _elements(bounds: list[_Bound]) -> _Bound | None:
    containers = [b for b in bounds if b.items]
    if not containers or any(b.element is None for b in containers):
        return None  # (also) from the Intent
    return _join(b.each() for b in containers)


def _size_charge(*bounds: _Bound) -> int:
    return sum(b.items + b.chars for b in bounds) // CHARS_PER_STEP


@dataclass
class _Estimator:
    scope: dict[str, _Bound] = field(default_factory=dict)

    def walk(self, tree: _Tree) -> tuple[int, _Bound]:
        kind = str(tree.data)
        trees = [c for c in tree.children if isinstance(c, lark.Tree)]
        if kind == "literal":
            token = str(tree.children[0]) if tree.children else ""
            quoted = token[:1] in {"'", '"', "r", "R", "b", "B"}
            return 1, _Bound(chars=len(token)) if quoted else _SCALAR
        if kind == "ident":
            name = str(tree.children[0])
            return 1, self.scope.get(name, _DATA)
        if kind == "member_dot_arg":
            return self._call(tree, trees)
        if kind in {"list_lit", "map_lit"}:
            entries = [self.walk(cast(_Tree, c)) for c in trees[0].children] if trees else []
            cost = 2 + sum(c for c, _ in entries)
            step = 1 if kind == "list_lit" else 2  # a map's keys, then values, in turn
            elements = [b for _, b in entries[::step]]
            built = _Bound(items=len(elements), element=_join(elements) if elements else _SCALAR)
            return cost + _size_charge(built), built
        parts = [self.walk(c) for c in trees]
        cost = 1 + sum(c for c, _ in parts)
        bounds = [b for _, b in parts]
        if kind == "addition" and len(trees) == 2 and trees[0].data == "addition_add":
            left, right = bounds
            grown = _Bound(
                items=left.items + right.items,
                chars=left.chars + right.chars,
                element=_elements([left, right]),
            )
            return cost + _size_charge(grown), grown
        if kind == "relation" and len(trees) == 2:
            return cost + _size_charge(*bounds), _SCALAR
        if kind == "ident_arg":  # size(), string(), has(), int() …: one pass over the value
            return cost + _size_charge(*bounds), _join(bounds)
        if len(bounds) == 1:
            return cost, bounds[0]
        return cost, _join(bounds) if kind in {"expr", "exprlist"} else _SCALAR

    def _call(self, tree: _Tree, trees: list[_Tree]) -> tuple[int, _Bound]:
        method = str(tree.children[1])
        receiver_cost, receiver = self.walk(trees[0])
        if method in _NOT_CEL:
            raise CostError(f"{method}() is not CEL (a cel-python extension) and is not allowed")
        args = trees[1].children if len(trees) > 1 else []
        if method in _COMPREHENSIONS and len(args) == 2:
            variable = next(cast(_Tree, args[0]).find_data("ident")).children[0]
            inner = _Estimator({**self.scope, str(variable): receiver.each()})
            body_cost, body = inner.walk(cast(_Tree, args[1]))
            cost = 1 + receiver_cost + receiver.items * (body_cost + 2)
            if method == "map":
                return cost, _Bound(items=receiver.items, element=body)
            if method == "filter":
                return cost, receiver
            return cost, _SCALAR
        parts = [self.walk(cast(_Tree, a)) for a in args]
        cost = 1 + receiver_cost + sum(c for c, _ in parts)
        return cost + _size_charge(receiver, *(b for _, b in parts)), _SCALAR


def estimate(ast: _Tree) -> int:
    """The worst-case steps evaluating `ast` may take, for an Intent within the assumed
    bounds (DATA_ITEMS, DATA_CHARS). Raises CostError for what cannot be bounded."""
    cost, _ = _Estimator().walk(ast)
    return cost


def check_cost(ast: _Tree) -> int:
    """The estimate; CostError if it is above RULE_COST_LIMIT."""
    cost = estimate(ast)
    if cost > RULE_COST_LIMIT:
        raise CostError(
            f"too costly: its worst case is about {cost:,} evaluation steps, the limit is "
            f"{RULE_COST_LIMIT:,} (a comprehension costs its list's size times its body, so "
            f"nesting multiplies; lists read from the Intent count as {DATA_ITEMS} entries, "
            f"strings as {DATA_CHARS:,} characters)"
        )
    return cost


# -- the budget -----------------------------------------------------------------------------


class Meter:
    """Steps left for one classification (or one policy check); shared by its evaluations."""

    def __init__(self, budget: int = EVALUATION_BUDGET) -> None:
        self.budget = budget
        self.used = 0

    def charge(self, steps: int) -> None:
        self.used += steps
        if self.used > self.budget:
            raise BudgetExceeded(
                f"evaluation stopped after {self.budget:,} steps (the budget of one "
                "classification): the rule is too costly for this Intent"
            )


class MeteredEvaluator(Evaluator):
    """cel-python's evaluator, charging a Meter a step per node it visits and a step per
    CHARS_PER_STEP characters or entries of each value it builds."""

    def __init__(self, ast: _Tree, activation: Activation, meter: Meter) -> None:
        super().__init__(ast, activation)
        self.meter = meter

    def sub_evaluator(self, ast: _Tree) -> Evaluator:
        return MeteredEvaluator(ast, self.activation, self.meter)

    def _visit_tree(self, tree: _Tree) -> Any:  # lark's one entry for every node
        self.meter.charge(1)
        value = super()._visit_tree(tree)
        if tree.data in _GROWS and isinstance(value, str | bytes | list | dict):
            self.meter.charge(len(value) // CHARS_PER_STEP)
        return value


__all__ = [
    "CHARS_PER_STEP",
    "DATA_CHARS",
    "DATA_ITEMS",
    "EVALUATION_BUDGET",
    "RULE_COST_LIMIT",
    "BudgetExceeded",
    "CostError",
    "Meter",
    "MeteredEvaluator",
    "check_cost",
    "estimate",
]
