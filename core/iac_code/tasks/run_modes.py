"""Normal chat or a pipeline, per request: the runtime the executor runs is chosen turn by turn.

The kernel validates a request's ``run_mode`` and ``pipeline_name`` before any task exists
(:func:`iac_code.tasks.inputs.read_run_mode`); :class:`ModeRouter` then runs the turn on the
chat runtime or on the pipeline the request, its session or the server names, and fixes that
pipeline in the session: a session never switches pipelines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

from iac_code.agents.runtime import AgentRuntime, RuntimeEvent, TurnRequest

PIPELINE_SESSION_KEY = "iac_code.pipelineName"  # in the context's session: the pipeline it runs, once chosen


def durable_pipeline(session: Mapping[str, Any]) -> str:
    """The pipeline a context's session is fixed to (``""``: none yet)."""
    name = session.get(PIPELINE_SESSION_KEY)
    return name if isinstance(name, str) else ""


class ModeRouter:
    """An agent runtime that runs each turn on the chat runtime or on a pipeline (see the module)."""

    def __init__(self, chat: AgentRuntime, pipelines: Mapping[str, AgentRuntime], default_pipeline: str) -> None:
        self.name = getattr(chat, "name", "chat")
        self.chat = chat
        self.pipelines = dict(pipelines)
        self.default_pipeline = default_pipeline

    def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        if turn.run_mode != "pipeline":
            return self.chat.run_turn(turn)
        name = turn.pipeline_name or durable_pipeline(turn.session) or self.default_pipeline
        if name not in self.pipelines:  # the session's pipeline is no longer installed: the server's own
            name = self.default_pipeline
        turn.session[PIPELINE_SESSION_KEY] = name
        return self.pipelines[name].run_turn(dataclasses.replace(turn, pipeline_name=name))
