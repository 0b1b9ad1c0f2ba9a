"""One minimal valid Intent document per kind, to type-check policy rules against."""

from __future__ import annotations

import functools
from typing import Any

from lattice_operator.policy.document import intent_document

_RUN = {"spriteRef": {"name": "s"}, "command": ["true"]}

_PARAMS: dict[str, dict[str, Any]] = {
    "issue_triage": {"repo": "o/r", "issueNumber": 1},
    "issue_plan_approve": {"repo": "o/r", "issueNumber": 1, "plan": "p"},
    "pr_create_from_plan": {"repo": "o/r", "baseBranch": "main", "plan": "p"},
    "pr_fixup_from_feedback": {"repo": "o/r", "prNumber": 1, "feedback": "f"},
    "sprite_create": {"name": "s", "spec": {"urlAuth": "sprite"}},
    "sprite_task_exec": _RUN,
    "health_detect": {"check": "c", "signal": "s", "severity": "low"},
    "health_remediate": {"remediation": "run_command", "run": _RUN},
    "fileops": {
        "proto": "triflow.fileops.v1",
        "id": "x",
        "purpose": "read_state",
        "summary": "s",
        "done": ["d"],
        "ops": [{"op": "read_file", "path": "a"}],
        "report": {"changedFiles": False, "diffSummary": False, "commandOutputs": "never"},
    },
    "environment_change": {
        "observedFailure": {"phase": "p"},
        "suggestedAdjustment": {"type": "escalate_to_human", "details": {}},
        "confidence": 0.5,
        "scope": "repo_specific",
    },
    "fly_machines": {"app": "a", "action": "start", "machineId": "m"},
    "checkpoint_restore": {"sprite": "s", "checkpointId": "v1"},
}


@functools.cache
def _build() -> tuple[dict[str, Any], ...]:
    from lattice_operator.api.v1alpha1.intent import INTENT_KINDS, IntentSpec, params_field

    docs = []
    for kind in INTENT_KINDS:
        spec = IntentSpec.model_validate(
            {
                "kind": kind,
                "params": {params_field(kind): _PARAMS[kind]},
                "proposedBy": {"type": "user"},
                **({"subject": {"type": "sprite", "ref": "s"}} if kind == "fileops" else {}),
            }
        )
        docs.append(
            intent_document(
                {"name": "sample", "namespace": "default", "labels": {"a": "b"}},
                spec.model_dump(mode="json", by_alias=True, exclude_none=True),
            )
        )
    return tuple(docs)


def sample_intents() -> tuple[dict[str, Any], ...]:
    """A sample Intent document of every kind (validated by the models)."""
    return _build()
