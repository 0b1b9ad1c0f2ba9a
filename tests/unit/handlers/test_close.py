"""The operator's clean-up: its own background tasks end before the clients they write through
close, and a task that failed does not fail the clean-up."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import kopf

# The handlers' context (private to them), as the operator's start-up builds it.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._startup import close
from lattice_operator.handlers.run import start_run_retention
from lattice_operator.handlers.sprite import start_fleet_observer


class Kube:
    """Records when it was closed, and what the tasks were doing then."""

    def __init__(self, tasks: list[asyncio.Task[None]]) -> None:
        self.tasks = tasks
        self.running_at_close: list[str] | None = None

    async def close(self) -> None:
        self.running_at_close = [t.get_name() for t in self.tasks if not t.done()]


async def test_background_tasks_end_before_the_clients_close_and_a_failed_one_is_quiet() -> None:
    # kopf retries a clean-up handler that raises a minute later: a task that failed on a
    # client (an API server gone mid-write) held a graceful stop past its grace.
    async def failed() -> None:
        raise aiohttp.ServerDisconnectedError()

    ctx = OperatorContext()
    ctx.background += [
        asyncio.create_task(failed(), name="failed"),
        asyncio.create_task(asyncio.sleep(3600), name="running"),
    ]
    kube = Kube(list(ctx.background))
    ctx.kube = cast(Any, kube)
    memo = kopf.Memo()
    memo.lattice = ctx
    await asyncio.sleep(0)
    await cast(Any, close)(memo=memo)
    assert kube.running_at_close == []
    assert all(task.done() for task in ctx.background)


class Backend:
    async def aclose(self) -> None:
        pass


async def test_the_fleet_observer_and_run_retention_are_tasks_the_clean_up_stops() -> None:
    ctx = OperatorContext(backend=cast(Any, Backend()))
    memo = kopf.Memo()
    memo.lattice = ctx
    await cast(Any, start_fleet_observer)(memo=memo, sprite_directory={})
    await cast(Any, start_run_retention)(memo=memo, run_claims={})
    assert {t.get_name() for t in ctx.background} >= {"fleet-observer", "run-retention"}
    await cast(Any, close)(memo=memo)
    assert all(task.done() for task in ctx.background)
