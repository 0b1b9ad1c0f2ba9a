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


class SetupError(LatticeError):
    """`lattice setup claude` cannot proceed (no git root, invalid settings JSON)."""


__all__ = ["SetupError", "ToolError"]
