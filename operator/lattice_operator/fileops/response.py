"""FileOpsRES (its models live with the Intent API, whose status keeps it) and the
validation-error shape."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lattice_operator.api.v1alpha1.fileops_response import (
    Ask,
    CommandProof,
    Fail,
    FieldError,
    FileDiff,
    FileOpsResponse,
    OpResult,
    Proof,
    Split,
    Status,
)


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
    "validation_errors",
]
