"""What each GitHub delivery means, decided on GitHub's own payloads
(@octokit/webhooks-examples, pinned): the mapping of events to Intents, approvals and
answers, and the signature check."""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.forge.builders import fixup_name, plan_name, triage_name
from lattice_operator.forge.events import BadDelivery, parse_delivery
from lattice_operator.forge.webhooks import route, sign, verify_signature
from tests.support.github.fixtures import webhook_example
from tests.support.github_repository import REPO, repository


def test_an_opened_issue_becomes_a_triage_intent_that_validates() -> None:
    payload = webhook_example("issues", "opened")
    outcome = route("issues", "d-1", payload, repository())
    assert outcome.kind == "create"
    manifest = outcome.manifest
    number = payload["issue"]["number"]
    assert manifest["metadata"]["name"] == triage_name(REPO, number)
    assert manifest["metadata"]["annotations"]["forge.lattice.dev/delivery"] == "d-1"
    intent = Intent.model_validate(manifest)  # the admission schema's models accept it
    params = intent.spec.params.issue_triage
    assert params is not None
    assert (params.repo, params.issue_number) == (REPO, number)
    assert params.title == payload["issue"]["title"]
    assert params.run is not None
    assert intent.spec.allowed_actions == ["POST_COMMENT", "LABEL_ISSUE", "OPEN_PR"]


def test_a_redelivered_or_relabelled_issue_names_the_same_intent() -> None:
    opened = route("issues", "d-1", webhook_example("issues", "opened"), repository())
    again = route("issues", "d-2", webhook_example("issues", "opened"), repository())
    assert opened.manifest["metadata"]["name"] == again.manifest["metadata"]["name"]


def test_triage_labels_select_issues() -> None:
    only_triage = repository(triage={"labels": ["triage"]})
    assert route("issues", "d", webhook_example("issues", "opened"), only_triage).kind == "ignore"
    labelled = webhook_example("issues", "labeled")  # labelled `bug`
    assert route("issues", "d", labelled, only_triage).kind == "ignore"
    bug = repository(triage={"labels": ["bug"]})
    assert route("issues", "d", labelled, bug).kind == "create"
    assert route("issues", "d", webhook_example("issues", "edited"), bug).kind == "ignore"


def test_the_approval_label_approves_the_issues_plan() -> None:
    payload = webhook_example("issues", "labeled")
    outcome = route("issues", "d-9", payload, repository(approval={"label": "bug"}))
    assert outcome.kind == "decide"
    assert outcome.decision == "approve"
    assert outcome.intent == plan_name(REPO, payload["issue"]["number"])
    assert outcome.login == payload["sender"]["login"]
    issue = payload["issue"]
    assert outcome.ref == (
        f"label:{REPO}#{issue['number']}:bug:{payload['sender']['login']}@{issue['updated_at']}"
    )


def test_a_label_approval_is_keyed_on_the_signed_event_not_the_delivery_id() -> None:
    # X-GitHub-Delivery is not signed: a captured event replayed under new ids is the same
    # decision (before, each id made a place of its own, `label:<id>`, and a record).
    payload = webhook_example("issues", "labeled")
    wired = repository(approval={"label": "bug"})
    refs = {route("issues", f"d-{n}", payload, wired).ref for n in range(3)}
    assert len(refs) == 1
    # The label taken off and put back later is a new decision.
    payload["issue"]["updated_at"] = "2030-01-01T00:00:00Z"
    assert route("issues", "d-0", payload, wired).ref not in refs


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"repository": "octo/app"}, "repository"),
        ({"issue": ["not", "an", "object"]}, "issue"),
        ({"sender": 7}, "sender"),
        ({"issue": {"number": "abc"}}, "issue.number"),
        ({"issue": {"number": float("inf")}}, "issue.number"),
        ({"issue": {"number": -1}}, "issue.number"),
        ({"issue": {"labels": [{"name": 3}]}}, "issue.labels.0.name"),
        ({"label": {"name": None}}, "label.name"),
    ],
)
def test_a_wrongly_typed_part_is_refused_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    payload = {**webhook_example("issues", "labeled"), **change}
    with pytest.raises(BadDelivery) as refused:
        route("issues", "d", payload, repository(approval={"label": "bug"}))
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"issue": {"number": 1e400}}', "issue.number"),
        (b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "the body"),
        (b"[1, 2]", "the body"),
        (b"\xff\xfe", "the body"),
    ],
)
def test_bodies_that_are_not_a_delivery_are_refused_naming_where(body: bytes, field: str) -> None:
    with pytest.raises(BadDelivery) as refused:
        parse_delivery(body)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("body", "decision"),
    [
        ("/lattice approve", "approve"),
        ("/lattice approve ship it", "approve"),
        ("/lattice reject not yet", "reject"),
    ],
)
def test_a_comment_command_decides_the_plan(body: str, decision: str) -> None:
    payload = webhook_example("issue_comment", "created")
    payload["comment"]["body"] = body
    outcome = route("issue_comment", "d", payload, repository())
    assert outcome.kind == "decide"
    assert outcome.decision == decision
    assert outcome.intent == plan_name(REPO, payload["issue"]["number"])
    assert outcome.ref == payload["comment"]["html_url"]


