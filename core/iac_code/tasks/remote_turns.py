"""The request handler's paths for a turn running on another node (``task-store`` shared, :mod:`iac_code.base.cluster`).

CancelTask and permission answers are forwarded to the node running the turn and
its answer (or A2A error) comes back as the caller's; SubscribeToTask and the
answer's continuation follow the task's event log in the shared store. A node
running a turn serves the forwarded calls through :meth:`RemoteTurns.on_control`.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.types.a2a_pb2 import Message, SendMessageRequest, Task
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length

from iac_code.base.cluster import NODE_UNAVAILABLE, NodeLink, NodeUnavailableError
from iac_code.tasks.permissions import PERMISSION_NOT_ACTIVE, Answer, PermissionBroker, acknowledgement
from iac_code.tasks.task_events import replayed, stamped_copy
from iac_code.tasks.task_store import interruption, is_interrupted
from iac_code.tasks.turns import STOP_STATES, TERMINAL_STATES, Turn, TurnEngine, events_after, state_of

if TYPE_CHECKING:
    from a2a.server.tasks import TaskStore

logger = logging.getLogger(__name__)

_ERRORS_BY_CODE: dict[int, type[A2AError]] = {
    -32602: InvalidParamsError, -32001: TaskNotFoundError, -32002: TaskNotCancelableError,
    -32004: UnsupportedOperationError, -32603: InternalError,
}


def _code_of(error: A2AError) -> int:
    for code, kind in _ERRORS_BY_CODE.items():
        if type(error) is kind:
            return code
    return -32603


def _a2a_error(error: dict[str, Any]) -> A2AError:
    """The A2A error another node answered with, as the same error here."""
    kind = _ERRORS_BY_CODE.get(int(error.get("code", -32603)), InternalError)
    return kind(message=str(error.get("message") or ""))


class RemoteTurns:
    """Mixed into :class:`iac_code.tasks.request_handler.KernelRequestHandler`: the cross-node paths."""

    _link: NodeLink | None
    _forward_timeout: float
    _permissions: PermissionBroker | None
    engine: TurnEngine
    task_store: TaskStore
    turn_ends_in_input_required: bool

    if TYPE_CHECKING:  # the handler's own, used here
        async def _settle(self, item: Any, context: ServerCallContext) -> None: ...
        async def _stored(self, task_id: str, context: ServerCallContext) -> tuple[Task, int] | None: ...
        def _ends(self, item: Any) -> bool: ...
        def _settled(self, events: AsyncIterator[Any], context: ServerCallContext) -> AsyncGenerator[Any, None]: ...

    async def _forward(self, node: str, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run ``op`` on the node running the turn; its A2A error comes back as the same error."""
        assert self._link is not None
        try:
            reply = await self._link.call(node, op, payload, self._forward_timeout)
        except NodeUnavailableError:
            raise InternalError(message=NODE_UNAVAILABLE) from None
        error = reply.get("error")
        if isinstance(error, dict):
            raise _a2a_error(error)
        return reply

    async def _follow_elsewhere(self, task: Task, version: int, after: int | None,
                                context: ServerCallContext, *,
                                between_turns: bool = False) -> AsyncGenerator[Any, None]:
        """SubscribeToTask to a turn running on another node (or a task between turns): its event log, pushed.

        Without ``after`` (or when the missed events are no longer retained) the stream
        opens with the task snapshot and follows from its version; it ends where a
        subscription on the running node would (the turn's next stop, or a terminal state).
        ``between_turns``: the snapshot is an iac-code task resting after its turn, so the
        stream goes on into the next turn (wherever it runs) and ends at that turn's stop.
        """
        assert self._link is not None
        replay = None
        if after is not None:
            replay = await events_after(self.task_store, task.id, after, version, context)
        start = version
        if replay is None:
            yield stamped_copy(task, version)
            if self._ends(task) and not between_turns:
                return
        else:
            start = after if after is not None else version
            if not replay and self._ends(task):
                return  # nothing missed and the turn is at a stop: where the original stream ended
        async for item in self._settled(self._follow_log(task.id, start), context):
            yield item
            if self._ends(item):
                return

    async def _forward_answer(self, node: str, answer: Answer, context: ServerCallContext) -> None:
        await self._forward(node, "answer", {"owner": resolve_user_scope(context), "answer": dataclasses.asdict(answer)})

    async def _follow_log(self, task_id: str, after: int) -> AsyncGenerator[Any, None]:
        assert self._link is not None
        stream = self._link.follow(task_id, after)
        try:
            async for entry in stream:
                yield replayed(entry)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def _answer_elsewhere(self, answer: Answer, context: ServerCallContext, immediately: bool) -> Task | Message:
        """A permission answer for a turn paused on another node: forwarded, then awaited in the task's log."""
        task, version, node = await self._paused_elsewhere(answer, context)
        pick = acknowledgement(answer.input_id)
        await self._forward_answer(node, answer, context)
        async for event in self._follow_log(task.id, version):
            state = state_of(event)
            if immediately:
                ack = pick(event, task)
                if ack is not None:
                    return ack
                if state in TERMINAL_STATES:  # the turn ended (interrupted, say) without acknowledging
                    break
            elif state in STOP_STATES:
                break
        stored = await self._stored(task.id, context)
        if stored is None:
            raise TaskNotFoundError
        return stored[0]

    async def _stream_answer_elsewhere(self, answer: Answer, context: ServerCallContext,
                                       params: SendMessageRequest) -> AsyncGenerator[Any, None]:
        """Streamed answer to a turn paused elsewhere: the paused task, then the continuation to the next stop."""
        task, version, node = await self._paused_elsewhere(answer, context)
        await self._forward_answer(node, answer, context)
        yield apply_history_length(stamped_copy(task, version), params.configuration)
        async for event in self._settled(self._follow_log(task.id, version), context):
            yield apply_history_length(event, params.configuration) if isinstance(event, Task) else event
            if state_of(event) in STOP_STATES:
                return

    async def _paused_elsewhere(self, answer: Answer, context: ServerCallContext) -> tuple[Task, int, str]:
        assert self._link is not None
        stored = await self._stored(answer.task_id, context)
        if stored is None:
            raise InvalidParamsError(message=PERMISSION_NOT_ACTIVE)
        task, version = stored
        node = await self._link.runner(resolve_user_scope(context), task.context_id, task.id)
        if node is None or node == self._link.node_id:
            raise InvalidParamsError(message=PERMISSION_NOT_ACTIVE)
        return task, version, node

    async def on_control(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """A call another node forwarded for a turn running here (:class:`iac_code.base.cluster.ControlHandler`)."""
        try:
            task_id = str(payload.get("taskId") or payload.get("answer", {}).get("task_id") or "")
            turn = self.engine.running(task_id)
            if turn is None or turn.owner != payload.get("owner"):
                if op == "answer":
                    raise InvalidParamsError(message=PERMISSION_NOT_ACTIVE)
                raise TaskNotCancelableError
            if op == "cancel":
                canceled = await self.engine.cancel(turn, turn.call_context)
                await self._settle(canceled, turn.call_context)
                return {"task": base64.b64encode(canceled.SerializeToString()).decode()}
            if op == "answer" and self._permissions is not None:
                self._permissions.resolve(Answer(**payload["answer"]))
                return {}
            raise UnsupportedOperationError(message=f"Unknown node call {op!r}")
        except A2AError as exc:
            return {"error": {"code": _code_of(exc), "message": exc.message}}

    async def _interrupt(self, turn: Turn) -> None:
        """Mark the task of a turn cut by this node's shutdown FAILED "Task interrupted"."""
        try:
            stored = await self.task_store.get_versioned(turn.task_id, turn.call_context)
            if stored is None or not is_interrupted(stored.task):
                return
            task, event = interruption(stored.task)
            await self.task_store.save_event(task, event, turn.call_context, prev_version=stored.version)
            await self._settle(task, turn.call_context)
        except Exception as exc:  # the shared store is unreachable: the task keeps its last state
            logger.warning("Could not mark task %s interrupted at shutdown: %s", turn.task_id, type(exc).__name__)
