"""A daemon told to stop (its Run ended) that returns within moments is waited for by kopf,
not polled for with a `touch-dummy` PATCH of the object (one write more per Run)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import kopf
from kopf._core.engines.daemons import _wait_for_instant_exit

# _kopf_settings is what the startup handlers set on kopf; checked without starting kopf.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._startup import DAEMON_EXIT_WAIT, _kopf_settings


async def _last_steps() -> None:
    # What a Run's daemon does after its last status write: post its last receipts.
    await asyncio.sleep(0.05)


async def _waited(settings: kopf.OperatorSettings) -> bool:
    task = asyncio.create_task(_last_steps())
    await _wait_for_instant_exit(settings=settings, daemon=SimpleNamespace(task=task))  # type: ignore[arg-type]
    done = task.done()
    await task
    return done


async def test_a_daemon_finishing_its_last_writes_is_waited_for() -> None:
    settings = kopf.OperatorSettings()
    _kopf_settings(settings, OperatorContext())
    assert settings.background.instant_exit_timeout == DAEMON_EXIT_WAIT
    assert await _waited(settings)


async def test_kopfs_default_would_poll_for_it() -> None:
    """kopf's default (ten event-loop cycles) gives up at once: kopf then polls for the exit
    by PATCHing the object — what the setting above avoids."""
    assert not await _waited(kopf.OperatorSettings())
