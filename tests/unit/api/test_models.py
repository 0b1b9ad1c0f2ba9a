"""The v1alpha1 models accept the samples and refuse what admission refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel, ValidationError

from lattice_operator.api.v1alpha1 import (
    Intent,
    Run,
    Sprite,
    find_condition,
    set_condition,
)
from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.api.v1alpha1.healthcheck import HealthCheck
from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicy
from lattice_operator.api.v1alpha1.spritecheckpoint import SpriteCheckpoint
from tests.support.admission_cases import CREATE_CASES, SAMPLES, Case, sample

MODELS: dict[str, type[BaseModel]] = {
    "Sprite": Sprite,
    "Run": Run,
    "Intent": Intent,
    "IntentPolicy": IntentPolicy,
    "HealthCheck": HealthCheck,
    "GitHubRepository": GitHubRepository,
    "SpriteCheckpoint": SpriteCheckpoint,
}


@pytest.mark.parametrize("path", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_every_sample_validates(path: str) -> None:
    doc = sample(path)
    model = MODELS[doc["kind"]].model_validate(doc)
    # Round trip: what we would write back is what we read.
    again = MODELS[doc["kind"]].model_validate(model.model_dump(by_alias=True, mode="json"))
    assert again == model


def test_samples_cover_every_intent_kind() -> None:
    kinds = {sample(p.name)["spec"]["kind"] for p in SAMPLES.glob("intent-*.yaml")}
    from lattice_operator.api.v1alpha1 import INTENT_KINDS

    assert kinds == set(INTENT_KINDS)


@pytest.mark.parametrize("case", [c for c in CREATE_CASES if c.models_refuse], ids=lambda c: c.id)
def test_models_refuse_what_admission_refuses(case: Case) -> None:
    with pytest.raises(ValidationError) as info:
        MODELS[case.kind].model_validate(case.body("x"))
    # The error points at the field the API server names, or at an enclosing object for
    # cross-field rules (pydantic reports model validators at the model's own location).
    paths = [_api_path(err["loc"]) for err in info.value.errors()]
    assert any(case.field.startswith(p) for p in paths), (case.field, paths)


def _api_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location in the API server's notation: spec.env[0].name."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def test_set_condition_keeps_transition_time_when_status_unchanged() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    t1 = t0 + timedelta(minutes=5)
    conds = set_condition(
        [], type="Ready", status="False", reason="Pending", observed_generation=1, now=t0
    )
    conds = set_condition(
        conds,
        type="Ready",
        status="False",
        reason="Missing",
        message="gone",
        observed_generation=2,
        now=t1,
    )
    ready = find_condition(conds, "Ready")
    assert ready is not None
    assert ready.last_transition_time == t0
    assert (ready.reason, ready.message, ready.observed_generation) == ("Missing", "gone", 2)
    conds = set_condition(
        conds, type="Ready", status="True", reason="Ready", observed_generation=2, now=t1
    )
    ready = find_condition(conds, "Ready")
    assert ready is not None
    assert ready.last_transition_time == t1
    assert len(conds) == 1


def test_set_condition_leaves_other_types_alone() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    conds = set_condition(
        [], type="Ready", status="True", reason="Ready", observed_generation=1, now=t0
    )
    conds = set_condition(
        conds, type="Synced", status="False", reason="Error", observed_generation=1, now=t0
    )
    assert [c.type for c in conds] == ["Ready", "Synced"]


def test_run_helpers() -> None:
    run = Run.model_validate(sample("run.yaml"))
    assert run.work_item_id() == "sample-1"
    assert not run.is_done()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run.status.start_time = start
    assert not run.has_timed_out(start + timedelta(seconds=599))
    assert run.has_timed_out(start + timedelta(seconds=600))
    run.status.phase = "Succeeded"
    assert run.is_done()


def test_sprite_backend_name_defaults_to_namespace_and_name() -> None:
    sprite = Sprite.model_validate(
        {**sample("sprite.yaml"), "metadata": {"name": "box", "namespace": "team-a"}}
    )
    assert sprite.backend_name() == "team-a-box"
    sprite.spec.sprite_name = "explicit"
    assert sprite.backend_name() == "explicit"
