"""Normal chat or a pipeline, per request: the runtime the executor runs is chosen turn by turn.

The kernel validates a request's ``run_mode`` and ``pipeline_name`` before any task exists
(:func:`iac_code.tasks.inputs.read_run_mode`); :class:`ModeRouter` then runs the turn on the
chat runtime or on the pipeline the request, its session or the server names, and fixes that
pipeline in the session: a session never switches pipelines.

Two more session keys are written by a pipeline and read by the kernel's request path
(:func:`mark_pipeline_waiting`, :func:`mark_pipeline_handoff`): the task the pipeline waits on
for the user's input (a pipeline-mode message that omits ``taskId`` continues it) and whether the
pipeline has handed off (``cleanupOnly`` continuations need that).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

from iac_code.agents.runtime import AgentRuntime, Interrupt, RuntimeEvent, TurnRequest

PIPELINE_SESSION_KEY = "iac_code.pipelineName"  # in the context's session: the pipeline it runs, once chosen
PIPELINE_WAITING_KEY = "iac_code.pipelineWaitingTask"  # the task a pipeline waits on for the user's input
PIPELINE_HANDOFF_KEY = "iac_code.pipelineHandoff"  # the outcome once the pipeline handed off to normal chat


def durable_pipeline(session: Mapping[str, Any]) -> str:
    """The pipeline a context's session is fixed to (``""``: none yet)."""
    name = session.get(PIPELINE_SESSION_KEY)
    return name if isinstance(name, str) else ""


def mark_pipeline_waiting(session: dict[str, Any], task_id: str | None) -> None:
    """Record in a context's session that its pipeline waits for the user's input on ``task_id`` (``None``: it
    waits on nothing). In pipeline mode a message that omits ``taskId`` then continues that task."""
    if task_id:
        session[PIPELINE_WAITING_KEY] = task_id
    else:
        session.pop(PIPELINE_WAITING_KEY, None)


def pipeline_waiting_task(session: Mapping[str, Any]) -> str:
    """The task the context's pipeline waits on for input (``""``: none)."""
    value = session.get(PIPELINE_WAITING_KEY)
    return value if isinstance(value, str) else ""


def mark_pipeline_handoff(session: dict[str, Any], outcome: str) -> None:
    """Record in a context's session that its pipeline handed off to normal chat with ``outcome``
    (``completed``, ``early_exit``, ``failed``, ``canceled``): ``cleanupOnly`` continuations are accepted from then on."""
    session[PIPELINE_HANDOFF_KEY] = {"outcome": outcome}
    session.pop(PIPELINE_WAITING_KEY, None)


def pipeline_handed_off(session: Mapping[str, Any]) -> bool:
    """Whether the context's pipeline has handed off (a completed handoff)."""
    return isinstance(session.get(PIPELINE_HANDOFF_KEY), Mapping)


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

    def resume_turn(self, turn: TurnRequest, frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """Resume a turn paused on a durable permission wait, on the runtime that ran it
        (``NotImplementedError`` when that one cannot resume)."""
        runtime = self.chat if turn.run_mode != "pipeline" else self.pipelines.get(
            turn.pipeline_name or durable_pipeline(turn.session) or self.default_pipeline)
        resume = getattr(runtime, "resume_turn", None)
        if resume is None:
            raise NotImplementedError("this turn's runtime cannot resume")
        return resume(turn, frame)  # type: ignore[no-any-return]

    async def handed_off(self, context_id: str, session: Mapping[str, Any]) -> bool:
        """Whether the context's pipeline (its session's, else the server's) says, from its own durable state, that
        it handed off (pipelines without ``handed_off`` say no)."""
        name = durable_pipeline(session) or self.default_pipeline
        ask = getattr(self.pipelines.get(name), "handed_off", None)
        return bool(await ask(context_id)) if ask is not None else False

    async def interrupt(self, interrupt: Interrupt) -> bool:
        """Offer user text for a running turn to the pipelines (the one running that context takes it)."""
        for pipeline in self.pipelines.values():
            deliver = getattr(pipeline, "interrupt", None)
            if deliver is not None and await deliver(interrupt):
                return True
        return False
