"""The request handler's paths for a permission answer that finds a checkpoint instead of a live turn (since-0.13 §4.3).

A permission answer first goes to the turn waiting for it (this node's broker, or the node running
it). When none waits but the task has a durable checkpoint (:mod:`iac_code.tasks.permission_waits`),
the answer is checked against the checkpoint and:

* a boundary already ``RESOLVED`` (or being restored) gets only the acknowledgement again, a
  ``permission_ack`` message with ``duplicate: true`` (nothing runs twice); another decision is refused;
* a ``SUSPENDED`` boundary (or one whose owner is gone: a restart, a dead node) is claimed
  ``RESTORING`` with the decision, the runtime's ``resume_turn`` is started and checked, and the
  turn resumes as a new run of the task: ``permissionRecovered``, ``inputReceived`` with
  ``recovered: true``, the paused call and the rest of the turn. A unary answer returns the task at
  the turn's next stop (``returnImmediately``: the acknowledgement), a streamed one the suspended
  task and then the turn's events.

Also here: a new message in a context whose task waits on a suspended permission is refused with
how to answer it, and CancelTask cancels a suspended task (its checkpoint becomes ``CANCELED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.types.a2a_pb2 import Message, SendMessageRequest, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from a2a.utils.errors import UnsupportedOperationError
from a2a.utils.task import apply_history_length

from iac_code.protocol.dispatcher import RAW_PARAMS_KEY
from iac_code.tasks.executor import CONTEXT_STATE_KEY, RESUME_STATE_KEY
from iac_code.tasks.inputs import iac_code_metadata, strip_turn_secrets
from iac_code.tasks.llm_headers import LlmHeaderStore, take_llm_headers
from iac_code.tasks.permission_waits import (
    CANCELED,
    CONFLICTS_CHECKPOINT,
    CONFLICTS_RECEIPT,
    CONFLICTS_RECOVERY,
    CONTEXT_CHANGED,
    IDENTITY_SCHEMA,
    LEGACY_IDENTITY,
    LIVE_PHASES,
    OWNER_CHANGED,
    RESOLVED,
    RESTORING,
    SUSPENDED,
    TASK_CONTEXT_MISMATCH,
    UNAVAILABLE,
    PermissionWaits,
    invalid,
)
from iac_code.tasks.permissions import Answer, PermissionBroker, ack_message, awaited_answer, pending_error
from iac_code.tasks.task_store import is_suspended
from iac_code.tasks.turns import ALREADY_WORKING, Subscription, Turn, TurnEngine, until_stop

if TYPE_CHECKING:
    from a2a.server.tasks import TaskStore

    from iac_code.base.cluster import NodeLink
    from iac_code.tasks.contexts import ContextRegistry

logger = logging.getLogger(__name__)

SUSPENDING_WAIT_SECONDS = 30.0  # an answer that arrives while its turn is being suspended waits this long for it
ATTEMPTS = 3  # a claim lost to a concurrent answer is looked at again this often


@dataclass(frozen=True)
class Recovery:
    """What a checkpoint makes of an answer: ``duplicate`` (only the acknowledgement) or ``resume``."""

    kind: str
    record: dict[str, Any]
    task: Task


def duplicate_ack(record: dict[str, Any]) -> Message:
    """The acknowledgement of an answer repeated against a resolved (or resolving) checkpoint."""
    ack = ack_message(task_id=str(record["taskId"]), context_id=str(record["contextId"]),
                      input_id=str(record["inputId"]), tool_use_id=str(record["toolUseId"]),
                      decision=str(record.get("decision") or ""))
    ack.parts[0].data.struct_value.fields["duplicate"].bool_value = True
    ack.metadata.update({"iac_code": {"inputReceived": {
        "kind": "permission", "inputId": record["inputId"], "toolUseId": record["toolUseId"],
        "decision": record.get("decision"), "recovered": bool(record.get("recovered")), "duplicate": True}}})
    return ack


class _Retry(Exception):  # noqa: N818 - control flow: the checkpoint changed under a claim, look again
    pass


class PermissionRecovery:
    """Mixed into :class:`iac_code.tasks.request_handler.KernelRequestHandler` (see the module)."""

    _waits: PermissionWaits | None
    _permissions: PermissionBroker | None
    _contexts: ContextRegistry | None
    _link: NodeLink | None
    _llm_headers: LlmHeaderStore | None
    engine: TurnEngine
    task_store: TaskStore
    agent_executor: Any

    if TYPE_CHECKING:  # the handler's own, used here
        async def _settle(self, item: Any, context: ServerCallContext) -> None: ...
        async def _start(self, request: RequestContext, context: ServerCallContext, existing: Task | None,
                         **options: Any) -> Turn: ...
        def _settled(self, events: AsyncIterator[Any], context: ServerCallContext) -> AsyncGenerator[Any, None]: ...
        @staticmethod
        def _language(params: SendMessageRequest, context: ServerCallContext) -> str | None: ...

    # ------------------------------------------------------------------ finding the checkpoint

    async def _recovery(self, answer: Answer, context: ServerCallContext) -> Recovery | None:
        """What the checkpoint of ``answer`` makes of it; ``None``: no checkpoint concerns it (a live turn waits
        for it here or on another node, or the wait was never durable): the usual paths answer it."""
        waits, broker = self._waits, self._permissions
        if waits is None or broker is None or broker.waits_for(answer.task_id, answer.input_id):
            return None
        record = await waits.find(answer.task_id, answer.input_id)
        if record is None:
            return None
        if record.get("identitySchema") != IDENTITY_SCHEMA:
            raise invalid(LEGACY_IDENTITY)
        owner = resolve_user_scope(context)
        if record.get("owner") != owner:
            raise invalid(OWNER_CHANGED)
        task = await self.task_store.get(answer.task_id, context)
        if task is None:
            raise invalid(UNAVAILABLE)
        if task.context_id != record.get("contextId"):
            raise invalid(CONTEXT_CHANGED)
        if answer.context_id != task.context_id:
            raise invalid(TASK_CONTEXT_MISMATCH)
        if answer.tool_use_id != record.get("toolUseId"):
            raise invalid(CONFLICTS_CHECKPOINT)
        for _ in range(ATTEMPTS):
            phase = record.get("phase")
            if phase == RESOLVED:
                if answer.decision != record.get("decision"):
                    raise invalid(CONFLICTS_RECEIPT)
                return Recovery("duplicate", record, task)
            if phase == CANCELED:
                raise invalid(UNAVAILABLE)
            held = await self._held(owner, record)
            if phase == RESTORING and held:
                if answer.decision != record.get("decision"):
                    raise invalid(CONFLICTS_RECOVERY)
                return Recovery("duplicate", record, task)
            if phase in LIVE_PHASES and held:
                turn = self.engine.running(answer.task_id)
                if turn is None:
                    return None  # live on another node: the answer is forwarded there
                try:  # answered or being suspended right now: look again once its turn has ended
                    await asyncio.wait_for(turn.done.wait(), SUSPENDING_WAIT_SECONDS)
                except TimeoutError:
                    return None
                record = await waits.find(answer.task_id, answer.input_id) or record
                task = await self.task_store.get(answer.task_id, context) or task
                continue
            # Nobody holds it: suspended, or its owner is gone (a restart, a dead node).
            awaited = awaited_answer(task)
            if awaited is None or awaited.input_id != answer.input_id:
                await waits.move(record, CANCELED)  # the task went on without it (interrupted, failed, canceled)
                raise invalid(UNAVAILABLE)
            if phase == SUSPENDED:
                return Recovery("resume", record, task)
            record = await waits.move(record, SUSPENDED, decision=None) or \
                await waits.find(answer.task_id, answer.input_id) or record
        raise invalid(UNAVAILABLE)

    async def _held(self, owner: str, record: dict[str, Any]) -> bool:
        """Whether a turn of the boundary's task holds its context now (here, or on a live node)."""
        task_id, context_id = str(record["taskId"]), str(record["contextId"])
        if self.engine.running(task_id) is not None:
            return True
        if self._contexts is not None and self._contexts.running_task(owner, context_id) == task_id:
            return True
        if self._link is not None:
            return await self._link.runner(owner, context_id, task_id) is not None
        return False

    # ------------------------------------------------------------------ resuming

    async def _start_recovery(self, recovery: Recovery, answer: Answer, params: SendMessageRequest,
                              context: ServerCallContext, **options: Any) -> Turn | Recovery:
        """Claim the checkpoint and start the resumed turn; a :class:`Recovery` (``duplicate``) when a concurrent
        answer claimed it first."""
        for _ in range(ATTEMPTS):
            try:
                return await self._claim_and_start(recovery, answer, params, context, **options)
            except _Retry:
                claiming = self._claims().get(answer.task_id)
                if claiming is not None:  # another answer here holds the context: let its claim land first
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(claiming.wait(), SUSPENDING_WAIT_SECONDS)
                again = await self._recovery(answer, context)
                if again is None:
                    break
                if again.kind == "duplicate":
                    return again
                recovery = again
        raise invalid(UNAVAILABLE)

    async def _claim_and_start(self, recovery: Recovery, answer: Answer, params: SendMessageRequest,
                               context: ServerCallContext, **options: Any) -> Turn:
        assert self._waits is not None and self._contexts is not None
        record, task = recovery.record, recovery.task
        owner = resolve_user_scope(context)
        raw = context.state.get(RAW_PARAMS_KEY)
        metadata, headers = take_llm_headers(
            iac_code_metadata(params.message, raw.get("message") if isinstance(raw, dict) else None))
        strip_turn_secrets(params.message)
        live_headers: dict[str, str] = {}
        if self._llm_headers is not None:
            self._llm_headers.apply(owner, task.context_id, headers)
            live_headers = self._llm_headers.live(owner, task.context_id)
        cwd = str(record.get("turn", {}).get("cwd") or "")
        try:
            reserved = await self._contexts.reserve(owner, task.context_id, cwd, None, task.id)
        except UnsupportedOperationError as exc:
            if exc.message == ALREADY_WORKING:
                raise _Retry from None  # another answer is resuming it
            raise
        handed = False
        claims = self._claims()
        claims[task.id] = settled = asyncio.Event()
        try:
            claimed = await self._waits.move(record, RESTORING, decision=answer.decision, recovered=True,
                                             node=self._waits.node_id)
            if claimed is None:
                raise _Retry
            try:
                resumption = await self.agent_executor.open_resume(claimed, reserved, metadata, live_headers)
            except BaseException:
                await self._waits.move(claimed, SUSPENDED, decision=None, recovered=False)
                raise
            context.state[CONTEXT_STATE_KEY] = reserved
            context.state[RESUME_STATE_KEY] = resumption
            request = RequestContext(call_context=context, task_id=task.id, context_id=task.context_id, task=task)
            handed = True  # from here on the turn (or _start, if it fails) releases the context
            return await self._start(request, context, task, **options)
        finally:
            settled.set()
            if claims.get(task.id) is settled:
                del claims[task.id]
            if not handed:
                await self._contexts.release(reserved)

    def _claims(self) -> dict[str, asyncio.Event]:
        """Claims in progress on this node, by task: set once the claim has landed (or was given up)."""
        claims: dict[str, asyncio.Event] | None = getattr(self, "_claiming", None)
        if claims is None:
            claims = self._claiming = {}
        return claims

    async def _answer_recovery(self, recovery: Recovery, answer: Answer, params: SendMessageRequest,
                               context: ServerCallContext, immediately: bool) -> Task | Message:
        """SendMessage with an answer a checkpoint takes: the duplicate ack, or the resumed turn at its next stop."""
        from iac_code.tasks.permissions import acknowledgement

        if recovery.kind == "duplicate":
            return duplicate_ack(recovery.record)
        started = await self._start_recovery(recovery, answer, params, context)
        if isinstance(started, Recovery):
            return duplicate_ack(started.record)
        return await started.wait(acknowledgement(answer.input_id) if immediately else until_stop)

    async def _stream_recovery(self, recovery: Recovery, answer: Answer, params: SendMessageRequest,
                               context: ServerCallContext) -> AsyncGenerator[Any, None]:
        """SendStreamingMessage with an answer a checkpoint takes: the duplicate ack alone, or the suspended task
        and then the resumed turn's events up to its next stop."""
        if recovery.kind == "duplicate":
            yield duplicate_ack(recovery.record)
            return
        subscription = Subscription(ends_at_stop=True)
        started = await self._start_recovery(recovery, answer, params, context, subscription=subscription)
        if isinstance(started, Recovery):
            yield duplicate_ack(started.record)
            return
        try:
            yield apply_history_length(recovery.task, params.configuration)
            async for event in self._settled(subscription.events(), context):
                yield apply_history_length(event, params.configuration) if isinstance(event, Task) else event
        finally:
            started.detach(subscription)

    # ------------------------------------------------------------------ beside a suspended wait

    async def _refuse_beside_suspended(self, params: SendMessageRequest, context: ServerCallContext,
                                       context_id: str) -> None:
        """A new message in a context whose task waits on a suspended permission: how to answer it (-32602)."""
        if self._waits is None:
            return
        owner = resolve_user_scope(context)
        for record in await self._waits.open_in_context(owner, context_id):
            if record.get("phase") == RESTORING or await self._held(owner, record):
                continue  # its turn holds the context: the reservation refuses the message (and says why)
            task = await self.task_store.get(str(record["taskId"]), context)
            awaited = awaited_answer(task) if task is not None else None
            if awaited is None or awaited.input_id != record.get("inputId"):
                # its task went on without it (a crash between the checkpoint and the question): forget it
                await self._waits.move(record, CANCELED)
                continue
            raise pending_error(str(record["taskId"]), self._language(params, context))

    async def _cancel_suspended(self, task: Task, context: ServerCallContext) -> Task:
        """CancelTask of a task whose permission wait is suspended: its checkpoint ``CANCELED``, the task CANCELED."""
        assert self._waits is not None
        await self._waits.cancel_task(task.id)
        canceled = Task()
        canceled.CopyFrom(task)
        if canceled.status.HasField("message"):
            canceled.history.append(canceled.status.message)
        canceled.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_CANCELED))
        canceled.status.timestamp.GetCurrentTime()
        canceled.metadata.update({"iac_code": {"permissionWait": {"status": "canceled", "resumable": False}}})
        await self.task_store.save(canceled, context)
        await self._settle(canceled, context)
        sender = getattr(self, "_push_sender", None)
        if sender is not None:
            await sender.send_notification(canceled.id, TaskStatusUpdateEvent(
                task_id=canceled.id, context_id=canceled.context_id, status=canceled.status))
        return canceled


__all__ = ["PermissionRecovery", "Recovery", "duplicate_ack", "is_suspended"]
