"""Adapters: the operator's hands on the outside world (Sprites, Kubernetes, GitHub)."""

__all__: list[str] = []
