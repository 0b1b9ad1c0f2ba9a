"""A sprite's work comes back as a git bundle; these rules decide whether it may be pushed.

The sprite never holds a credential: the operator reads a bundle of the sprite's branch,
has its own git read it into quarantine (`Forge.inspect_bundle`), and pushes only when
every rule holds. A refusal names the rule; the Run records it as a violation.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from lattice_operator.ports.forge import BundleFacts

MAX_BUNDLE_BYTES = 16 * 1024 * 1024
"""The Sprites file API's limit too: a bigger bundle could not be read anyway."""
MAX_COMMITS = 200


@dataclass(frozen=True)
class BundleVerdict:
    """Push `sha` to `branch`, or refuse with `rule` and `reason`."""

    sha: str | None
    rule: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.rule is None


def check_bundle(
    facts: BundleFacts,
    *,
    branch: str,
    base_branch: str,
    base_sha: str,
    protected: Collection[str] = (),
    max_bytes: int = MAX_BUNDLE_BYTES,
    max_commits: int = MAX_COMMITS,
) -> BundleVerdict:
    """Whether a sprite's bundle of `branch` may be pushed: it must hold exactly that
    branch (never the base branch or a protected one), descend from the commit the sprite
    was given, and stay within the size and commit limits."""

    def refuse(rule: str, reason: str) -> BundleVerdict:
        return BundleVerdict(sha=None, rule=rule, reason=reason)

    target = f"refs/heads/{branch}"
    if branch == base_branch or branch in protected:
        return refuse("base_rewrite", f"the sprite may not push to {branch}: it is protected")
    if facts.size > max_bytes:
        return refuse("too_large", f"the bundle has {facts.size} bytes, over {max_bytes}")
    if not facts.verified:
        return refuse("unreadable", f"the bundle cannot be read: {facts.problem or 'unknown'}")
    others = sorted(ref for ref in facts.refs if ref != target)
    if others:
        return refuse(
            "other_refs", f"the bundle carries {', '.join(others)[:200]} besides {target}"
        )
    sha = facts.refs.get(target)
    if sha is None:
        return refuse("branch_missing", f"the bundle does not carry {target}")
    if not facts.descends.get(target, False):
        return refuse(
            "not_based_on_expected",
            f"{branch} does not descend from {base_sha[:12]}, the commit the sprite was given: "
            "history was rewritten",
        )
    commits = facts.commits.get(target, -1)
    if commits == 0:
        return refuse("no_changes", f"{branch} has no commit after {base_sha[:12]}")
    if commits < 0 or commits > max_commits:
        return refuse("too_many_commits", f"{branch} has {commits} new commits, over {max_commits}")
    return BundleVerdict(sha=sha)


__all__ = ["MAX_BUNDLE_BYTES", "MAX_COMMITS", "BundleVerdict", "check_bundle"]
