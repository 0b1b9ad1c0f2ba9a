"""A Run's consumer takes everything its socket pump has queued in one pass (a busy operator
fell behind its sockets taking one chunk per pass: bench_replica, issue 30)."""

from __future__ import annotations

import asyncio
from typing import Any

# The pass's batching is private to the session follower; its contract is checked here
# directly, the driver's behaviour with it by the lifecycle tests.
from lattice_operator.reconcilers.run.session import QUEUE_SIZE, _drained


def queued(*items: tuple[str, Any]) -> asyncio.Queue[tuple[str, Any]]:
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=QUEUE_SIZE)
    for item in items:
        queue.put_nowait(item)
    return queue


def test_a_backlog_is_taken_at_once_with_consecutive_chunks_joined_in_order() -> None:
    queue = queued(("out", b"b"), ("out", b"c\n"), ("replay", b"r"), ("out", b"d"))
    assert _drained(("out", b"a"), queue) == [
        ("out", b"abc\n"),
        ("replay", b"r"),
        ("out", b"d"),
    ]
    assert queue.empty()


def test_the_exit_stays_after_the_output_before_it() -> None:
    queue = queued(("out", b"x"), ("exit", 0), ("out", b"never"))
    assert _drained(("out", b"w"), queue) == [("out", b"wx"), ("exit", 0), ("out", b"never")]


def test_a_tick_or_a_lost_socket_alone_is_passed_on_as_it_is() -> None:
    assert _drained(("tick", None), queued()) == [("tick", None)]
    assert _drained(("lost", None), queued()) == [("lost", None)]


def test_one_pass_takes_at_most_what_the_queue_can_hold() -> None:
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()  # unbounded, to overfill a pass
    for n in range(QUEUE_SIZE + 10):
        queue.put_nowait(("out", b"%d," % n) if n % 2 else ("replay", b"%d," % n))
    taken = _drained(("tick", None), queue)
    assert len(taken) == 1 + QUEUE_SIZE
    assert queue.qsize() == 10
