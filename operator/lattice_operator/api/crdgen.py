"""Generate structural CustomResourceDefinitions from the pydantic models.

The models are the source of truth; `lattice crds` writes what this module
returns into `crds/`, and a test fails when the committed files drift.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel

from lattice_operator.api import GROUP
from lattice_operator.api.v1alpha1 import VERSION, Intent, Run, Sprite
from lattice_operator.api.v1alpha1.environment import Environment
from lattice_operator.api.v1alpha1.environment import name_rule as environment_name_rule
from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.api.v1alpha1.healthcheck import HealthCheck, name_rule
from lattice_operator.api.v1alpha1.intent import frozen_spec_rule
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicy
from lattice_operator.api.v1alpha1.spritecheckpoint import SpriteCheckpoint
from lattice_operator.modeling import described

JsonSchema = dict[str, Any]

_DROP_KEYS = {"title", "discriminator"}


class SchemaError(ValueError):
    """A model cannot be expressed as a structural schema."""


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


@dataclass(frozen=True)
class KindInfo:
    model: type[BaseModel]
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    columns: tuple[PrinterColumn, ...] = ()
    categories: tuple[str, ...] = ("lattice",)
    extra_root_rules: tuple[dict[str, str], ...] = field(default=())
    scope: str = "Namespaced"
    """`Namespaced` or `Cluster`."""


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")

KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        model=Sprite,
        kind="Sprite",
        plural="sprites",
        singular="sprite",
        short_names=("spr",),
        columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Backend", ".status.backendStatus", description="cold, warm or running"),
            PrinterColumn("URL", ".status.url", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        model=Run,
        kind="Run",
        plural="runs",
        singular="run",
        short_names=("lrun",),
        columns=(
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Sprite", ".spec.spriteRef.name"),
            PrinterColumn("Events", ".status.cursor.eventCount", "integer"),
            PrinterColumn("Session", ".status.sessionId", priority=1),
            PrinterColumn(
                "Reason", '.status.conditions[?(@.type=="Succeeded")].reason', priority=1
            ),
            AGE,
        ),
    ),
    KindInfo(
        model=Intent,
        kind="Intent",
        plural="intents",
        singular="intent",
        short_names=("lin",),
        columns=(
            PrinterColumn("Kind", ".spec.kind"),
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Risk", ".status.classification.risk"),
            PrinterColumn("Run", ".status.runRef.name", priority=1),
            AGE,
        ),
        extra_root_rules=(frozen_spec_rule(),),
    ),
    KindInfo(
        model=IntentPolicy,
        kind="IntentPolicy",
        plural="intentpolicies",
        singular="intentpolicy",
        short_names=("ipol",),
        columns=(
            PrinterColumn("Valid", '.status.conditions[?(@.type=="Valid")].status'),
            PrinterColumn("Reason", '.status.conditions[?(@.type=="Valid")].reason', priority=1),
            AGE,
        ),
    ),
    KindInfo(
        model=HealthCheck,
        kind="HealthCheck",
        plural="healthchecks",
        singular="healthcheck",
        short_names=("lhc",),
        columns=(
            PrinterColumn("Schedule", ".spec.schedule"),
            PrinterColumn("Suspend", ".spec.suspend", "boolean"),
            PrinterColumn("Healthy", '.status.conditions[?(@.type=="Healthy")].status'),
            PrinterColumn("Last", ".status.lastScheduleTime", "date"),
            PrinterColumn("Incident", ".status.incident.state", priority=1),
            AGE,
        ),
        extra_root_rules=(name_rule(),),
    ),
    KindInfo(
        model=GitHubRepository,
        kind="GitHubRepository",
        plural="githubrepositories",
        singular="githubrepository",
        short_names=("ghrepo",),
        columns=(
            PrinterColumn("Repo", ".spec.repo"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            AGE,
        ),
    ),
    KindInfo(
        model=SpriteCheckpoint,
        kind="SpriteCheckpoint",
        plural="spritecheckpoints",
        singular="spritecheckpoint",
        short_names=("sck",),
        columns=(
            PrinterColumn("Sprite", ".spec.spriteRef.name"),
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Checkpoint", ".status.checkpointId"),
            PrinterColumn("Comment", ".spec.comment", priority=1),
            AGE,
        ),
    ),
    KindInfo(
        model=Environment,
        kind="Environment",
        plural="environments",
        singular="environment",
        short_names=("lenv",),
        columns=(AGE,),
        extra_root_rules=(environment_name_rule(),),
        scope="Cluster",
    ),
)


def _resolve(schema: JsonSchema, defs: dict[str, JsonSchema]) -> JsonSchema:
    """Inline $ref/allOf and collapse Optional (anyOf with null) into its one real branch."""
    schema = dict(schema)
    if "$ref" in schema:
        name = schema.pop("$ref").rsplit("/", 1)[-1]
        schema = {**copy.deepcopy(defs[name]), **schema}
        return _resolve(schema, defs)
    if "allOf" in schema:
        parts = schema.pop("allOf")
        if len(parts) != 1:
            raise SchemaError(f"allOf with {len(parts)} members is not structural")
        return _resolve({**_resolve(parts[0], defs), **schema}, defs)
    if "anyOf" in schema:
        branches = [b for b in schema.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise SchemaError("unions other than Optional[X] are not structural")
        if schema.get("default", 0) is None:
            schema.pop("default")
        return _resolve({**_resolve(branches[0], defs), **schema}, defs)
    return schema


def to_structural(schema: JsonSchema, defs: dict[str, JsonSchema]) -> JsonSchema:
    """Turn one pydantic JSON schema node into a structural OpenAPI v3 node."""
    node = _resolve(schema, defs)
    out: JsonSchema = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "default":
            # Scalar defaults are applied by the API server (visible in `kubectl get -o yaml`);
            # empty containers would only add noise to every object.
            if isinstance(value, (str, int, float, bool)):
                out["default"] = value
        elif key == "properties":
            out["properties"] = {k: to_structural(v, defs) for k, v in value.items()}
        elif key == "items":
            out["items"] = to_structural(value, defs)
        elif key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict) and value:
                out["additionalProperties"] = to_structural(value, defs)
            elif isinstance(value, dict):
                out["x-kubernetes-preserve-unknown-fields"] = True
        else:
            out[key] = value
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("additionalProperties", None)
    elif "type" not in out and "properties" in out:
        out["type"] = "object"
    if "type" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        raise SchemaError(f"schema node without a type: {sorted(node)}")
    return out


def model_schema(model: type[BaseModel]) -> JsonSchema:
    """The structural schema of a model (validation mode, wire aliases)."""
    described(model)
    raw = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    defs = raw.pop("$defs", {})
    return to_structural(raw, defs)


def crd_for(info: KindInfo) -> JsonSchema:
    """The CustomResourceDefinition for one kind."""
    full = model_schema(info.model)
    props = full["properties"]
    root: JsonSchema = {
        "type": "object",
        "description": full.get("description", ""),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": props["spec"],
        },
    }
    if "status" in props:  # a kind without one (Environment) has no status subresource
        root["properties"]["status"] = props["status"]
    if info.extra_root_rules:
        root["x-kubernetes-validations"] = list(info.extra_root_rules)
    columns = []
    for col in info.columns:
        entry: JsonSchema = {"name": col.name, "type": col.type, "jsonPath": col.json_path}
        if col.description:
            entry["description"] = col.description
        if col.priority:
            entry["priority"] = col.priority
        columns.append(entry)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{info.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": info.scope,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": list(info.short_names),
                "categories": list(info.categories),
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}} if "status" in props else {},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def all_crds() -> dict[str, JsonSchema]:
    """File name → CRD document, for every resource the operator needs."""
    return {f"{GROUP}_{info.plural}.yaml": crd_for(info) for info in KINDS}


def render(doc: JsonSchema) -> str:
    """YAML text of a document, stable across runs."""
    header = "# Generated by `lattice crds` from lattice_operator.api; do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)
