"""Background asyncio tasks whose failures are always observed.

An exception in a task nobody awaits surfaces only as "Task exception was never
retrieved" when it is garbage-collected, long after the fact and without
context. ``spawn`` logs it the moment the task ends instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _report(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()  # marks it retrieved
    if error is not None:
        logger.error("Background task %s failed", task.get_name(), exc_info=error)


def spawn(coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
    """Start ``coro`` as a task on the running loop; a failure is logged when it ends."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    task.add_done_callback(_report)
    return task
