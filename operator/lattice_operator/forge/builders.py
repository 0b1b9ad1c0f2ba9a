"""Intents made from GitHub: names derived from what they are about (so the same event, or
its redelivery, never makes two), specs from a GitHubRepository's rules."""

from __future__ import annotations

from typing import Any

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import IssueTriageParams
from lattice_operator.forge.context import repo_slug

DELIVERY_ANNOTATION = "forge.lattice.dev/delivery"
"""The webhook delivery that created an Intent (X-GitHub-Delivery)."""
REPOSITORY_LABEL = "forge.lattice.dev/repository"
"""The GitHubRepository whose rules made the Intent."""


def triage_name(repo: str, issue: int) -> str:
    return f"triage-{repo_slug(repo)}-{issue}"


def plan_name(repo: str, issue: int) -> str:
    return f"plan-{repo_slug(repo)}-{issue}"


def fixup_name(repo: str, pull: int, review: int) -> str:
    return f"fixup-{repo_slug(repo)}-{pull}-{review}"


def _owned_by(intent: Intent) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "name": intent.metadata.name,
        "uid": intent.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": False,
    }


def plan_intent(triage: Intent, plan: str, base_branch: str = "main") -> dict[str, Any]:
    """The issue_plan_approve Intent for the plan a triage agent proposed."""
    params = triage.spec.kind_params()
    assert isinstance(params, IssueTriageParams)
    member: dict[str, Any] = {
        "repo": params.repo,
        "issueNumber": params.issue_number,
        "plan": plan[:60_000],
        "baseBranch": base_branch,
    }
    if params.run is not None:
        member["run"] = params.run.to_wire()
    labels = {k: v for k, v in triage.metadata.labels.items() if k == REPOSITORY_LABEL}
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": {
            "name": plan_name(params.repo, params.issue_number),
            "namespace": triage.metadata.namespace,
            "labels": labels,
            "ownerReferences": [_owned_by(triage)],
        },
        "spec": {
            "kind": "issue_plan_approve",
            "summary": f"Approve the plan for {params.repo}#{params.issue_number}"[:1024],
            "proposedBy": {"type": "system", "name": triage.metadata.name},
            "subject": {"type": "issue", "ref": f"{params.repo}#{params.issue_number}"},
            "params": {"issuePlanApprove": member},
            "allowedActions": list(triage.spec.allowed_actions),
        },
    }


__all__ = [
    "DELIVERY_ANNOTATION",
    "REPOSITORY_LABEL",
    "fixup_name",
    "plan_intent",
    "plan_name",
    "triage_name",
]
