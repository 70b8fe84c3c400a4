"""Idle shutdown (``idle-shutdown-seconds``): the HTTP server stops itself when nobody uses it.

A monitor wakes every ``min(1, max(0.05, timeout / 10))`` seconds and asks the kernel to stop
(the path SIGTERM takes: running work drained, state written, exit code 0) once

* no HTTP request is in flight (an open SSE stream is one),
* at least ``timeout`` seconds passed since the last request started or finished, and
* the kernel reports no active work (:attr:`iac_code.api.Activity.idle`: no running turn, no
  live permission wait, nothing a turn gate such as execution control holds).

Active work resets the idle clock, so the timeout counts from when the last of it ended.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

INVALID_TEXT = "idle_shutdown_seconds must be a non-negative number."
HTTP_ONLY_TEXT = "idle_shutdown_seconds is only supported with the HTTP transport."


def problems(value: Any, transports: list[str]) -> list[str]:
    """The configuration problems of ``idle-shutdown-seconds`` (a real, finite number ≥ 0; > 0 only with
    ``http`` as the one transport)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return [INVALID_TEXT]
    if value > 0 and any(name != "http" for name in transports):
        return [HTTP_ONLY_TEXT]
    return []


def wake_interval(timeout: float) -> float:
    """How often the monitor looks: ``min(1, max(0.05, timeout / 10))`` seconds."""
    return min(1.0, max(0.05, timeout / 10))


class IdleMonitor:
    """Counts the HTTP requests in flight and stops the server after ``timeout`` idle seconds."""

    def __init__(self, kernel: PluginContext, timeout: float) -> None:
        self.kernel = kernel
        self.timeout = float(timeout)
        self.in_flight = 0
        self.last_used = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def request_started(self) -> None:
        self.in_flight += 1
        self.last_used = time.monotonic()

    def request_finished(self) -> None:
        self.in_flight -= 1
        self.last_used = time.monotonic()

    def idle_for(self, now: float) -> float | None:
        """Seconds the server has been idle, ``None`` while a request or any work is active (which resets the clock)."""
        if self.in_flight > 0:
            return None
        try:
            idle = self.kernel.activity().idle
        except Exception:  # a probe that fails reads as busy: never stop on a guess
            logger.exception("Reading the server's activity failed")
            idle = False
        if not idle:
            self.last_used = now
            return None
        return now - self.last_used

    def start(self) -> None:
        self.last_used = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="idle-shutdown")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _watch(self) -> None:
        interval = wake_interval(self.timeout)
        while True:
            await asyncio.sleep(interval)
            if self.kernel.readiness != "ready":
                continue
            idle = self.idle_for(time.monotonic())
            if idle is not None and idle >= self.timeout:
                logger.info("No request and no work for %.3g s (idle-shutdown-seconds): shutting down", idle)
                self.kernel.request_stop()
                return
