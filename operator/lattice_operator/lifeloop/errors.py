"""The lifeloop package's exception tree (raised for caller mistakes, never for evidence)."""

from __future__ import annotations

from lattice_operator.errors import LatticeError


class LifeloopError(LatticeError):
    """Base of the errors the lifeloop package raises."""


class ReceiptRequestError(LifeloopError):
    """A receipt that the contract forbids was asked for (for example one for receipt.emitted)."""


class ManifestError(LifeloopError):
    """An adapter manifest breaks the contract's manifest rules."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


__all__ = ["LifeloopError", "ManifestError", "ReceiptRequestError"]
