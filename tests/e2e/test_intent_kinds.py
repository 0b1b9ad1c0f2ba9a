"""Intent kinds beyond sprite_task_exec, and what flows between an Intent and its Run:
sprite_create makes a Sprite, forge kinds wait for a forge, forge actions are queued, a
WAITING shows on the Intent and the Intent's resume reaches its Run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lattice_operator.builders import INTENT_LABEL
from tests.support.admission_cases import sample
from tests.support.agents import agent
from tests.support.e2e_intents import intent_doc, setup_namespace
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

ALLOW_ALL = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "team"},  # replaces test_intents' policy of that name
    "spec": {"rules": [{"name": "all", "match": "true", "risk": "safe", "outcome": "allow"}]},
}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_sprite_create_makes_a_sprite(stack: Stack, namespace: str) -> None:
    stack.apply(namespace, ALLOW_ALL)
    doc = sample("intent-sprite-create.yaml")
    stack.apply(namespace, doc)
    intent = stack.wait_phase(
        namespace, "intents", doc["metadata"]["name"], {"Succeeded", "Failed"}
    )
    assert intent["status"]["phase"] == "Succeeded", intent["status"]
    name = doc["spec"]["params"]["spriteCreate"]["name"]
    sprite = stack.wait_sprite_ready(namespace, name)
    assert sprite["spec"]["urlAuth"] == "sprite"
    # Not owned (a sprite outlives the Intent that asked for it), but traceable to it.
    assert "ownerReferences" not in sprite["metadata"]
    assert sprite["metadata"]["labels"][INTENT_LABEL] == doc["metadata"]["name"]


def test_a_forge_kind_waits_for_a_forge_and_never_succeeds(stack: Stack, namespace: str) -> None:
    stack.apply(namespace, ALLOW_ALL)
    doc = sample("intent-issue-triage.yaml")
    stack.apply(namespace, doc)
    intent = stack.wait_phase(namespace, "intents", doc["metadata"]["name"], {"Waiting"})
    reasons = {c["reason"] for c in intent["status"]["conditions"]}
    assert "NoForgeConfigured" in reasons, intent["status"]["conditions"]
    assert intent["status"].get("result") is None


ASKS_FOR_A_PR = agent(
    r"""
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("INFO", {"message": "resumed"})  # the protocol: acknowledge the resume first
    inputs = json.load(open("/workspace/.lattice/resume.json"))["inputs"]
    emit("COMPLETED", {"status": "success", "summary": "go=%s" % inputs["go"]})
else:
    emit("ACTION_REQUEST", {"action": "OPEN_PR", "parameters": {"title": "fix"},
                            "blocking": False})
    emit("WAITING", {"reason": "QUESTION", "checkpoint_id": checkpoint("before asking"),
                     "expected_inputs": {"go": "boolean"}})
"""
)


def test_forge_actions_queue_and_the_intent_resumes_its_run(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    stack.apply(namespace, ALLOW_ALL)
    stack.apply(
        namespace,
        intent_doc("pr", ["python3", "-c", ASKS_FOR_A_PR], allowedActions=["OPEN_PR"]),
    )
    intent = stack.wait_phase(namespace, "intents", "pr", {"Waiting", "Failed"})
    status = intent["status"]
    assert status["phase"] == "Waiting", status
    # The Run's WAITING shows on the Intent ...
    waiting = status["waiting"]
    assert waiting["expectedInputs"] == {"go": "boolean"}
    # ... and the granted forge action waits for the forge integration.
    [queued] = status["actions"]
    assert (queued["action"], queued["state"]) == ("OPEN_PR", "pending")

    resume = {"spec": {"resume": {"checkpointId": waiting["checkpointId"], "inputs": {"go": True}}}}
    stack.cluster.kubectl(
        "patch", "intent", "pr", "-n", namespace, "--type", "merge", "-p", json.dumps(resume)
    )
    done = stack.wait_phase(namespace, "intents", "pr", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["result"]["summary"] == "go=True"
    run = stack.get(namespace, "runs", done["status"]["runRef"]["name"])
    assert run["spec"]["resume"]["inputs"] == {"go": True}
