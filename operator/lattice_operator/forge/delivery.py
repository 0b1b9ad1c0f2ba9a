"""Taking a sprite's work back: bundle its branch, have the operator's git check it against
the bundle rules, push it with the operator's credential. Shared by OPEN_PR (the Run driver)
and by an Intent finishing a fixup."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from lattice_operator.forge.bundles import MAX_BUNDLE_BYTES, MAX_COMMITS, check_bundle
from lattice_operator.forge.workspace import read_branch_bundle
from lattice_operator.ports.forge import Forge
from lattice_operator.ports.sprites import SpriteBackend


@dataclass(frozen=True)
class BranchTarget:
    """Where a sprite's work may go."""

    repo: str
    base_branch: str
    """The branch the workspace was cloned from."""
    base_sha: str
    """The commit the sprite was given."""
    head_branch: str
    """The only branch it may push."""
    expected: str | None
    """Where `head_branch` is on the forge before the push (None: it must not exist)."""


@dataclass(frozen=True)
class Delivered:
    """The pushed commit, or the rule the branch broke (nothing pushed then)."""

    sha: str | None
    rule: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class DeliveryLimits:
    max_bytes: int = MAX_BUNDLE_BYTES
    max_commits: int = MAX_COMMITS
    protected: Collection[str] = ("main", "master")


async def deliver_branch(
    forge: Forge,
    backend: SpriteBackend,
    sprite: str,
    target: BranchTarget,
    limits: DeliveryLimits,
) -> Delivered:
    """Bundle, check and push the sprite's branch; AdapterErrors propagate (retry classes)."""
    data = await read_branch_bundle(
        backend, sprite, target.base_sha, target.head_branch, limits.max_bytes
    )
    facts = await forge.inspect_bundle(target.repo, data, target.base_sha)
    verdict = check_bundle(
        facts,
        branch=target.head_branch,
        base_branch=target.base_branch,
        base_sha=target.base_sha,
        protected=limits.protected,
        max_bytes=limits.max_bytes,
        max_commits=limits.max_commits,
    )
    if not verdict.ok or verdict.sha is None:
        return Delivered(sha=None, rule=verdict.rule, reason=verdict.reason)
    await forge.push_branch(
        target.repo, data, branch=target.head_branch, sha=verdict.sha, expected=target.expected
    )
    return Delivered(sha=verdict.sha)


__all__ = ["BranchTarget", "Delivered", "DeliveryLimits", "deliver_branch"]
