"""Webhook deliveries as GitHub sends them: a real example payload of the event
(@octokit/webhooks-examples) with the repository, issue, comment, pull request and review of
the test's own GitHub written in, signed with the test's secret."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from lattice_operator.forge.webhooks import sign
from tests.support.github.fixtures import webhook_example
from tests.support.github.server import user


def _repository(payload: dict[str, Any], repo: str) -> None:
    owner, name = repo.split("/")
    payload["repository"].update(full_name=repo, name=name)
    payload["repository"]["owner"]["login"] = owner


def _sender(payload: dict[str, Any], login: str, kind: str = "User") -> None:
    payload["sender"].update(login=login, type=kind)


def issues(
    action: str, repo: str, issue: dict[str, Any], sender: str, label: str | None = None
) -> dict[str, Any]:
    payload = webhook_example("issues", action)
    _repository(payload, repo)
    _sender(payload, sender)
    payload["issue"].update(
        number=issue["number"],
        title=issue["title"],
        body=issue["body"],
        labels=issue["labels"],
        user=user(issue["user"]["login"]),
    )
    payload["issue"].pop("pull_request", None)
    if label is not None:
        payload["label"] = {**payload.get("label", {}), "name": label}
    return payload


def issue_comment(
    repo: str, issue: dict[str, Any], comment: dict[str, Any], sender: str
) -> dict[str, Any]:
    payload = webhook_example("issue_comment", "created")
    _repository(payload, repo)
    _sender(payload, sender)
    payload["issue"].update(number=issue["number"], title=issue["title"], body=issue["body"])
    payload["issue"].pop("pull_request", None)
    payload["comment"].update(
        id=comment["id"], body=comment["body"], html_url=comment["html_url"], user=user(sender)
    )
    return payload


def review_submitted(
    repo: str, pull: dict[str, Any], review: dict[str, Any], sender: str
) -> dict[str, Any]:
    payload = webhook_example("pull_request_review", "submitted")
    _repository(payload, repo)
    _sender(payload, sender)
    payload["pull_request"].update(number=pull["number"], title=pull["title"])
    payload["pull_request"]["head"].update(ref=pull["head"]["ref"], sha=pull["head"]["sha"])
    payload["pull_request"]["base"].update(ref=pull["base"]["ref"])
    payload["review"].update(
        id=review["id"], state=review["state"].lower(), body=review["body"], user=user(sender)
    )
    return payload


def review_comment(
    repo: str, pull: dict[str, Any], comment: dict[str, Any], sender: str
) -> dict[str, Any]:
    payload = webhook_example("pull_request_review_comment", "created")
    _repository(payload, repo)
    _sender(payload, sender)
    payload["pull_request"].update(number=pull["number"], title=pull["title"])
    payload["comment"].update(
        id=comment["id"],
        body=comment["body"],
        path=comment["path"],
        line=comment["line"],
        pull_request_review_id=comment["pull_request_review_id"],
        user=user(sender),
    )
    return payload


def push(
    repo: str, branch: str, before: str, after: str, paths: list[str], sender: str
) -> dict[str, Any]:
    """A push of one commit `after` to `branch` that modified `paths`."""
    payload = webhook_example("push")
    _repository(payload, repo)
    _sender(payload, sender)
    commit = {**payload["head_commit"], "id": after, "added": [], "removed": [], "modified": paths}
    payload.update(
        ref=f"refs/heads/{branch}",
        before=before,
        after=after,
        created=False,
        deleted=False,
        commits=[commit],
        head_commit=commit,
    )
    return payload


def deliver(
    url: str,
    secret: bytes,
    event: str,
    payload: dict[str, Any],
    delivery: str | None = None,
    *,
    signature: str | None = None,
) -> httpx.Response:
    """POST one delivery the way GitHub does (JSON body, event, delivery id, signature)."""
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/test",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature or sign(secret, body),
    }
    return httpx.post(url, content=body, headers=headers, timeout=30, trust_env=False)
