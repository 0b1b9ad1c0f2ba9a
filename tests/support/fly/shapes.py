"""The Fly Machines API shapes pinned in tests/data/fly/machines-api.json (where they come
from is written in the file), and a check of a request or an answer against them: the path
and method must be an operation there, query parameters and JSON fields declared for it,
with the declared types."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHAPES_FILE = Path(__file__).resolve().parents[2] / "data" / "fly" / "machines-api.json"


@functools.cache
def shapes() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SHAPES_FILE.read_text())
    return data


@dataclass
class Checked:
    operation: str | None = None
    """`METHOD /template`, as the shapes file names it."""
    params: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _route(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\{[^}]+\\}", "([^/]+)", re.escape(template)) + "$")


def check_request(method: str, path: str, query: dict[str, str], body: Any) -> Checked:
    """`path` without the base path (/v1)."""
    result = Checked()
    found = None
    for operation in shapes()["operations"]:
        verb, template = operation.split(" ", 1)
        match = _route(template).match(path)
        if match and verb == method:
            names = re.findall(r"{([^}]+)}", template)
            found = operation
            result.params = dict(zip(names, match.groups(), strict=True))
            break
    if found is None:
        result.problems.append(f"{method} {path}: no such operation in the pinned Fly shapes")
        return result
    result.operation = found
    spec = shapes()["operations"][found]
    for name, value in query.items():
        kind = spec["query"].get(name)
        if kind is None:
            result.problems.append(f"{found}: query parameter {name} is not Fly's")
        elif isinstance(kind, list) and value not in kind:
            result.problems.append(f"{found}: query {name}={value!r} not in {kind}")
        elif kind == "integer" and not value.isdigit():
            result.problems.append(f"{found}: query {name}={value!r} is not an integer")
    if spec["body"] is None:
        if body not in (None, {}, b"", ""):
            result.problems.append(f"{found}: Fly takes no body here")
    elif body is not None:
        result.problems.extend(check_object(spec["body"], body, found))
    return result


def check_object(schema: str, value: Any, where: str) -> list[str]:
    """Problems of `value` as an object of `schema` (unknown fields, wrong types)."""
    problems: list[str] = []
    if schema.endswith("[]"):
        if not isinstance(value, list):
            return [f"{where}: not a list of {schema[:-2]}"]
        for index, item in enumerate(value):
            problems.extend(check_object(schema[:-2], item, f"{where}[{index}]"))
        return problems
    fields = shapes()["schemas"][schema]
    if not isinstance(value, dict):
        return [f"{where}: {schema} is not an object"]
    for name, item in value.items():
        kind = fields.get(name)
        if kind is None:
            problems.append(f"{where}: field {name} is not in Fly's {schema}")
        else:
            problems.extend(_check_value(kind, item, f"{where}.{name}"))
    return problems


def _check_value(kind: str, value: Any, where: str) -> list[str]:
    simple: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "boolean": bool,
    }
    if kind in simple:
        ok = isinstance(value, simple[kind]) and not (kind == "integer" and isinstance(value, bool))
        return [] if ok else [f"{where}: {value!r} is not a {kind}"]
    if kind == "map[string]string":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return [] if ok else [f"{where}: not a map of strings"]
    return check_object(kind, value, where)


__all__ = ["SHAPES_FILE", "Checked", "check_object", "check_request", "shapes"]
