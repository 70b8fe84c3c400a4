"""Agent runtimes used by the tests, registered as plugins through the real hook."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import AgentRuntimeSpec
from iac_code.agents.runtime import RuntimeEvent, TextDelta, TurnRequest
from iac_code.testing import GatedRuntime, GatedRuntimePlugin  # noqa: F401 (re-exported for the tests)


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
