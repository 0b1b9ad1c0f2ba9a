"""Lifeloop: receipts, failure and retry classes, the adapter manifest (pure, no kopf)."""

from lattice_operator.lifeloop.classes import DEFAULT_RETRY, FailureClass, RetryClass

__all__ = ["DEFAULT_RETRY", "FailureClass", "RetryClass"]
