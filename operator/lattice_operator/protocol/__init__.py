"""The sprite protocol v1: models, line splitter, outbox merge, status reducer (pure)."""

__all__: list[str] = []
