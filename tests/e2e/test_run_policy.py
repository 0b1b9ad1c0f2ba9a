"""A Sprite's spec.runPolicy: IntentOnly admits only Runs an Intent created."""

from __future__ import annotations

import json

import pytest

from tests.support.admission_cases import build
from tests.support.e2e_intents import POLICY, intent_doc
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _guarded_sprite(stack: Stack, namespace: str) -> None:
    stack.apply(
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


def test_intent_only_refuses_a_hand_made_run_at_admission(stack: Stack, namespace: str) -> None:
    stack.apply(namespace, POLICY)
    _guarded_sprite(stack, namespace)
    stack.wait_sprite_ready(namespace, "box")
    out = stack.cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(_hand_made_run("direct")), check=False
    )
    assert out.returncode != 0
    assert "spec.spriteRef.name: Sprite box admits only Runs created by an Intent" in out.stderr
    assert "spec.runPolicy: IntentOnly" in out.stderr
    # Through an Intent (policy, approval), the same command runs.
    stack.apply(namespace, intent_doc("governed", ["sh", "-c", "echo hi"], trusted=True))
    done = stack.wait_phase(namespace, "intents", "governed", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]


def test_intent_only_is_enforced_by_the_operator_when_admission_could_not(
    stack: Stack, namespace: str
) -> None:
    # The Run exists before its Sprite does, so admission had nothing to check against.
    stack.apply(namespace, _hand_made_run("early"))
    _guarded_sprite(stack, namespace)
    run = stack.wait_phase(namespace, "runs", "early", {"Succeeded", "Failed"})
    status = run["status"]
    assert status["phase"] == "Failed", status
    condition = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert condition["reason"] == "RunPolicy"
    assert "spec.runPolicy: IntentOnly" in condition["message"]
    assert not status.get("sessionId")  # never executed
