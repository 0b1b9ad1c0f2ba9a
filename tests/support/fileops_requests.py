"""FileOps requests for tests: the fields every request needs, the ops and report as given."""

from __future__ import annotations

from typing import Any

from lattice_operator.api.v1alpha1.fileops import FileOpsRequest

ON_FAILURE = {"changedFiles": True, "diffSummary": True, "commandOutputs": "on_failure"}


def fileops_request(
    ops: list[dict[str, Any]],
    *,
    id: str = "S1",
    purpose: str = "execute_step",
    report: dict[str, Any] | None = None,
    **extra: Any,
) -> FileOpsRequest:
    return FileOpsRequest.model_validate(
        {
            "proto": "triflow.fileops.v1",
            "id": id,
            "purpose": purpose,
            "summary": "test",
            "done": ["it is done"],
            "ops": ops,
            "report": report or ON_FAILURE,
            **extra,
        }
    )
