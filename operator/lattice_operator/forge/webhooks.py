"""GitHub webhook deliveries: the signature, and what a delivery means for a repository
(pure; the handler carries the outcome out).

Mapping (each tested with GitHub's own payload shapes, @octokit/webhooks-examples):

| event                       | action                            | becomes                       |
|-----------------------------|-----------------------------------|-------------------------------|
| issues                      | opened (with a triage label)      | an issue_triage Intent        |
| issues                      | labeled: a triage label           | an issue_triage Intent        |
| issues                      | opened/labeled: a research label  | a research issue_triage       |
| issues                      | labeled: the approval label       | approval of the issue's plan  |
| issue_comment (an issue's)  | created: `/lattice approve|reject`| approval or rejection         |
| issue_comment (an issue's)  | created: anything else            | the answer a triage waits for |
| pull_request_review         | submitted: commented, changes_req.| a pr_fixup_from_feedback      |
| pull_request_review_comment | created                           | the fixup of its review       |
| push                        | to the base branch, code docs name| a docs update (loop 6)        |
| ping                        |                                   | nothing (200)                 |

A review is `pull_request_review` (submitted), never `pull_request` or `issue_comment`: the
line comments of a review arrive as `pull_request_review_comment` events carrying the
review's id, so a review and its comments make one fixup. Comments by bots (the operator's
own answers among them) are ignored.

Intent names come from what they are about (repository, issue, review), so a redelivered
event finds the Intent it made and makes nothing new. Likewise an approval's place
(`Outcome.ref`) comes from the signed payload (a comment's URL; a label's issue, name, actor
and time), never from the unsigned X-GitHub-Delivery header: a captured event replayed under
new delivery ids is the same decision, recorded once.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.forge.builders import (
    DELIVERY_ANNOTATION,
    REPOSITORY_LABEL,
    fixup_name,
    plan_name,
    triage_name,
)
from lattice_operator.forge.docs import affected, changed_paths, docs_intent, docs_name
from lattice_operator.forge.events import (
    Comment,
    Delivery,
    Issue,
    PullRequest,
    Review,
    parse_delivery,
)

SIGNATURE_HEADER = "X-Hub-Signature-256"
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
HANDLED_EVENTS = frozenset(
    {
        "issues",
        "issue_comment",
        "pull_request_review",
        "pull_request_review_comment",
        "push",
        "ping",
    }
)
REVIEW_STATES = frozenset({"commented", "changes_requested"})


def verify_signature(secret: bytes, body: bytes, header: str | None) -> bool:
    """X-Hub-Signature-256 (`sha256=<hex HMAC of the body>`), compared in constant time."""
    if not header or not header.isascii() or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode())


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Outcome:
    """What one delivery asks for."""

    kind: Literal["create", "decide", "answer", "ignore"]
    reason: str = ""
    """For humans and the metric label (ignore: why)."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """create: the Intent."""
    intent: str = ""
    """decide/answer: the Intent concerned."""
    decision: Literal["approve", "reject"] = "approve"
    login: str = ""
    """decide/answer: the GitHub user."""
    ref: str = ""
    """decide: where the decision was made (one record per comment or label event)."""
    text: str = ""
    """answer: the comment's body."""
    issue: int = 0
    """The issue or pull request (to answer a refused command on)."""


