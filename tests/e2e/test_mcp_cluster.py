"""`lattice mcp --cluster` under a limited user's kubeconfig: RBAC decides what it sees and does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from tests.support.e2e_intents import bind_role, intent_doc
from tests.support.e2e_runs import apply_run, ready_sprite
from tests.support.mcp_client import call, error_code, lattice_mcp
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
USER = "carol-agent"
VIEWER: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-mcp-viewer-test"},
    "rules": [
        {
            "apiGroups": ["lattice.dev"],
            "resources": ["sprites", "runs", "intents"],
            "verbs": ["get", "list"],
        },
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list"]},
    ],
}
PROPOSER: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-mcp-proposer-test"},
    "rules": [{"apiGroups": ["lattice.dev"], "resources": ["intents"], "verbs": ["create"]}],
}


async def _once_bound(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The first call after a RoleBinding: the authorizer's cache may lag it a moment."""
    for _ in range(60):
        payload = await call(session, tool, **arguments)
        if payload.get("error", {}).get("code") != "FORBIDDEN":
            return payload
        await asyncio.sleep(0.5)
    raise AssertionError(f"{tool} still forbidden 30 s after the RoleBinding")


async def test_cluster_tools_answer_with_the_callers_identity(stack: Stack, namespace: str) -> None:
    ready_sprite(stack, namespace, "box")
    apply_run(stack, namespace, "hello", ["sh", "-c", "echo hi"])
    stack.wait_phase(namespace, "runs", "hello", {"Succeeded", "Failed"})
    kubeconfig: Path = stack.cluster.user_kubeconfig(USER)
    env = {"KUBECONFIG": str(kubeconfig)}
    intent_spec = intent_doc("proposed", ["sh", "-c", "echo proposed"])["spec"]

    async with lattice_mcp("--cluster", env=env) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        unbound = await error_code(
            session, "lattice_cluster_list", kind="runs", namespace=namespace
        )
        bind_role(stack, namespace, USER, VIEWER)
        runs = await _once_bound(session, "lattice_cluster_list", kind="runs", namespace=namespace)
        sprites = await call(session, "lattice_cluster_list", kind="sprites", namespace=namespace)
        run = await call(
            session, "lattice_cluster_get", kind="runs", name="hello", namespace=namespace
        )
        events = await call(
            session, "lattice_cluster_run_events", name="hello", namespace=namespace
        )
        receipts = await call(
            session, "lattice_cluster_run_receipts", name="hello", namespace=namespace
        )
        missing = await error_code(
            session, "lattice_cluster_get", kind="intents", name="nope", namespace=namespace
        )
        other_ns = await error_code(
            session, "lattice_cluster_list", kind="runs", namespace="default"
        )
        refused = await error_code(
            session, "lattice_cluster_propose_intent", spec=intent_spec, namespace=namespace
        )
        bind_role(stack, namespace, USER, PROPOSER)
        invalid = await _once_bound(
            session,
            "lattice_cluster_propose_intent",
            spec={"kind": "no_such_kind"},
            namespace=namespace,
        )
        proposed = await call(
            session,
            "lattice_cluster_propose_intent",
            spec=intent_spec,
            name="proposed",
            namespace=namespace,
        )
    assert not any("approve" in t for t in tools)
    assert unbound == "FORBIDDEN"
    assert [r["name"] for r in runs["items"]] == ["hello"]
    assert [s["name"] for s in sprites["items"]] == ["box"]
    assert run["status"]["phase"] == "Succeeded"
    assert "managedFields" not in run["metadata"]
    assert events["phase"] == "Succeeded"
    assert receipts["count"] >= 1
    assert receipts["receipts"][0]["event"] == "session.starting"
    assert missing == "NOT_FOUND"
    assert other_ns == "FORBIDDEN"
    assert refused == "FORBIDDEN"
    assert invalid["error"]["code"] == "INVALID"
    assert proposed["name"] == "proposed"
    created = json.loads(
        stack.cluster.kubectl("get", "intent", "proposed", "-n", namespace, "-o", "json").stdout
    )
    exec_params = created["spec"]["params"]["spriteTaskExec"]
    assert exec_params["command"] == ["sh", "-c", "echo proposed"]
