"""Approvals fail closed without an operator, while ordinary Intent writes do not need one.

In its own module: it stops and restarts the module's operator, which resets the
process's metrics that `test_intents.test_intent_metrics` reads.
"""

from __future__ import annotations

import pytest

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
        stack.apply(namespace, intent_doc("offline", ["sh", "-c", "echo offline"]))
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