def route(
    event: str,
    delivery: str,
    payload: Delivery | Mapping[str, Any],
    repository: GitHubRepository,
) -> Outcome:
    """What a verified delivery means for `repository` (whose namespace gets the Intents).

    `delivery` (the X-GitHub-Delivery header, not signed) is only written on the Intents
    made, for humans: nothing is keyed on it, or a replay under new ids would count anew.
    A payload of the wrong shape raises `BadDelivery`.
    """
    payload = payload if isinstance(payload, Delivery) else parse_delivery(payload)
    spec = repository.spec
    full_name = payload.repository.full_name if payload.repository else ""
    if event == "ping":
        return Outcome("ignore", "ping")
    if full_name.lower() != spec.repo.lower():
        return Outcome("ignore", "other_repository")
    action, login, bot = payload.action, payload.login, payload.by_bot
    if event == "push":
        return _push(repository, payload, delivery)
    if event == "issues":
        issue = payload.issue or Issue()
        number = issue.number
        if issue.of_pull_request or not number:
            return Outcome("ignore", "not_an_issue")
        label = payload.label.name if payload.label else ""
        approval = spec.approval
        if action == "labeled" and approval.label and label == approval.label:
            return Outcome(
                "decide",
                intent=plan_name(spec.repo, number),
                decision="approve",
                login=login,
                ref=label_ref(spec.repo, number, label, login, issue.updated_at),
                issue=number,
            )
        labels = {x.name for x in issue.labels}
        if spec.research is not None and action in ("opened", "labeled"):
            # Loop 4: an open question. Same Intent name as a triage: one per issue.
            asks = set(spec.research.labels)
            if (label in asks) if action == "labeled" else bool(asks & labels):
                manifest = triage_intent(repository, issue, delivery, research=True)
                return Outcome("create", "research", manifest=manifest)
        if spec.triage is None or action not in ("opened", "labeled"):
            return Outcome("ignore", f"issues.{action}")
        wanted = set(spec.triage.labels)
        if wanted and not (wanted & (labels | {label})):
            return Outcome("ignore", "no_triage_label")
        if action == "labeled" and wanted and label not in wanted:
            return Outcome("ignore", "other_label")
        return Outcome("create", "triage", manifest=triage_intent(repository, issue, delivery))
    if event == "issue_comment":
        issue = payload.issue or Issue()
        comment = payload.comment or Comment()
        number = issue.number
        if action != "created" or bot:
            return Outcome("ignore", "bot" if bot else f"issue_comment.{action}")
        if issue.pull_request:
            return Outcome("ignore", "pull_request_conversation")
        body = (comment.body or "").strip()
        command = spec.approval.command.strip()
        reject = command.rsplit(" ", 1)[0] + " reject" if " " in command else "/reject"
        for word, decision in ((command, "approve"), (reject, "reject")):
            if body == word or body.startswith(word + " ") or body.startswith(word + "\n"):
                return Outcome(
                    "decide",
                    intent=plan_name(spec.repo, number),
                    decision=decision,  # type: ignore[arg-type]
                    login=login,
                    ref=comment.html_url or f"comment:{comment.id}",
                    text=body[len(word) :].strip()[:1024],
                    issue=number,
                )
        return Outcome(
            "answer",
            intent=triage_name(spec.repo, number),
            login=login,
            text=body[:60_000],
            issue=number,
            ref=str(comment.id or ""),
        )
    if event in ("pull_request_review", "pull_request_review_comment"):
        if not spec.fixups or bot:
            return Outcome("ignore", "bot" if bot else "fixups_off")
        pull = payload.pull_request or PullRequest()
        if event == "pull_request_review":
            review = payload.review or Review()
            if action != "submitted" or review.state.lower() not in REVIEW_STATES:
                return Outcome("ignore", f"review.{review.state or action}")
            review_id, text = review.id, review.body or ""
        else:
            comment = payload.comment or Comment()
            if action != "created":
                return Outcome("ignore", f"review_comment.{action}")
            review_id = comment.pull_request_review_id or 0
            text = f"{comment.path}:{comment.line}: {comment.body or ''}"
        if not pull.number or not review_id:
            return Outcome("ignore", "no_review")
        manifest = fixup_intent(repository, pull, review_id, text, login, delivery)
        return Outcome("create", "fixup", manifest=manifest)
    return Outcome("ignore", "unknown_event")


