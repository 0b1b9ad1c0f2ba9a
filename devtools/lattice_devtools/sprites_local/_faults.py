"""Fault-injection switches, set at run time through `POST /_local/faults`.

| Switch                       | Effect                                                          |
|------------------------------|-----------------------------------------------------------------|
| `drop_before_exit`           | when a process exits, its exec sockets are dropped (no exit frame)|
| `close_without_close_frame`  | the exit frame is sent, then TCP is dropped without a close frame|
| `close_delay`                | seconds the server holds the socket open after the exit frame    |
| `rate_limit`                 | the next `remaining` matching requests get 429 + Retry-After      |
| `slow_wake`                  | seconds a warm or cold sprite takes to wake                       |
| `stream_error`               | the next N checkpoint/restore streams end with an error line     |
| `exec_start_delay`           | seconds a new exec is held before its command starts             |
| `exec_answer_delay`          | seconds a started exec's upgrade answer is held                  |
| `sprites`                    | limit the exec, wake and stream switches to these sprites        |

Actions (immediate): `POST /_local/sprites/{name}/cold` (go cold now: sessions lost, no exit
frames) and `POST /_local/sprites/{name}/drop?session=ID` (drop exec sockets now; the
processes keep running).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RateLimitFault(BaseModel):
    """Answer 429 to the next `remaining` requests that match."""

    model_config = ConfigDict(extra="forbid")

    remaining: int = Field(default=1, ge=0)
    """How many requests still get a 429."""
    retry_after: int = Field(default=1, ge=0)
    """The Retry-After seconds (header and `retry_after_seconds`)."""
    method: str | None = None
    """Only this HTTP method (e.g. POST); None = any."""
    path_prefix: str | None = None
    """Only paths starting with this (e.g. /v1/sprites); None = any API path."""

    def matches(self, method: str, path: str) -> bool:
        if self.remaining <= 0:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path_prefix is None or path.startswith(self.path_prefix)


class Faults(BaseModel):
    """The switches; all off by default."""

    model_config = ConfigDict(extra="forbid")

    drop_before_exit: bool = False
    close_without_close_frame: bool = False
    close_delay: float = Field(default=0.0, ge=0, le=60)
    rate_limit: RateLimitFault | None = None
    slow_wake: float = Field(default=0.0, ge=0, le=60)
    stream_error: int = Field(default=0, ge=0)
    exec_start_delay: float = Field(default=0.0, ge=0, le=60)
    exec_answer_delay: float = Field(default=0.0, ge=0, le=60)
    sprites: list[str] | None = None

    def applies_to(self, sprite: str) -> bool:
        return self.sprites is None or sprite in self.sprites


__all__ = ["Faults", "RateLimitFault"]
