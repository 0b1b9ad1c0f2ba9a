"""Checkpoints a user holds (pure): the checkpoint_restore Intent kind through classification,
approval, the one-Run-per-Sprite rule and its recorded outcome; a SpriteCheckpoint's take
decision, its marker, retention and the Sprite's status list."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Sprite
from lattice_operator.api.v1alpha1.intent import ApprovalRecord, IntentResult
from lattice_operator.api.v1alpha1.spritecheckpoint import SpriteCheckpoint
from lattice_operator.ports.sprites import CheckpointInfo
from lattice_operator.reconcilers.approvals import spec_digest
from lattice_operator.reconcilers.intent import IntentPlan, reconcile_intent
from lattice_operator.reconcilers.intent_pass import RestoreWork
from lattice_operator.reconcilers.sprite_checkpoint import (
    backend_comment,
    decide_take,
    deletes_backend,
    sprite_entries,
    taken_before,
    to_prune,
    user_comment,
    with_phase,
)
from tests.support.admission_cases import sample
from tests.support.intent_world import NOW, advance, world


def restore_intent(**params: Any) -> Intent:
    doc = sample("intent-checkpoint-restore.yaml")
    doc["metadata"] = {"name": "r", "namespace": "ns", "uid": "u", "generation": 1}
    if params:
        doc["spec"]["params"]["checkpointRestore"] = {"sprite": "sample", **params}
    return Intent.model_validate(doc)


def ready_sprite(ready: str = "True", backend: str | None = "ns-sample") -> Sprite:
    return Sprite.model_validate(
        {
            "metadata": {"name": "sample", "namespace": "ns", "uid": "s"},
            "spec": {},
            "status": {
                "spriteName": backend,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": ready,
                        "reason": "Ready",
                        "lastTransitionTime": NOW.isoformat(),
                    }
                ],
            },
        }
    )


def approved_by(it: Intent, user: str) -> ApprovalRecord:
    return ApprovalRecord(
        user=user, decision="approve", reason="", time=NOW, spec_digest=spec_digest(it.spec)
    )


def run_pass(it: Intent, **fields: Any) -> IntentPlan:
    return reconcile_intent(replace(world(it), **fields))


def succeeded(plan: IntentPlan) -> tuple[str, str, str]:
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def approved(it: Intent, **fields: Any) -> tuple[Intent, IntentPlan]:
    """The Intent as far as its approval by alice, and the pass that executes it."""
    first = run_pass(it)
    assert first.phase == "AwaitingApproval"  # mutating: approval by default
    it = advance(it, first)
    plan = run_pass(it, approvals=[approved_by(it, "alice")], **fields)
    return it, plan


def test_a_restore_needs_approval_by_default() -> None:
    plan = run_pass(restore_intent())
    assert plan.phase == "AwaitingApproval"
    assert plan.status.classification is not None
    assert plan.status.classification.risk == "controlled"
    assert plan.restore is None


def test_an_approved_restore_hands_the_handler_the_backend_sprite() -> None:
    _, plan = approved(restore_intent(), sprite=ready_sprite())
    assert plan.phase == "Executing"
    assert plan.restore == RestoreWork(
        sprite="ns-sample",
        checkpoint_id=None,
        checkpoint="sample-before",
        approved_by=("alice",),  # for the restore's receipt
    )
    assert plan.status.sprite_ref is not None
    assert plan.status.sprite_ref.name == "sample"
    assert succeeded(plan) == (
        "Unknown",
        "Executing",
        "restoring Sprite sample to SpriteCheckpoint sample-before",
    )
    by_id = restore_intent(checkpointId="v3")
    _, plan = approved(by_id, sprite=ready_sprite())
    assert plan.restore == RestoreWork(
        sprite="ns-sample", checkpoint_id="v3", checkpoint=None, approved_by=("alice",)
    )


def test_a_restore_is_refused_while_a_run_holds_the_sprite() -> None:
    _, plan = approved(restore_intent(), sprite=ready_sprite(), sprite_holder="build-1")
    assert plan.phase == "Failed"
    assert plan.restore is None
    status, reason, message = succeeded(plan)
    assert (status, reason) == ("False", "SpriteHeld")
    assert message.startswith("Run build-1 holds Sprite sample")
    assert plan.status.result is not None
    assert plan.status.result.status == "failure"


def test_a_restore_waits_for_its_sprite_to_be_ready() -> None:
    for sprite in (None, ready_sprite("False"), ready_sprite(backend=None)):
        _, plan = approved(restore_intent(), sprite=sprite)
        assert plan.phase == "Waiting"
        assert plan.restore is None
        assert succeeded(plan)[1] == "SpriteNotReady"


def test_the_recorded_outcome_ends_it_with_who_approved_and_what_was_restored() -> None:
    it, plan = approved(restore_intent(), sprite=ready_sprite())
    it = advance(it, plan)
    it.status.result = IntentResult(status="success", summary="restored ns-sample to checkpoint v3")
    done = run_pass(it, approvals=[approved_by(it, "alice")], sprite=ready_sprite())
    assert done.phase == "Succeeded"
    assert done.restore is None
    assert succeeded(done) == ("True", "Restored", "restored ns-sample to checkpoint v3")
    assert [(n.reason, n.message, n.warning) for n in done.notices] == [
        ("CheckpointRestored", "restored ns-sample to checkpoint v3; approved by alice", False)
    ]
    trail = [(e.to_phase, e.actor, e.reason) for e in done.status.audit_log]
    assert trail[2:] == [
        ("Approved", "alice", "approved by alice"),
        (
            "Executing",
            "lattice-operator",
            "restoring Sprite sample to SpriteCheckpoint sample-before",
        ),
        ("Succeeded", "lattice-operator", "restored ns-sample to checkpoint v3"),
    ]
    it.status.result = IntentResult(status="failure", summary="restoring ns-sample to v9: gone")
    failed = run_pass(it, approvals=[approved_by(it, "alice")], sprite=ready_sprite())
    assert failed.phase == "Failed"
    assert succeeded(failed)[1] == "RestoreFailed"
    assert [(n.reason, n.warning) for n in failed.notices] == [("CheckpointRestoreFailed", True)]


def test_a_restore_left_unrecorded_is_planned_again() -> None:
    """An operator that stopped between Executing and the restore does it on its next pass."""
    it, plan = approved(restore_intent(), sprite=ready_sprite())
    it = advance(it, plan)
    again = run_pass(it, approvals=[approved_by(it, "alice")], sprite=ready_sprite())
    assert again.phase == "Executing"
    assert again.restore == plan.restore


# -- SpriteCheckpoint ------------------------------------------------------------------------


def checkpoint(
    name: str = "before",
    *,
    uid: str = "c-1",
    phase: str | None = None,
    checkpoint_id: str | None = None,
    minutes: int = 0,
    policy: str = "Delete",
) -> SpriteCheckpoint:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if checkpoint_id is not None:
        status.update(
            checkpointId=checkpoint_id,
            spriteName="ns-sample",
            createTime=(NOW + timedelta(minutes=minutes)).isoformat(),
        )
    return SpriteCheckpoint.model_validate(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": 1},
            "spec": {
                "spriteRef": {"name": "sample"},
                "comment": "before the refactor",
                "deletionPolicy": policy,
            },
            "status": status,
        }
    )


def test_a_checkpoint_is_taken_once_its_sprite_is_ready() -> None:
    assert decide_take(checkpoint(), None).action == "wait"
    assert decide_take(checkpoint(), ready_sprite("False")).reason == "SpriteNotReady"
    take = decide_take(checkpoint(), ready_sprite())
    assert (take.action, take.sprite) == ("take", "ns-sample")
    assert decide_take(checkpoint(checkpoint_id="v2"), ready_sprite()).action == "done"
    gone = ready_sprite().model_copy(deep=True)
    gone.metadata.deletion_timestamp = NOW
    assert decide_take(checkpoint(), gone).action == "fail"


def test_a_retried_take_finds_the_checkpoint_it_took() -> None:
    """A crash after the backend took it and before the status said so: the next attempt
    adopts that checkpoint (by the uid in its comment) instead of taking a second one."""
    mine = checkpoint(uid="abc")
    comment = backend_comment(mine)
    assert user_comment(comment) == "before the refactor"
    listed = [
        CheckpointInfo(id="v1", comment="a run's"),
        CheckpointInfo(id="v2", comment=backend_comment(checkpoint(uid="other"))),
        CheckpointInfo(id="v3", comment=comment),
    ]
    found = taken_before(listed, "abc")
    assert found is not None
    assert found.id == "v3"
    assert taken_before(listed[:2], "abc") is None
    long = checkpoint(uid="abc").model_copy(deep=True)
    long.spec.comment = "x" * 1024
    assert len(backend_comment(long)) <= 1024
    assert backend_comment(long).endswith("[lattice:abc]")


def test_status_records_the_backend_checkpoint() -> None:
    taken = CheckpointInfo(id="v3", create_time=NOW, comment="c")
    status = with_phase(
        checkpoint(), "Ready", "Taken", "checkpoint v3", NOW, taken=taken, sprite="ns-sample"
    )
    assert (status.phase, status.checkpoint_id, status.sprite_name) == ("Ready", "v3", "ns-sample")
    assert status.create_time == NOW
    assert [(c.type, c.status, c.observed_generation) for c in status.conditions] == [
        ("Ready", "True", 1)
    ]
    pending = with_phase(checkpoint(), "Pending", "SpriteNotReady", "waiting", NOW)
    assert pending.conditions[0].status == "Unknown"
    assert pending.checkpoint_id is None


def test_deleting_deletes_the_backend_checkpoint_unless_retained() -> None:
    assert deletes_backend(checkpoint(checkpoint_id="v1"))
    assert not deletes_backend(checkpoint(checkpoint_id="v1", policy="Retain"))
    assert not deletes_backend(checkpoint())  # never taken


def test_retention_prunes_the_oldest_held_checkpoints_only() -> None:
    held = [
        checkpoint(f"c{i}", uid=f"u{i}", phase="Ready", checkpoint_id=f"v{i}", minutes=i)
        for i in range(5)
    ]
    kept = checkpoint(
        "keep", uid="k", phase="Ready", checkpoint_id="v9", minutes=-5, policy="Retain"
    )
    pending = checkpoint("new", uid="n", phase="Pending")
    objects = [*held, kept, pending]
    assert to_prune(objects, None) == []
    assert to_prune(objects, 2) == ["c2", "c1", "c0"]
    assert to_prune(objects, 10) == []


def test_the_sprite_lists_its_newest_checkpoints_with_their_objects() -> None:
    listed = [
        CheckpointInfo(id=f"v{i}", create_time=NOW + timedelta(minutes=i), comment=f"c{i}")
        for i in range(12)
    ]
    listed.append(
        CheckpointInfo(
            id="v12",
            create_time=NOW + timedelta(minutes=12),
            comment=backend_comment(checkpoint(uid="x")),
        )
    )
    objects = [checkpoint("mine", uid="x", phase="Ready", checkpoint_id="v12")]
    entries = sprite_entries(listed, objects)
    assert len(entries) == 10
    assert [e.id for e in entries[:3]] == ["v12", "v11", "v10"]
    assert (entries[0].object, entries[0].comment) == ("mine", "before the refactor")
    assert entries[1].object is None  # a Run's or the backend's own: listed too


def test_a_sprite_status_patch_never_carries_the_checkpoint_list() -> None:
    """The Sprite handlers and the fleet observer write whole statuses computed from their
    view of the object: without this, an older view would put an older list back."""
    sprite = ready_sprite()
    sprite.status.checkpoints = sprite_entries([CheckpointInfo(id="v1", create_time=NOW)], [])
    assert "checkpoints" not in sprite.status.to_patch()
    assert sprite.status.to_wire()["checkpoints"][0]["id"] == "v1"
