"""The kernel's AgentExecutor: runtime events in, A2A events out.

This is the one place that translates :mod:`iac_code.runtime` events into
a2a-sdk task events. A turn of an iac-code runtime ends in
``TASK_STATE_INPUT_REQUIRED`` (the context stays open for follow-ups).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus

from iac_code.inputs import DecodedInput
from iac_code.runtime import (
    AgentRuntime,
    TextDelta,
    ToolCompleted,
    ToolFailed,
    ToolInputComplete,
    ToolInputDelta,
    ToolStarted,
    TurnFailed,
    TurnRequest,
    Usage,
)

logger = logging.getLogger(__name__)

INPUT_STATE_KEY = "iac_code.input"
EMPTY_INPUT_TEXT = "A2A server currently accepts text input only."
CANCELED_TEXT = "Task canceled."
INTERNAL_FAILURE_TEXT = "The agent runtime failed unexpectedly. The error was logged on the server."
RESULT_FIELD_LIMIT = 4000


def agent_message(task_id: str, context_id: str, message_id: str, text: str) -> Message:
    """A ROLE_AGENT text message bound to the task."""
    return Message(message_id=message_id, role=Role.ROLE_AGENT, parts=[Part(text=text)],
                   task_id=task_id, context_id=context_id)


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value[:RESULT_FIELD_LIMIT]
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value


class RuntimeExecutor(AgentExecutor):
    """Runs one iac-code runtime turn per A2A message and publishes its events."""

    turn_ends_in_input_required = True

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(Task(
                id=task_id, context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message]))
        try:
            await updater.update_status(TaskState.TASK_STATE_WORKING)
            decoded: DecodedInput | None = context.call_context.state.get(INPUT_STATE_KEY)
            if decoded is None or (not decoded.prompt.strip() and not decoded.manifest):
                await updater.failed(agent_message(task_id, context_id, f"{task_id}-4", EMPTY_INPUT_TEXT))
                return
            turn = TurnRequest(context_id=context_id, task_id=task_id, prompt=decoded.prompt,
                               cwd=os.getcwd(), manifest=decoded.manifest)
            await self._run(turn, updater)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Agent runtime %r failed on task %s", getattr(self._runtime, "name", "?"), task_id)
            await updater.failed(agent_message(task_id, context_id, f"{task_id}-4", INTERNAL_FAILURE_TEXT))

    async def _run(self, turn: TurnRequest, updater: TaskUpdater) -> None:
        task_id, context_id = turn.task_id, turn.context_id
        chunks: list[str] = []
        usage: Usage | None = None
        delta_id = f"{task_id}-message"
        working = TaskState.TASK_STATE_WORKING
        async for event in self._runtime.run_turn(turn):
            if isinstance(event, TextDelta):
                if event.text:
                    chunks.append(event.text)
                    await updater.update_status(working, agent_message(task_id, context_id, delta_id, event.text))
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, ToolStarted | ToolInputDelta | ToolInputComplete | ToolCompleted | ToolFailed):
                await updater.update_status(working, metadata={"iac_code": {"tool": self._tool_metadata(event)}})
            elif isinstance(event, TurnFailed):
                state = TaskState.TASK_STATE_INPUT_REQUIRED if event.retryable else TaskState.TASK_STATE_FAILED
                await updater.update_status(
                    state, agent_message(task_id, context_id, f"{task_id}-{int(state)}", event.message[:1000]),
                    metadata={"iac_code": {"error": {"retryable": event.retryable}}})
                return
        metadata: dict[str, Any] = {"assistantFinal": {"complete": True}}
        if usage is not None:
            metadata["usage"] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                                 "totalTokens": usage.input_tokens + usage.output_tokens}
        await updater.update_status(working, agent_message(task_id, context_id, f"{task_id}-2", "".join(chunks)),
                                    metadata={"iac_code": metadata})
        await updater.requires_input()

    @staticmethod
    def _tool_metadata(event: Any) -> dict[str, Any]:
        status = {ToolStarted: "started", ToolInputDelta: "input_delta", ToolInputComplete: "input_complete",
                  ToolCompleted: "completed", ToolFailed: "failed"}[type(event)]
        data: dict[str, Any] = {"status": status, "toolUseId": event.tool_use_id, "name": event.name}
        if isinstance(event, ToolCompleted):
            data["result"] = _cut(dict(event.result))
        elif isinstance(event, ToolFailed):
            data["result"] = {"error": event.error[:RESULT_FIELD_LIMIT]}
        return data

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.cancel(agent_message(task_id, context_id, f"{task_id}-5", CANCELED_TEXT))
