"""The webhook configurations the operator registers: paths, fail-closed, and which writes
reach the approval webhook (the matchConditions expression, evaluated with CEL here)."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from lattice_operator.handlers.admission_config import (
    APPROVAL_HANDLER,
    APPROVAL_MATCH,
    GRANTS_HANDLER,
    GRANTS_MATCH,
    MUTATING,
    POLICY_HANDLER,
    RUN_OWNER_MATCH,
    RUN_POLICY_MATCH,
    VALIDATING,
    webhook_configurations,
)
from lattice_operator.reconcilers.grants import new_secret_grants

CLIENT = {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="}


def test_each_webhook_points_at_its_handler_and_fails_closed() -> None:
    configs = webhook_configurations("lattice.dev", CLIENT)
    (approval,) = configs[MUTATING]["webhooks"]
    policy = configs[VALIDATING]["webhooks"][0]
    assert approval["clientConfig"] == {
        "url": f"https://127.0.0.1:9443/{APPROVAL_HANDLER}",
        "caBundle": "Q0E=",
    }
    assert policy["clientConfig"]["url"] == f"https://127.0.0.1:9443/{POLICY_HANDLER}"
    assert approval["rules"][0]["resources"] == ["intents"]
    assert policy["rules"][0]["resources"] == ["intentpolicies"]
    assert {approval["failurePolicy"], policy["failurePolicy"]} == {"Fail"}
    assert approval["matchConditions"][0]["expression"] == APPROVAL_MATCH
    assert "matchConditions" not in policy  # every policy write is checked
    assert CLIENT == {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="}  # not mutated


def test_a_service_reference_gets_the_handler_path() -> None:
    configs = webhook_configurations(
        "x", {"service": {"name": "op", "namespace": "lattice-system", "path": "/hooks/"}}
    )
    service = configs[MUTATING]["webhooks"][0]["clientConfig"]["service"]
    assert service == {"name": "op", "namespace": "lattice-system", "path": "/hooks/stamp-approval"}


def _sends(operation: str, new: dict[str, str] | None, old: dict[str, str] | None) -> bool:
    def obj(annotations: dict[str, str] | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "i"}
        if annotations is not None:
            meta["annotations"] = annotations
        return {"metadata": meta}

    env = celpy.Environment()
    program = env.program(env.compile(APPROVAL_MATCH))
    activation = {
        "object": json_to_cel(obj(new)),
        "oldObject": json_to_cel(obj(old) if operation == "UPDATE" else None),
        "request": json_to_cel({"operation": operation}),
    }
    return bool(program.evaluate(activation))


REQUEST = {"approval.lattice.dev/request": "{}"}
RECORDS = {"approval.lattice.dev/records": "[]"}
OTHER = {"note": "x"}


@pytest.mark.parametrize(
    ("operation", "new", "old", "sent"),
    [
        ("CREATE", None, None, False),
        ("CREATE", OTHER, None, False),
        ("CREATE", REQUEST, None, True),
        ("CREATE", RECORDS, None, True),  # a forged record at creation
        ("UPDATE", OTHER, None, False),
        ("UPDATE", OTHER, OTHER, False),
        ("UPDATE", REQUEST, None, True),
        ("UPDATE", {**RECORDS, **OTHER}, RECORDS, True),  # any edit of an approved Intent
        ("UPDATE", None, RECORDS, True),  # records removed
        ("UPDATE", OTHER, RECORDS, True),
    ],
)
def test_only_writes_touching_approvals_reach_the_webhook(
    operation: str, new: dict[str, str] | None, old: dict[str, str] | None, sent: bool
) -> None:
    assert _sends(operation, new, old) is sent


def _grants_sent(operation: str, new: list[Any] | None, old: list[Any] | None) -> bool:
    def obj(credentials: list[Any] | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"kind": "sprite_task_exec"}
        if credentials is not None:
            spec["credentials"] = credentials
        return {"metadata": {"name": "i"}, "spec": spec}

    env = celpy.Environment()
    program = env.program(env.compile(GRANTS_MATCH))
    activation = {
        "object": json_to_cel(obj(new)),
        "oldObject": json_to_cel(obj(old) if operation == "UPDATE" else None),
        "request": json_to_cel({"operation": operation}),
    }
    return bool(program.evaluate(activation))


GH = {"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}
NPM = {"name": "npm", "secretKeyRef": {"name": "npm", "key": "token"}}


@pytest.mark.parametrize(
    ("operation", "new", "old", "sent"),
    [
        ("CREATE", None, None, False),
        ("CREATE", [], None, False),
        ("CREATE", [GH], None, True),
        ("UPDATE", [GH], None, True),
        ("UPDATE", [GH], [GH], False),  # labels, annotations, cancel: no check needed
        ("UPDATE", [GH, NPM], [GH], True),
        ("UPDATE", [], [GH], False),  # removing a grant takes nothing
    ],
)
def test_only_writes_adding_grants_reach_the_grants_webhook(
    operation: str, new: list[Any] | None, old: list[Any] | None, sent: bool
) -> None:
    assert _grants_sent(operation, new, old) is sent


def test_grants_webhook_is_registered_and_fails_closed() -> None:
    webhooks = webhook_configurations("lattice.dev", CLIENT)[VALIDATING]["webhooks"]
    (grants,) = [w for w in webhooks if w["clientConfig"]["url"].endswith(GRANTS_HANDLER)]
    assert grants["rules"][0]["resources"] == ["intents"]
    assert grants["failurePolicy"] == "Fail"
    assert grants["matchConditions"][0]["expression"] == GRANTS_MATCH


def test_new_secret_grants_names_only_secrets_not_granted_before() -> None:
    assert new_secret_grants({"credentials": [GH]}, None) == [(0, "gh", "tokens")]
    assert new_secret_grants({"credentials": [GH, NPM]}, {"credentials": [GH]}) == [
        (1, "npm", "npm")
    ]
    # Renaming a grant of the same Secret is no new access.
    renamed = {"name": "github", "secretKeyRef": {"name": "tokens", "key": "gh"}}
    assert new_secret_grants({"credentials": [renamed]}, {"credentials": [GH]}) == []
    assert new_secret_grants({}, {"credentials": [GH]}) == []


def _run_owner_sent(operation: str, new: list[Any] | None, old: list[Any] | None) -> bool:
    def obj(owners: list[Any] | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "r"}
        if owners is not None:
            meta["ownerReferences"] = owners
        return {"metadata": meta, "spec": {}}

    env = celpy.Environment()
    program = env.program(env.compile(RUN_OWNER_MATCH))
    activation = {
        "object": json_to_cel(obj(new)),
        "oldObject": json_to_cel(obj(old) if operation == "UPDATE" else None),
        "request": json_to_cel({"operation": operation}),
    }
    return bool(program.evaluate(activation))


def _owner(kind: str, *, controller: bool | None = True) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": "lattice.dev/v1alpha1", "kind": kind, "name": "i"}
    ref["uid"] = "u"
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(
    ("operation", "new", "old", "sent"),
    [
        ("CREATE", None, None, False),
        ("CREATE", [_owner("Intent")], None, True),
        ("CREATE", [_owner("Intent", controller=False)], None, False),
        ("CREATE", [_owner("Intent", controller=None)], None, False),
        ("CREATE", [_owner("Sprite")], None, False),
        ("UPDATE", [_owner("Intent")], None, True),  # an Intent made controller afterwards
        ("UPDATE", [_owner("Intent")], [_owner("Intent")], False),  # e.g. status or labels
        ("UPDATE", None, [_owner("Intent")], False),  # the garbage collector orphaning it
    ],
)
def test_only_writes_making_an_intent_a_runs_controller_are_checked(
    operation: str, new: list[Any] | None, old: list[Any] | None, sent: bool
) -> None:
    assert _run_owner_sent(operation, new, old) is sent


def _run_policy_sent(owners: list[Any] | None) -> bool:
    meta: dict[str, Any] = {"name": "r"}
    if owners is not None:
        meta["ownerReferences"] = owners
    env = celpy.Environment()
    program = env.program(env.compile(RUN_POLICY_MATCH))
    return bool(program.evaluate({"object": json_to_cel({"metadata": meta, "spec": {}})}))


def _foreign(api_version: str) -> dict[str, Any]:
    return _owner("Intent") | {"apiVersion": api_version}


@pytest.mark.parametrize(
    "owners",
    [
        None,
        [_owner("Intent")],
        [_owner("Intent", controller=False)],
        [_owner("Sprite")],
        [_foreign("evil.example/v1")],
        [_foreign("lattice.dev.evil.example/v1alpha1")],
        [_foreign("v1")],
        [_foreign("evil.example/v1"), _owner("Sprite", controller=False)],
    ],
)
def test_every_run_create_meets_the_owner_check_or_the_run_policy_check(
    owners: list[Any] | None,
) -> None:
    """A Run our Intent controls is the operator's own write (check-run-owner); every other
    Run, a controller of kind Intent in another group included, meets check-run-policy."""
    ours = bool(owners) and owners[0] == _owner("Intent")
    assert _run_owner_sent("CREATE", owners, None) is ours
    assert _run_policy_sent(owners) is not ours
