"""The FileOps request (triflow.fileops.v1) carried by a `fileops` Intent."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from lattice_operator.api.v1alpha1._base import PRESERVE_UNKNOWN, ApiModel, cel

FileOpName = Literal[
    "read_file",
    "write_file",
    "write_json",
    "apply_patch",
    "run",
    "triflow_plan_init",
    "triflow_state_preflight",
    "triflow_state_apply_split",
    "triflow_state_finalize",
    "triflow_state_mark_blocked",
    "triflow_state_append_steps",
]

# Required fields per op, as the protocol's ops table lists them (wire names).
REQUIRED_OP_FIELDS: dict[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "write_file": ("path", "content"),
    "write_json": ("path", "value"),
    "apply_patch": ("patch",),
    "run": ("cmd",),
    "triflow_plan_init": ("plan",),
    "triflow_state_preflight": ("path",),
    "triflow_state_apply_split": ("stepIndex", "substeps"),
    "triflow_state_finalize": ("verification",),
    "triflow_state_mark_blocked": ("reason",),
    "triflow_state_append_steps": ("steps",),
}

ShortText = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
PathText = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


def _op_rules() -> list[dict[str, str]]:
    rules = []
    for op, fields in REQUIRED_OP_FIELDS.items():
        cond = " && ".join(f"has(self.{f})" for f in fields)
        rules.append(
            {
                "rule": f"self.op != '{op}' || ({cond})",
                "message": f"op {op} requires {', '.join(fields)}",
            }
        )
    return rules


class FileOp(ApiModel):
    """One operation; which fields are required depends on `op`."""

    model_config = ConfigDict(json_schema_extra=cel(*_op_rules()))

    op: FileOpName
    """The operation."""
    path: PathText | None = None
    """File path, relative to the working root."""
    content: str | None = Field(default=None, max_length=262144)
    """Full file content for write_file."""
    value: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """JSON object for write_json (an object, so that admission rules can see it)."""
    patch: str | None = Field(default=None, max_length=262144)
    """An apply_patch-format patch."""
    cmd: str | None = Field(default=None, max_length=8192)
    """Shell command for run."""
    cwd: PathText | None = None
    """Working directory for run."""
    timeout_ms: int | None = Field(default=None, ge=1, le=86_400_000)
    """Timeout for run, in milliseconds."""
    plan: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """The plan for triflow_plan_init."""
    max_attempts: int | None = Field(default=None, ge=1, le=10)
    """For triflow_state_preflight."""
    step_index: int | None = Field(default=None, ge=0)
    """For triflow_state_apply_split."""
    substeps: list[ShortText] | None = Field(default=None, min_length=3, max_length=7)
    """For triflow_state_apply_split: 3 to 7 titles."""
    verification: ShortText | None = None
    """For triflow_state_finalize."""
    changed_files: list[PathText] | None = Field(default=None, max_length=256)
    """For triflow_state_finalize."""
    reason: ShortText | None = None
    """For triflow_state_mark_blocked."""
    steps: list[ShortText] | None = Field(default=None, min_length=1, max_length=2)
    """For triflow_state_append_steps: 1 or 2 titles."""
    max_allowed: int | None = Field(default=None, ge=1, le=10)
    """For triflow_state_append_steps."""

    @model_validator(mode="after")
    def _required_fields(self) -> FileOp:
        wire = self.model_dump(by_alias=True, exclude_none=True)
        missing = [f for f in REQUIRED_OP_FIELDS[self.op] if f not in wire]
        if missing:
            raise ValueError(f"op {self.op} requires {', '.join(REQUIRED_OP_FIELDS[self.op])}")
        return self


class FileOpsConstraints(ApiModel):
    """Execution constraints."""

    model_config = ConfigDict(alias_generator=None)

    no_network: bool = False
    """Disallow network access."""
    writable_roots: list[PathText] = Field(default_factory=lambda: ["."], max_length=32)
    """Paths writes are allowed under."""
    max_attempts: int = Field(default=2, ge=1, le=10)
    """Maximum attempts."""


class FileOpsReport(ApiModel):
    """What the response should report."""

    changed_files: bool
    """Report changed files."""
    diff_summary: bool
    """Report a diff summary."""
    command_outputs: Literal["on_failure", "always", "never"]
    """When to include command outputs."""


class FileOpsRequest(ApiModel):
    """A FileOpsREQ: an explicit list of file operations with done conditions."""

    proto: Literal["triflow.fileops.v1"]
    """Always triflow.fileops.v1."""
    id: str = Field(min_length=1, max_length=128)
    """Unique request id."""
    purpose: Literal[
        "execute_step", "write_plan_files", "finalize_step", "read_state", "split_step"
    ]
    """Why the request is made."""
    summary: str = Field(min_length=1, max_length=100)
    """One sentence for humans (at most 100 characters)."""
    constraints: FileOpsConstraints = Field(default_factory=FileOpsConstraints)
    """Execution constraints."""
    done: list[ShortText] = Field(min_length=1, max_length=32)
    """Done conditions (at least one)."""
    ops: list[FileOp] = Field(min_length=1, max_length=64)
    """Operations (at least one)."""
    report: FileOpsReport
    """Report configuration."""
