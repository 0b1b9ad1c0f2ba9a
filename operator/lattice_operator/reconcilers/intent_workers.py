"""The operator's own work per open Intent: one task each, started and stopped by the
Intent's watch events, instead of a kopf daemon.

kopf gives every object it runs a daemon for a finalizer, added after the create and removed
once the daemon ends: two writes per Intent, and a watch event and PATCH on the path to its
decision. These tasks need none: they live in the operator (the leader's: the handlers that
start them are registered with the reconciling operator only) and end

- on their own, when the Intent reaches a final phase (or is found gone by a write's 404);
- at once, when the watch reports the Intent deleted (or another object under its name);
- when a watch event shows a final phase (the stop flag: the pass in progress finishes);
- when the operator stops (`stop_all`).

An Intent deleted while no watch event could report it (a watch re-listed after a 410 reports
no deletion) leaves its task running until its next write gets 404; the effects a pass can
carry out with no Intent write before them check that the Intent is still there first
(handlers.intent_effects, reconcilers.intent_loop): a Run deleted by the garbage collector
wakes the task, which must not create it again.

Bounded: at most one task per Intent name; an Intent in a final phase gets none, and an
Intent whose task ended on its own gets no second one from a late (older) watch event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str]
"""An Intent's (namespace, name)."""

ENDED_REMEMBERED = 4096
"""Intents (by uid) whose task ended on its own, remembered so that a watch event older than
the final write starts no second task (kopf's daemons: never re-spawned once exited)."""


class LiveBody(Mapping[str, Any]):
    """The newest watch body of one object, for a loop that reads it across awaits (as kopf's
    live body of a daemon): each event replaces what it reads."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = raw

    def replace(self, raw: Mapping[str, Any]) -> None:
        self._raw = raw

    def __getitem__(self, key: str) -> Any:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class StopFlag:
    """True once the task is to end after its pass in progress (`intent_loop.Stopped`)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def __bool__(self) -> bool:
        return self._set


@dataclass(frozen=True)
class Work:
    """What one Intent's task is given."""

    key: Key
    uid: str
    body: LiveBody
    stopped: StopFlag
    wakeup: asyncio.Event


WorkFn = Callable[[Work], Awaitable[None]]
"""One Intent's work: returns when the Intent is finished or gone, or once `stopped`."""


@dataclass
class _Worker:
    work: Work
    task: asyncio.Task[None]


def _uid(raw: Mapping[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("uid") or "")


class IntentWorkers:
    """The tasks of the open Intents, by (namespace, name)."""

    def __init__(self, work: WorkFn, *, remembered: int = ENDED_REMEMBERED) -> None:
        self._work = work
        self._workers: dict[Key, _Worker] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._remembered = remembered

    def seen(self, key: Key, raw: Mapping[str, Any], *, deleted: bool, open_: bool) -> None:
        """A watch event of the Intent `key`: `raw` its object, `deleted` for a DELETED
        event, `open_` when its phase is not final."""
        uid = _uid(raw)
        worker = self._workers.get(key)
        if worker is not None and worker.work.uid != uid:
            # Another object under that name: the one the task worked for is gone.
            self._cancel(key)
            worker = None
        if deleted or (raw.get("metadata") or {}).get("deletionTimestamp"):
            if worker is not None:
                self._cancel(key)
            return
        if worker is not None:
            # The body first, then the wake-up: the pass it wakes reads this event's object.
            worker.work.body.replace(raw)
            if not open_:
                worker.work.stopped.set()
            worker.work.wakeup.set()
            return
        if open_ and uid and uid not in self._ended:
            work = Work(key, uid, LiveBody(raw), StopFlag(), asyncio.Event())
            task = asyncio.create_task(self._run(work), name=f"intent {key[0]}/{key[1]}")
            self._workers[key] = _Worker(work, task)

    def wake(self, key: Key) -> None:
        """What the Intent's task reads changed (the Intent, its Run or its Sprite)."""
        worker = self._workers.get(key)
        if worker is not None:
            worker.work.wakeup.set()

    def running(self) -> dict[Key, str]:
        """The Intents with a task, and their uids."""
        return {key: worker.work.uid for key, worker in self._workers.items()}

    def __len__(self) -> int:
        return len(self._workers)

    async def stop_all(self) -> None:
        """Cancel every task and wait for them (the operator stops)."""
        tasks = [worker.task for worker in self._workers.values()]
        self._workers.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _cancel(self, key: Key) -> None:
        worker = self._workers.pop(key)
        worker.work.stopped.set()
        worker.task.cancel()

    async def _run(self, work: Work) -> None:
        try:
            await self._work(work)
        finally:
            mine = self._workers.get(work.key)
            if mine is not None and mine.work is work:
                del self._workers[work.key]
                if not work.stopped:
                    # Ended on its own (finished, gone, refused for good): a late event of
                    # this object starts nothing.
                    self._ended[work.uid] = None
                    while len(self._ended) > self._remembered:
                        self._ended.popitem(last=False)


async def sleep_unless_stopped(seconds: float, work: Work) -> None:
    """Wait `seconds`, or less if the task is told to stop meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_stopped(work), timeout=seconds)


async def _stopped(work: Work) -> None:
    while not work.stopped:
        work.wakeup.clear()
        await work.wakeup.wait()


__all__ = [
    "ENDED_REMEMBERED",
    "IntentWorkers",
    "Key",
    "LiveBody",
    "StopFlag",
    "Work",
    "WorkFn",
    "sleep_unless_stopped",
]
