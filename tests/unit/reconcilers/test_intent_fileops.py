"""The pipeline's fileops branch as a pure function: it waits for its Sprite, counts
attempts before carrying one out, ends on the response, and gives up after max_attempts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Sprite
from lattice_operator.reconcilers.intent import reconcile_intent
from tests.support.admission_cases import build, sample
from tests.support.intent_world import NOW, advance, policy, world


def fileops_intent(**status: Any) -> Intent:
    doc = sample("intent-fileops.yaml")
    doc["metadata"] = {"name": "f", "namespace": "ns", "uid": "u", "generation": 1}
    doc["status"] = status
    return Intent.model_validate(doc)


def sprite(ready: bool) -> Sprite:
    doc = build("sprite.yaml", "sample", {})
    doc["metadata"]["namespace"] = "ns"
    doc["status"] = {
        "spriteName": "ns-sample",
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "Ready" if ready else "Creating",
                "message": "",
                "lastTransitionTime": NOW.isoformat(),
            }
        ],
    }
    return Sprite.model_validate(doc)


def test_it_waits_for_its_sprite_then_counts_an_attempt_before_carrying_it_out() -> None:
    it = fileops_intent()
    waiting = reconcile_intent(replace(world(it, policies=[policy("allow")]), sprite=sprite(False)))
    assert waiting.phase == "Waiting"
    assert waiting.fileops is None
    assert waiting.status.sprite_ref is not None
    assert waiting.status.sprite_ref.name == "sample"
    go = reconcile_intent(
        replace(world(advance(it, waiting), policies=[policy("allow")]), sprite=sprite(True))
    )
    assert go.phase == "Executing"
    assert go.fileops is not None
    assert (go.fileops.sprite, go.fileops.attempt) == ("ns-sample", 1)
    assert go.status.fileops is not None
    assert go.status.fileops.attempts == 1  # written before anything is done


def test_the_response_ends_it() -> None:
    for outcome, phase in (("ok", "Succeeded"), ("split", "Succeeded"), ("fail", "Failed")):
        response: dict[str, Any] = {"proto": "triflow.fileops.v1", "id": "S2", "status": outcome}
        if outcome == "ok":
            response |= {"changedFiles": ["todo.md"], "ops": [], "proof": {}}
        elif outcome == "split":
            response["split"] = {"substeps": []}
        else:
            response["fail"] = {"reason": "run: `pytest -q` exited 1"}
        it = fileops_intent(fileops={"attempts": 1, "response": response})
        plan = reconcile_intent(replace(world(it, policies=[policy("allow")]), sprite=sprite(True)))
        assert plan.phase == phase, outcome
        assert plan.fileops is None
    assert plan.status.result is not None
    assert plan.status.result.summary == "run: `pytest -q` exited 1"


def test_attempts_that_never_finished_are_bounded() -> None:
    it = fileops_intent(fileops={"attempts": 2})
    plan = reconcile_intent(replace(world(it, policies=[policy("allow")]), sprite=sprite(True)))
    assert plan.phase == "Failed"
    assert plan.fileops is None
    assert "started 2 times" in plan.status.result.summary  # type: ignore[union-attr]
