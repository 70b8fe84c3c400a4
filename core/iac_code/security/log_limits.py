"""Rate-limited log lines, for what clients can cause over and over (malformed frames, bad HTTP).

A client that sends a thousand bad requests must not write a thousand log lines:
:class:`RateLimitedLog` writes the first ``burst`` lines of each interval and one
"Suppressed N more" line for the rest. The kernel's framing
(:mod:`iac_code.protocol.framing`) and the transports share this one implementation.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable


class RateLimitedLog:
    """Logs at most ``burst`` lines per ``interval`` seconds; the lines past that are counted and
    reported in one "suppressed" line when the interval ends (or on :meth:`flush`)."""

    def __init__(self, log: logging.Logger, level: int, what: str, *, burst: int = 10, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = log
        self.level = level
        self.what = what
        self.burst = burst
        self.interval = interval
        self.suppressed = 0
        self._clock = clock
        self._window_end = -math.inf
        self._count = 0
        self._flush_handle: asyncio.TimerHandle | None = None

    def log(self, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless this interval's burst is used up; True when it was logged."""
        now = self._clock()
        if now >= self._window_end:
            self.flush()
            self._window_end = now + self.interval
            self._count = 0
        if self._count < self.burst:
            self._count += 1
            self.logger.log(self.level, msg, *args)
            return True
        self.suppressed += 1
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                pass  # no loop (a unit test): reported by the next line or flush()
            else:
                self._flush_handle = loop.call_later(max(0.0, self._window_end - now), self.flush)
        return False

    def flush(self) -> None:
        """Report the lines suppressed so far, if any."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self.suppressed:
            self.logger.log(self.level, "Suppressed %d more %s in the last %g s", self.suppressed, self.what,
                            self.interval)
            self.suppressed = 0
