"""The Run indexes: one parse per version of a Run (handlers/_parsed.py), and only the Runs an
Intent can read kept whole."""

from __future__ import annotations

import copy
from typing import Any, cast

import kopf
import pytest
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.builders import run_name

# handlers/_parsed (the parse behind the Run indexes) is the module under test.
from lattice_operator.handlers._parsed import indexed_run, model_of, per_version
from lattice_operator.handlers.intent import runs_by_name
from tests.support.intent_world import intent
from tests.support.run_harness import run_doc


def _body(doc: dict[str, Any]) -> kopf.Body:
    return kopf.Body(cast(kopf.RawBody, doc))


def _doc(version: str, phase: str | None = None) -> dict[str, Any]:
    doc = run_doc()
    doc["metadata"]["resourceVersion"] = version
    if phase:
        doc["status"] = {"phase": phase}
    return doc


def test_the_same_version_is_parsed_once() -> None:
    first = indexed_run(_body(_doc("7")))
    assert indexed_run(_body(_doc("7"))) is first


def test_a_new_version_is_parsed_again() -> None:
    first = indexed_run(_body(_doc("7")))
    second = indexed_run(_body(_doc("8", phase="Running")))
    assert second is not first
    assert (first.status.phase, second.status.phase) == (None, "Running")


def test_the_model_shares_nothing_with_the_body() -> None:
    doc = _doc("9")
    doc["spec"]["env"] = [{"name": "A", "value": "1"}]
    run = indexed_run(_body(doc))
    doc["spec"]["env"][0]["value"] = "changed"
    assert run.spec.env[0].value == "1"


def test_an_invalid_run_is_a_permanent_error() -> None:
    doc = copy.deepcopy(_doc("10"))
    doc["spec"]["command"] = "not a list"
    with pytest.raises(kopf.PermanentError, match="invalid Run"):
        indexed_run(_body(doc))


async def test_runs_by_name_keeps_only_runs_an_intent_can_read() -> None:
    theirs = _doc("11")
    theirs["metadata"]["name"] = run_name(intent())  # a Run made first under an Intent's name
    mine = _doc("12")
    mine["metadata"]["name"] = "nightly-build"
    assert list(await runs_by_name(_body(theirs))) == [("team", theirs["metadata"]["name"])]
    assert await runs_by_name(_body(mine)) == {}


def test_a_parse_reads_the_same_as_pydantic_and_skips_managed_fields() -> None:
    doc = _doc("10", phase="Running")
    doc["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    body = _body(doc)
    assert model_of(Run, body) == Run.model_validate(copy.deepcopy(doc))
    assert "managedFields" in body["metadata"]  # kopf's body is left as it was
    broken = copy.deepcopy(doc)
    broken["spec"]["command"] = "not a list"
    with pytest.raises(ValidationError, match=r"spec\.command"):
        model_of(Run, _body(broken))


def test_a_view_parses_again_only_when_the_version_moved() -> None:
    calls: list[str] = []

    def parse(body: kopf.Body) -> Run:
        calls.append(body["metadata"]["resourceVersion"])
        return model_of(Run, body)

    view = per_version(parse)
    first = view(_body(_doc("11")))
    assert view(_body(_doc("11"))) is first
    assert view(_body(_doc("12", phase="Running"))).status.phase == "Running"
    assert calls == ["11", "12"]
