"""Validation errors in the protocol's shape: every field the table requires, every enum,
paths and writable roots — before anything runs."""

from __future__ import annotations

from typing import Any

import pytest

from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.fileops.executor import check
from lattice_operator.fileops.response import FileOpsResponse, validation_errors

GOOD: dict[str, Any] = {
    "proto": "triflow.fileops.v1",
    "id": "S1",
    "purpose": "execute_step",
    "summary": "do it",
    "done": ["done"],
    "ops": [{"op": "read_file", "path": "a.txt"}],
    "report": {"changedFiles": True, "diffSummary": True, "commandOutputs": "on_failure"},
}


def errors(**change: Any) -> dict[str, str]:
    raw = {**GOOD, **change}
    for key, value in change.items():
        if value is None:
            del raw[key]
    return {e.field: e.error for e in validation_errors(raw)}


def test_a_valid_request_has_no_errors() -> None:
    assert validation_errors(GOOD) == []


@pytest.mark.parametrize("field", ["proto", "id", "purpose", "summary", "done", "ops", "report"])
def test_every_required_field(field: str) -> None:
    assert errors(**{field: None}) == {field: "required field missing"}


def test_enums_and_bounds() -> None:
    assert errors(purpose="do_thing")["purpose"].startswith("invalid value 'do_thing', must be")
    assert "proto" in errors(proto="v2")
    assert "summary" in errors(summary="x" * 101)
    assert "done" in errors(done=[])
    assert "ops" in errors(ops=[])
    assert "report.commandOutputs" in errors(
        report={"changedFiles": True, "diffSummary": True, "commandOutputs": "sometimes"}
    )


def test_an_op_missing_its_fields_names_each_one() -> None:
    found = errors(ops=[{"op": "read_file"}, {"op": "write_file", "path": "x"}])
    assert found == {
        "ops[0].path": "required field missing",
        "ops[1].content": "required field missing",
    }
    assert "ops[0].op" in errors(ops=[{"op": "frobnicate"}])


def test_paths_and_writable_roots_are_checked_before_running() -> None:
    request = FileOpsRequest.model_validate(
        {
            **GOOD,
            "constraints": {"writable_roots": ["src", "/etc"]},
            "ops": [
                {"op": "read_file", "path": "../outside"},
                {"op": "write_file", "path": "docs/x.md", "content": "x"},
                {"op": "write_file", "path": "src/ok.py", "content": "x"},
                {"op": "run", "cmd": "true", "cwd": "/tmp"},
                {
                    "op": "apply_patch",
                    "patch": "*** Begin Patch\n*** Add File: b/x\n+x\n*** End Patch",
                },
            ],
        }
    )
    found = {e.field: e.error for e in check(request)}
    assert set(found) == {
        "constraints.writable_roots[1]",
        "ops[0].path",
        "ops[1].path",
        "ops[3].cwd",
        "ops[4].patch",
    }
    assert "outside the writable roots" in found["ops[1].path"]
    response = FileOpsResponse(id="S1", status="validation_error", errors=check(request))
    wire = response.wire()
    assert wire["status"] == "validation_error"
    assert wire["errors"][0] == {
        "field": "constraints.writable_roots[1]",
        "error": wire["errors"][0]["error"],
    }


def test_each_status_needs_its_fields() -> None:
    with pytest.raises(ValueError, match="requires changed_files, ops, proof"):
        FileOpsResponse(id="x", status="ok")
    with pytest.raises(ValueError, match="requires fail"):
        FileOpsResponse(id="x", status="fail")
    with pytest.raises(ValueError, match="requires split"):
        FileOpsResponse(id="x", status="split")
    with pytest.raises(ValueError, match="requires ask"):
        FileOpsResponse(id="x", status="ask")
