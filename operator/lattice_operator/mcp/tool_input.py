"""A tool's input as a pydantic model: its JSON schema for tools/list, and its validation.

The SDK's low-level server validates nothing, so each tool's arguments are validated by the
model its schema is generated from (one source, they cannot disagree). Arguments arrive as
JSON and are validated as JSON, strictly: no string to number, no boolean for an integer.
A bad argument is a `ToolError` naming the parameter: `INVALID_ARGUMENT`, or the code a
tool's `codes` gives that parameter (`INVALID_PRIORITY`, …).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, WithJsonSchema

from lattice_operator.mcp.errors import ToolError

In = TypeVar("In", bound="ToolInput")
Ctx = TypeVar("Ctx")
Out = TypeVar("Out")
CodeFor = Callable[[object], ToolError | None]
"""The error for a bad value of one parameter, given the value; None leaves it to the
generic INVALID_ARGUMENT."""


class ToolInput(BaseModel):
    """The arguments of one tool. Subclasses declare fields in the order they are checked:
    the first bad one is reported."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    codes: ClassVar[Mapping[str, CodeFor]] = {}
    """Parameters whose bad values have their own error code."""

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        """The schema tools/list shows: a plain JSON schema, no titles, no `$ref`, an
        optional parameter as its type (null is accepted as absent)."""
        schema = cls.model_json_schema()
        defs = schema.pop("$defs", {})
        schema.pop("title", None)
        schema.setdefault("required", [])
        properties = schema.get("properties", {})
        schema["properties"] = {k: _plain(v, defs) for k, v in properties.items()}
        return schema

    @classmethod
    def parse(cls, arguments: Mapping[str, object]) -> Self:
        """The validated arguments, or the `ToolError` of the first bad parameter. A null
        argument is an absent one (its default applies; a required one is missing)."""
        given = {k: v for k, v in arguments.items() if v is not None}
        try:
            return cls.model_validate_json(json.dumps(given))
        except (TypeError, ValueError) as err:  # ValidationError is a ValueError
            raise _error(cls, err) from None


def _plain(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs[ref.rsplit("/", 1)[-1]]
        # An enum's class docstring is not the parameter's description.
        inlined = {k: v for k, v in target.items() if k not in ("title", "description")}
        return _plain({**inlined, **{k: v for k, v in schema.items() if k != "$ref"}}, defs)
    out = {k: v for k, v in schema.items() if k != "title"}
    variants = out.get("anyOf")
    if isinstance(variants, list):
        others = [v for v in variants if v != {"type": "null"}]
        if len(others) == 1 and len(others) < len(variants):
            del out["anyOf"]
            out = {**_plain(others[0], defs), **out}
    if "default" in out and out["default"] is None:
        del out["default"]  # an optional parameter: absent and null are the same
    for key in ("items", "additionalProperties"):
        value = out.get(key)
        if isinstance(value, dict):
            value = _plain(value, defs)
            out[key] = value
        if key == "additionalProperties" and value in ({}, True):
            del out[key]  # any value: JSON schema's default
    return out


def _error(model: type[ToolInput], err: Exception) -> ToolError:
    if not isinstance(err, ValidationError):
        return ToolError(
            "INVALID_ARGUMENT", f"Arguments are not JSON: {err}", "Pass JSON values only"
        )
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    parameter = loc[0] if loc else ""
    # A missing parameter is INVALID_ARGUMENT whatever its own code (docs/mcp.md, Errors).
    if parameter in model.codes and first["type"] != "missing":
        coded = model.codes[parameter](first["input"])
        if coded is not None:
            return coded
    where = ".".join(loc)
    if first["type"] == "extra_forbidden":
        message = f"Parameter '{where}' is not a parameter of this tool"
    elif first["type"] == "missing":
        message = f"Parameter '{where}' is required"
    else:
        message = f"Parameter '{where}': {first['msg']}"
    return ToolError("INVALID_ARGUMENT", message, "Check the tool's input schema with tools/list")


def number(low: float, high: float) -> tuple[AfterValidator, WithJsonSchema]:
    """For `Annotated[int | float, *number(low, high)]`: a JSON number in [low, high], kept as
    the caller wrote it (an integer stays one), shown as `{"type": "number", …}`."""

    def in_range(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(f"must be from {low:g} to {high:g}")
        return value

    schema = {"type": "number", "minimum": low, "maximum": high}
    return AfterValidator(in_range), WithJsonSchema(schema)


@dataclass(frozen=True)
class Tool(Generic[Ctx, Out]):
    """One tool as served: what tools/list shows, and the call with validated arguments."""

    name: str
    description: str
    input: type[ToolInput]
    run: Callable[[Ctx, Mapping[str, object]], Out]
    """Validate the arguments with `input`, then call the handler."""

    def input_schema(self) -> dict[str, Any]:
        return self.input.input_schema()


def tool(
    name: str, description: str, input: type[In], handler: Callable[[Ctx, In], Out]
) -> Tool[Ctx, Out]:
    """A tool whose `handler` receives its arguments validated by `input`."""

    def run(context: Ctx, arguments: Mapping[str, object]) -> Out:
        return handler(context, input.parse(arguments))

    return Tool(name, description, input, run)


__all__ = ["CodeFor", "Tool", "ToolInput", "number", "tool"]
