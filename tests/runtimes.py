"""Agent runtimes used by the tests, registered as plugins through the real hook."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from iac_code.hookspecs import hookimpl
from iac_code.records import AgentRuntimeSpec
from iac_code.runtime import RuntimeEvent, TextDelta, TurnRequest


class GatedRuntime:
    """Streams one delta, then waits until ``release`` is set (or the turn is cancelled)."""

    name = "gated"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        yield TextDelta("working on it")
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield TextDelta(" done")


class GatedRuntimePlugin:
    def __init__(self) -> None:
        self.runtime = GatedRuntime()

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="gated", create_runtime=lambda kernel: self.runtime)]


def settings(**extra: Any) -> dict[str, Any]:
    return {"agent-runtime": "gated", **extra}
