"""Checking resume inputs against the `expected_inputs` a WAITING event declared.

The type vocabulary is the protocol's: `string`, `integer`, `boolean`, `map`
and `array<T>` (nestable). Every expected input is required; an input the
sprite did not ask for is refused too (a typo would otherwise be lost
silently). Each problem names the field, with a path into arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class InputProblem(BaseModel):
    """One refused resume input."""

    model_config = ConfigDict(frozen=True)

    field: str
    """The input's name, with `[i]` for array elements (for example `comments[2]`)."""
    expected: str | None
    """The declared type, or None for an input that was not asked for."""
    reason: str
    """Why it was refused."""


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


def _check(name: str, spec: str, value: Any, problems: list[InputProblem]) -> None:
    if spec.startswith("array<") and spec.endswith(">"):
        if not isinstance(value, list | tuple):
            problems.append(
                InputProblem(field=name, expected=spec, reason=f"{_describe(value)}, not {spec}")
            )
            return
        inner = spec[len("array<") : -1]
        for index, item in enumerate(value):
            _check(f"{name}[{index}]", inner, item, problems)
        return
    ok = {
        "string": isinstance(value, str),
        # bool is an int in Python; JSON keeps them apart, and so do we.
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "map": isinstance(value, Mapping) and all(isinstance(k, str) for k in value),
    }.get(spec)
    if ok is None:
        problems.append(InputProblem(field=name, expected=spec, reason=f"unknown type {spec!r}"))
    elif not ok:
        problems.append(
            InputProblem(field=name, expected=spec, reason=f"{_describe(value)}, not {spec}")
        )


def validate_resume_inputs(
    expected: Mapping[str, str], inputs: Mapping[str, Any]
) -> list[InputProblem]:
    """Every problem with `inputs` (empty when they satisfy `expected`)."""
    problems: list[InputProblem] = []
    for name, spec in expected.items():
        if name not in inputs:
            problems.append(InputProblem(field=name, expected=spec, reason="missing"))
        else:
            _check(name, spec, inputs[name], problems)
    for name in inputs:
        if name not in expected:
            problems.append(InputProblem(field=name, expected=None, reason="not an expected input"))
    return problems


__all__ = ["InputProblem", "validate_resume_inputs"]
