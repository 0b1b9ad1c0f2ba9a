"""The GitHubRepository resource: a repository whose webhooks the operator serves, and the
rules that turn its events into Intents in this namespace.

Why a custom resource (and not chart values): the Intents these rules create live in the
namespace of the team that owns the repository; RBAC on `githubrepositories` says who may
wire a repository to a namespace; a change applies without restarting the operator; and
its status says whether the webhook secret is readable. The operator-wide parts (the
GitHub credential it pushes and comments with) stay in the operator's settings.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from lattice_operator.api.v1alpha1._base import (
    LIST_SET,
    ApiModel,
    ObjectMeta,
    SecretKeyReference,
    list_map,
)
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition
from lattice_operator.api.v1alpha1.intent import BRANCH_PATTERN, REPO_PATTERN, ActionName
from lattice_operator.api.v1alpha1.run import RunTemplate

Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]
GITHUB_LOGIN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(\[bot\])?$"


class GitHubIdentity(ApiModel):
    """A GitHub account mapped to the Kubernetes identity whose rights it uses to approve."""

    github: str = Field(max_length=64, pattern=GITHUB_LOGIN)
    """The GitHub login."""
    user: str = Field(min_length=1, max_length=512)
    """The Kubernetes user name: a SubjectAccessReview asks whether it may `approve`
    intents.lattice.dev, as for `lattice approve`. Only someone allowed to impersonate this
    user (or the user themself) may write the mapping."""
    groups: list[Name] = Field(default_factory=list, max_length=32, json_schema_extra=LIST_SET)
    """Its Kubernetes groups, for the SubjectAccessReview."""


class TriageRule(ApiModel):
    """Which issues become `issue_triage` Intents."""

    labels: list[Name] = Field(default_factory=list, max_length=16, json_schema_extra=LIST_SET)
    """Only issues carrying one of these labels (opened with it, or labelled later); empty:
    every opened issue."""


class ResearchRule(ApiModel):
    """Which issues are open questions (loop 4): the agent researches them and its sourced
    notes are posted on the issue before it proposes a plan."""

    labels: list[Name] = Field(min_length=1, max_length=16, json_schema_extra=LIST_SET)
    """Issues carrying one of these labels (opened with it, or labelled later)."""


class DocsRule(ApiModel):
    """Code that docs describe (loop 6): a push to the base branch changing a path matched
    by `code` starts a docs update of the paths matched by `docs`."""

    code: str = Field(min_length=1, max_length=256)
    """A shell-style pattern over the whole path (`*` crosses `/`), e.g. `operator/*.py`."""
    docs: str = Field(min_length=1, max_length=256)
    """The docs that describe it, the same way, e.g. `docs/*.md`."""


class ApprovalRule(ApiModel):
    """How a plan is approved from GitHub (`issue_plan_approve`)."""

    command: str = Field(default="/lattice approve", min_length=2, max_length=64)
    """A comment starting with this approves the issue's open plan (`/lattice reject` with
    the same prefix rejects it)."""
    label: str | None = Field(default="lattice-approved", max_length=64)
    """Adding this label approves it too (null: labels do not approve)."""
    approvers: list[GitHubIdentity] = Field(
        default_factory=list, max_length=64, json_schema_extra=list_map("github")
    )
    """Who may approve: nobody else's command counts (it is refused, and answered)."""


_DEFAULT_ACTIONS: list[ActionName] = ["POST_COMMENT", "LABEL_ISSUE", "OPEN_PR"]


class GitHubRepositorySpec(ApiModel):
    """A repository wired to this namespace."""

    repo: str = Field(max_length=256, pattern=REPO_PATTERN)
    """owner/name. Its webhook URL is `<operator>/github/<namespace>/<name>`."""
    webhook_secret_ref: SecretKeyReference
    """The webhook's secret (X-Hub-Signature-256 is checked with it)."""
    base_branch: str = Field(default="main", max_length=255, pattern=BRANCH_PATTERN)
    """The branch pull requests target."""
    agent: RunTemplate | None = None
    """The agent that triages issues, implements plans and addresses reviews (its Sprite
    and command); without one, the Intents created wait with reason NoAgentConfigured."""
    triage: TriageRule | None = Field(default_factory=TriageRule)
    """Issue events that become `issue_triage` Intents (null: none)."""
    research: ResearchRule | None = None
    """Issue events that become research `issue_triage` Intents (`params.issueTriage.research`;
    null: none). A research label wins over the triage rule: one Intent per issue."""
    docs: list[DocsRule] = Field(default_factory=list, max_length=16)
    """Documentation upheld (loop 6): pushes to `baseBranch` that touch code these rules
    name become docs updates (a `pr_create_from_plan` Intent with `docs`)."""
    approval: ApprovalRule = Field(default_factory=ApprovalRule)
    """Plan approval from GitHub."""
    fixups: bool = True
    """Reviews that request changes or comment become `pr_fixup_from_feedback` Intents."""
    allowed_actions: list[ActionName] = Field(
        default_factory=lambda: _DEFAULT_ACTIONS.copy(),
        max_length=5,
        json_schema_extra=LIST_SET,
    )
    """What the agent's Runs may ask for."""


class GitHubRepositoryStatus(ApiModel):
    """Observed state."""

    observed_generation: int | None = None
    """The .metadata.generation last checked."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=8, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Ready: the webhook secret is readable."""


class GitHubRepository(ApiModel):
    """A GitHub repository whose events become Intents in this namespace."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["GitHubRepository"] = "GitHubRepository"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: GitHubRepositorySpec
    status: GitHubRepositoryStatus = Field(default_factory=GitHubRepositoryStatus)


__all__ = [
    "ApprovalRule",
    "GitHubIdentity",
    "GitHubRepository",
    "GitHubRepositorySpec",
    "GitHubRepositoryStatus",
    "TriageRule",
]
