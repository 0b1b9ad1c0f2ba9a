"""An Intent's grants go only to the Run the Intent created: `spec.intentRef` on a Run anyone
may create borrows nothing, and a Run made first under the Intent's Run name is not adopted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.admission_cases import build
from tests.support.e2e_intents import (
    AGENT,
    apply_secret,
    bind_role,
    intent_doc,
    kubectl_as,
    setup_namespace,
)
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

GRANT: dict[str, Any] = {
    "allowedActions": ["FETCH_CREDENTIAL"],
    "credentials": [{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}],
}


def _user_run(name: str, intent: str) -> dict[str, Any]:
    """A Run a user makes by hand, claiming an Intent with spec.intentRef."""
    doc = build(
        "run.yaml", name, {"spec.command": ["python3", "-c", AGENT], "spec.spriteRef.name": "box"}
    )
    doc["spec"].pop("retries", None)
    doc["spec"]["intentRef"] = {"name": intent}
    return doc


def _credentials_dir(stack: Stack, namespace: str) -> Path:
    sprite = str(stack.get(namespace, "sprites", "box")["status"]["spriteName"])
    return stack.sprites.host_shm(sprite) / "lattice" / "credentials"


def _refused_for_the_credential(stack: Stack, namespace: str, run: str) -> dict[str, Any]:
    done = stack.wait_phase(namespace, "runs", run, {"Succeeded", "Failed"})
    status: dict[str, Any] = done["status"]
    assert status["phase"] == "Succeeded", status
    [result] = status["actionResults"]
    assert result["status"] == "refused", result
    assert result.get("path") is None
    [request] = status["events"]["actionRequests"]
    assert request["state"] == "Refused"
    return status


def test_intent_ref_alone_borrows_no_grants(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    # An Intent granting the credential, still awaiting approval.
    stack.create(namespace, intent_doc("vault", ["sh", "-c", "echo approved work"], **GRANT))
    stack.wait_phase(namespace, "intents", "vault", {"AwaitingApproval"})

    # Someone who can create Runs points one at it.
    stack.create(namespace, _user_run("borrow", "vault"))
    status = _refused_for_the_credential(stack, namespace, "borrow")
    [result] = status["actionResults"]
    assert "the Run is not the one its Intent created" in result["reason"]
    assert status["events"]["completion"]["summary"].startswith(
        "refused: the Run is not the one its Intent created"
    )
    credentials = _credentials_dir(stack, namespace)
    assert not credentials.exists() or not any(credentials.iterdir())
    # The Intent is untouched: still waiting for its approver, no Run of its own.
    assert stack.get(namespace, "intents", "vault")["status"]["phase"] == "AwaitingApproval"


def test_a_run_made_under_the_intents_run_name_is_not_adopted(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    # The attacker takes the name the Intent's Run will have, with their own command ...
    stack.create(namespace, _user_run("taken-run", "taken"))
    stack.wait_phase(namespace, "runs", "taken-run", {"Running", "Waiting", "Succeeded"})
    # ... then an auto-approved Intent granting the credential arrives.
    stack.create(
        namespace, intent_doc("taken", ["sh", "-c", "echo the real work"], trusted=True, **GRANT)
    )
    intent = stack.wait_phase(namespace, "intents", "taken", {"Succeeded", "Failed"})
    status = intent["status"]
    assert status["phase"] == "Failed", status
    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "RunNameTaken"
    assert "Run taken-run already exists and was not created by this Intent" in cond["message"]
    assert status.get("runRef") is None

    run = stack.get(namespace, "runs", "taken-run")
    assert run["metadata"].get("ownerReferences") is None  # never adopted
    assert run["spec"]["command"] == ["python3", "-c", AGENT]
    _refused_for_the_credential(stack, namespace, "taken-run")
    credentials = _credentials_dir(stack, namespace)
    assert not credentials.exists() or not any(credentials.iterdir())


INTENT_AUTHOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-intent-author-test"},
    "rules": [
        {
            "apiGroups": ["lattice.dev"],
            "resources": ["intents"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ],
}
SECRET_READER = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-secret-reader-test"},
    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
}


def test_only_someone_who_can_read_a_secret_can_grant_it(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    for user in ("mallory", "alice"):
        bind_role(stack, namespace, user, INTENT_AUTHOR)
    bind_role(stack, namespace, "alice", SECRET_READER)

    # mallory may create Intents but not read the Secret: granting it is refused ...
    greedy = intent_doc("greedy-grant", ["python3", "-c", AGENT], trusted=True, **GRANT)
    refused = kubectl_as(
        stack, "mallory", "create", "-n", namespace, "-f", "-", input=json.dumps(greedy)
    )
    assert refused.returncode != 0
    assert "spec.credentials[0] (gh): mallory may not read Secret tokens" in refused.stderr
    # ... also by adding it to an Intent afterwards.
    plain = intent_doc("plain", ["true"])
    made = kubectl_as(
        stack, "mallory", "create", "-n", namespace, "-f", "-", input=json.dumps(plain)
    )
    assert made.returncode == 0, made.stderr
    added = kubectl_as(
        stack,
        "mallory",
        "patch",
        "intent",
        "plain",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"credentials": GRANT["credentials"]}}),
    )
    assert added.returncode != 0
    assert "may not read Secret tokens" in added.stderr
    # Editing an Intent without touching its grants needs no such right.
    labelled = kubectl_as(stack, "mallory", "label", "intent", "plain", "-n", namespace, "team=a")
    assert labelled.returncode == 0, labelled.stderr

    # alice can read it, so she may grant it.
    fine = intent_doc("fine-grant", ["python3", "-c", AGENT], trusted=True, **GRANT)
    made = kubectl_as(stack, "alice", "create", "-n", namespace, "-f", "-", input=json.dumps(fine))
    assert made.returncode == 0, made.stderr


RUN_AUTHOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-run-author-test"},
    "rules": [
        {
            "apiGroups": ["lattice.dev"],
            "resources": ["runs"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ],
}


def test_only_the_operator_makes_an_intent_a_runs_controller(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    bind_role(stack, namespace, "mallory", RUN_AUTHOR)
    stack.create(namespace, intent_doc("target", ["sh", "-c", "echo approved work"], **GRANT))
    intent = stack.wait_phase(namespace, "intents", "target", {"AwaitingApproval"})
    owner = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "name": "target",
        "uid": intent["metadata"]["uid"],
        "controller": True,
    }
    forged = _user_run("target-run", "target")
    forged["metadata"]["ownerReferences"] = [owner]
    refused = kubectl_as(
        stack, "mallory", "create", "-n", namespace, "-f", "-", input=json.dumps(forged)
    )
    assert refused.returncode != 0
    assert "may not make an Intent the controller of a Run" in refused.stderr
    # Nor by adding the reference to a Run made without it.
    plain = _user_run("plain-run", "target")
    made = kubectl_as(
        stack, "mallory", "create", "-n", namespace, "-f", "-", input=json.dumps(plain)
    )
    assert made.returncode == 0, made.stderr
    patch = {"metadata": {"ownerReferences": [owner]}}
    added = kubectl_as(
        stack,
        "mallory",
        "patch",
        "run",
        "plain-run",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        json.dumps(patch),
    )
    assert added.returncode != 0
    assert "may not make an Intent the controller of a Run" in added.stderr
    # A reference that is not a controller one is no claim, and is let through.
    owner["controller"] = False
    loose = kubectl_as(
        stack,
        "mallory",
        "patch",
        "run",
        "plain-run",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        json.dumps({"metadata": {"ownerReferences": [owner]}}),
    )
    assert loose.returncode == 0, loose.stderr
