"""kopf's diff-base is kept only for the kinds whose handlers read it (Sprites, policies,
GitHub repositories, HealthChecks), never for Runs and Intents."""

from __future__ import annotations

from typing import Any

import kopf

# DiffBase is the kopf setting under test; it lives in the startup handlers' private module.
from lattice_operator.handlers._startup import DiffBase


def _body(kind: str, **extra: Any) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "ns", "annotations": {}, **extra},
            "spec": {"a": 1},
            "status": {"phase": "Running"},
        }
    )


def _storage() -> DiffBase:
    return DiffBase(prefix="lattice.dev", key="last-handled-configuration")


def test_runs_and_intents_have_an_empty_essence_never_stored() -> None:
    storage = _storage()
    for kind in ("Run", "Intent"):
        body = _body(kind)
        assert storage.build(body=body) == {}
        assert storage.fetch(body=body) == {}  # the same: kopf sees no change, never a creation
        patch = kopf.Patch()
        storage.store(body=body, patch=patch, essence=storage.build(body=body))
        assert not patch  # no PATCH of kopf's own


def test_an_old_runs_stored_annotation_is_not_read() -> None:
    stored = {"lattice.dev/last-handled-configuration": '{"spec":{"a":0}}'}
    assert _storage().fetch(body=_body("Run", annotations=stored)) == {}


def test_other_kinds_keep_kopfs_diff_base() -> None:
    storage = _storage()
    body = _body("Sprite")
    essence = storage.build(body=body)
    assert essence == {"spec": {"a": 1}}
    assert storage.fetch(body=body) is None  # never stored: a creation
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=essence)
    assert "lattice.dev/last-handled-configuration" in patch["metadata"]["annotations"]


def test_a_kind_of_the_same_name_from_another_group_is_not_skipped() -> None:
    body = kopf.Body({"apiVersion": "other.io/v1", "kind": "Run", "metadata": {}, "spec": {}})
    assert _storage().build(body=body) == {"spec": {}}
