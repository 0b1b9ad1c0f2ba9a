"""A bounded memory of what was already counted in the metrics, kept in the operator's
context (not in a module: each operator in a process, a test's included, has its own)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

KEPT = 10_000


class CountedOnce:
    """Keys seen, the newest `kept` of them."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._seen: OrderedDict[Hashable, None] = OrderedDict()

    def first(self, key: Hashable) -> bool:
        """Whether `key` is new (it is remembered from now on)."""
        if key in self._seen:
            return False
        self._seen[key] = None
        while len(self._seen) > self._kept:
            self._seen.popitem(last=False)
        return True

    def __contains__(self, key: Hashable) -> bool:
        return key in self._seen

    def __len__(self) -> int:
        return len(self._seen)
