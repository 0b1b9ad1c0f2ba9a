"""environment_change Intents (pure): what each of the eight adjustment types does once
approved, the Sprite patch written before the status, idempotence, and bad details refused
naming their field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lattice_operator.api.v1alpha1 import Intent, Sprite
from lattice_operator.api.v1alpha1.intent import ApprovalRecord, SuggestedAdjustment
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep
from lattice_operator.reconcilers.approvals import spec_digest
from lattice_operator.reconcilers.intent import IntentPlan, reconcile_intent
from lattice_operator.reconcilers.intent_kinds.environment_steps import (
    AdjustmentInvalid,
    domains_of,
    step_of,
    with_step,
)
from tests.support.admission_cases import sample
from tests.support.intent_world import NOW, advance, policy, world


def change(adjustment: dict[str, Any], scope: str = "repo_specific") -> Intent:
    doc = sample("intent-environment-change.yaml")
    doc["metadata"] = {"name": "env-1", "namespace": "ns", "uid": "u", "generation": 1}
    params = doc["spec"]["params"]["environmentChange"]
    params["suggestedAdjustment"] = adjustment
    params["scope"] = scope
    return Intent.model_validate(doc)


def sprite(**spec: Any) -> Sprite:
    return Sprite.model_validate(
        {
            "metadata": {"name": "sample", "namespace": "ns", "resourceVersion": "41"},
            "spec": spec,
        }
    )


def plan_for(it: Intent, on: Sprite | None) -> IntentPlan:
    return reconcile_intent(replace(world(it, policies=[policy("allow")]), sprite=on))


def ended(plan: IntentPlan) -> tuple[str, str, str]:
    done = next(c for c in plan.status.conditions if c.type == "Succeeded")
    return done.status, done.reason, done.message


def adj(kind: str, **details: Any) -> SuggestedAdjustment:
    return SuggestedAdjustment.model_validate({"type": kind, "details": details})


def test_a_preinstall_step_is_added_to_the_sprites_environment_guarded() -> None:
    it = change({"type": "add_preinstall_step", "details": {"command": "touch /tmp/ok"}})
    plan = plan_for(it, sprite())
    assert plan.phase == "Succeeded"
    assert ended(plan)[:2] == ("True", "Completed")
    assert plan.sprite_patch is not None
    assert plan.sprite_patch.sprite == "sample"
    assert plan.sprite_patch.patch == {
        "metadata": {"resourceVersion": "41"},
        "spec": {
            "environment": [
                {
                    "name": "env-1",
                    "type": "add_preinstall_step",
                    "command": "touch /tmp/ok",
                    "details": {},
                }
            ]
        },
    }
    assert plan.status.result is not None
    assert "step env-1 (add_preinstall_step): touch /tmp/ok" in plan.status.result.summary
    assert [n.reason for n in plan.notices] == ["EnvironmentChanged"]


def test_a_step_already_there_is_not_written_again() -> None:
    it = change({"type": "add_preinstall_step", "details": {"command": "touch /tmp/ok"}})
    there = EnvironmentStep(name="env-1", type="add_preinstall_step", command="touch /tmp/ok")
    plan = plan_for(it, sprite(environment=[there.to_wire()]))
    assert plan.phase == "Succeeded"
    assert plan.sprite_patch is None


def test_a_missing_sprite_fails_without_changing_anything() -> None:
    plan = plan_for(change({"type": "add_preinstall_step", "details": {"command": "x"}}), None)
    assert plan.phase == "Failed"
    assert ended(plan) == ("False", "SpriteFailed", "Sprite sample not found: nothing changed")
    assert plan.sprite_patch is None


@pytest.mark.parametrize(
    ("kind", "details", "command", "recorded"),
    [
        (
            "add_system_package",
            {"package": "redis-server"},
            "dpkg -s redis-server >/dev/null 2>&1 || "
            "{ apt-get update && apt-get install -y redis-server; }",
            {"package": "redis-server"},
        ),
        (
            "runtime_install",
            {"runtime": "node", "version": "20"},
            "command -v node >/dev/null && node --version 2>&1 | grep -qF 20",
            {"runtime": "node", "version": "20"},
        ),
        (
            "runtime_version_adjust",
            {"runtime": "python3", "command": "pip install --no-index ./w.whl"},
            "pip install --no-index ./w.whl",
            {"runtime": "python3"},
        ),
        (
            "dependency_manager_switch",
            {"manager": "uv"},
            "command -v uv >/dev/null",
            {"manager": "uv"},
        ),
        ("add_preinstall_step", {"command": "make deps"}, "make deps", {}),
        (
            "adjust_smoke_command",
            {"command": "pytest -x -q tests/smoke"},
            "pytest -x -q tests/smoke",
            {},
        ),
    ],
)
def test_each_step_type_becomes_a_stated_command(
    kind: str, details: dict[str, Any], command: str, recorded: dict[str, str]
) -> None:
    step = step_of("s", adj(kind, **details))
    assert (step.type, step.command, step.details) == (kind, command, recorded)


@pytest.mark.parametrize(
    ("kind", "details", "field"),
    [
        ("add_preinstall_step", {}, "details.command is required"),
        ("adjust_smoke_command", {"command": 3}, "details.command must be a string"),
        ("add_system_package", {}, "details.package is required"),
        ("add_system_package", {"package": "redis; rm -rf /"}, "details.package must be a name"),
        ("runtime_install", {"runtime": "node", "version": "$(id)"}, "details.version must be"),
        ("dependency_manager_switch", {"manager": "a b"}, "details.manager must be a name"),
    ],
)
def test_details_that_cannot_make_a_safe_step_are_refused_naming_the_field(
    kind: str, details: dict[str, Any], field: str
) -> None:
    with pytest.raises(AdjustmentInvalid, match=f"suggestedAdjustment.{field}"):
        step_of("s", adj(kind, **details))
    plan = plan_for(change({"type": kind, "details": details}), sprite())
    assert plan.phase == "Failed"
    assert ended(plan)[1] == "InvalidSpec"
    assert plan.sprite_patch is None


def test_adjustments_replace_what_they_adjust_and_add_the_rest() -> None:
    steps = [
        step_of("a", adj("runtime_install", runtime="node", version="18")),
        step_of("b", adj("adjust_smoke_command", command="true")),
        step_of("c", adj("add_preinstall_step", command="make deps")),
    ]
    steps = with_step(
        steps, step_of("d", adj("runtime_version_adjust", runtime="node", version="20"))
    )
    steps = with_step(steps, step_of("e", adj("adjust_smoke_command", command="pytest -q")))
    steps = with_step(steps, step_of("f", adj("add_preinstall_step", command="make more")))
    assert [s.name for s in steps] == ["c", "d", "e", "f"]


def approved_for(it: Intent, on: Sprite | None) -> IntentPlan:
    """A network change needs an approval even where policy allows environment changes:
    the pass after alice's."""
    first = plan_for(it, on)
    assert first.phase == "AwaitingApproval"
    it = advance(it, first)
    record = ApprovalRecord(
        user="alice", decision="approve", reason="", time=NOW, spec_digest=spec_digest(it.spec)
    )
    ready = world(it, policies=[policy("allow")], approvals=[record])
    return reconcile_intent(replace(ready, sprite=on))


