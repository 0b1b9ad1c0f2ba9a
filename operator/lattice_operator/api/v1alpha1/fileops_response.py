"""FileOpsRES, exactly as the protocol shows it: what the executor answers (fileops/), and
what an Intent's `status.fileops.response` holds (`StoredFileOpsResponse`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Status = Literal["ok", "ask", "fail", "split", "validation_error"]


class _Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class OpResult(_Wire):
    op_index: int = Field(alias="opIndex", ge=0)
    status: Literal["ok", "fail", "skipped"]
    summary: str = Field(max_length=1024)


class CommandProof(_Wire):
    cmd: str
    exit_code: int | None = Field(default=None, alias="exitCode")
    """None: the command did not finish (killed at its timeout); the wire form omits it."""
    stdout: str = ""
    stderr: str = ""
    stdout_ref: dict[str, Any] | None = Field(default=None, alias="stdoutRef")
    """Where the whole output is when `stdout` holds only its end (path, bytes, sha256)."""
    stderr_ref: dict[str, Any] | None = Field(default=None, alias="stderrRef")


class Proof(_Wire):
    commands: list[CommandProof] = Field(default_factory=list)
    notes: str = ""


class Split(_Wire):
    substeps: list[str] = Field(default_factory=list)


class Ask(_Wire):
    questions: list[str] = Field(default_factory=list)


class Fail(_Wire):
    reason: str = Field(max_length=1024)
    hint: str = Field(default="", max_length=1024)


class FieldError(_Wire):
    field: str
    error: str


class FileDiff(_Wire):
    path: str
    added: int
    removed: int


class FileOpsResponse(_Wire):
    proto: Literal["triflow.fileops.v1"] = "triflow.fileops.v1"
    id: str
    status: Status
    changed_files: list[str] | None = Field(default=None, alias="changedFiles")
    diff_summary: list[FileDiff] | None = Field(default=None, alias="diffSummary")
    data: dict[str, Any] | None = None
    ops: list[OpResult] | None = None
    proof: Proof | None = None
    split: Split | None = None
    ask: Ask | None = None
    fail: Fail | None = None
    errors: list[FieldError] | None = None

    @model_validator(mode="after")
    def _required_for_status(self) -> FileOpsResponse:
        # The protocol's "Status Meanings" table.
        required = {
            "ok": ("changed_files", "ops", "proof"),
            "split": ("split",),
            "ask": ("ask",),
            "fail": ("fail",),
            "validation_error": ("errors",),
        }[self.status]
        missing = [name for name in required if getattr(self, name) is None]
        if missing:
            raise ValueError(f"status {self.status} requires {', '.join(missing)}")
        return self

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class StoredFileOpsResponse(FileOpsResponse):
    """A response as an Intent's status keeps it: when the whole is too big, without file
    contents and command outputs, and naming where the whole is (`responseRef`). Top-level
    fields a later version adds are ignored (a downgraded operator still reads the outcome)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    response_ref: str | None = Field(default=None, alias="responseRef")
    """The whole response, kept in the sprite."""


__all__ = [
    "Ask",
    "CommandProof",
    "Fail",
    "FieldError",
    "FileDiff",
    "FileOpsResponse",
    "OpResult",
    "Proof",
    "Split",
    "Status",
    "StoredFileOpsResponse",
]
