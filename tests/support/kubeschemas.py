"""JSON schemas for kubeconform, made offline: Kubernetes' from the pinned API server's
OpenAPI document (`/openapi/v2`), ours from the CRDs in crds/.

kubeconform looks a resource's schema up by a path template; with
`<dir>/{{ .ResourceKind }}{{ .KindSuffix }}.json` it opens, for `apps/v1` `Deployment`,
`<dir>/deployment-apps-v1.json` (the kind in lower case, the group's first label, the
version; `v1` alone for the core group). Each file is standalone: the kind's schema with
the definitions it reaches under `definitions` (references stay local, so recursive
definitions such as JSONSchemaProps work). Strict, as kubeconform's `-strict` schemas are:
an object that lists its properties allows no others. Kubernetes' string-or-number types
(IntOrString, Quantity) accept both.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REF = "#/definitions/"
INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
NUMBER_OR_STRING = {"anyOf": [{"type": "number"}, {"type": "string"}]}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
TEMPLATE = "{{ .ResourceKind }}{{ .KindSuffix }}.json"


def file_name(api_version: str, kind: str) -> str:
    """The file kubeconform opens for a resource (its KindSuffix rules)."""
    group, _, version = api_version.rpartition("/")
    suffix = f"-{version}" if not group else f"-{group.split('.')[0]}-{version}"
    return f"{kind.lower()}{suffix.lower()}.json"


def _strict(node: Any, *, preserve: bool = False) -> Any:
    """A copy in which objects with properties allow no others, and Kubernetes' special
    types accept what the API server accepts."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string") is True:
        return {**INT_OR_STRING, **{k: v for k, v in node.items() if k == "description"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):
            # Maps of names to schemas: the names are not keywords.
            out[key] = {name: _strict(schema) for name, schema in value.items()}
        elif key == "example" or key.startswith("x-"):
            out[key] = value  # data, not schemas
        else:
            out[key] = _strict(value)
    keep_open = preserve or node.get("x-kubernetes-preserve-unknown-fields") is True
    if "properties" in out and "additionalProperties" not in out and not keep_open:
        out["additionalProperties"] = False
    if node.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF):
            yield ref[len(REF) :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _reachable(definitions: dict[str, Any], roots: Iterable[str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = definitions[name]
        todo.extend(_refs(definitions[name]))
    return seen


def _definitions(openapi: dict[str, Any]) -> dict[str, Any]:
    definitions = {name: _strict(schema) for name, schema in openapi["definitions"].items()}
    definitions[QUANTITY] = {**NUMBER_OR_STRING, "description": "a Kubernetes quantity"}
    return definitions


def _standalone(root: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    reached = _reachable(definitions, _refs(root))
    return {**root, "definitions": reached} if reached else root


def write_kubernetes_schemas(
    openapi: dict[str, Any], out: Path, kinds: set[tuple[str, str]] | None = None
) -> list[Path]:
    """A file per (apiVersion, kind) of the OpenAPI document's resources (or of `kinds`)."""
    definitions = _definitions(openapi)
    written = []
    for name, schema in definitions.items():
        for gvk in openapi["definitions"][name].get("x-kubernetes-group-version-kind", []):
            group, version, kind = gvk["group"], gvk["version"], gvk["kind"]
            api_version = f"{group}/{version}" if group else version
            if kinds is not None and (api_version, kind) not in kinds:
                continue
            root = {k: v for k, v in schema.items() if k != "x-kubernetes-group-version-kind"}
            path = out / file_name(api_version, kind)
            path.write_text(json.dumps(_standalone(root, definitions)))
            written.append(path)
    return written


def write_crd_schemas(
    crds: Iterable[dict[str, Any]], openapi: dict[str, Any], out: Path
) -> list[Path]:
    """A file per served version of each CRD, its metadata checked as ObjectMeta."""
    definitions = _definitions(openapi)
    written = []
    for crd in crds:
        spec = crd["spec"]
        for version in spec["versions"]:
            schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            schema.setdefault("properties", {})["metadata"] = {"$ref": REF + OBJECT_META}
            api_version = f"{spec['group']}/{version['name']}"
            path = out / file_name(api_version, spec["names"]["kind"])
            path.write_text(json.dumps(_standalone(schema, definitions)))
            written.append(path)
    return written


__all__ = ["TEMPLATE", "file_name", "write_crd_schemas", "write_kubernetes_schemas"]
