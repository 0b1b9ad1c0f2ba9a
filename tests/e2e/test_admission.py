"""The real API server refuses invalid objects at admission, naming the field."""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException

from tests.support.admission_cases import (
    CREATE_CASES,
    PLURALS,
    PRUNED,
    SAMPLES,
    UPDATE_CASES,
    Case,
    UpdateCase,
    build,
    sample,
)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e
GROUP, VERSION = "lattice.dev", "v1alpha1"


def _create(cluster: Cluster, namespace: str, body: dict[str, object]) -> dict[str, object]:
    plural = PLURALS[str(body["kind"])]
    result: dict[str, object] = cluster.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, body
    )
    return result


def _refusal(exc: ApiException) -> str:
    assert exc.status == 422, (exc.status, exc.body)
    return str(json.loads(exc.body)["message"])


@pytest.mark.parametrize("case", CREATE_CASES, ids=lambda c: c.id)
def test_invalid_object_is_refused_with_field_path(
    cluster: Cluster, namespace: str, case: Case
) -> None:
    with pytest.raises(ApiException) as info:
        _create(cluster, namespace, case.body("invalid"))
    message = _refusal(info.value)
    assert case.field in message, message
    assert case.message in message, message


@pytest.mark.parametrize("case", UPDATE_CASES, ids=lambda c: c.id)
def test_transition_rule_refuses_update(cluster: Cluster, namespace: str, case: UpdateCase) -> None:
    first, changed = case.bodies("obj")
    created = _create(cluster, namespace, first)
    changed["metadata"] = created["metadata"]
    with pytest.raises(ApiException) as info:
        cluster.custom.replace_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[case.kind], "obj", changed
        )
    message = _refusal(info.value)
    assert case.field in message, message
    assert case.message in message, message


@pytest.mark.parametrize("path", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_valid_samples_are_accepted(cluster: Cluster, namespace: str, path: str) -> None:
    body = sample(path)
    created = _create(cluster, namespace, body)
    # Everything we sent is kept as sent (the server may only add defaults).
    assert _is_subset(body["spec"], created["spec"]), created["spec"]


def _is_subset(sent: object, stored: object) -> bool:
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _is_subset(v, stored[k]) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(sent) == len(stored)
            and all(_is_subset(a, b) for a, b in zip(sent, stored, strict=True))
        )
    return sent == stored


@pytest.mark.parametrize(("sample_name", "field"), PRUNED)
def test_unknown_fields_are_pruned(
    cluster: Cluster, namespace: str, sample_name: str, field: str
) -> None:
    body = build(sample_name, "pruned", {field: "surprise"})
    created = _create(cluster, namespace, body)
    node: object = created
    *parents, leaf = field.split(".")
    for part in parents:
        assert isinstance(node, dict)
        node = node[part]
    assert isinstance(node, dict)
    assert leaf not in node


def test_defaults_are_applied_by_the_server(cluster: Cluster, namespace: str) -> None:
    body = build("run.yaml", "defaults", {})
    created = _create(cluster, namespace, body)
    spec = created["spec"]
    assert isinstance(spec, dict)
    assert spec["workingDir"] == "/workspace"
    assert spec["cancel"] is False
    assert spec["tty"] is False
