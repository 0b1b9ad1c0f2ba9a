"""What `lattice check` reports: one problem, with the seed's error code where it has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """A problem in one file: its code, where (path, field, line) and what to do."""

    code: str
    path: str
    message: str
    lattice_id: str | None = None
    field: str | None = None
    line: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "path": self.path,
            "lattice_id": self.lattice_id,
            "field": self.field,
            "line": self.line,
            "message": self.message,
        }

    def as_text(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: [{self.code}] {self.message}"


__all__ = ["Problem"]
