"""Loop 4 (open questions → research dialogue), its pure parts: which issue events become a
research triage, what its pass decides once the agent declared notes, and the notes file
(untrusted input) made into the comment posted on the issue."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.forge.builders import triage_name
from lattice_operator.forge.research import notes_comment, parse_notes, plan_comment
from lattice_operator.forge.webhooks import route
from lattice_operator.ports.errors import InvalidRequest
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.forge_pipeline import AGENT, run, world
from tests.support.github.fixtures import webhook_example
from tests.support.github_repository import REPO, repository

REF = "/workspace/notes.json"


def test_an_issue_opened_or_labelled_as_a_question_becomes_a_research_triage() -> None:
    research = repository(research={"labels": ["bug"]}, triage={"labels": ["other"]})
    labelled = webhook_example("issues", "labeled")  # labelled `bug`
    outcome = route("issues", "d-1", labelled, research)
    assert (outcome.kind, outcome.reason) == ("create", "research")
    number = labelled["issue"]["number"]
    # The same name as a triage: the issue's comments resume it (a dialogue), one per issue.
    assert outcome.manifest["metadata"]["name"] == triage_name(REPO, number)
    intent = Intent.model_validate(outcome.manifest)
    params = intent.spec.params.issue_triage
    assert params is not None
    assert params.research is True
    assert intent.spec.summary is not None
    assert intent.spec.summary.startswith("Research ")
    opened = webhook_example("issues", "opened")
    opened["issue"]["labels"] = [labelled["label"]]
    assert route("issues", "d-2", opened, research).reason == "research"


def test_an_issue_without_a_research_label_is_triaged_as_before() -> None:
    research = repository(research={"labels": ["question"]})
    outcome = route("issues", "d-1", webhook_example("issues", "opened"), research)
    assert (outcome.kind, outcome.reason) == ("create", "triage")
    assert "research" not in outcome.manifest["spec"]["params"]["issueTriage"]
    # Labelled with another label: not a question, and the default triage rule (every
    # opened issue) does not take `labeled` events without labels of its own.
    labelled = route("issues", "d-2", webhook_example("issues", "labeled"), research)
    assert labelled.reason != "research"


def test_research_labels_cannot_be_empty() -> None:
    with pytest.raises(ValueError, match=r"research\.labels"):
        repository(research={"labels": []})


def _research_intent(**status: Any) -> Intent:
    return Intent.model_validate(
        {
            "metadata": {"name": "triage", "namespace": "ns", "uid": "u-4", "generation": 1},
            "spec": {
                "kind": "issue_triage",
                "params": {
                    "issueTriage": {
                        "repo": "octo/app",
                        "issueNumber": 4,
                        "research": True,
                        "run": AGENT,
                    }
                },
                "allowedActions": ["POST_COMMENT"],
            },
            "status": status,
        }
    )


def test_a_run_that_declared_notes_is_finished_by_the_operator_to_post_them() -> None:
    prepared = {"forge": {"repo": "octo/app", "preparedAt": "2026-01-01T00:00:00Z"}}
    artifact = {"kind": "notes", "ref": REF, "line": 1, "session": 1, "at": "2026-01-01T00:00:00Z"}
    notes = {"artifacts": [artifact]}
    plan = reconcile_intent(world(_research_intent(**prepared), run=run("Succeeded", events=notes)))
    assert plan.forge is not None
    assert (plan.forge.step, plan.forge.kind) == ("finish", "issue_triage")
    # Without notes or a plan there is nothing to post: done at once, as a triage.
    bare = reconcile_intent(world(_research_intent(**prepared), run=run("Succeeded")))
    assert bare.forge is None
    assert bare.phase == "Succeeded"


def test_notes_become_one_comment_with_their_sources_numbered() -> None:
    text = json.dumps(
        {
            "notes": "  Postgres LISTEN/NOTIFY fits: at most 8000 bytes a payload.  ",
            "sources": ["https://www.postgresql.org/docs/current/sql-notify.html", "docs/db.md"],
        }
    )
    comment = notes_comment(parse_notes(text, REF))
    assert comment == (
        "### Research notes\n\n"
        "Postgres LISTEN/NOTIFY fits: at most 8000 bytes a payload.\n\n"
        "**Sources**\n\n"
        "1. <https://www.postgresql.org/docs/current/sql-notify.html>\n"
        "2. `docs/db.md`"
    )
    uncited = notes_comment(parse_notes(json.dumps({"notes": "n"}), REF))
    assert uncited.endswith("**Sources**\n\n(the agent cited none)")
    # A source cannot break out of its markup.
    odd = parse_notes(json.dumps({"notes": "n", "sources": ["a`b", "https://x y"]}), REF)
    assert notes_comment(odd).endswith("1. `ab`\n2. `https://x y`")
    assert plan_comment("1. do it", "plan-octo-app-4") == (
        "### Proposed plan\n\n1. do it\n\nAwaiting approval as Intent `plan-octo-app-4`."
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "is not JSON"),
        ("[]", "must be a JSON object"),
        (json.dumps({"sources": []}), "`notes` must be a non-empty string"),
        (json.dumps({"notes": 3}), "`notes` must be a non-empty string"),
        (json.dumps({"notes": "n", "sources": "x"}), "`sources` must be a list"),
        (json.dumps({"notes": "n", "sources": ["ok", 7]}), "`sources[1]` must be"),
        (json.dumps({"notes": "n", "sources": ["a\nb"]}), "`sources[0]` must be one line"),
        (json.dumps({"notes": "n", "sources": ["s"] * 31}), "`sources` has 31 items"),
    ],
)
def test_a_malformed_notes_file_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(InvalidRequest) as exc:
        parse_notes(text, REF)
    assert str(exc.value).startswith("the notes artifact '/workspace/notes.json'")
    assert field in str(exc.value)
