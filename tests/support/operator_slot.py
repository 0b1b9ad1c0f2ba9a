"""One operator per test worker, shared by the e2e modules that use the default `stack`.

Starting `lattice run` costs seconds of CPU (imports, login, webhook registration) and
stopping it more; every module paying both was the suite's largest fixed cost. The slot keeps
one operator with the default settings (cluster-wide, standalone) for as long as modules that
use it run one after another.

The rule, here alone: two operators never reconcile one cluster at once (both would act, and
the webhook configurations are cluster-wide). So the shared operator is stopped, and its
webhook configurations removed, before a module that starts its own (`operator_stack`, or
any module that does not use the shared `stack`: tests/conftest.py releases it), and started
again lazily when the next module asks for it. A module that stopped or killed it leaves
either a serving operator or a dead one the slot replaces.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.support.cluster import Cluster
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, start_stack, stop_stack, wait_webhooks_served

# The e2e conftest's `stack` fixture: the modules that ask for it share the operator.
SHARED_FIXTURE = ("stack", "tests.e2e.conftest")

_slots: list[OperatorSlot] = []
_shared_files: set[str] = set()


class OperatorSlot:
    """The worker's shared operator: started on `acquire`, stopped on `release`."""

    def __init__(self, cluster: Cluster, sprites: LocalSprites, log_dir: Path) -> None:
        self.cluster, self.sprites, self.log_dir = cluster, sprites, log_dir
        self.stack: Stack | None = None
        self.starts = 0

    def acquire(self) -> Stack:
        """A serving shared operator whose `log()` starts now (a new one if none is alive)."""
        if self.stack is not None and not self.stack.operator.alive():
            self.release()  # died or stopped in the last module: its webhooks point nowhere
        if self.stack is None:
            self.stack = start_stack(self.cluster, self.sprites, self.log_dir)
            self.starts += 1
        else:
            # A module may have stopped it and started another with `stack.start()`: that one
            # is current; either way its webhooks must be the ones served.
            wait_webhooks_served(self.cluster)
        self.stack.operator.mark_log()
        return self.stack

    def release(self) -> None:
        """The shared operator stopped and its webhook configurations removed (if running)."""
        stack, self.stack = self.stack, None
        if stack is not None:
            stop_stack(stack)

    def __enter__(self) -> OperatorSlot:
        _slots.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _slots.remove(self)
        self.release()


def release_shared() -> None:
    """Stop the worker's shared operator, if one runs: another is about to start."""
    for slot in _slots:
        slot.release()


def uses_shared_operator(item: Any) -> bool:
    """Whether a collected test asks for the shared `stack` (not a module's own `stack`)."""
    info = getattr(item, "_fixtureinfo", None)
    defs: Sequence[Any] = info.name2fixturedefs.get(SHARED_FIXTURE[0], ()) if info else ()
    return bool(defs) and getattr(defs[-1].func, "__module__", "") == SHARED_FIXTURE[1]


def note_shared_files(files: Iterable[str]) -> None:
    """The test files (as pytest's module paths) whose modules share the operator."""
    _shared_files.update(files)


def is_shared_file(path: Path | str) -> bool:
    return os.fspath(path) in _shared_files
