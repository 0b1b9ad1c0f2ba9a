"""Every request checked against GitHub's OpenAPI description: the path must be one GitHub
has, the method one it allows there, path and query parameters of the declared types and
names, and a JSON body valid against the operation's schema.

OpenAPI 3.0's `nullable` is rewritten into JSON Schema once at load; bodies are validated by
jsonschema (Draft 7) with `$ref`s resolved inside the description.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from tests.support.github.fixtures import openapi

_URN = "urn:github-openapi"


def _nullable(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable(v) for k, v in node.items()}
    if out.pop("nullable", False) is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


@dataclass(frozen=True)
class Route:
    template: str
    pattern: re.Pattern[str]
    params: tuple[str, ...]
    greedy: bool = False


@dataclass
class Checked:
    """A request's operation and parameters, or why GitHub would not know it."""

    template: str | None = None
    operation_id: str | None = None
    path_params: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class OpenApiCheck:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = _nullable(spec)
        self.version = str(spec["info"]["version"])
        self._registry: Registry[Any] = Registry().with_resource(
            _URN, Resource.from_contents(self.spec, default_specification=DRAFT7)
        )
        routes = []
        for template in self.spec["paths"]:
            params = tuple(re.findall(r"{([^}]+)}", template))
            regex = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
            # A git ref or a file path keeps its slashes (clients do not escape them).
            regex = re.sub(r"{(ref|path|branch)}$", "(.+)", regex)
            regex = re.sub(r"{[^}]+}", "([^/]+)", regex)
            greedy = "(.+)" in regex
            routes.append(Route(template, re.compile(f"^{regex}$"), params, greedy))
        # Literal segments win over parameters (/pulls/comments before /pulls/{pull_number}).
        routes.sort(key=lambda r: (len(r.params), r.greedy))
        self._routes = routes

    def _resolve(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            pointer = node["$ref"].removeprefix("#/").split("/")
            node = self.spec
            for part in pointer:
                node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    @functools.cache  # noqa: B019 - one checker per test session
    def _validator(self, pointer: str) -> Draft7Validator:
        return Draft7Validator({"$ref": f"{_URN}#{pointer}"}, registry=self._registry)

    def check(
        self, method: str, path: str, query: dict[str, str], body: Any, has_body: bool
    ) -> Checked:
        result = Checked()
        route = next((r for r in self._routes if r.pattern.match(path)), None)
        if route is None:
            result.problems.append(f"{method} {path}: no such path in GitHub's API")
            return result
        result.template = route.template
        values = route.pattern.match(path).groups()  # type: ignore[union-attr]
        result.path_params = dict(zip(route.params, values, strict=True))
        operations = self.spec["paths"][route.template]
        operation = operations.get(method.lower())
        if operation is None:
            allowed = sorted(
                m.upper() for m in operations if m in ("get", "post", "patch", "put", "delete")
            )
            result.problems.append(
                f"{method} {route.template}: not allowed (GitHub allows {allowed})"
            )
            return result
        result.operation_id = operation.get("operationId")
        declared = {}
        for raw in [*operations.get("parameters", []), *operation.get("parameters", [])]:
            param = self._resolve(raw)
            declared[(param["in"], param["name"])] = param
        for name, value in result.path_params.items():
            self._check_value(result, declared.get(("path", name)), name, value, "path")
        for name, value in query.items():
            param = declared.get(("query", name))
            if param is None:
                result.problems.append(f"{method} {route.template}: unknown query parameter {name}")
                continue
            self._check_value(result, param, name, value, "query")
        for (where, name), param in declared.items():
            if where == "query" and param.get("required") and name not in query:
                result.problems.append(f"{method} {route.template}: query parameter {name} missing")
        request_body = operation.get("requestBody")
        if request_body is not None:
            request_body = self._resolve(request_body)
            if not has_body:
                if request_body.get("required"):
                    result.problems.append(f"{method} {route.template}: the body is required")
                return result
            content = request_body.get("content", {})
            if "application/json" not in content:
                result.problems.append(f"{method} {route.template}: body is not JSON here")
                return result
            index = (
                f"/paths/{route.template.replace('~', '~0').replace('/', '~1')}/{method.lower()}"
            )
            schema_at = f"{index}/requestBody/content/application~1json/schema"
            if "$ref" in operation["requestBody"]:
                schema_at = (
                    operation["requestBody"]["$ref"].removeprefix("#")
                    + "/content/application~1json/schema"
                )
            for error in self._validator(schema_at).iter_errors(body):
                where = "/".join(str(p) for p in error.absolute_path) or "(body)"
                result.problems.append(
                    f"{method} {route.template}: body {where}: {error.message[:300]}"
                )
        elif has_body and body not in (None, {}, ""):
            result.problems.append(f"{method} {route.template}: GitHub takes no body here")
        return result

    def _check_value(
        self, result: Checked, param: dict[str, Any] | None, name: str, value: str, where: str
    ) -> None:
        if param is None:
            result.problems.append(f"{where} parameter {name} is not declared")
            return
        schema = self._resolve(param.get("schema", {}))
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if "integer" in kinds and not re.fullmatch(r"-?\d+", value):
            result.problems.append(f"{where} parameter {name}={value!r} is not an integer")
        if "enum" in schema and value not in [str(v) for v in schema["enum"] if v is not None]:
            result.problems.append(f"{where} parameter {name}={value!r} not in {schema['enum']}")


@functools.cache
def github_check() -> OpenApiCheck:
    return OpenApiCheck(openapi())