def test_any_other_comment_answers_the_waiting_triage() -> None:
    payload = webhook_example("issue_comment", "created")
    outcome = route("issue_comment", "d", payload, repository())
    assert outcome.kind == "answer"
    assert outcome.intent == triage_name(REPO, payload["issue"]["number"])
    assert outcome.text == payload["comment"]["body"].strip()


def test_comments_by_bots_and_on_pull_requests_are_ignored() -> None:
    payload = webhook_example("issue_comment", "created")
    payload["sender"]["type"] = "Bot"
    assert route("issue_comment", "d", payload, repository()).reason == "bot"
    payload = webhook_example("issue_comment", "created")
    payload["issue"]["pull_request"] = {"url": "x"}
    assert route("issue_comment", "d", payload, repository()).reason == (
        "pull_request_conversation"
    )


def test_a_submitted_review_and_its_line_comments_make_one_fixup() -> None:
    review = webhook_example("pull_request_review", "submitted")
    outcome = route("pull_request_review", "d-r", review, repository())
    assert outcome.kind == "create"
    number, review_id = review["pull_request"]["number"], review["review"]["id"]
    assert outcome.manifest["metadata"]["name"] == fixup_name(REPO, number, review_id)
    intent = Intent.model_validate(outcome.manifest)
    assert intent.spec.params.pr_fixup_from_feedback is not None
    assert intent.spec.params.pr_fixup_from_feedback.review_id == review_id
    comment = webhook_example("pull_request_review_comment", "created")
    from_comment = route("pull_request_review_comment", "d-c", comment, repository())
    review_of_comment = comment["comment"]["pull_request_review_id"]
    assert from_comment.manifest["metadata"]["name"] == fixup_name(
        REPO, comment["pull_request"]["number"], review_of_comment
    )


def test_reviews_that_approve_or_are_dismissed_change_nothing() -> None:
    review = webhook_example("pull_request_review", "submitted")
    review["review"]["state"] = "approved"
    assert route("pull_request_review", "d", review, repository()).kind == "ignore"
    dismissed = webhook_example("pull_request_review", "dismissed")
    assert route("pull_request_review", "d", dismissed, repository()).kind == "ignore"
    off = repository(fixups=False)
    submitted = webhook_example("pull_request_review", "submitted")
    assert route("pull_request_review", "d", submitted, off).kind == "ignore"


def test_a_pull_request_event_is_not_a_review() -> None:
    # The predecessor listened to pull_request for reviews: nothing comes of it here.
    opened = webhook_example("pull_request", "opened")
    assert route("pull_request", "d", opened, repository()).reason == "unknown_event"


def test_other_repositories_and_pings_change_nothing() -> None:
    payload = webhook_example("issues", "opened")
    assert route("issues", "d", payload, repository(repo="octo/other")).reason == (
        "other_repository"
    )
    assert route("ping", "d", webhook_example("ping"), repository()).reason == "ping"


def test_signatures_are_checked() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    header = sign(b"s3cret", body)
    assert verify_signature(b"s3cret", body, header)
    assert not verify_signature(b"other", body, header)
    assert not verify_signature(b"s3cret", body + b" ", header)
    assert not verify_signature(b"s3cret", body, None)
    assert not verify_signature(b"s3cret", body, header.replace("sha256=", "sha1="))
    assert not verify_signature(b"s3cret", body, header + "\udcff")  # a non-ASCII byte


def test_the_plan_out_of_a_triage_targets_the_repositorys_base_branch() -> None:
    from lattice_operator.forge.builders import plan_intent

    payload = webhook_example("issues", "opened")
    outcome = route("issues", "d-1", payload, repository(baseBranch="develop"))
    triage = Intent.model_validate(
        {**outcome.manifest, "metadata": {**outcome.manifest["metadata"], "uid": "triage-uid"}}
    )
    params = triage.spec.params.issue_triage
    assert params is not None
    assert params.base_branch == "develop"
    plan = Intent.model_validate(plan_intent(triage, "1. do it"))
    approve = plan.spec.params.issue_plan_approve
    assert approve is not None
    assert approve.base_branch == "develop"
