"""Classification and gate rules (CEL)."""

__all__: list[str] = []
