"""The ValidatingAdmissionPolicies the operator registers: what each looks at, which list
entries count as new (the variables, evaluated with CEL here), one validation per position up
to the schema's bound, and the operator's identity in the owner check. The refusals themselves
ask the API server's authorizer and are tested against the real API server (e2e:
test_intent_grants.py, test_github_loops.py, test_run_policy.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel

from lattice_operator.handlers.admission_policy import (
    APPROVERS_POLICY,
    BINDINGS,
    GRANTS_POLICY,
    MAX_GRANTS,
    MAX_MAPPINGS,
    POLICIES,
    RUN_OWNER_POLICY,
    admission_policies,
    run_owner_rule,
)

CRDS = Path(__file__).resolve().parents[3] / "crds"


def _spec(policies: dict[str, list[dict[str, Any]]], check: str) -> dict[str, Any]:
    (policy,) = [p for p in policies[POLICIES] if p["metadata"]["name"] == f"{check}.lattice.dev"]
    spec: dict[str, Any] = policy["spec"]
    return spec


def _variables(
    check: str, operation: str, new: dict[str, Any], old: dict[str, Any] | None
) -> dict[str, Any]:
    """The policy's variables in order, each seeing the ones before (as the API server does)."""
    env = celpy.Environment()
    values: dict[str, Any] = {}
    for variable in _spec(admission_policies("lattice.dev", "op"), check)["variables"]:
        activation = {
            "object": json_to_cel(new),
            "oldObject": json_to_cel(old),
            "request": json_to_cel({"operation": operation, "userInfo": {"username": "mallory"}}),
            "variables": json_to_cel(values),
        }
        result = env.program(env.compile(variable["expression"])).evaluate(activation)
        values[variable["name"]] = json.loads(json.dumps(result, default=str))
    return values


def _intent(*grants: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "i", "namespace": "n"}, "spec": {"credentials": list(grants)}}


def _grant(name: str, secret: str) -> dict[str, Any]:
    return {"name": name, "secretKeyRef": {"name": secret, "key": "k"}}


GH, NPM = _grant("gh", "tokens"), _grant("npm", "npm")


@pytest.mark.parametrize(
    ("operation", "new", "old", "added"),
    [
        ("CREATE", _intent(GH), None, ["gh"]),
        ("UPDATE", _intent(GH, NPM), _intent(GH), ["npm"]),
        # Renaming a grant of the same Secret is no new access.
        ("UPDATE", _intent(_grant("github", "tokens")), _intent(GH), []),
        ("UPDATE", _intent(GH), {"metadata": {"name": "i"}, "spec": {}}, ["gh"]),
    ],
)
def test_only_secrets_not_granted_before_are_checked(
    operation: str, new: dict[str, Any], old: dict[str, Any] | None, added: list[str]
) -> None:
    values = _variables(GRANTS_POLICY, operation, new, old)
    assert [g["name"] for g in values["added"]] == added


def _repo(*approvers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "r"}, "spec": {"approval": {"approvers": list(approvers)}}}


ALICE = {"github": "a", "user": "alice"}
SELF = {"github": "m", "user": "mallory"}
SELF_WITH_GROUPS = {"github": "m", "user": "mallory", "groups": ["ops"]}


@pytest.mark.parametrize(
    ("operation", "new", "old", "added"),
    [
        ("CREATE", _repo(ALICE), None, ["a"]),
        ("CREATE", _repo(SELF), None, []),  # one's own account to oneself needs nothing
        ("CREATE", _repo(SELF_WITH_GROUPS), None, ["m"]),  # a group does
        ("UPDATE", _repo(ALICE, SELF_WITH_GROUPS), _repo(ALICE), ["m"]),
        ("UPDATE", _repo({**ALICE, "user": "bob"}), _repo(ALICE), ["a"]),  # changed: again
        ("UPDATE", _repo(ALICE), {"metadata": {"name": "r"}, "spec": {}}, ["a"]),
    ],
)
def test_only_new_or_changed_mappings_are_checked(
    operation: str, new: dict[str, Any], old: dict[str, Any] | None, added: list[str]
) -> None:
    values = _variables(APPROVERS_POLICY, operation, new, old)
    assert [m["github"] for m in values["added"]] == added


def _max_items(crd: str, *path: str) -> int:
    schema = yaml.safe_load((CRDS / crd).read_text())["spec"]["versions"][0]["schema"]
    node = schema["openAPIV3Schema"]
    for key in path:
        node = node["properties"][key]
    return int(node["maxItems"])


def test_every_position_the_schema_allows_has_its_validation() -> None:
    """A refusal's message cannot ask the authorizer, so each list position has its own
    validation: as many as the CRD lets the list hold, or one would go unchecked."""
    policies = admission_policies("lattice.dev", "op")
    assert _max_items("lattice.dev_intents.yaml", "spec", "credentials") == MAX_GRANTS
    assert (
        _max_items("lattice.dev_githubrepositories.yaml", "spec", "approval", "approvers")
        == MAX_MAPPINGS
    )
    grants = _spec(policies, GRANTS_POLICY)["validations"]
    assert len(grants) == MAX_GRANTS
    assert f"variables.added[{MAX_GRANTS - 1}]" in grants[-1]["expression"]
    approvers = _spec(policies, APPROVERS_POLICY)["validations"]
    assert len(approvers) == 2 * MAX_MAPPINGS  # its user, then its groups
    assert "resource('users')" in approvers[0]["expression"]
    assert "resource('groups')" in approvers[1]["expression"]


def test_each_policy_is_bound_to_deny_and_fails_closed() -> None:
    policies = admission_policies("lattice.dev", "op")
    names = [p["metadata"]["name"] for p in policies[POLICIES]]
    assert names == [
        f"{c}.lattice.dev" for c in (RUN_OWNER_POLICY, GRANTS_POLICY, APPROVERS_POLICY)
    ]
    assert [b["spec"] for b in policies[BINDINGS]] == [
        {"policyName": n, "validationActions": ["Deny"]} for n in names
    ]
    for policy in policies[POLICIES]:
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert {v["reason"] for v in policy["spec"]["validations"]} == {"Forbidden"}


def test_only_the_operators_identity_may_make_an_intent_a_runs_controller() -> None:
    env = celpy.Environment()

    def allows(rule: str, user: str) -> bool:
        program = env.program(env.compile(rule))
        return bool(program.evaluate({"request": json_to_cel({"userInfo": {"username": user}})}))

    rule = run_owner_rule('system:serviceaccount:lattice-system:op"x')
    assert allows(rule, 'system:serviceaccount:lattice-system:op"x')  # quoted, not injected
    assert not allows(rule, "mallory")
    assert not allows(run_owner_rule(None), "anyone")  # identity unknown: nobody
    spec = _spec(admission_policies("lattice.dev", "op"), RUN_OWNER_POLICY)
    assert spec["validations"][0]["expression"] == run_owner_rule("op")
