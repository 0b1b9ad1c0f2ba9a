"""Resume inputs against a WAITING's expected inputs."""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.protocol import validate_resume_inputs

EXPECTED = {
    "approved": "boolean",
    "comments": "array<string>",
    "attempts": "integer",
    "title": "string",
    "labels": "map",
    "matrix": "array<array<integer>>",
}
GOOD: dict[str, Any] = {
    "approved": True,
    "comments": ["Looks good", "nit on line 42"],
    "attempts": 3,
    "title": "Fix cache",
    "labels": {"area": "cache"},
    "matrix": [[1, 2], [], [3]],
}


def test_matching_inputs_pass() -> None:
    assert validate_resume_inputs(EXPECTED, GOOD) == []


@pytest.mark.parametrize(
    ("field", "value", "reported"),
    [
        ("approved", "true", "approved"),
        ("approved", 1, "approved"),
        ("attempts", True, "attempts"),  # a boolean is not an integer, whatever Python thinks
        ("attempts", 3.0, "attempts"),
        ("title", 7, "title"),
        ("labels", ["area"], "labels"),
        ("comments", "one comment", "comments"),
        ("comments", ["ok", 2], "comments[1]"),
        ("matrix", [[1], ["x"]], "matrix[1][0]"),
    ],
)
def test_wrong_types_are_refused_with_the_field_name(
    field: str, value: object, reported: str
) -> None:
    (problem,) = validate_resume_inputs(EXPECTED, {**GOOD, field: value})
    assert problem.field == reported
    assert problem.expected is not None
    assert "not" in problem.reason


def test_missing_and_unexpected_inputs() -> None:
    inputs = {k: v for k, v in GOOD.items() if k != "approved"} | {"aproved": True}
    problems = validate_resume_inputs(EXPECTED, inputs)
    assert [(p.field, p.reason) for p in problems] == [
        ("approved", "missing"),
        ("aproved", "not an expected input"),
    ]


def test_null_is_not_a_value_of_any_type() -> None:
    problems = validate_resume_inputs({"title": "string"}, {"title": None})
    assert problems[0].reason == "null, not string"
