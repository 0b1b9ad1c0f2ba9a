"""Loop 6, documentation upheld (pure): a push to the base branch that changes code the
repository's `docs` rules name becomes a docs update, a `pr_create_from_plan` Intent with
`docs` set; the docs agent's commits become a pull request, docs it declares current end
it with nothing pushed, and lag it reports and cannot fix keeps one open issue per set of
docs (opened once, then commented).
"""

from __future__ import annotations

import hashlib
from fnmatch import fnmatchcase
from typing import Any

from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.forge.context import repo_slug
from lattice_operator.forge.events import PushCommit

MAX_PATHS = 100
"""Changed paths named in the Intent (the agent sees the whole diff in its clone)."""
LAG_LABEL = "lattice-docs-lag"
"""The label of a lag issue (it also finds the open one again)."""
LAG_LIMIT = 20_000


def docs_name(repo: str, sha: str) -> str:
    return f"docs-{repo_slug(repo)}-{sha[:12]}"


def changed_paths(commits: list[PushCommit]) -> list[str]:
    """Every path the push added, removed or modified, once, in order."""
    seen: dict[str, None] = {}
    for commit in commits:
        for path in (*commit.added, *commit.modified, *commit.removed):
            seen.setdefault(path, None)
    return list(seen)


def affected(repository: GitHubRepository, paths: list[str]) -> tuple[list[str], list[str]]:
    """The changed code paths some rule names, and the docs globs of those rules."""
    code: dict[str, None] = {}
    docs: dict[str, None] = {}
    for rule in repository.spec.docs:
        hits = [p for p in paths if fnmatchcase(p, rule.code)]
        for path in hits:
            code.setdefault(path, None)
        if hits:
            docs.setdefault(rule.docs, None)
    return list(code), list(docs)


def docs_intent(
    repository: GitHubRepository,
    sha: str,
    code: list[str],
    docs: list[str],
    metadata: dict[str, Any],
) -> dict[str, Any]:
    """The docs update of the push of `sha`, named after it (a redelivery finds it)."""
    spec = repository.spec
    listed = "\n".join(f"- `{p}`" for p in code[:MAX_PATHS])
    plan = (
        f"Keep the docs in step with the code changed on `{spec.base_branch}` at {sha}.\n\n"
        f"Changed code:\n{listed}\n\nDocs that describe it: "
        + ", ".join(f"`{d}`" for d in docs)
        + "\n\nUpdate them, or report what lags and cannot be fixed here."
    )
    member: dict[str, Any] = {
        "repo": spec.repo,
        "baseBranch": spec.base_branch,
        "headBranch": f"lattice/docs-{sha[:12]}",
        "plan": plan,
        "docs": {"sha": sha, "changed": code[:MAX_PATHS], "docs": docs},
    }
    if spec.agent is not None:
        member["run"] = spec.agent.to_wire()
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": metadata,
        "spec": {
            "kind": "pr_create_from_plan",
            "summary": f"Update the docs for {spec.repo}@{sha[:12]}"[:1024],
            "proposedBy": {"type": "webhook", "name": f"github:push:{sha[:12]}"},
            "subject": {"type": "repository", "ref": f"{spec.repo}@{sha}"[:256]},
            "params": {"prCreateFromPlan": member},
            "allowedActions": list(spec.allowed_actions),
        },
    }


def lag_key(docs: list[str]) -> str:
    """One open issue per set of docs that lag, whatever push found it."""
    digest = hashlib.sha256("\n".join(sorted(docs)).encode()).hexdigest()[:16]
    return f"docs-lag:{digest}"


def lag_title(docs: list[str]) -> str:
    return ("Docs lag behind the code: " + ", ".join(docs))[:256]


def lag_report(report: str, sha: str, code: list[str]) -> str:
    """What the agent reported, with the push that showed it."""
    paths = ", ".join(f"`{p}`" for p in code[:20])
    return f"{report.strip()[:LAG_LIMIT]}\n\nFound after {sha[:12]} changed {paths}."


__all__ = [
    "LAG_LABEL",
    "affected",
    "changed_paths",
    "docs_intent",
    "docs_name",
    "lag_key",
    "lag_report",
    "lag_title",
]
