"""End-to-end helpers for Intents: the namespace set-up, Intent documents, RBAC roles and
bindings, approvals as another user."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from lattice_adapters.kube import KubeConfig
from tests.support.admission_cases import build, sample
from tests.support.agents import agent
from tests.support.cluster import create_or_replace, wait_for
from tests.support.loadgen import apiserver_metrics, requests_between
from tests.support.stack import Stack

POLICY = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "team"},
    "spec": {
        "rules": [
            {
                "name": "trusted-exec",
                "match": "intent.spec.kind == 'sprite_task_exec' && "
                "has(intent.metadata.labels) && 'trusted' in intent.metadata.labels",
                "risk": "safe",
                "outcome": "allow",
            },
            {
                "name": "no-fileops",
                "match": "intent.spec.kind == 'fileops'",
                "risk": "dangerous",
                "outcome": "deny",
                "message": "file operations are not allowed in this namespace",
            },
            {
                "name": "env-changes",
                "match": "intent.spec.kind == 'environment_change'",
                "risk": "dangerous",
                "outcome": "require_approval",
                "approvers": 2,
            },
        ]
    },
}


APPROVER_ROLE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "manifests/rbac/lattice-approver.yaml").read_text()
)


EDITOR_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-intent-editor-test"},
    "rules": [
        {
            "apiGroups": ["lattice.dev"],
            "resources": ["intents"],
            "verbs": ["get", "list", "watch", "update", "patch"],
        }
    ],
}


def setup_namespace(stack: Stack, namespace: str, sprite: str = "box") -> None:
    # API creates: no caller re-applies the policy or the Sprite nor reads them through kubectl.
    stack.create(namespace, POLICY)
    stack.create(namespace, build("sprite.yaml", sprite, {"spec.networkPolicy": {"rules": []}}))
    stack.wait_sprite_ready(namespace, sprite)


def intent_doc(
    name: str, command: list[str], *, trusted: bool = False, **spec: Any
) -> dict[str, Any]:
    doc = sample("intent-sprite-task-exec.yaml")
    doc["metadata"] = {"name": name, **({"labels": {"trusted": "yes"}} if trusted else {})}
    doc["spec"]["params"]["spriteTaskExec"] = {"spriteRef": {"name": "box"}, "command": command}
    doc["spec"]["allowedActions"] = []
    doc["spec"].update(spec)
    return doc


def bind_role(stack: Stack, namespace: str, user: str, role: dict[str, Any]) -> None:
    """`role` (a ClusterRole) bound to `user` in `namespace`, through the API client.

    Create-or-replace: the same ClusterRole is bound again for every user and module."""
    rbac = stack.cluster.rbac
    role_name = role["metadata"]["name"]
    create_or_replace(
        lambda body: rbac.create_cluster_role(body),
        lambda: rbac.read_cluster_role(role_name),
        lambda body: rbac.replace_cluster_role(role_name, body),
        role,
    )
    binding: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{user}-{role['metadata']['name']}", "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    binding_name = binding["metadata"]["name"]
    create_or_replace(
        lambda body: rbac.create_namespaced_role_binding(namespace, body),
        lambda: rbac.read_namespaced_role_binding(binding_name, namespace),
        lambda body: rbac.replace_namespaced_role_binding(binding_name, namespace, body),
        binding,
    )


def kubectl_as(
    stack: Stack, user: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl as another identity (impersonated: works on any cluster the admin controls)."""
    return stack.cluster.kubectl("--as", user, *args, input=input, check=False)


def approval_request(decision: str, reason: str = "") -> str:
    return "approval.lattice.dev/request=" + json.dumps({"decision": decision, "reason": reason})


SECRET = "s3cr3t-Value-0f-the-token-9d1c7"


def apply_secret(stack: Stack, namespace: str) -> None:
    stack.cluster.core.create_namespaced_secret(
        namespace,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="tokens"), string_data={"gh": SECRET}),
    )


def forge_approval(
    stack: Stack, namespace: str, intent: str, *, forger: str, name: str
) -> subprocess.CompletedProcess[str]:
    """`forger` writes an approval record in `name`'s name straight into the annotation."""
    record = {"user": name, "decision": "approve", "reason": "", "time": "2026-01-01T00:00:00Z"}
    annotation = f"approval.lattice.dev/records={json.dumps([record])}"
    return kubectl_as(stack, forger, "annotate", "intent", intent, "-n", namespace, annotation)


AGENT = agent(
    r"""
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("INFO", {"message": "resumed"})  # the protocol: acknowledge the resume first
    inputs = json.load(open("/workspace/.lattice/resume.json"))["inputs"]
    if inputs.get("status") == "fulfilled":
        path = inputs["path"]
        mode = stat.S_IMODE(os.stat(path).st_mode)
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        summary = "credential at %s mode %o sha256 %s" % (path, mode, digest)
    else:
        summary = "refused: %s" % inputs.get("reason")
    emit("COMPLETED", {"status": "success", "summary": summary})
else:
    emit("ACTION_REQUEST", {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"},
                            "blocking": True})
    emit("WAITING", {"reason": "CREDENTIAL", "checkpoint_id": checkpoint("before waiting"),
                     "expected_inputs": {"status": "string", "path": "string",
                                         "reason": "string"}})
"""
)


INTENT_WRITE_RESOURCES = ("intents", "runs", "events")
"""The resources one Intent's writes go to: itself, its Run, their receipts and notices."""


def quiet_cluster(stack: Stack) -> None:
    """No namespace is being deleted: the writes a deletion makes (kopf's finalizer removals,
    the namespace controller's deletes) are not counted as an Intent's."""

    def quiet() -> bool:
        spaces = stack.cluster.core.list_namespace().items
        return not any(n.status is not None and n.status.phase == "Terminating" for n in spaces)

    wait_for(quiet, timeout=180, interval=0.5, what="no namespace being deleted")


def api_writes(stack: Stack) -> dict[tuple[str, str], float]:
    """The API server's request counters (apiserver_request_total, by resource and verb)."""
    return asyncio.run(apiserver_metrics(KubeConfig.load(stack.cluster.kubeconfig)))


def intent_writes(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[str, int]:
    """The writes to an Intent's resources between two scrapes, as `intents/status PATCH 200`."""
    return {
        k: v
        for k, v in requests_between(before, after, detailed=True).items()
        if k.split()[0].split("/")[0] in INTENT_WRITE_RESOURCES
    }
