"""The installed turn gates as one object for the executor and the request handler.

Calls every :class:`~iac_code.base.turn_gates.TurnGate` in plugin order; one that raises is logged
and skipped (a broken gate never fails a turn). Without any gate it is falsy and the callers skip it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from iac_code.base.turn_gates import TurnGate, TurnPoint

logger = logging.getLogger(__name__)


class TurnGates:
    """Every installed turn gate, called in order."""

    def __init__(self, gates: Sequence[TurnGate] = ()) -> None:
        self._gates = tuple(gates)

    def __bool__(self) -> bool:
        return bool(self._gates)

    async def admit(self, owner: str, context_id: str, task_id: str) -> str | None:
        """The first gate's refusal of a new turn on ``context_id``, or ``None`` (a gate's ``admit`` may be a
        coroutine: one that reads shared state across nodes)."""
        for gate in self._gates:
            try:
                refusal = gate.admit(owner, context_id, task_id)
                if inspect.isawaitable(refusal):
                    refusal = await refusal
            except Exception:
                logger.exception("Turn gate %s failed in admit", type(gate).__name__)
                continue
            if refusal:
                return refusal
        return None

    async def admit_message(self, owner: str, context_id: str, task_id: str,
                            metadata: Mapping[str, Any]) -> str | None:
        """The first refusal of a gate's optional ``admit_message`` (it reads the message's ``metadata.iac_code``;
        it may be a coroutine, e.g. to check an answer against a remote service), or ``None``."""
        for gate in self._gates:
            check = getattr(gate, "admit_message", None)
            if check is None:
                continue
            try:
                refusal = check(owner, context_id, task_id, metadata)
                if inspect.isawaitable(refusal):
                    refusal = await refusal
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Turn gate %s failed in admit_message", type(gate).__name__)
                continue
            if refusal:
                return str(refusal)
        return None

    def busy(self) -> bool:
        """Whether any gate's optional ``busy()`` says it holds work (a paused or terminating execution)."""
        for gate in self._gates:
            check = getattr(gate, "busy", None)
            if check is None:
                continue
            try:
                if check():
                    return True
            except Exception:
                logger.exception("Turn gate %s failed in busy", type(gate).__name__)
                return True  # unknown: not idle
        return False

    async def safe_point(self, point: TurnPoint) -> None:
        """Await every gate at a safe point (a cancellation propagates)."""
        for gate in self._gates:
            try:
                await gate.safe_point(point)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Turn gate %s failed at %s", type(gate).__name__, point.kind)

    def waiting(self, point: TurnPoint, waiting: bool) -> None:
        for gate in self._gates:
            try:
                gate.waiting(point, waiting)
            except Exception:
                logger.exception("Turn gate %s failed in waiting", type(gate).__name__)

    async def turn_ended(self, point: TurnPoint, status: str) -> None:
        for gate in self._gates:
            try:
                await gate.turn_ended(point, status)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Turn gate %s failed in turn_ended", type(gate).__name__)

    def metadata(self, owner: str, context_id: str) -> dict[str, Any]:
        """The gates' ``metadata.iac_code`` entries for a status update on a task of ``context_id``."""
        merged: dict[str, Any] = {}
        for gate in self._gates:
            try:
                entries: Mapping[str, Any] | None = gate.metadata(owner, context_id)
            except Exception:
                logger.exception("Turn gate %s failed in metadata", type(gate).__name__)
                continue
            if entries:
                merged.update(entries)
        return merged

    async def start(self) -> None:
        for gate in self._gates:
            await gate.start()

    async def stop(self) -> None:
        for gate in self._gates:
            try:
                await gate.stop()
            except Exception:
                logger.exception("Turn gate %s failed to stop", type(gate).__name__)
