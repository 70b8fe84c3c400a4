"""An agent runtime for input tests: it echoes the decoded prompt and manifest.

Each turn streams two text deltas: the prompt exactly as the runtime received
it, then ``MANIFEST_MARKER`` followed by ``json.dumps(list(turn.manifest))``.
The plugin also records every ``TurnRequest`` so tests can inspect large
prompts without parsing them back out of a response.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import AgentRuntimeSpec
from iac_code.agents.runtime import RuntimeEvent, TextDelta, TurnRequest

MANIFEST_MARKER = "\n--manifest--\n"


class EchoRuntime:
    """Echoes each turn's prompt and manifest back as assistant text."""

    name = "echo"

    def __init__(self) -> None:
        self.turns: list[TurnRequest] = []

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        self.turns.append(turn)
        yield TextDelta(turn.prompt)
        yield TextDelta(MANIFEST_MARKER + json.dumps(list(turn.manifest)))


class EchoPlugin:
    """Provides the ``echo`` runtime through the real hook."""

    def __init__(self) -> None:
        self.runtime = EchoRuntime()

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="echo", create_runtime=lambda kernel: self.runtime)]


def split_echo(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(prompt, manifest) from an echo turn's final text."""
    prompt, _, manifest = text.rpartition(MANIFEST_MARKER)
    return prompt, json.loads(manifest)
