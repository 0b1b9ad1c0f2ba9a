"""A bounded scrollback of a session's output, replayed to whoever attaches."""

from __future__ import annotations

from collections import deque


class OutputRing:
    """The last `capacity` bytes of output, as (stream id, bytes) chunks in order."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("capacity must not be negative")
        self._capacity = capacity
        self._chunks: deque[tuple[int, bytes]] = deque()
        self._size = 0

    def append(self, stream: int, data: bytes) -> None:
        """Add a chunk, dropping the oldest bytes beyond the capacity."""
        if not data or self._capacity == 0:
            return
        if len(data) >= self._capacity:
            self._chunks.clear()
            self._chunks.append((stream, data[-self._capacity :]))
            self._size = self._capacity
            return
        self._chunks.append((stream, data))
        self._size += len(data)
        while self._size > self._capacity:
            first_stream, first = self._chunks[0]
            excess = self._size - self._capacity
            if len(first) <= excess:
                self._chunks.popleft()
                self._size -= len(first)
            else:
                self._chunks[0] = (first_stream, first[excess:])
                self._size -= excess

    def snapshot(self) -> list[tuple[int, bytes]]:
        """The retained chunks, oldest first."""
        return list(self._chunks)

    def __len__(self) -> int:
        return self._size


__all__ = ["OutputRing"]