def test_network_access_adds_allow_rules_to_the_sprites_policy() -> None:
    rules = [{"domain": "*", "action": "deny"}, {"domain": "pypi.internal", "action": "deny"}]
    it = change({"type": "enable_network_access", "details": {"domain": "pypi.internal"}})
    plan = approved_for(it, sprite(networkPolicy={"rules": rules}))
    assert plan.phase == "Succeeded"
    assert plan.sprite_patch is not None
    assert plan.sprite_patch.patch["spec"] == {
        "networkPolicy": {
            "rules": [
                {"domain": "*", "action": "deny"},
                {"domain": "pypi.internal", "action": "allow"},
            ]
        }
    }
    # Allowed already (or unrestricted, or the operator's default): nothing written.
    allowed = [{"domain": "pypi.internal", "action": "allow"}]
    specs: list[dict[str, Any]] = [
        {"networkPolicy": {"rules": allowed}},
        {"networkPolicy": {"rules": []}},
        {},
    ]
    for spec in specs:
        again = approved_for(it, sprite(**spec))
        assert again.phase == "Succeeded"
        assert again.sprite_patch is None


@pytest.mark.parametrize("domain", ["github.com", "api.github.com", "*", "x.githubusercontent.com"])
def test_network_access_never_opens_the_forges(domain: str) -> None:
    with pytest.raises(AdjustmentInvalid, match="never reaches the forges"):
        domains_of(adj("enable_network_access", domain=domain))
    it = change({"type": "enable_network_access", "details": {"domain": domain}})
    plan = approved_for(it, sprite(networkPolicy={"rules": [{"domain": "*", "action": "deny"}]}))
    assert ended(plan)[:2] == ("False", "InvalidSpec")
    assert plan.sprite_patch is None


def test_escalation_is_a_notice_and_runs_nothing() -> None:
    plan = plan_for(change({"type": "escalate_to_human", "details": {}}), sprite())
    assert ended(plan)[:2] == ("True", "EscalatedToHuman")
    assert plan.sprite_patch is None
    assert [(n.reason, n.warning) for n in plan.notices] == [("EnvironmentEscalated", True)]


def test_a_global_candidate_is_recorded_not_applied() -> None:
    it = change({"type": "add_preinstall_step", "details": {"command": "x"}}, "global_candidate")
    plan = plan_for(it, sprite())
    assert ended(plan)[:2] == ("True", "GlobalCandidate")
    assert plan.sprite_patch is None
    assert plan.status.result is not None
    assert "lattice env promote env-1" in plan.status.result.summary
