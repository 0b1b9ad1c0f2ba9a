"""The Runs an Intent's work loop created (or found already there), as the API server answered,
until the Run index shows them.

Under a load the operator cannot keep up with, the Run index is minutes behind the API
server. A pass woken meanwhile (by its own status write, its Sprite) that read the index alone
would see no Run and create it again, to be refused as already there: a POST and an
admission-webhook call wasted per wake-up, 2,398 of them for 6,057 Intents at 100/s offered,
however long a fixed wait before trying again was. With the Run the API server answered, a
pass decides on it as it would on the index's (a Pending Run, or someone else's Run, refused)
and creates nothing.
"""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Run

INDEX_PATIENCE = 300.0
"""Seconds a created Run stands in for the index's. Past it (the Run deleted before the index
ever showed it, say) the next pass creates it again: made anew, or found and kept again."""


class CreatedRuns:
    """One daemon's Runs not yet in the index, by name (one at a time in practice)."""

    def __init__(self, patience: float = INDEX_PATIENCE) -> None:
        self._patience = patience
        self._runs: dict[str, tuple[float, Run]] = {}

    def note(self, run: Run, now: float) -> None:
        """`run` as the API server answered its create (or a read after being refused)."""
        self._runs[run.metadata.name] = (now + self._patience, run)

    def view(self, name: str, indexed: Run | None, now: float) -> Run | None:
        """The Run a pass decides on: the index's once it has one (all notes are dropped
        then), else the one noted under `name` within its patience."""
        if indexed is not None:
            self._runs.clear()
            return indexed
        entry = self._runs.get(name)
        if entry is None:
            return None
        until, run = entry
        if now >= until:
            del self._runs[name]
            return None
        return run

    def __len__(self) -> int:
        return len(self._runs)


__all__ = ["INDEX_PATIENCE", "CreatedRuns"]
