"""Schedules: cron expressions (as CronJob's, by cronsim) and `@every <duration>`, in a
time zone; pure over the times they are given."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

_EVERY = re.compile(r"^@every\s+(\d+)(s|m|h)$")
_UNITS = {"s": 1, "m": 60, "h": 3600}
MIN_EVERY = 5


@dataclass(frozen=True)
class Schedule:
    expression: str
    every: timedelta | None = None
    """Set for `@every`: fires at multiples of it since the epoch (steady across restarts)."""


def parse_schedule(text: str) -> Schedule:
    """The schedule, or ValueError saying what is wrong with it."""
    text = text.strip()
    match = _EVERY.match(text)
    if match:
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
        if seconds < MIN_EVERY:
            raise ValueError(f"@every must be at least {MIN_EVERY}s")
        return Schedule(text, timedelta(seconds=seconds))
    if text.startswith("@every"):
        raise ValueError("@every takes a duration like 30s, 5m or 1h")
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(f"not a cron expression: {exc}") from None
    if len(text.split()) == 6 and not text.startswith("@"):
        raise ValueError("five fields (minute hour day month weekday): seconds are not supported")
    return Schedule(text)


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name like Europe/Berlin)") from None


def next_after(schedule: Schedule, after: datetime, tz: ZoneInfo) -> datetime:
    """The first firing strictly after `after` (UTC)."""
    if schedule.every is not None:
        step = schedule.every.total_seconds()
        n = int(after.timestamp() // step) + 1
        return datetime.fromtimestamp(n * step, UTC)
    local = after.astimezone(tz).replace(microsecond=0)
    nxt = next(iter(CronSim(schedule.expression, local)))
    return nxt.astimezone(UTC)


def latest_due(
    schedule: Schedule, since: datetime, now: datetime, tz: ZoneInfo, *, limit: int = 1000
) -> tuple[datetime | None, int]:
    """The last firing in (since, now], and how many firings fell in that window (bounded:
    after `limit` the count stops, as CronJob stops counting missed starts)."""
    if schedule.every is not None:
        step = schedule.every.total_seconds()
        last = int(now.timestamp() // step) * step
        first = int(since.timestamp() // step) + 1
        count = int(last // step) - first + 1
        return (datetime.fromtimestamp(last, UTC) if count > 0 else None), max(count, 0)
    found: datetime | None = None
    count = 0
    cursor = since
    while count < limit:
        nxt = next_after(schedule, cursor, tz)
        if nxt > now:
            break
        found, cursor = nxt, nxt
        count += 1
    return found, count


__all__ = ["Schedule", "latest_due", "next_after", "parse_schedule", "zone"]
