"""The FileOps exception tree."""

from __future__ import annotations

from lattice_operator.errors import LatticeError


class FileOpsError(LatticeError):
    """An operation cannot be carried out; `reason` and `hint` go into the response's `fail`."""

    def __init__(self, reason: str, hint: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


class PathRefused(FileOpsError):
    """A path leaves the workspace or the request's writable roots."""


class PatchRefused(FileOpsError):
    """A patch is malformed or does not apply to the files as they are."""


class StateRefused(FileOpsError):
    """A TriFlow state operation's precondition does not hold."""


__all__ = ["FileOpsError", "PatchRefused", "PathRefused", "StateRefused"]
