"""Local claims: which task someone on this checkout is working on.

A claim is `<project>/.lattice/claims/<ID>.json` (`{"lattice_id", "claimed_by",
"claimed_at"}`), never in a document: it says who works on what here, not what the project
is. `.lattice/` holds a `.gitignore` of `*`, so the claims are never committed.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lattice_operator.mcp.documents import ANY_ID_PATTERN
from lattice_operator.mcp.errors import ToolError

STATE_DIR = ".lattice"
UNREADABLE = "(unreadable claim file)"
"""The claimant of a claim file that cannot be read: someone's, so nobody takes it over
silently; `lattice check` names the file."""


@dataclass(frozen=True)
class Claim:
    lattice_id: str
    claimed_by: str
    claimed_at: str
    path: str
    """The claim file, relative to the project root."""

    @property
    def readable(self) -> bool:
        return self.claimed_by != UNREADABLE

    def as_json(self) -> dict[str, Any]:
        return {
            "lattice_id": self.lattice_id,
            "claimed_by": self.claimed_by,
            "claimed_at": self.claimed_at,
        }


class ClaimStore:
    """The claim files of one project."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.directory = root / STATE_DIR / "claims"

    def _file(self, lattice_id: str) -> Path:
        # IDs come from documents anyone can write: never a path of their own choosing.
        if not ANY_ID_PATTERN.match(lattice_id):
            raise ToolError(
                "INVALID_ARGUMENT",
                f"'{lattice_id}' is not a Lattice ID",
                "Pass an ID such as LCGWQN",
            )
        return self.directory / f"{lattice_id}.json"

    def _read(self, path: Path) -> Claim:
        rel = path.relative_to(self.root).as_posix()
        lattice_id = path.stem
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            by, at = data["claimed_by"], data["claimed_at"]
            if not isinstance(by, str) or not by or not isinstance(at, str):
                raise TypeError("claimed_by/claimed_at are not strings")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            return Claim(lattice_id, UNREADABLE, "", rel)
        return Claim(lattice_id, by, at, rel)

    def get(self, lattice_id: str) -> Claim | None:
        path = self._file(lattice_id)
        return self._read(path) if path.exists() or path.is_symlink() else None

    def all(self) -> dict[str, Claim]:
        if not self.directory.is_dir():
            return {}
        found = {}
        for path in sorted(self.directory.glob("*.json")):
            if ANY_ID_PATTERN.match(path.stem):
                found[path.stem] = self._read(path)
        return found

    def _ensure_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        ignore = self.root / STATE_DIR / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Local state of `lattice claim`: never committed.\n*\n")

    def create(self, lattice_id: str, claimed_by: str, claimed_at: str) -> Claim | None:
        """Write the claim unless one exists (exclusive create: of two at once, one wins);
        None when it was written, else the claim already there."""
        path = self._file(lattice_id)
        self._ensure_directory()
        claim = Claim(lattice_id, claimed_by, claimed_at, path.relative_to(self.root).as_posix())
        # Written whole to a temporary file, then linked: link never replaces an existing
        # file, so the claim appears complete or not at all, and only one of two wins.
        fd, tmp = tempfile.mkstemp(prefix=f".{lattice_id}.", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(claim.as_json(), handle)
                handle.write("\n")
            os.chmod(tmp, 0o644)
            os.link(tmp, path)
        except FileExistsError:
            return self._read(path)
        finally:
            os.unlink(tmp)
        return None

    def release(self, lattice_id: str) -> Claim | None:
        """Remove the claim; the claim removed, or None when there was none."""
        claim = self.get(lattice_id)
        if claim is not None:
            self._file(lattice_id).unlink(missing_ok=True)
        return claim


__all__ = ["STATE_DIR", "UNREADABLE", "Claim", "ClaimStore"]
