"""Building protocol streams for tests and the benchmark: events, outbox bytes, stdout bytes."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

SPRITE = "sprite-42"
WORK = "issue-17"
PREFIX = b"LATTICE_EVENT "
T0 = datetime(2026, 1, 15, 10, 30, tzinfo=UTC)


def ts(seconds: float = 0) -> str:
    """An ISO-8601 UTC timestamp `seconds` after T0."""
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def envelope(
    event_type: str,
    payload: dict[str, Any],
    *,
    at: float = 0,
    sprite_id: str = SPRITE,
    work_item_id: str = WORK,
) -> dict[str, Any]:
    return {
        "protocol_version": "v1",
        "event_type": event_type,
        "sprite_id": sprite_id,
        "work_item_id": work_item_id,
        "timestamp": ts(at),
        "payload": payload,
    }


def line(event: dict[str, Any]) -> bytes:
    """One event as compact JSON bytes (no newline)."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def ev(event_type: str, payload: dict[str, Any], **kw: Any) -> bytes:
    return line(envelope(event_type, payload, **kw))


def info(message: str, *, percent: float | None = None, at: float = 0, **kw: Any) -> bytes:
    payload: dict[str, Any] = {"message": message}
    if percent is not None:
        payload.update(kind="progress", metadata={"percent": percent, "phase": "test"})
    return ev("INFO", payload, at=at, **kw)


def outbox_bytes(lines: list[bytes]) -> bytes:
    return b"".join(item + b"\n" for item in lines)


def stdout_bytes(lines: list[bytes], *, noise: bool = True, crlf: bool = False) -> bytes:
    end = b"\r\n" if crlf else b"\n"
    out = []
    for i, item in enumerate(lines):
        if noise:
            out.append(f"log line {i}: building...".encode() + end)
        out.append(PREFIX + item + end)
    return b"".join(out)


def realistic_events(n: int, *, seed: int = 1) -> Iterator[bytes]:
    """`n` distinct valid events with the mix and sizes of a chatty sprite.

    Mostly progress INFO (messages of 20-240 characters), phases that start and
    finish, artifacts and the odd non-blocking ACTION_REQUEST; no WAITING or
    COMPLETED, so the stream can be of any length.
    """
    rnd = random.Random(seed)
    words = [
        "build",
        "test",
        "lint",
        "compile",
        "fetch",
        "resolve",
        "index",
        "cache",
        "write",
        "read",
        "check",
    ]
    phases = ["bootstrap", "implement", "test", "polish", "review"]
    for i in range(n):
        at = i * 0.05
        r = rnd.random()
        if r < 0.80:
            text = " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 40)))
            yield info(f"step {i}: {text}", percent=round(100 * i / max(n, 1), 2), at=at)
        elif r < 0.86:
            phase = phases[(i // 7) % len(phases)]
            if i % 2:
                yield ev("PHASE_STARTED", {"phase": phase}, at=at)
            else:
                yield ev("PHASE_FINISHED", {"phase": phase, "success": rnd.random() > 0.1}, at=at)
        elif r < 0.95:
            yield ev(
                "ARTIFACT",
                {"kind": "file", "ref": f"src/module_{i}.py", "url": None, "metadata": {}},
                at=at,
            )
        elif r < 0.99:
            yield info(f"observation {i}: cache hit ratio {rnd.random():.3f}", at=at)
        else:
            yield ev(
                "ACTION_REQUEST",
                {
                    "action": "POST_COMMENT",
                    "parameters": {"body": f"progress {i}"},
                    "blocking": False,
                },
                at=at,
            )
