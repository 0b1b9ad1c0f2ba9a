"""A Sprite's spec.runPolicy: IntentOnly admits only Runs an Intent created."""

from __future__ import annotations

import json

import pytest

from tests.support.admission_cases import build
from tests.support.e2e_intents import POLICY, bind_role, intent_doc, kubectl_as
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _guarded_sprite(stack: Stack, namespace: str) -> None:
    stack.create(
        namespace,
        build(
            "sprite.yaml",
            "box",
            {"spec.networkPolicy": {"rules": []}, "spec.runPolicy": "IntentOnly"},
        ),
    )


def _hand_made_run(name: str) -> dict[str, object]:
    doc = build(
        "run.yaml", name, {"spec.command": ["sh", "-c", "echo hi"], "spec.spriteRef.name": "box"}
    )
    doc["spec"].pop("retries", None)
    return doc


def _assert_refused_by_the_operator(stack: Stack, namespace: str, name: str) -> None:
    """The Run failed for its Sprite's runPolicy before any session started."""
    run = stack.wait_phase(namespace, "runs", name, {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Failed", status
    condition = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert condition["reason"] == "RunPolicy"
    assert "spec.runPolicy: IntentOnly" in condition["message"]
    assert not status.get("sessionId")  # never executed


def test_intent_only_refuses_a_hand_made_run_at_admission(stack: Stack, namespace: str) -> None:
    stack.create(namespace, POLICY)
    _guarded_sprite(stack, namespace)
    stack.wait_sprite_ready(namespace, "box")
    out = stack.cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(_hand_made_run("direct")), check=False
    )
    assert out.returncode != 0
    assert "spec.spriteRef.name: Sprite box admits only Runs created by an Intent" in out.stderr
    assert "spec.runPolicy: IntentOnly" in out.stderr
    # Through an Intent (policy, approval), the same command runs.
    stack.create(namespace, intent_doc("governed", ["sh", "-c", "echo hi"], trusted=True))
    done = stack.wait_phase(namespace, "intents", "governed", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]


def test_intent_only_is_enforced_by_the_operator_when_admission_could_not(
    stack: Stack, namespace: str
) -> None:
    # The Run exists before its Sprite does, so admission had nothing to check against.
    stack.create(namespace, _hand_made_run("early"))
    _guarded_sprite(stack, namespace)
    _assert_refused_by_the_operator(stack, namespace, "early")


RUN_CREATOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "e2e-run-creator"},
    "rules": [{"apiGroups": ["lattice.dev"], "resources": ["runs"], "verbs": ["create", "get"]}],
}


def _claiming_run(name: str, api_version: str, uid: str) -> dict[str, object]:
    """A hand-made Run whose controller reference says Intent, as an attacker writes it."""
    doc = _hand_made_run(name)
    doc["metadata"]["ownerReferences"] = [  # type: ignore[index]
        {"apiVersion": api_version, "kind": "Intent", "name": "governed", "uid": uid}
        | {"controller": True}
    ]
    return doc


def test_intent_only_refuses_a_run_claiming_an_intent_of_another_group(
    stack: Stack, namespace: str
) -> None:
    """A subject allowed only to create Runs names a controller of kind Intent in another API
    group (which the owner check does not guard): it is no Intent, and the Run is refused."""
    _guarded_sprite(stack, namespace)
    stack.wait_sprite_ready(namespace, "box")
    bind_role(stack, namespace, "mallory", RUN_CREATOR)
    for api_version in ("evil.example/v1", "lattice.dev.evil.example/v1alpha1"):
        doc = _claiming_run("forged", api_version, "6f1f7d2e-0000-4000-8000-000000000001")
        out = kubectl_as(
            stack, "mallory", "create", "-n", namespace, "-f", "-", input=json.dumps(doc)
        )
        assert out.returncode != 0, api_version
        assert "Sprite box admits only Runs created by an Intent" in out.stderr, out.stderr
    # Our group is guarded by the owner check: only the operator writes such a reference.
    doc = _claiming_run("forged", "lattice.dev/v1alpha1", "6f1f7d2e-0000-4000-8000-000000000001")
    out = kubectl_as(stack, "mallory", "create", "-n", namespace, "-f", "-", input=json.dumps(doc))
    assert out.returncode != 0
    assert "may not make an Intent the controller of a Run" in out.stderr, out.stderr


def test_the_operator_refuses_a_run_claiming_an_intent_of_another_group(
    stack: Stack, namespace: str
) -> None:
    # The Run exists before its Sprite, so admission had nothing to check against; the
    # reference names a real Intent's uid, but in another group.
    stack.create(namespace, POLICY)
    stack.create(namespace, intent_doc("governed", ["sh", "-c", "echo hi"], trusted=True))
    real = stack.get(namespace, "intents", "governed")
    stack.create(namespace, _claiming_run("early", "evil.example/v1", real["metadata"]["uid"]))
    _guarded_sprite(stack, namespace)
    _assert_refused_by_the_operator(stack, namespace, "early")
