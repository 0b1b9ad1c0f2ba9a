"""Approvals fail closed without an operator, while ordinary Intent writes do not need one;
the checks the API server evaluates itself (admission policies) hold without one too.

In its own module: it stops and restarts the module's operator, which resets the
process's metrics that `test_intents.test_intent_metrics` reads.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.admission_cases import build
from tests.support.e2e_intents import (
    APPROVER_ROLE,
    EDITOR_ROLE,
    approval_request,
    bind_role,
    forge_approval,
    intent_doc,
    kubectl_as,
    setup_namespace,
)
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

GRANT: dict[str, Any] = {
    "credentials": [{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}]
}
RUN_WRITER = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-run-writer-offline-test"},
    "rules": [{"apiGroups": ["lattice.dev"], "resources": ["runs"], "verbs": ["create"]}],
}


def _forged_run(intent: dict[str, Any]) -> dict[str, Any]:
    doc = build("run.yaml", "forged", {"spec.command": ["true"], "spec.spriteRef.name": "box"})
    doc["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "name": intent["metadata"]["name"],
            "uid": intent["metadata"]["uid"],
            "controller": True,
        }
    ]
    return doc


def test_without_an_operator_intents_are_written_but_approvals_fail_closed(
    stack: Stack, namespace: str
) -> None:
    setup_namespace(stack, namespace)
    bind_role(stack, namespace, "alice", APPROVER_ROLE)
    bind_role(stack, namespace, "mallory", EDITOR_ROLE)
    # A graceful shutdown, with kopf's clean-up (which used to remove the webhooks).
    code = stack.operator.stop()
    assert code == 0, f"operator exited with {code}:\n{stack.operator.log()[-4000:]}"
    try:
        # Ordinary writes need no operator: no webhook is consulted for them.
        stack.create(namespace, intent_doc("offline", ["sh", "-c", "echo offline"]))
        stack.cluster.kubectl("label", "intent", "offline", "-n", namespace, "team=a")
        # Approval writes are refused while nobody can check them, even an authorised one ...
        refused = kubectl_as(
            stack,
            "alice",
            "annotate",
            "intent",
            "offline",
            "-n",
            namespace,
            approval_request("approve"),
        )
        assert refused.returncode != 0
        assert "failed calling webhook" in refused.stderr, refused.stderr
        # ... and above all a forged record.
        forgery = forge_approval(stack, namespace, "offline", forger="mallory", name="alice")
        assert forgery.returncode != 0
        annotations = stack.get(namespace, "intents", "offline")["metadata"].get("annotations")
        assert not any(key.startswith("approval.lattice.dev/") for key in annotations or {})
        # Who may grant a Secret or make an Intent a Run's controller is the API server's own
        # check: it needs no operator, and refuses as precisely without one.
        grant = kubectl_as(
            stack, "mallory", "patch", "intent", "offline", "-n", namespace,
            "--type", "merge", "-p", json.dumps({"spec": GRANT}),
        )  # fmt: skip
        assert grant.returncode != 0
        assert "spec.credentials[0] (gh): mallory may not read Secret tokens" in grant.stderr
        stack.create(namespace, intent_doc("granted-offline", ["true"], **GRANT))  # the admin may
        bind_role(stack, namespace, "mallory", RUN_WRITER)
        intent = stack.get(namespace, "intents", "offline")
        forged = kubectl_as(
            stack, "mallory", "create", "-n", namespace, "-f", "-",
            input=json.dumps(_forged_run(intent)),
        )  # fmt: skip
        assert forged.returncode != 0
        assert "mallory may not make an Intent the controller of a Run" in forged.stderr
    finally:
        stack.start()
    stack.wait_phase(namespace, "intents", "offline", {"AwaitingApproval"})
    approved = kubectl_as(
        stack,
        "alice",
        "annotate",
        "intent",
        "offline",
        "-n",
        namespace,
        approval_request("approve"),
    )
    assert approved.returncode == 0, approved.stderr
    intent = stack.wait_phase(namespace, "intents", "offline", {"Succeeded", "Failed"})
    assert intent["status"]["phase"] == "Succeeded", intent["status"]
    assert [a["user"] for a in intent["status"]["approvals"]] == ["alice"]
