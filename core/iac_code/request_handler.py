"""a2a-sdk's DefaultRequestHandler with the kernel's two additions.

1. Input parts are decoded (through the decoder plugins) while the request
   context is built, before a task exists, so refused input is a JSON-RPC error.
2. For runtimes whose turns end in ``INPUT_REQUIRED`` (iac-code runtimes), a
   task resting there has *finished* its turn: it is not cancelable and has
   nothing to subscribe to. Brought-in SDK executors keep the A2A meaning,
   where INPUT_REQUIRED is an interrupted, live state.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import Any, Protocol

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from iac_code.dispatcher import RAW_PARAMS_KEY
from iac_code.executor import INPUT_STATE_KEY
from iac_code.inputs import InputDecoder


TURN_END_STATES = frozenset({
    TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED, TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED,
})


class TurnTracker(Protocol):
    def is_running(self, task_id: str) -> bool: ...


class DecodingContextBuilder(SimpleRequestContextBuilder):
    """Builds the SDK request context and decodes the message's parts first."""

    def __init__(self, decoder: InputDecoder) -> None:
        super().__init__(should_populate_referred_tasks=False, task_store=None)
        self._decoder = decoder

    async def build(self, context: ServerCallContext, params: SendMessageRequest | None = None,
                    task_id: str | None = None, context_id: str | None = None,
                    task: Task | None = None) -> RequestContext:
        if params is not None:
            raw = context.state.get(RAW_PARAMS_KEY)
            raw_parts = raw.get("message", {}).get("parts") if isinstance(raw, dict) else None
            if not isinstance(raw_parts, list):
                raw_parts = None
            context.state[INPUT_STATE_KEY] = self._decoder.decode(params.message, os.getcwd(), raw_parts)
        return await super().build(context, params=params, task_id=task_id, context_id=context_id, task=task)


class KernelRequestHandler(DefaultRequestHandler):
    """DefaultRequestHandler whose INPUT_REQUIRED meaning follows the runtime."""

    def __init__(self, *args: Any, turns: TurnTracker | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turns = turns

    async def _finished_turn(self, task_id: str, context: ServerCallContext) -> bool:
        if self._turns is None:
            return False
        task = await self.task_store.get(task_id, context)
        return (task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                and not self._turns.is_running(task_id))

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        if await self._finished_turn(params.id, context):
            raise TaskNotCancelableError
        return await super().on_cancel_task(params, context)

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Any, None]:
        if await self._finished_turn(params.id, context):
            raise TaskNotFoundError(message=f"Task {params.id} is not active")
        stream = super().on_subscribe_to_task(params, context)
        try:
            async for event in stream:
                yield event
                if self._turns is not None and _ends_turn(event):
                    return  # the turn is over: an iac-code subscription ends with it
        finally:
            await stream.aclose()


def _ends_turn(event: Any) -> bool:
    if isinstance(event, TaskStatusUpdateEvent):
        state = event.status.state
    elif isinstance(event, Task):
        state = event.status.state
    else:
        return False
    return state in TURN_END_STATES
