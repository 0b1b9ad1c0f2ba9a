"""Child manifests built for Intents, Runs and receipts are valid objects."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Intent, Run, Sprite
from lattice_operator.builders import (
    environment_change_intent,
    notice_event,
    run_for_intent,
    sprite_for_intent,
)
from lattice_operator.protocol.projection import ProposalStatus
from tests.support.admission_cases import sample

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _intent(name: str) -> Intent:
    doc = sample(name)
    doc["metadata"] = {"name": "my-intent", "namespace": "team-a", "uid": "u-1"}
    return Intent.model_validate(doc)


def test_run_for_intent_is_deterministic_owned_and_valid() -> None:
    intent = _intent("intent-sprite-task-exec.yaml")
    params = intent.spec.params.sprite_task_exec
    assert params is not None
    first, second = run_for_intent(intent, params), run_for_intent(intent, params)
    assert first == second
    assert first["metadata"]["name"] == "my-intent-run"
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Intent", "u-1", True)
    run = Run.model_validate(first)
    assert run.spec.intent_ref is not None
    assert run.spec.intent_ref.name == "my-intent"
    assert run.spec.command == params.command


def test_sprite_for_intent_is_a_valid_unowned_sprite() -> None:
    intent = _intent("intent-sprite-create.yaml")
    params = intent.spec.params.sprite_create
    assert params is not None
    manifest = sprite_for_intent(intent, params)
    assert "ownerReferences" not in manifest["metadata"]  # a sprite outlives its Intent
    assert Sprite.model_validate(manifest).metadata.name == "repo-work"


def test_environment_proposal_intent_is_valid_and_named_by_its_line() -> None:
    run = Run.model_validate(
        {**sample("run.yaml"), "metadata": {"name": "r", "namespace": "n", "uid": "run-uid"}}
    )
    proposal = ProposalStatus(
        line=7,
        session=1,
        adjustment="runtime_install",
        scope="repo_specific",
        confidence=0.5,
        details={"runtime": "node"},
        observed_failure={"phase": "bootstrap", "exit_code": 127},
        evidence=["package.json"],
        at=NOW,
    )
    manifest = environment_change_intent(run, "team-a-box", proposal)
    intent = Intent.model_validate(manifest)  # the models accept it, as admission will
    assert manifest["metadata"]["name"] == "r-env-7"
    assert intent.spec.kind == "environment_change"
    assert intent.spec.proposed_by.type == "sprite"
    assert intent.spec.allowed_actions == []  # a proposal grants nothing


def test_event_names_are_valid_object_names() -> None:
    ref = ObjectRef("lattice.dev/v1alpha1", "Intent", "ns", "a.b-c", "uid")
    event = notice_event(
        ref, reason="NotifyUser", note="x" * 5000, now=NOW, controller="c", instance="i"
    )
    assert DNS_SUBDOMAIN.match(event["metadata"]["generateName"] + "abcde")
    assert len(event["note"]) <= 1024
