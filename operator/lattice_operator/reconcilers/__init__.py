"""Level-based logic per kind: read the world, compute what should be. No kopf here."""

__all__: list[str] = []
