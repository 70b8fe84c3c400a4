"""Agent runtimes used by the tests, registered as plugins through the real hook."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import AgentRuntimeSpec
from iac_code.agents.runtime import RuntimeEvent, TextDelta, TurnRequest


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


class ProbeRuntime:
    """Answers with what the kernel told it about the turn, as JSON."""

    name = "probe"

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        turn.session["turns"] = int(turn.session.get("turns", 0)) + 1
        yield TextDelta(json.dumps({
            "prompt": turn.prompt, "cwd": turn.cwd, "channel": turn.channel, "language": turn.language,
            "history": [dict(h) for h in turn.history], "sessionTurns": turn.session["turns"],
        }))


class FailingRuntime:
    """Raises an exception whose text contains a local path and a secret."""

    name = "failing"

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        yield TextDelta("starting")
        raise RuntimeError("cannot open /home/secret/.aliyun/config token=sk-live-123")


class ProbePlugin:
    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="probe", create_runtime=lambda kernel: ProbeRuntime()),
                AgentRuntimeSpec(name="failing", create_runtime=lambda kernel: FailingRuntime())]
