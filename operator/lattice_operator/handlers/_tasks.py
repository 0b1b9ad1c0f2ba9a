"""Stopping the operator's own background tasks at shutdown."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


async def stop_task(task: object) -> None:
    """Cancel a background task and wait for it to end. What it ended with is logged, never
    raised: kopf retries a cleanup handler that raises a minute later, which holds the
    operator's shutdown past its grace period (the task may fail on a client another cleanup
    handler has already closed)."""
    if not isinstance(task, asyncio.Task):
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.warning("background task %s ended with an error", task.get_name(), exc_info=True)
