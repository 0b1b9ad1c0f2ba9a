"""FileOpsRES, exactly as the protocol shows it, and the validation-error shape."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Status = Literal["ok", "ask", "fail", "split", "validation_error"]


class _Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class OpResult(_Wire):
    op_index: int = Field(alias="opIndex", ge=0)
    status: Literal["ok", "fail", "skipped"]
    summary: str = Field(max_length=1024)


class CommandProof(_Wire):
    cmd: str
    exit_code: int | None = Field(alias="exitCode")
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


def validation_errors(raw: Any) -> list[FieldError]:
    """A raw FileOpsREQ checked by the request model: the errors as `{field, error}` with the
    protocol's field paths (`ops[0].path`), empty when it is valid."""
    from lattice_operator.api.v1alpha1.fileops import REQUIRED_OP_FIELDS, FileOpsRequest

    try:
        FileOpsRequest.model_validate(raw)
    except ValidationError as exc:
        errors: list[FieldError] = []
        ops = raw.get("ops") if isinstance(raw, dict) else None
        for e in exc.errors():
            loc = e["loc"]
            # An op missing its fields: one error per field, as the protocol shows them.
            if len(loc) == 2 and loc[0] == "ops" and isinstance(loc[1], int) and ops:
                op = ops[loc[1]] if loc[1] < len(ops) else None
                if isinstance(op, dict) and op.get("op") in REQUIRED_OP_FIELDS:
                    missing = [f for f in REQUIRED_OP_FIELDS[op["op"]] if f not in op]
                    errors += [
                        FieldError(field=f"ops[{loc[1]}].{f}", error="required field missing")
                        for f in missing
                    ]
                    if missing:
                        continue
            errors.append(FieldError(field=_field(loc), error=_error(e)))
        return errors
    return []


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(request)"


def _error(error: Any) -> str:
    if error["type"] == "missing":
        return "required field missing"
    if error["type"] == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"invalid value {error.get('input')!r}, must be one of: {expected}"
    return str(error["msg"]).removeprefix("Value error, ")


__all__ = ["FieldError", "FileOpsResponse", "OpResult", "validation_errors"]
