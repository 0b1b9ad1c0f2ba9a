"""The operator's exception tree (adapters have their own, translated at their boundary)."""

from __future__ import annotations


class LatticeError(Exception):
    """Base of every error the operator raises on purpose."""


class ConfigurationError(LatticeError):
    """Operator settings are missing or invalid."""


class InvalidSpecError(LatticeError):
    """A custom resource's spec failed validation by the models."""

    def __init__(self, message: str, field_path: str | None = None) -> None:
        super().__init__(message)
        self.field_path = field_path


__all__ = ["ConfigurationError", "InvalidSpecError", "LatticeError"]
