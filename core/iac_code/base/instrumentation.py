"""The instrumentation seam: how a metrics or tracing plugin observes the kernel.

A plugin returns an :class:`Instrumentation` from the ``iac_code_instrumentation`` hook and
the kernel calls it at its measuring points: around the server's life, around each A2A call,
after each journal commit, snapshot batch and push attempt. Every method here does nothing,
so a plugin overrides only what it observes. Without such a plugin the kernel holds ``None``
and a measuring point costs one attribute check. Spans are the process's business: a tracing
plugin installs its tracer with :func:`iac_code.base.tracing.install` when it starts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Activity:
    """What a running server holds right now, read by gauges when they are scraped and by the idle shutdown."""

    turns_active: int
    permission_waits: int
    contexts_loaded: int
    connections: Mapping[str, int]
    """Open client connections by transport name (transports that count them)."""
    held: bool = False
    """Whether a turn gate holds work although no turn may run (execution control pausing, paused,
    resuming or terminating): see :meth:`idle`."""

    @property
    def idle(self) -> bool:
        """No active work: no running turn, no live permission wait, nothing a turn gate holds. The HTTP
        transport's idle shutdown stops only a server for which this is true."""
        return self.turns_active == 0 and self.permission_waits == 0 and not self.held


class Instrumentation:
    """Observes one server; subclass it and override what you measure (every method here is a no-op)."""

    async def start(self, context: Any) -> None:
        """The server starts: called before its transports bind. ``context`` is its
        :class:`~iac_code.api.PluginContext`, or ``None`` in a process without a server
        (``iac-code a2a push-worker``)."""

    async def stop(self) -> None:
        """The server has stopped (its transports are closed, its state is written), or its start failed."""

    def handler_class(self, base: type[T]) -> type[T]:
        """The request handler class the server builds: ``base`` or a subclass of it."""
        return base

    async def observe_call(self, method: str, call: Any, params: Mapping[str, Any] | None,
                           fields: Mapping[str, str] | None, pending: Awaitable[Any]) -> Any:
        """Run one A2A call: await ``pending`` (the call, not started yet) exactly once and return its result.

        ``call`` is the binding's :class:`~iac_code.api.CallInfo` (``headers``, ``transport``);
        ``params`` the decoded params, ``fields`` REST path parameters. A streaming call's
        result is an async iterator (its first event has arrived): return it or a wrapper.
        A refused or failed call raises an exception whose ``error`` attribute is the error
        the binding reports (:func:`~iac_code.api.error_code` gives its JSON-RPC code).
        """
        return await pending

    def journal_committed(self, seconds: float) -> None:
        """One group commit of the task journal was written and synced in ``seconds``."""

    def snapshot_written(self, seconds: float) -> None:
        """One batch of task and context snapshots was written in ``seconds``."""

    def push_attempt(self, seconds: float) -> None:
        """One push notification HTTP attempt took ``seconds``."""

    def push_outcome(self, outcome: str) -> None:
        """A push job was ``delivered``, ``retried``, ``dead_lettered`` or ``deferred``."""


class _Fanout(Instrumentation):
    """Several plugins' instrumentation as one, in plugin order (the first one's call observation outermost)."""

    def __init__(self, parts: Sequence[Instrumentation]) -> None:
        self._parts = tuple(parts)

    async def start(self, context: Any) -> None:
        for part in self._parts:
            await part.start(context)

    async def stop(self) -> None:
        for part in reversed(self._parts):
            await part.stop()

    def handler_class(self, base: type[T]) -> type[T]:
        for part in self._parts:
            base = part.handler_class(base)
        return base

    async def observe_call(self, method: str, call: Any, params: Mapping[str, Any] | None,
                           fields: Mapping[str, str] | None, pending: Awaitable[Any]) -> Any:
        for part in reversed(self._parts):
            pending = part.observe_call(method, call, params, fields, pending)
        return await pending

    def journal_committed(self, seconds: float) -> None:
        for part in self._parts:
            part.journal_committed(seconds)

    def snapshot_written(self, seconds: float) -> None:
        for part in self._parts:
            part.snapshot_written(seconds)

    def push_attempt(self, seconds: float) -> None:
        for part in self._parts:
            part.push_attempt(seconds)

    def push_outcome(self, outcome: str) -> None:
        for part in self._parts:
            part.push_outcome(outcome)


def combine(parts: Sequence[Instrumentation]) -> Instrumentation | None:
    """One object for the plugins' instrumentation: ``None`` without any, the one itself when alone."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else _Fanout(parts)