def _push(repository: GitHubRepository, payload: Delivery, delivery: str) -> Outcome:
    """Loop 6: a push to the base branch changing code the docs rules name."""
    spec = repository.spec
    if not spec.docs:
        return Outcome("ignore", "docs_off")
    if payload.ref != f"refs/heads/{spec.base_branch}" or payload.deleted:
        return Outcome("ignore", "other_ref")
    if not SHA.fullmatch(payload.after):
        return Outcome("ignore", "no_commit")
    code, docs = affected(repository, changed_paths(payload.commits))
    if not code:
        return Outcome("ignore", "no_docs_affected")
    name = docs_name(spec.repo, payload.after)
    metadata = _metadata(repository, name, delivery)
    manifest = docs_intent(repository, payload.after, code, docs, metadata)
    return Outcome("create", "docs", manifest=manifest)


def label_ref(repo: str, number: int, label: str, login: str, at: str | None) -> str:
    """Where a label approval was given, from the signed payload: the issue, the label, who
    put it and when (the issue's updated_at is the labelling's time). A replay of the same
    event names the same place, so it is recorded once; a label removed and put back is a
    new decision."""
    return f"label:{repo}#{number}:{label}:{login}@{at or ''}"[:256]


def _metadata(repository: GitHubRepository, name: str, delivery: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": repository.metadata.namespace,
        "labels": {REPOSITORY_LABEL: repository.metadata.name[:63]},
        "annotations": {DELIVERY_ANNOTATION: delivery[:128]},
    }


def _run(repository: GitHubRepository) -> dict[str, Any]:
    agent = repository.spec.agent
    return {"run": agent.to_wire()} if agent is not None else {}


def triage_intent(
    repository: GitHubRepository, issue: Issue, delivery: str, *, research: bool = False
) -> dict[str, Any]:
    spec = repository.spec
    number = issue.number
    author = issue.user.login if issue.user else ""
    verb = "Research" if research else "Triage"
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": _metadata(repository, triage_name(spec.repo, number), delivery),
        "spec": {
            "kind": "issue_triage",
            "summary": f"{verb} {spec.repo}#{number}: {issue.title or ''}"[:1024],
            "proposedBy": {"type": "webhook", "name": f"github:{author}"[:253]},
            "subject": {"type": "issue", "ref": f"{spec.repo}#{number}"},
            "params": {
                "issueTriage": {
                    "repo": spec.repo,
                    "issueNumber": number,
                    "title": (issue.title or "")[:1024],
                    "body": (issue.body or "")[:65536],
                    "baseBranch": spec.base_branch,
                    **({"research": True} if research else {}),
                    **_run(repository),
                }
            },
            # The repository's grants. OPEN_PR needs a workspace, which only the PR kinds
            # prepare: a triage's OPEN_PR is refused whatever it is granted.
            "allowedActions": list(spec.allowed_actions),
        },
    }


def fixup_intent(
    repository: GitHubRepository,
    pull: PullRequest,
    review_id: int,
    feedback: str,
    login: str,
    delivery: str,
) -> dict[str, Any]:
    spec = repository.spec
    number = pull.number
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": _metadata(repository, fixup_name(spec.repo, number, review_id), delivery),
        "spec": {
            "kind": "pr_fixup_from_feedback",
            "summary": f"Address review {review_id} on {spec.repo}#{number}"[:1024],
            "proposedBy": {"type": "webhook", "name": f"github:{login}"[:253]},
            "subject": {"type": "pull_request", "ref": f"{spec.repo}#{number}"},
            "params": {
                "prFixupFromFeedback": {
                    "repo": spec.repo,
                    "prNumber": number,
                    "reviewId": review_id,
                    "feedback": feedback[:65536] or "(see the review comments)",
                    **_run(repository),
                }
            },
            # The repository's grants. OPEN_PR needs a workspace, which only the PR kinds
            # prepare: a triage's OPEN_PR is refused whatever it is granted.
            "allowedActions": list(spec.allowed_actions),
        },
    }


__all__ = [
    "HANDLED_EVENTS",
    "SIGNATURE_HEADER",
    "Outcome",
    "fixup_intent",
    "label_ref",
    "route",
    "sign",
    "triage_intent",
    "verify_signature",
]
