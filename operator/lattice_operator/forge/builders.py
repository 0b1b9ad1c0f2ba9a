"""Intents made from GitHub: names derived from what they are about (so the same event, or
its redelivery, never makes two), specs from a GitHubRepository's rules."""

from __future__ import annotations

import json
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


MAX_TASKS = 30


def parse_tasks(text: str) -> list[dict[str, str]]:
    """A triage agent's drafted issues (a JSON list of {title, body}); the well-formed ones,
    at most MAX_TASKS (a sprite's file is untrusted input)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    drafts = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and isinstance(item.get("title"), str) and item["title"].strip():
            body = item.get("body") if isinstance(item.get("body"), str) else ""
            drafts.append({"title": item["title"].strip()[:256], "body": str(body)[:16384]})
    return drafts[:MAX_TASKS]


def tasks_plan(tasks: list[dict[str, str]]) -> str:
    """The plan text shown for approval: the drafted issues."""
    return "Create these issues:\n" + "\n".join(f"- {t['title']}" for t in tasks)


def plan_intent(
    triage: Intent, plan: str, tasks: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The issue_plan_approve Intent for the plan (or the drafted issues) a triage agent
    proposed."""
    params = triage.spec.kind_params()
    assert isinstance(params, IssueTriageParams)
    member: dict[str, Any] = {
        "repo": params.repo,
        "issueNumber": params.issue_number,
        "plan": plan[:60_000],
        "baseBranch": params.base_branch,
    }
    if params.run is not None:
        member["run"] = params.run.to_wire()
    if tasks:
        member["tasks"] = tasks
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
    "MAX_TASKS",
    "REPOSITORY_LABEL",
    "fixup_name",
    "parse_tasks",
    "plan_intent",
    "plan_name",
    "tasks_plan",
    "triage_name",
]
