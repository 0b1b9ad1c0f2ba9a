"""Decisions are counted once per key and operator; the memory is bounded, newest kept."""

from __future__ import annotations

# Handlers-private plumbing under test: the operator's context and its CountedOnce memory.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._counted_once import CountedOnce


def test_a_key_is_first_once_and_the_oldest_are_forgotten() -> None:
    counted = CountedOnce(kept=2)
    assert counted.first(("a", 1))
    assert not counted.first(("a", 1))
    assert counted.first(("a", 2))
    assert counted.first(("b", 1))  # ("a", 1) is forgotten now
    assert len(counted) == 2
    assert counted.first(("a", 1))


def test_each_operator_has_its_own() -> None:
    one, two = OperatorContext(), OperatorContext()
    assert one.decisions_counted.first(("i", 1))
    assert two.decisions_counted.first(("i", 1))
