"""GitHub webhook deliveries: the signature, and what a delivery means for a repository
(pure; the handler carries the outcome out).

Mapping (each tested with GitHub's own payload shapes, @octokit/webhooks-examples):

| event                       | action                            | becomes                       |
|-----------------------------|-----------------------------------|-------------------------------|
| issues                      | opened (with a triage label)      | an issue_triage Intent        |
| issues                      | labeled: a triage label           | an issue_triage Intent        |
| issues                      | labeled: the approval label       | approval of the issue's plan  |
| issue_comment (an issue's)  | created: `/lattice approve|reject`| approval or rejection         |
| issue_comment (an issue's)  | created: anything else            | the answer a triage waits for |
| pull_request_review         | submitted: commented, changes_req.| a pr_fixup_from_feedback      |
| pull_request_review_comment | created                           | the fixup of its review       |
| ping                        |                                   | nothing (200)                 |

A review is `pull_request_review` (submitted), never `pull_request` or `issue_comment`: the
line comments of a review arrive as `pull_request_review_comment` events carrying the
review's id, so a review and its comments make one fixup. Comments by bots (the operator's
own answers among them) are ignored.

Intent names come from what they are about (repository, issue, review), so a redelivered
event finds the Intent it made and makes nothing new.
"""

from __future__ import annotations

import hashlib
import hmac
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

SIGNATURE_HEADER = "X-Hub-Signature-256"
HANDLED_EVENTS = frozenset(
    {"issues", "issue_comment", "pull_request_review", "pull_request_review_comment", "ping"}
)
REVIEW_STATES = frozenset({"commented", "changes_requested"})


def verify_signature(secret: bytes, body: bytes, header: str | None) -> bool:
    """X-Hub-Signature-256 (`sha256=<hex HMAC of the body>`), compared in constant time."""
    if not header or not header.startswith("sha256="):
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


def _login(payload: dict[str, Any]) -> tuple[str, bool]:
    sender = payload.get("sender") or {}
    login = str(sender.get("login") or "")
    return login, sender.get("type") == "Bot" or login.endswith("[bot]")


def route(
    event: str, delivery: str, payload: dict[str, Any], repository: GitHubRepository
) -> Outcome:
    """What a verified delivery means for `repository` (whose namespace gets the Intents)."""
    spec = repository.spec
    full_name = str((payload.get("repository") or {}).get("full_name") or "")
    if event == "ping":
        return Outcome("ignore", "ping")
    if full_name.lower() != spec.repo.lower():
        return Outcome("ignore", "other_repository")
    action = str(payload.get("action") or "")
    login, bot = _login(payload)
    if event == "issues":
        issue = payload.get("issue") or {}
        number = int(issue.get("number") or 0)
        if "pull_request" in issue or not number:
            return Outcome("ignore", "not_an_issue")
        label = str((payload.get("label") or {}).get("name") or "")
        approval = spec.approval
        if action == "labeled" and approval.label and label == approval.label:
            return Outcome(
                "decide",
                intent=plan_name(spec.repo, number),
                decision="approve",
                login=login,
                ref=f"label:{delivery}",
                issue=number,
            )
        if spec.triage is None or action not in ("opened", "labeled"):
            return Outcome("ignore", f"issues.{action}")
        wanted = set(spec.triage.labels)
        labels = {str(x.get("name")) for x in issue.get("labels") or [] if isinstance(x, dict)}
        if wanted and not (wanted & (labels | {label})):
            return Outcome("ignore", "no_triage_label")
        if action == "labeled" and wanted and label not in wanted:
            return Outcome("ignore", "other_label")
        return Outcome("create", "triage", manifest=triage_intent(repository, issue, delivery))
    if event == "issue_comment":
        issue = payload.get("issue") or {}
        comment = payload.get("comment") or {}
        number = int(issue.get("number") or 0)
        if action != "created" or bot:
            return Outcome("ignore", "bot" if bot else f"issue_comment.{action}")
        if "pull_request" in issue and issue.get("pull_request"):
            return Outcome("ignore", "pull_request_conversation")
        body = str(comment.get("body") or "").strip()
        command = spec.approval.command.strip()
        reject = command.rsplit(" ", 1)[0] + " reject" if " " in command else "/reject"
        for word, decision in ((command, "approve"), (reject, "reject")):
            if body == word or body.startswith(word + " ") or body.startswith(word + "\n"):
                return Outcome(
                    "decide",
                    intent=plan_name(spec.repo, number),
                    decision=decision,  # type: ignore[arg-type]
                    login=login,
                    ref=str(comment.get("html_url") or f"comment:{comment.get('id')}"),
                    text=body[len(word) :].strip()[:1024],
                    issue=number,
                )
        return Outcome(
            "answer",
            intent=triage_name(spec.repo, number),
            login=login,
            text=body[:60_000],
            issue=number,
            ref=str(comment.get("id") or ""),
        )
    if event in ("pull_request_review", "pull_request_review_comment"):
        if not spec.fixups or bot:
            return Outcome("ignore", "bot" if bot else "fixups_off")
        pull = payload.get("pull_request") or {}
        if event == "pull_request_review":
            review = payload.get("review") or {}
            if action != "submitted" or str(review.get("state") or "").lower() not in REVIEW_STATES:
                return Outcome("ignore", f"review.{review.get('state') or action}")
            review_id, text = int(review.get("id") or 0), str(review.get("body") or "")
        else:
            comment = payload.get("comment") or {}
            if action != "created":
                return Outcome("ignore", f"review_comment.{action}")
            review_id = int(comment.get("pull_request_review_id") or 0)
            text = f"{comment.get('path')}:{comment.get('line')}: {comment.get('body') or ''}"
        number = int(pull.get("number") or 0)
        if not number or not review_id:
            return Outcome("ignore", "no_review")
        manifest = fixup_intent(repository, pull, review_id, text, login, delivery)
        return Outcome("create", "fixup", manifest=manifest)
    return Outcome("ignore", "unknown_event")


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
    repository: GitHubRepository, issue: dict[str, Any], delivery: str
) -> dict[str, Any]:
    spec = repository.spec
    number = int(issue["number"])
    author = str((issue.get("user") or {}).get("login") or "")
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": _metadata(repository, triage_name(spec.repo, number), delivery),
        "spec": {
            "kind": "issue_triage",
            "summary": f"Triage {spec.repo}#{number}: {issue.get('title') or ''}"[:1024],
            "proposedBy": {"type": "webhook", "name": f"github:{author}"[:253]},
            "subject": {"type": "issue", "ref": f"{spec.repo}#{number}"},
            "params": {
                "issueTriage": {
                    "repo": spec.repo,
                    "issueNumber": number,
                    "title": str(issue.get("title") or "")[:1024],
                    "body": str(issue.get("body") or "")[:65536],
                    "baseBranch": spec.base_branch,
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
    pull: dict[str, Any],
    review_id: int,
    feedback: str,
    login: str,
    delivery: str,
) -> dict[str, Any]:
    spec = repository.spec
    number = int(pull["number"])
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
    "route",
    "sign",
    "triage_intent",
    "verify_signature",
]
