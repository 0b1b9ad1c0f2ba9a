"""Invalid objects the API server must refuse, each naming the field it refuses.

Shared by the unit tests (the pydantic models refuse the same objects) and the
e2e tests (the real API server refuses them at admission).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"

PLURALS = {
    "Sprite": "sprites",
    "Run": "runs",
    "Intent": "intents",
    "IntentPolicy": "intentpolicies",
    "HealthCheck": "healthchecks",
    "GitHubRepository": "githubrepositories",
    "SpriteCheckpoint": "spritecheckpoints",
}


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (list indexes as numbers); value DELETE removes the key."""
    parts = path.split(".")
    node: Any = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


DELETE = object()


@dataclass(frozen=True)
class Case:
    """One invalid object: a valid sample with `changes` applied."""

    id: str
    sample: str
    changes: dict[str, Any]
    field: str
    """The field path the refusal must name (as the API server prints it)."""
    message: str
    """A fragment of the refusal's reason."""
    models_refuse: bool = True
    """The pydantic models refuse it too (false only for rules the models cannot see)."""

    def body(self, name: str) -> dict[str, Any]:
        return build(self.sample, name, self.changes)

    @property
    def kind(self) -> str:
        return str(sample(self.sample)["kind"])


@dataclass(frozen=True)
class UpdateCase:
    """A valid object created, then changed in a way a transition rule refuses."""

    id: str
    sample: str
    changes: dict[str, Any]
    field: str
    message: str
    initial: dict[str, Any] = field(default_factory=dict)

    def bodies(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the object to create, the same object with the refused change)."""
        first = build(self.sample, name, self.initial)
        return first, build(self.sample, name, {**self.initial, **self.changes})

    @property
    def kind(self) -> str:
        return str(sample(self.sample)["kind"])


def build(sample_name: str, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """A sample named `name` with dotted-path changes applied."""
    doc = copy.deepcopy(sample(sample_name))
    doc["metadata"] = {"name": name}
    for path, value in changes.items():
        _set(doc, path, value)
    return doc


LONG = "x" * 9000

CREATE_CASES: tuple[Case, ...] = (
    Case(
        "sprite-urlauth-enum",
        "sprite.yaml",
        {"spec.urlAuth": "private"},
        "spec.urlAuth",
        "Unsupported value",
    ),
    Case(
        "sprite-name-pattern",
        "sprite.yaml",
        {"spec.spriteName": "Bad_Name"},
        "spec.spriteName",
        "should match",
    ),
    Case(
        "sprite-name-too-long",
        "sprite.yaml",
        {"spec.spriteName": "a" * 64},
        "spec.spriteName",
        "Too long",
    ),
    Case(
        "sprite-deletion-policy",
        "sprite.yaml",
        {"spec.deletionPolicy": "Keep"},
        "spec.deletionPolicy",
        "Unsupported value",
    ),
    Case(
        "sprite-rule-domain-and-include",
        "sprite.yaml",
        {
            "spec.networkPolicy.rules.0": {
                "include": "defaults",
                "domain": "a.example",
                "action": "allow",
            }
        },
        "spec.networkPolicy.rules[0]",
        "exactly one of domain or include",
    ),
    Case(
        "sprite-rule-domain-without-action",
        "sprite.yaml",
        {"spec.networkPolicy.rules.1": {"domain": "a.example"}},
        "spec.networkPolicy.rules[1].action",
        "action is required",
    ),
    Case(
        "sprite-two-http-ports",
        "sprite.yaml",
        {
            "spec.services": [
                {"name": "a", "cmd": "a", "httpPort": 8000},
                {"name": "b", "cmd": "b", "httpPort": 8001},
            ]
        },
        "spec.services",
        "at most one service may set httpPort",
    ),
    Case(
        "sprite-http-port-range",
        "sprite.yaml",
        {"spec.services": [{"name": "a", "cmd": "a", "httpPort": 70000}]},
        "spec.services[0].httpPort",
        "less than or equal to 65535",
    ),
    Case(
        "sprite-too-many-labels",
        "sprite.yaml",
        {"spec.labels": [f"l{i}" for i in range(33)]},
        "spec.labels",
        "must have at most 32 items",
    ),
    Case("sprite-missing-spec", "sprite.yaml", {"spec": DELETE}, "spec", "Required value"),
    Case(
        "run-missing-sprite-ref",
        "run.yaml",
        {"spec.spriteRef": DELETE},
        "spec.spriteRef",
        "Required value",
    ),
    Case(
        "run-empty-command",
        "run.yaml",
        {"spec.command": []},
        "spec.command",
        "should have at least 1 items",
    ),
    Case(
        "run-resume-without-checkpoint",
        "run.yaml",
        {"spec.resume": {"inputs": {"approved": True}}},
        "spec.resume.checkpointId",
        "resume.checkpointId is required",
    ),
    Case(
        "run-tty-needs-exec-ws",
        "run.yaml",
        {"spec.mode": "exec_post", "spec.tty": True},
        "spec.tty",
        "tty needs mode exec_ws",
    ),
    Case(
        "run-unknown-mode",
        "run.yaml",
        {"spec.mode": "ssh"},
        "spec.mode",
        "Unsupported value",
    ),
    Case(
        "run-timeout-zero",
        "run.yaml",
        {"spec.timeoutSeconds": 0},
        "spec.timeoutSeconds",
        "greater than or equal to 1",
    ),
    Case(
        "run-too-many-retries",
        "run.yaml",
        {"spec.retries": 11},
        "spec.retries",
        "less than or equal to 10",
    ),
    Case(
        "run-relative-working-dir",
        "run.yaml",
        {"spec.workingDir": "workspace"},
        "spec.workingDir",
        "should match",
    ),
    Case(
        "run-env-name",
        "run.yaml",
        {"spec.env": [{"name": "1BAD", "value": "x"}]},
        "spec.env[0].name",
        "should match",
    ),
    Case("run-long-arg", "run.yaml", {"spec.command": ["sh", LONG]}, "spec.command[1]", "Too long"),
    Case(
        "run-sprite-ref-name",
        "run.yaml",
        {"spec.spriteRef.name": "Not A Name"},
        "spec.spriteRef.name",
        "should match",
    ),
    Case(
        "intent-unknown-kind",
        "intent-sprite-task-exec.yaml",
        {"spec.kind": "delete_everything"},
        "spec.kind",
        "Unsupported value",
    ),
    Case(
        "intent-params-mismatch",
        "intent-sprite-task-exec.yaml",
        {"spec.kind": "issue_triage"},
        "spec.params.issueTriage",
        "params.issueTriage must be set when kind is issue_triage",
    ),
    Case(
        "intent-unknown-action",
        "intent-sprite-task-exec.yaml",
        {"spec.allowedActions": ["DELETE_REPO"]},
        "spec.allowedActions[0]",
        "Unsupported value",
    ),
    Case(
        "intent-confidence-range",
        "intent-environment-change.yaml",
        {"spec.params.environmentChange.confidence": 1.5},
        "spec.params.environmentChange.confidence",
        "less than or equal to 1",
    ),
    Case(
        "intent-fly-start-without-machine",
        "intent-fly-machines.yaml",
        {"spec.params.flyMachines.machineId": DELETE},
        "spec.params.flyMachines.machineId",
        "actions start and stop take machineId, not machine",
    ),
    Case(
        "intent-fly-bad-app-name",
        "intent-fly-machines.yaml",
        {"spec.params.flyMachines.app": "Bad_App"},
        "spec.params.flyMachines.app",
        "should match",
    ),
    Case(
        "intent-restore-both-checkpoints",
        "intent-checkpoint-restore.yaml",
        {"spec.params.checkpointRestore.checkpointId": "v1"},
        "spec.params.checkpointRestore",
        "exactly one of checkpointId or checkpoint must be set",
    ),
    Case(
        "intent-restore-bad-checkpoint-id",
        "intent-checkpoint-restore.yaml",
        {
            "spec.params.checkpointRestore.checkpoint": DELETE,
            "spec.params.checkpointRestore.checkpointId": "-v1",
        },
        "spec.params.checkpointRestore.checkpointId",
        "should match",
    ),
    Case(
        "spritecheckpoint-sprite-required",
        "spritecheckpoint.yaml",
        {"spec.spriteRef": DELETE},
        "spec.spriteRef",
        "Required value",
    ),
    Case(
        "spritecheckpoint-deletion-policy",
        "spritecheckpoint.yaml",
        {"spec.deletionPolicy": "Keep"},
        "spec.deletionPolicy",
        "Unsupported value",
    ),
    Case(
        "spritecheckpoint-comment-too-long",
        "spritecheckpoint.yaml",
        {"spec.comment": "c" * 1025},
        "spec.comment",
        "Too long",
    ),
    Case(
        "sprite-checkpoint-retention-range",
        "sprite.yaml",
        {"spec.checkpoints.retention": 0},
        "spec.checkpoints.retention",
        "greater than or equal to 1",
    ),
    Case(
        "intent-fileops-summary-too-long",
        "intent-fileops.yaml",
        {"spec.params.fileops.summary": "s" * 101},
        "spec.params.fileops.summary",
        "Too long",
    ),
    Case(
        "intent-fileops-op-missing-field",
        "intent-fileops.yaml",
        {"spec.params.fileops.ops.1": {"op": "write_file", "path": "todo.md"}},
        "spec.params.fileops.ops[1]",
        "op write_file requires path, content",
    ),
    Case(
        "intent-fileops-without-its-sprite",
        "intent-fileops.yaml",
        {"spec.subject": {"type": "repository", "ref": "org/repo"}},
        "spec.subject",
        "a fileops Intent names the Sprite it works in",
    ),
    Case(
        "intent-credential-key",
        "intent-sprite-task-exec.yaml",
        {
            "spec.credentials": [
                {"name": "gh", "secretKeyRef": {"name": "tokens", "key": "bad key!"}}
            ]
        },
        "spec.credentials[0].secretKeyRef.key",
        "should match",
    ),
    Case(
        "intent-repo-pattern",
        "intent-issue-triage.yaml",
        {"spec.params.issueTriage.repo": "not-a-repo"},
        "spec.params.issueTriage.repo",
        "should match",
    ),
    Case(
        "intent-proposer-type",
        "intent-sprite-task-exec.yaml",
        {"spec.proposedBy.type": "robot"},
        "spec.proposedBy.type",
        "Unsupported value",
    ),
    Case(
        "healthcheck-schedule-shape",
        "healthcheck.yaml",
        {"spec.schedule": "every five minutes"},
        "spec.schedule",
        "should match",
    ),
    Case(
        "healthcheck-concurrency-policy",
        "healthcheck.yaml",
        {"spec.concurrencyPolicy": "Sometimes"},
        "spec.concurrencyPolicy",
        "Unsupported value",
    ),
    Case(
        "healthcheck-history-limit",
        "healthcheck.yaml",
        {"spec.failedHistoryLimit": 1000},
        "spec.failedHistoryLimit",
        "less than or equal to 100",
    ),
    Case(
        "healthcheck-name-length",
        "healthcheck.yaml",
        {"metadata.name": "a" * 53},
        "metadata.name",
        "no more than 52 characters",
        models_refuse=False,
    ),
    Case(
        "healthcheck-probe-required",
        "healthcheck.yaml",
        {"spec.probe": DELETE},
        "spec.probe",
        "Required value",
    ),
)

UPDATE_CASES: tuple[UpdateCase, ...] = (
    UpdateCase(
        "sprite-name-immutable",
        "sprite.yaml",
        {"spec.spriteName": "renamed"},
        "spec.spriteName",
        "spriteName is immutable",
        initial={"spec.spriteName": "original"},
    ),
    UpdateCase(
        "run-command-immutable",
        "run.yaml",
        {"spec.command": ["true"]},
        "spec.command",
        "command is immutable",
    ),
    UpdateCase(
        "run-mode-immutable",
        "run.yaml",
        {"spec.mode": "service"},
        "spec.mode",
        "mode is immutable",
        initial={"spec.mode": "exec_post"},
    ),
    UpdateCase(
        "spritecheckpoint-sprite-immutable",
        "spritecheckpoint.yaml",
        {"spec.spriteRef.name": "other"},
        "spec.spriteRef",
        "spriteRef is immutable",
    ),
    UpdateCase(
        "run-cancel-irreversible",
        "run.yaml",
        {"spec.cancel": False},
        "spec.cancel",
        "cancel cannot be undone",
        initial={"spec.cancel": True},
    ),
)

# Fields the API server silently prunes because no schema declares them.
PRUNED: tuple[tuple[str, str], ...] = (
    ("sprite.yaml", "spec.bogusField"),
    ("run.yaml", "spec.spriteRef.extra"),
    ("intent-sprite-task-exec.yaml", "spec.params.spriteTaskExec.notAField"),
)
