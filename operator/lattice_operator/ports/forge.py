"""The forge port: what the operator asks of GitHub (issues, comments, labels, pull requests,
reviews, branches) and of git on its own side (bundles for sprites, checked pushes).

`lattice_adapters.github.GitHubForge` implements it over githubkit. Every failure is an
exception of `lattice_operator.ports.errors` (each carrying its Lifeloop failure class):
NotFound, Conflict (422 "already exists", a push that is not a fast-forward), Unauthorized
(401, a revoked installation), InvalidRequest (400/403/422), RateLimited (primary or
secondary, with `retry_after`), TransportError (unreachable, 502/503/504), ServerError.

Writes that must not happen twice carry an idempotency key: the adapter writes it into the
comment or body as an HTML comment (`marker`) and looks for it before writing again
(`create_comment(..., key=)`, `open_pull_request` by head branch).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

MARKER_PREFIX = "lattice:key="
_MARKER = re.compile(r"<!-- lattice:key=([A-Za-z0-9._:/-]{1,200}) -->")


def marker(key: str) -> str:
    """The hidden line that makes a comment or body findable by its idempotency key."""
    return f"<!-- {MARKER_PREFIX}{key} -->"


def marker_of(text: str | None) -> str | None:
    """The idempotency key a comment or body carries, if any."""
    found = _MARKER.search(text or "")
    return found.group(1) if found else None


class _Frozen(BaseModel):
    # No use_attribute_docstrings: no schema is made of these, and reading the docstrings
    # when the class is defined is start-up CPU (see modeling.ApiModel).
    model_config = ConfigDict(frozen=True, extra="ignore")


class ForgeUser(_Frozen):
    login: str
    """The account's login."""
    type: str = "User"
    """User, Bot or Organization."""


class ForgeIssue(_Frozen):
    """An issue (or the issue side of a pull request)."""

    number: int
    title: str
    body: str = ""
    state: Literal["open", "closed"] = "open"
    labels: tuple[str, ...] = ()
    user: ForgeUser | None = None
    html_url: str = ""


class ForgeComment(_Frozen):
    """A comment on an issue or a pull request's conversation."""

    id: int
    body: str = ""
    user: ForgeUser | None = None
    html_url: str = ""

    @property
    def key(self) -> str | None:
        """The idempotency key it carries (comments the operator wrote)."""
        return marker_of(self.body)


class ForgePullRequest(_Frozen):
    """A pull request."""

    number: int
    title: str
    body: str = ""
    state: Literal["open", "closed"] = "open"
    head_ref: str
    """The branch with the changes."""
    head_sha: str
    """Its commit when read."""
    base_ref: str
    """The branch it targets."""
    html_url: str = ""


class ForgeReview(_Frozen):
    """A submitted review of a pull request."""

    id: int
    state: str
    """APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED or PENDING."""
    body: str = ""
    user: ForgeUser | None = None
    commit_id: str | None = None


class ForgeReviewComment(_Frozen):
    """A comment on a line of a pull request's diff."""

    id: int
    body: str
    path: str = ""
    line: int | None = None
    pull_request_review_id: int | None = None
    user: ForgeUser | None = None


class BundleFacts(_Frozen):
    """What the operator's git says about a bundle a sprite produced (never trusted as sent)."""

    size: int
    """Its size in bytes."""
    refs: dict[str, str]
    """Ref name → commit, as the bundle lists them."""
    prerequisites: tuple[str, ...]
    """Commits the bundle assumes the receiver has."""
    verified: bool
    """`git bundle verify` accepted it against the operator's copy of the repository."""
    problem: str = ""
    """Why it could not be read or verified."""
    descends: dict[str, bool] = {}
    """Ref name → whether its commit descends from the commit the sprite was given."""
    commits: dict[str, int] = {}
    """Ref name → commits between the given commit and the ref."""


class PreparedWorkspace(_Frozen):
    """A repository prepared on the operator's side for a sprite."""

    bundle: bytes
    """`git bundle` of the base branch (no credential in it)."""
    base_branch: str
    base_sha: str
    """The commit the sprite starts from: its branch must descend from it."""


class Forge(Protocol):
    """A GitHub repository host, with the operator's own credential."""

    # -- issues and comments --------------------------------------------------------------
    async def get_issue(self, repo: str, number: int) -> ForgeIssue: ...

    async def create_issue(
        self, repo: str, title: str, body: str, *, labels: Sequence[str] = (), key: str
    ) -> ForgeIssue:
        """Open an issue carrying the idempotency `key`; an open issue already carrying it
        (with one of `labels`, the first, to find it) is returned instead."""
        ...

    async def find_issue(self, repo: str, key: str, *, label: str) -> ForgeIssue | None:
        """The open issue labelled `label` whose body carries `key`."""
        ...

    async def update_issue(
        self, repo: str, number: int, *, body: str | None = None, state: str | None = None
    ) -> ForgeIssue: ...

    async def list_comments(self, repo: str, number: int) -> list[ForgeComment]:
        """Every comment on an issue or pull request, oldest first."""
        ...

    async def create_comment(self, repo: str, number: int, body: str, *, key: str) -> ForgeComment:
        """Comment once: a comment already carrying `key` is returned instead."""
        ...

    async def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[str]:
        """Add labels (idempotent); the issue's labels after it."""
        ...

    async def remove_label(self, repo: str, number: int, label: str) -> None:
        """Remove a label (absent is success)."""
        ...

    # -- pull requests --------------------------------------------------------------------
    async def get_pull_request(self, repo: str, number: int) -> ForgePullRequest: ...

    async def open_pull_request(
        self, repo: str, *, title: str, body: str, head: str, base: str
    ) -> ForgePullRequest:
        """Open a PR from `head`; the open PR already from `head` is returned instead."""
        ...

    async def list_reviews(self, repo: str, number: int) -> list[ForgeReview]: ...

    async def list_review_comments(
        self, repo: str, number: int, *, review_id: int | None = None
    ) -> list[ForgeReviewComment]:
        """Line comments on a PR (only those of one review, when given)."""
        ...

    # -- branches and git -----------------------------------------------------------------
    async def branch_sha(self, repo: str, branch: str) -> str | None:
        """The commit a branch points at (None: no such branch)."""
        ...

    async def prepare_workspace(self, repo: str, base_branch: str) -> PreparedWorkspace:
        """Fetch the repository on the operator's side and bundle the base branch."""
        ...

    async def inspect_bundle(self, repo: str, data: bytes, base_sha: str) -> BundleFacts:
        """Read a sprite's bundle into a quarantine of the operator's copy (nothing pushed)."""
        ...

    async def push_branch(
        self, repo: str, data: bytes, *, branch: str, sha: str, expected: str | None
    ) -> None:
        """Push commit `sha` from bundle `data` to `branch`, only if the branch is at
        `expected` now (None: it must not exist): a fast-forward or a new branch, never a
        rewrite; Conflict otherwise."""
        ...

    async def aclose(self) -> None: ...


__all__ = [
    "MARKER_PREFIX",
    "BundleFacts",
    "Forge",
    "ForgeComment",
    "ForgeIssue",
    "ForgePullRequest",
    "ForgeReview",
    "ForgeReviewComment",
    "ForgeUser",
    "PreparedWorkspace",
    "marker",
    "marker_of",
]
