"""The node tests' RBAC audit: what the release's roles grant, and the audit-log check that every
request of the operator was allowed and every grant used, but for the grants a short test
cannot reach (UNEXERCISED_GRANTS, each with its reason).
"""

from __future__ import annotations

import json

from lattice_devtools.localcluster.node import NodeCluster

# Grants the operator holds that this test run does not exercise, each with its reason.
UNEXERCISED_GRANTS: dict[tuple[str, str, str], str] = {
    ("", "events", "create"): "kopf posts a handler's errors and warnings as core Events; "
    "a clean run has none",
    ("lattice.dev", "sprites", "create"): "sprite_create Intents create Sprites; "
    "the samples here do not use that kind",
    ("lattice.dev", "runs", "delete"): "retention deletes finished Runs after "
    "ttlSecondsAfterFinished or past the history limit; no Run here lives that long",
    ("lattice.dev", "intents", "get"): "an Intent decided on an outdated spec is read again; "
    "only a conflicting write reaches it",
    ("lattice.dev", "intents", "patch"): "kopf removes the finalizer that a release before "
    "the operator's own per-Intent tasks put on an Intent; only tests/node/test_upgrade.py, "
    "before this installation, has such Intents",
    **{
        grant: "a SpriteCheckpoint is taken, pruned and restored from (reading its Sprite); "
        "this run takes none (tests/e2e/test_intent_kinds.py does)"
        for grant in (
            ("lattice.dev", "sprites", "get"),
            ("lattice.dev", "spritecheckpoints", "patch"),
            ("lattice.dev", "spritecheckpoints", "get"),
            ("lattice.dev", "spritecheckpoints", "delete"),
            ("lattice.dev", "spritecheckpoints/status", "patch"),
        )
    },
}


# ... and, in the shorter namespaced run, these too (the first installation exercised them).
NAMESPACED_UNEXERCISED: dict[tuple[str, str, str], str] = {
    ("", "secrets", "update"): "the certificate Secret is written by a rotation; this "
    "installation keeps its year-long certificate",
    ("events.k8s.io", "events", "list"): "a new leader lists the receipts of a Run it takes "
    "over; no leader changes here",
}


def granted(node: NodeCluster, release: str, namespaces: list[str]) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) the release's ClusterRole and Roles grant."""
    roles = [node.kube_json("get", "clusterrole", f"{release}-lattice-operator")]
    roles += [
        role
        for ns in namespaces
        for role in node.kube_json("-n", ns, "get", "roles")["items"]
        if role["metadata"]["name"].startswith(f"{release}-lattice-operator")
    ]
    return {
        (group, resource, verb)
        for role in roles
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def audit_log_check(
    node: NodeCluster,
    user: str,
    grants: set[tuple[str, str, str]],
    since_line: int,
    unexercised: dict[tuple[str, str, str], str],
) -> None:
    """Every request of `user` (after `since_line` of the audit log) was allowed, and every
    grant was used, but for the `unexercised` ones."""
    used: set[tuple[str, str, str]] = set()
    denied: set[tuple[str, str, str]] = set()
    lines = (node.state / "audit.log").read_text().splitlines()[since_line:]
    for line in lines:
        event = json.loads(line)
        # A watch still open has only its ResponseStarted event; every other request ends.
        if event.get("user", {}).get("username") != user or event.get("stage") not in (
            "ResponseStarted",
            "ResponseComplete",
        ):
            continue
        ref = event.get("objectRef") or {}
        if not ref.get("resource"):
            continue  # discovery (nonResourceURLs), allowed to every authenticated user
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
        decision = event.get("annotations", {}).get("authorization.k8s.io/decision")
        if decision != "allow":
            denied.add((ref.get("apiGroup", ""), resource, event["verb"]))
    assert used, f"no request of {user} in the audit log"
    assert not denied, f"refused: {sorted(denied)}"
    assert set(unexercised) <= grants, "an exception names a grant the chart dropped"
    never = grants - used - set(unexercised)
    assert not never, f"granted but never used: {sorted(never)}; used: {sorted(used)}"
