"""What a GitHub Intent is about, read from its spec and status: the repository, the issue
or pull request, the sprite's branch. One reading for the Intent pipeline, the grants its
Run gets, and the webhook rules."""

from __future__ import annotations

import hashlib
import re

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import (
    IssuePlanApproveParams,
    IssueTriageParams,
    PrCreateFromPlanParams,
    PrFixupFromFeedbackParams,
)
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.ports.cluster import ForgeGrant

FORGE_KINDS = frozenset(
    {"issue_triage", "issue_plan_approve", "pr_create_from_plan", "pr_fixup_from_feedback"}
)
WORKSPACE_KINDS = frozenset({"pr_create_from_plan", "pr_fixup_from_feedback"})
"""Kinds whose sprite gets a clone of the repository (and may push its branch back)."""

ForgeParams = (
    IssueTriageParams | IssuePlanApproveParams | PrCreateFromPlanParams | PrFixupFromFeedbackParams
)


def forge_params(intent: Intent) -> ForgeParams | None:
    if intent.spec.kind not in FORGE_KINDS:
        return None
    params = intent.spec.kind_params()
    assert isinstance(
        params,
        IssueTriageParams
        | IssuePlanApproveParams
        | PrCreateFromPlanParams
        | PrFixupFromFeedbackParams,
    )
    return params


def agent_of(intent: Intent) -> RunTemplate | None:
    params = forge_params(intent)
    return params.run if params is not None else None


def repo_slug(repo: str) -> str:
    """A DNS-label-safe, collision-resistant short form of owner/name."""
    clean = re.sub(r"[^a-z0-9]+", "-", repo.lower()).strip("-")[:30].strip("-")
    return f"{clean}-{hashlib.sha256(repo.encode()).hexdigest()[:6]}"


def head_branch(intent: Intent) -> str | None:
    """The branch the sprite works on: named by the spec, generated, or the PR's own."""
    params = forge_params(intent)
    if isinstance(params, PrCreateFromPlanParams):
        return params.head_branch or f"lattice/{intent.metadata.name}"[:255]
    forge = intent.status.forge
    if isinstance(params, PrFixupFromFeedbackParams) and forge is not None:
        return forge.head_branch
    return None


def forge_grant(intent: Intent) -> ForgeGrant | None:
    """Where the Run of this Intent may act on the forge."""
    params = forge_params(intent)
    if params is None:
        return None
    forge = intent.status.forge
    issue = pull = None
    if isinstance(params, IssueTriageParams | IssuePlanApproveParams):
        issue = params.issue_number
    elif isinstance(params, PrCreateFromPlanParams):
        issue = params.issue_number
        pull = forge.pull_request.number if forge and forge.pull_request else None
    else:
        pull = params.pr_number
    return ForgeGrant(
        repo=params.repo,
        issue=issue,
        pull=pull,
        base_branch=forge.base_branch if forge else None,
        base_sha=forge.base_sha if forge else None,
        head_branch=head_branch(intent),
        expected_head=forge.pushed_sha if forge else None,
    )


__all__ = [
    "FORGE_KINDS",
    "WORKSPACE_KINDS",
    "agent_of",
    "forge_grant",
    "forge_params",
    "head_branch",
    "repo_slug",
]
