"""Loop 6 (documentation upheld), its pure parts: which pushes become a docs update, the
Intent they become, and the one lag issue per set of docs."""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.forge.docs import docs_name, lag_key, lag_title
from lattice_operator.forge.events import BadDelivery
from lattice_operator.forge.webhooks import route
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.forge_pipeline import prepared, run, world
from tests.support.github.fixtures import webhook_example
from tests.support.github_repository import REPO, repository

SHA = "a" * 40
RULES = [
    {"code": "operator/*.py", "docs": "docs/operator.md"},
    {"code": "charts/*", "docs": "docs/install.md"},
]


def push(paths: list[str], ref: str = "refs/heads/main", **extra: Any) -> dict[str, Any]:
    payload = webhook_example("push")
    commits = [
        {"id": "b" * 40, "added": paths[:1], "modified": paths[1:], "removed": []},
        {"id": SHA, "added": [], "modified": paths[:1], "removed": []},
    ]
    payload.update({"ref": ref, "after": SHA, "deleted": False, "commits": commits, **extra})
    return payload


def test_a_push_to_the_base_branch_touching_named_code_is_a_docs_update() -> None:
    paths = ["operator/a.py", "README.md", "operator/sub/b.py"]
    outcome = route("push", "d-1", push(paths), repository(docs=RULES))
    assert (outcome.kind, outcome.reason) == ("create", "docs")
    intent = Intent.model_validate(outcome.manifest)
    assert intent.metadata.name == docs_name(REPO, SHA)
    assert intent.metadata.name.endswith("-aaaaaaaaaaaa")
    assert intent.spec.kind == "pr_create_from_plan"
    params = intent.spec.params.pr_create_from_plan
    assert params is not None
    assert params.docs is not None
    # Each path once, only those a rule names (`*` crosses `/`), the docs of those rules.
    assert params.docs.changed == ["operator/a.py", "operator/sub/b.py"]
    assert params.docs.docs == ["docs/operator.md"]
    assert params.docs.sha == SHA
    assert (params.head_branch, params.base_branch) == ("lattice/docs-aaaaaaaaaaaa", "main")
    assert "`operator/sub/b.py`" in params.plan
    assert params.run is not None
    again = route("push", "d-2", push(paths), repository(docs=RULES))
    assert again.manifest["metadata"]["name"] == intent.metadata.name  # a redelivery


@pytest.mark.parametrize(
    ("payload", "spec", "reason"),
    [
        (push(["operator/a.py"]), {}, "docs_off"),
        (push(["operator/a.py"], ref="refs/heads/topic"), {"docs": RULES}, "other_ref"),
        (push(["operator/a.py"], ref="refs/tags/v1"), {"docs": RULES}, "other_ref"),
        (push(["operator/a.py"], deleted=True), {"docs": RULES}, "other_ref"),
        (push(["README.md", "docs/x.md"]), {"docs": RULES}, "no_docs_affected"),
        (push(["operator/a.py"], after="0" * 39), {"docs": RULES}, "no_commit"),
    ],
)
def test_other_pushes_change_nothing(payload: dict[str, Any], spec: Any, reason: str) -> None:
    outcome = route("push", "d", payload, repository(**spec))
    assert (outcome.kind, outcome.reason) == ("ignore", reason)


def test_a_push_with_a_wrongly_typed_part_is_refused_naming_it() -> None:
    payload = push(["operator/a.py"])
    payload["commits"][0]["modified"] = "operator/a.py"
    with pytest.raises(BadDelivery) as exc:
        route("push", "d", payload, repository(docs=RULES))
    assert exc.value.field == "commits.0.modified"


def test_the_lag_issue_is_one_per_set_of_docs() -> None:
    assert lag_key(["b.md", "a.md"]) == lag_key(["a.md", "b.md"])
    assert lag_key(["a.md"]) != lag_key(["a.md", "b.md"])
    assert lag_key(["a.md"]).startswith("docs-lag:")
    assert lag_title(["docs/install.md"]) == "Docs lag behind the code: docs/install.md"


def test_the_rules_are_checked_at_admission_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"docs\.0\.code"):
        repository(docs=[{"code": "", "docs": "README.md"}])


def _artifact(kind: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "ref": "/workspace/x",
        "line": 1,
        "session": 1,
        "at": "2026-01-01T00:00:00Z",
    }


@pytest.mark.parametrize(
    ("kinds", "finishes"),
    [
        (["docs_current"], False),
        (["docs_lag"], True),
        ([], True),
        (["docs_current", "docs_lag"], True),
    ],
)
def test_a_docs_update_the_agent_found_current_ends_without_a_pull_request(
    kinds: list[str], finishes: bool
) -> None:
    outcome = route("push", "d-1", push(["operator/a.py"]), repository(docs=RULES))
    it = Intent.model_validate(
        {
            **outcome.manifest,
            "metadata": {"name": "docs", "namespace": "ns", "uid": "u", "generation": 1},
            "status": prepared(),  # the workspace was handed out, the Run succeeded
        }
    )
    events = {"artifacts": [_artifact(k) for k in kinds]}
    plan = reconcile_intent(world(it, run=run("Succeeded", events=events)))
    if finishes:  # commits to push and a PR to open, or lag to report: the finish step
        assert plan.forge is not None
        assert plan.forge.step == "finish"
    else:
        assert plan.forge is None
        assert plan.phase == "Succeeded"
        assert plan.status.result is not None
        assert plan.status.result.summary == "the docs are current: nothing to change"
