"""The CRDs in crds/ are exactly what the models generate, and they are structural."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice_operator.api.crdgen import KINDS, SchemaError, all_crds, model_schema, render
from lattice_operator.api.v1alpha1 import ApiModel

CRD_DIR = Path(__file__).resolve().parents[3] / "crds"


def test_committed_crds_match_the_models() -> None:
    generated = {name: render(doc) for name, doc in all_crds().items()}
    committed = {p.name: p.read_text() for p in CRD_DIR.glob("*.yaml")}
    assert set(committed) == set(generated), "run `make crds`"
    for name, text in generated.items():
        assert committed[name] == text, f"{name} is stale: run `make crds`"


def _walk(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for key, child in node.get("properties", {}).items():
        found += _walk(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        found += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


@pytest.mark.parametrize("info", KINDS, ids=lambda k: k.kind)
def test_every_user_supplied_string_and_list_is_bounded(info: Any) -> None:
    root = all_crds()[f"lattice.dev_{info.plural}.yaml"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]
    unbounded = []
    for path, node in _walk(root["properties"]["spec"], "spec"):
        if node.get("type") == "string" and "enum" not in node and "maxLength" not in node:
            unbounded.append(path)
        if node.get("type") == "array" and "maxItems" not in node:
            unbounded.append(path)
    assert unbounded == []


@pytest.mark.parametrize("info", KINDS, ids=lambda k: k.kind)
def test_schema_is_structural(info: Any) -> None:
    root = all_crds()[f"lattice.dev_{info.plural}.yaml"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]
    for path, node in _walk(root, ""):
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        for banned in ("$ref", "anyOf", "oneOf", "allOf", "title"):
            assert banned not in node, f"{banned} at {path}"


def test_descriptions_reach_the_schema() -> None:
    doc = all_crds()["lattice.dev_runs.yaml"]
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "argv" in spec["properties"]["command"]["description"]
    assert doc["spec"]["names"]["categories"] == ["lattice"]


def test_unions_other_than_optional_are_refused() -> None:
    class Bad(ApiModel):
        value: int | str

    with pytest.raises(SchemaError):
        model_schema(Bad)


def test_render_is_stable_yaml() -> None:
    for name, doc in all_crds().items():
        assert yaml.safe_load(render(doc)) == doc, name
