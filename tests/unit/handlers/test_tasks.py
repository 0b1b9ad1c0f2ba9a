"""Stopping background tasks at shutdown: a task that failed does not fail the cleanup."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import kopf

# The handlers' private helper for their cleanup handlers, under test here.
from lattice_operator.handlers._tasks import stop_task
from lattice_operator.handlers.run import stop_run_retention
from lattice_operator.handlers.sprite import stop_fleet_observer


async def test_a_task_that_failed_on_a_closed_client_is_stopped_without_raising() -> None:
    # kopf retries a cleanup handler that raises a minute later: the shutdown would wait.
    async def observe() -> None:
        raise aiohttp.ServerDisconnectedError()

    task = asyncio.create_task(observe())
    await asyncio.sleep(0)
    await stop_task(task)
    assert task.done()


async def test_a_running_task_is_cancelled_and_awaited() -> None:
    task = asyncio.create_task(asyncio.sleep(3600))
    await stop_task(task)
    assert task.cancelled()


async def test_no_task_is_nothing_to_stop() -> None:
    await stop_task(None)


async def test_the_fleet_observer_and_retention_cleanups_stop_failed_tasks_quietly() -> None:
    async def failed() -> None:
        raise aiohttp.ServerDisconnectedError()

    memo = kopf.Memo()
    memo.fleet_task = asyncio.create_task(failed())
    memo.retention_task = asyncio.create_task(failed())
    await asyncio.sleep(0)
    # Called as kopf calls a cleanup handler: by keyword (kopf's decorator types it so).
    await cast(Any, stop_fleet_observer)(memo=memo)
    await cast(Any, stop_run_retention)(memo=memo)
    assert memo.fleet_task.done()
    assert memo.retention_task.done()
