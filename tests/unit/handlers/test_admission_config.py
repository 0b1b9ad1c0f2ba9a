"""The webhook configurations the operator registers: paths, fail-closed, and which writes
reach each webhook or admission policy (the matchConditions expressions, evaluated with CEL
here)."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from lattice_operator.handlers.admission_config import (
    APPROVAL_HANDLER,
    APPROVAL_MATCH,
    HEALTH_CHECK_HANDLER,
    MUTATING,
    POLICY_HANDLER,
    RUN_POLICY_HANDLER,
    RUN_POLICY_MATCH,
    SPEC_CHANGED_MATCH,
    VALIDATING,
    webhook_configurations,
)
from lattice_operator.handlers.admission_policy import GRANTS_MATCH, RUN_OWNER_MATCH

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
    assert policy["matchConditions"][0]["expression"] == SPEC_CHANGED_MATCH
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
def test_only_writes_adding_grants_reach_the_grants_policy(
    operation: str, new: list[Any] | None, old: list[Any] | None, sent: bool
) -> None:
    assert _grants_sent(operation, new, old) is sent


def test_only_the_checks_that_read_more_than_the_request_are_webhooks() -> None:
    """Who may make an Intent a Run's controller, grant a Secret or map an approver is the
    API server's own business (admission_policy): no webhook is called for them."""
    configs = webhook_configurations("lattice.dev", CLIENT)
    paths = [
        w["clientConfig"]["url"].rsplit("/", 1)[1]
        for plural in (MUTATING, VALIDATING)
        for w in configs[plural]["webhooks"]
    ]
    assert paths == [APPROVAL_HANDLER, POLICY_HANDLER, RUN_POLICY_HANDLER, HEALTH_CHECK_HANDLER]


def _spec_changed(operation: str, new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(SPEC_CHANGED_MATCH))
    activation = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"operation": operation}),
    }
    return bool(program.evaluate(activation))


def test_policy_and_healthcheck_webhooks_see_only_creates_and_spec_changes() -> None:
    spec = {"metadata": {"name": "p"}, "spec": {"rules": []}}
    labelled = {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"rules": []}}
    changed = {"metadata": {"name": "p"}, "spec": {"rules": [{"name": "r"}]}}
    assert _spec_changed("CREATE", spec, None)
    assert not _spec_changed("UPDATE", labelled, spec)  # finalizers, labels, annotations
    assert _spec_changed("UPDATE", changed, spec)
    assert _spec_changed("UPDATE", {"metadata": {"name": "p"}}, spec)  # no spec: checked


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
    ours = owners is not None and bool(owners) and owners[0] == _owner("Intent")
    assert _run_owner_sent("CREATE", owners, None) is ours
    assert _run_policy_sent(owners) is not ours
