"""The MCP package's exception tree: one error a tool reports, with a code and a suggestion."""

from __future__ import annotations

from typing import Any

from lattice_operator.errors import LatticeError


class ToolError(LatticeError):
    """A tool call failed for a reason the caller can fix; reported as a structured error."""

    def __init__(self, code: str, message: str, suggestion: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion

    def as_payload(self) -> dict[str, Any]:
        """The seed's error shape: `{"error": {"code", "message", "suggestion"}}`."""
        return {
            "error": {"code": self.code, "message": self.message, "suggestion": self.suggestion}
        }


class DocumentError(LatticeError):
    """A project document whose front matter cannot be read: skipped by the tools and
    named by `lattice_list` (path, field, reason); the file itself is left as it is."""

    def __init__(self, path: str, field: str, reason: str) -> None:
        where = f"field '{field}'" if field else "front matter"
        super().__init__(f"{path}: {where}: {reason}")
        self.path = path
        self.field = field
        self.reason = reason
        self.lattice_id = ""
        """The document's ID when its text shows one (it still counts as taken)."""

    def as_entry(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "lattice_id": self.lattice_id or None,
            "field": self.field or None,
            "error": self.reason,
        }

    def as_tool_error(self) -> ToolError:
        return ToolError(
            "INVALID_DOCUMENT",
            f"Document '{self.path}' cannot be read: {self}",
            "Fix the named field in the file's front matter (no YAML aliases, dates as "
            "YYYY-MM-DD or ISO 8601)",
        )


class SetupError(LatticeError):
    """`lattice setup claude` cannot proceed (no git root, invalid settings JSON)."""


__all__ = ["DocumentError", "SetupError", "ToolError"]
