"""An approval is bound to the spec it was given for: an edit after it resets it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lattice_operator.reconcilers.approvals import RECORDS
from tests.support.admission_cases import sample
from tests.support.cluster import wait_for
from tests.support.e2e_intents import (
    APPROVER_ROLE,
    EDITOR_ROLE,
    approval_request,
    bind_role,
    intent_doc,
    kubectl_as,
    setup_namespace,
)
from tests.support.e2e_runs import lattice
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

TWO_APPROVERS = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "two-approvers"},
    "spec": {
        "rules": [
            {
                "name": "exec-needs-two",
                "match": "intent.spec.kind == 'sprite_task_exec'",
                "risk": "controlled",
                "outcome": "require_approval",
                "approvers": 2,
            }
        ]
    },
}


def _approved_condition(stack: Stack, namespace: str, name: str) -> dict[str, Any]:
    intent = stack.get(namespace, "intents", name)
    conditions = (intent.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Approved"), {})


def _wait_message(stack: Stack, namespace: str, name: str, *fragments: str) -> dict[str, Any]:
    def shown() -> dict[str, Any] | None:
        cond = _approved_condition(stack, namespace, name)
        message = cond.get("message", "")
        return cond if all(f in message for f in fragments) else None

    found: dict[str, Any] = wait_for(shown, timeout=60, what=f"Approved message {fragments}")
    return found


def _approve(stack: Stack, namespace: str, user: str, name: str) -> None:
    done = kubectl_as(
        stack, user, "annotate", "intent", name, "-n", namespace, approval_request("approve")
    )
    assert done.returncode == 0, done.stderr


def test_an_edit_after_an_approval_resets_it(stack: Stack, namespace: str) -> None:
    stack.create(namespace, TWO_APPROVERS)
    setup_namespace(stack, namespace)
    for user in ("alice", "bob"):
        bind_role(stack, namespace, user, APPROVER_ROLE)
    bind_role(stack, namespace, "mallory", EDITOR_ROLE)
    stack.create(namespace, intent_doc("bound", ["sh", "-c", "echo reviewed"]))
    intent = stack.wait_phase(namespace, "intents", "bound", {"AwaitingApproval"})
    assert intent["status"]["classification"]["rule"] == "exec-needs-two"

    _approve(stack, namespace, "alice", "bound")
    _wait_message(stack, namespace, "bound", "1 so far (alice)")

    # Someone who may only edit Intents changes the command after alice's approval.
    edit = {"spec": {"params": {"spriteTaskExec": {"command": ["sh", "-c", "echo edited"]}}}}
    edited = kubectl_as(
        stack, "mallory", "patch", "intent", "bound", "-n", namespace,
        "--type", "merge", "-p", json.dumps(edit),
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr

    _approve(stack, namespace, "bob", "bound")
    cond = _wait_message(
        stack, namespace, "bound", "1 so far (bob)", "spec changed after approval by alice"
    )
    assert (cond["status"], cond["reason"]) == ("Unknown", "AwaitingApproval")
    intent = stack.get(namespace, "intents", "bound")
    assert intent["status"]["phase"] == "AwaitingApproval"
    assert "runRef" not in intent["status"]
    # Both records stay in the audit trail, each with the spec it was given for.
    records = intent["status"]["approvals"]
    assert [r["user"] for r in records] == ["alice", "bob"]
    assert records[0]["specDigest"] != records[1]["specDigest"]

    # Alice approves the spec as it is now: two approvals of the current spec, and it runs.
    _approve(stack, namespace, "alice", "bound")
    intent = stack.wait_phase(namespace, "intents", "bound", {"Succeeded", "Failed"})
    status = intent["status"]
    assert status["phase"] == "Succeeded", status
    approved = next(e for e in status["auditLog"] if e["to"] == "Approved")
    assert approved["actor"] == "alice, bob"
    run = stack.get(namespace, "runs", status["runRef"]["name"])
    assert run["spec"]["command"] == ["sh", "-c", "echo edited"]


def test_lattice_approve_pins_the_spec_it_showed(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    stack.create(namespace, intent_doc("pinned", ["sh", "-c", "echo pinned"]))
    stack.wait_phase(namespace, "intents", "pinned", {"AwaitingApproval"})
    # A decision made on a spec that is no longer the stored one is refused ...
    stale = json.dumps({"decision": "approve", "reason": "", "specDigest": "sha256:" + "0" * 64})
    refused = stack.cluster.kubectl(
        "annotate",
        "intent",
        "pinned",
        "-n",
        namespace,
        f"approval.lattice.dev/request={stale}",
        check=False,
    )
    assert refused.returncode != 0
    assert "changed since it was shown to you" in refused.stderr
    # ... and `lattice approve` shows what it approves and pins exactly that.
    out = lattice(stack, "approve", "pinned", "-n", namespace).stdout
    assert 'command: ["sh", "-c", "echo pinned"]' in out
    assert "approve recorded as" in out
    done = stack.wait_phase(namespace, "intents", "pinned", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]


def test_an_intent_near_the_object_size_limit_can_be_approved(stack: Stack, namespace: str) -> None:
    """An UPDATE's admission review carries the object twice: a ~1 MB Intent made a ~2 MB
    review, which the webhook server refused (kopf's 1 MiB body limit) with nothing but "413",
    so the Intent could never be approved."""
    doc = sample("intent-fileops.yaml")
    doc["metadata"] = {"name": "large"}
    doc["spec"]["params"]["fileops"]["ops"] = [
        {"op": "write_file", "path": f"part-{i}.txt", "content": "x" * (250 * 1024)}
        for i in range(4)
    ]
    # create, not apply: apply's last-applied annotation would hold the whole object twice.
    stack.cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(doc))
    done = stack.cluster.kubectl(
        "annotate", "intent", "large", "-n", namespace, approval_request("approve"), check=False
    )
    assert done.returncode == 0, done.stderr
    annotations = stack.get(namespace, "intents", "large")["metadata"]["annotations"]
    [record] = json.loads(annotations[RECORDS])
    assert record["decision"] == "approve", record
