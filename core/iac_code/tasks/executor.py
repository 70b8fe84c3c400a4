"""The kernel's AgentExecutor: runtime events in, A2A events out.

This is the one place that translates :mod:`iac_code.agents.runtime` events into
a2a-sdk task events. A turn of an iac-code runtime ends in
``TASK_STATE_INPUT_REQUIRED`` (the context stays open for follow-ups).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus

from iac_code.language import messages as m
from iac_code.base import tracing
from iac_code.base.turn_gates import (
    PERMISSION,
    PERMISSION_ANSWERED,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_STARTED,
    TurnPoint,
)
from iac_code.tasks.artifacts import ArtifactStore
from iac_code.tasks.contexts import ContextRegistry, ContextState, channel_fallback
from iac_code.tasks.gating import TurnGates
from iac_code.language.i18n import translator
from iac_code.tasks.inputs import TurnInput
from iac_code.tasks.llm_headers import LlmHeaderStore
from iac_code.tasks.permission_waits import (
    REQUEST_CHANGED,
    RESOLVED,
    SUSPENDED,
    SUSPENDED_WAIT,
    SUSPENDING,
    TIMEOUT_GRACE,
    UNAVAILABLE,
    WAITING_WAIT,
    PermissionWaits,
    Resumption,
    WaitSuspended,
    invalid,
    request_digest,
    restore_session,
    restored_turn,
)
from iac_code.tasks.permissions import (
    ALLOW_ONCE,
    DENY,
    AuditLog,
    Decision,
    PermissionBroker,
    PermissionPolicy,
    ack_message,
    audit_record,
    envelope,
    pause_text,
)
from iac_code.tasks.sessions import SESSION_ID_FIELD, session_id_of
from iac_code.agents.runtime import (
    AgentRuntime,
    ArtifactPayload,
    Interrupt,
    PermissionRequest,
    Progress,
    TextDelta,
    Thinking,
    ToolCompleted,
    ToolFailed,
    ToolInputComplete,
    ToolInputDelta,
    ToolStarted,
    TurnFailed,
    TurnRequest,
    Usage,
)
from iac_code.agents.tool_metadata import FIELD_LIMIT, input_summary, tool_result

logger = logging.getLogger(__name__)

INPUT_STATE_KEY = "iac_code.input"
CONTEXT_STATE_KEY = "iac_code.context"
RESUME_STATE_KEY = "iac_code.resume"  # a recovered permission answer: the turn resumes (permission_recovery)


def agent_message(task_id: str, context_id: str, kind: str, text: str) -> Message:
    """A ROLE_AGENT text message bound to the task, with a unique ``<taskId>-<kind>-<hex>`` id."""
    return Message(message_id=f"{task_id}-{kind}-{uuid.uuid4().hex[:16]}", role=Role.ROLE_AGENT,
                   parts=[Part(text=text)], task_id=task_id, context_id=context_id)


def usage_metadata(usage: Usage) -> dict[str, Any]:
    """``metadata.iac_code.usage``: the token counts, and ``provider``, ``model``, ``cachedInputTokens`` when known."""
    data: dict[str, Any] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                            "totalTokens": usage.input_tokens + usage.output_tokens}
    if usage.provider:
        data["provider"] = usage.provider[:128]
    if usage.model:
        data["model"] = usage.model[:256]
    if usage.cached_input_tokens is not None:
        data["cachedInputTokens"] = usage.cached_input_tokens
    return data


class _Updater(TaskUpdater):
    """The turn's ``TaskUpdater``: remembers the last state it published, puts the session id
    (``iacCodeSessionId``) into ``metadata.iac_code`` of every status update, and merges the turn gates'
    entries there for each one that carries metadata or changes the state."""

    def __init__(self, event_queue: EventQueue, task_id: str, context_id: str, gates: TurnGates | None = None,
                 owner: str = "") -> None:
        super().__init__(event_queue, task_id, context_id)
        self.last_state: int | None = None
        self._gates = gates
        self._owner = owner
        self._session_id = session_id_of(context_id)

    async def update_status(self, state: TaskState, message: Message | None = None, timestamp: str | None = None,
                            metadata: dict[str, Any] | None = None) -> None:
        gates = self._gates
        iac_code = dict((metadata or {}).get("iac_code") or {})
        if gates and (metadata is not None or state != self.last_state):
            extra = gates.metadata(self._owner, self.context_id)
            if extra:
                iac_code.update(extra)
        iac_code[SESSION_ID_FIELD] = self._session_id  # every status carries it (and so the task's metadata)
        metadata = {**(metadata or {}), "iac_code": iac_code}
        self.last_state = state
        await super().update_status(state, message, timestamp, metadata)


class RuntimeExecutor(AgentExecutor):
    """Runs one iac-code runtime turn per A2A message and publishes its events."""

    turn_ends_in_input_required = True

    def __init__(self, runtime: AgentRuntime, contexts: ContextRegistry, artifacts: ArtifactStore, *,
                 policy: PermissionPolicy, broker: PermissionBroker, audit: AuditLog,
                 exposure: frozenset[str] = frozenset({"tool_trace"}),
                 permission_timeout: float | None = None, inline_bytes: int = 65536,
                 llm_headers: LlmHeaderStore | None = None, gates: TurnGates | None = None,
                 waits: PermissionWaits | None = None) -> None:
        self._runtime = runtime
        self.waits = waits  # durable permission waits (checkpoints), when the runtime can resume
        self.llm_headers = llm_headers if llm_headers is not None else LlmHeaderStore()
        self.gates = gates or TurnGates()  # iac_code_turn_gates: safe points, admission, status metadata
        self._inline_bytes = inline_bytes
        self.contexts = contexts
        self._artifacts = artifacts
        self.policy = policy
        self.broker = broker
        self._audit = audit
        self._tool_trace = "tool_trace" in exposure
        self._raw_thinking = "raw_thinking" in exposure
        self._permission_timeout = permission_timeout

    @property
    def runtime(self) -> AgentRuntime:
        """The agent runtime this executor runs (``/iac-code/readiness`` asks it about its model)."""
        return self._runtime

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        gates = self.gates
        owner = resolve_user_scope(context.call_context) if gates else ""
        updater = _Updater(event_queue, task_id, context_id, gates, owner)
        state = context.call_context.state
        reserved: ContextState | None = state.pop(CONTEXT_STATE_KEY, None)
        started, ending = False, "failed"  # how the turn ended, for the turn gates
        try:
            if context.current_task is None and context.message is not None:
                created = Task(id=task_id, context_id=context_id,
                               status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[context.message])
                created.metadata.update({"iac_code": {SESSION_ID_FIELD: session_id_of(context_id)}})
                await event_queue.enqueue_event(created)
            if gates:
                started = True
                await gates.safe_point(self._point(owner, context_id, task_id, TURN_STARTED, updater))
            resumption: Resumption | None = state.pop(RESUME_STATE_KEY, None)
            if resumption is not None and reserved is not None:  # a recovered permission answer
                await self._resume(resumption, reserved, updater, context.call_context)
                ending = {TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
                          TaskState.TASK_STATE_FAILED: "failed"}.get(updater.last_state, "normal-turn-ended")
                return
            await updater.update_status(TaskState.TASK_STATE_WORKING)
            turn_input: TurnInput | None = state.get(INPUT_STATE_KEY)
            t = translator(turn_input.language if turn_input is not None else None)
            if turn_input is not None and turn_input.error:
                failure = agent_message(task_id, context_id, "4", t(turn_input.error))
                if turn_input.error_detail:
                    failure.parts.append(Part(text=t(turn_input.error_detail)))
                await updater.update_status(
                    TaskState.TASK_STATE_FAILED, failure,
                    metadata={"iac_code": {"error": dict(turn_input.error_info)}} if turn_input.error_info else None)
                return
            if turn_input is None or reserved is None or (
                    not turn_input.decoded.prompt.strip() and not turn_input.decoded.manifest):
                await updater.failed(agent_message(task_id, context_id, "4", t(m.EMPTY_INPUT)))
                return
            owner = resolve_user_scope(context.call_context)
            self.llm_headers.apply(owner, context_id, turn_input.llm_headers)
            turn = TurnRequest(
                context_id=context_id, task_id=task_id, prompt=turn_input.decoded.prompt, cwd=turn_input.cwd,
                language=turn_input.language or "en", channel=channel_fallback(reserved.channel),
                manifest=turn_input.decoded.manifest, history=tuple(reserved.history), session=reserved.session,
                metadata=turn_input.metadata, run_mode=turn_input.run_mode, pipeline_name=turn_input.pipeline_name,
                llm_headers=self.llm_headers.live(owner, context_id))
            answer = await self._run(turn, updater, context.call_context, reserved)
            if answer is not None:
                ending = "normal-turn-ended"
                reserved.history.append({"role": "user", "text": turn.prompt})
                reserved.history.append({"role": "assistant", "text": answer})
            elif updater.last_state == TaskState.TASK_STATE_INPUT_REQUIRED:
                ending = "input-required"  # a retryable failure
        except asyncio.CancelledError:
            ending = "canceled"
            raise
        except Exception:
            logger.exception("Agent runtime %r failed on task %s", getattr(self._runtime, "name", "?"), task_id)
            language = getattr(state.get(INPUT_STATE_KEY), "language", None)
            await updater.failed(agent_message(task_id, context_id, "4",
                                               translator(language)(m.INTERNAL_FAILURE)))
        finally:
            if reserved is not None:
                await self.contexts.release(reserved)
            if started:
                await gates.turn_ended(TurnPoint(owner, context_id, task_id, "turn_ended"), ending)

    @staticmethod
    def _point(owner: str, context_id: str, task_id: str, kind: str, updater: TaskUpdater | None,
               event: Any = None) -> TurnPoint:
        """A turn point for the gates; ``updater`` given: it can announce a change on the task."""
        announce = None if updater is None else (
            lambda: updater.update_status(TaskState.TASK_STATE_WORKING, metadata={"iac_code": {}}))
        if event is None:
            return TurnPoint(owner, context_id, task_id, kind, announce=announce)
        if isinstance(event, PermissionRequest):
            return TurnPoint(owner, context_id, task_id, kind, event.tool_use_id, event.tool_name,
                             dict(event.operation), event.is_read_only, announce=announce)
        return TurnPoint(owner, context_id, task_id, kind, event.tool_use_id, event.name,
                         failed=isinstance(event, ToolFailed), announce=announce)

    async def _run(self, turn: TurnRequest, updater: TaskUpdater, call_context: ServerCallContext,
                   reserved: ContextState) -> str | None:
        """Translate the runtime's events; return the final answer (``None`` if the turn failed)."""
        return await self._run_events(turn, updater, call_context, None, "", reserved)

    async def _durable_session(self, turn: TurnRequest, reserved: ContextState) -> None:
        """Before a pipeline turn's end is published: its session (the handoff, the task it waits on) on disk."""
        if turn.run_mode == "pipeline" and self.contexts is not None:
            await self.contexts.persist(reserved)

    async def _translate(self, turn: TurnRequest, updater: TaskUpdater, call_context: ServerCallContext,
                         tool_spans: Any, reserved: ContextState, events: Any = None, said: str = "") -> str | None:
        """``events``: the runtime's events (default: a new ``run_turn``); ``said``: text of the turn before them."""
        task_id, context_id = turn.task_id, turn.context_id
        chunks: list[str] = [said] if said else []
        usage: Usage | None = None
        final: dict[str, Any] = {}  # Progress(final=True): merged into the turn's last status
        working = TaskState.TASK_STATE_WORKING
        gates = self.gates
        owner = resolve_user_scope(call_context) if gates else ""
        async for event in (events if events is not None else self._runtime.run_turn(turn)):
            if isinstance(event, Progress):
                if event.tool_trace and not self._tool_trace:
                    continue
                if event.final:
                    final.update(event.metadata)
                else:
                    await updater.update_status(
                        working, agent_message(task_id, context_id, "message", event.text) if event.text else None,
                        metadata={"iac_code": dict(event.metadata)})
            elif isinstance(event, TextDelta):
                if event.text:
                    chunks.append(event.text)
                    await updater.update_status(working, agent_message(task_id, context_id, "message", event.text))
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, ToolStarted | ToolInputDelta | ToolInputComplete | ToolCompleted | ToolFailed):
                tool_spans.observe(event)
                tool = self._tool_metadata(event)
                if isinstance(event, ToolCompleted) and event.artifact is not None:
                    tool["artifact"] = await self._store_artifact(turn, event.artifact, updater)
                if self._tool_trace:
                    await updater.update_status(working, metadata={"iac_code": {"tool": tool}})
                if gates and isinstance(event, ToolInputComplete | ToolCompleted | ToolFailed):  # a safe point
                    kind = TOOL_CALL if isinstance(event, ToolInputComplete) else TOOL_RESULT
                    await gates.safe_point(self._point(owner, context_id, task_id, kind, updater, event))
            elif isinstance(event, Thinking):
                if self._raw_thinking and event.text:
                    await updater.update_status(working, metadata={"iac_code": {"thinking": {
                        "type": "raw_thinking", "text": event.text[:FIELD_LIMIT]}}})
            elif isinstance(event, PermissionRequest):
                if gates:  # a safe point: before the question
                    await gates.safe_point(self._point(owner, context_id, task_id, PERMISSION, updater, event))
                event.allowed = await self._permission(event, turn, updater, call_context, "".join(chunks))
            elif isinstance(event, TurnFailed):
                await self._durable_session(turn, reserved)
                state = TaskState.TASK_STATE_INPUT_REQUIRED if event.retryable else TaskState.TASK_STATE_FAILED
                await updater.update_status(
                    state, agent_message(task_id, context_id, str(int(state)), event.message[:1000]),
                    metadata={"iac_code": {"error": {"retryable": event.retryable}}})
                return None
        answer = "".join(chunks)
        extra_final = final.get("assistantFinal")  # e.g. a pipeline's cleanupOnly summary
        metadata: dict[str, Any] = {**final, "assistantFinal": {
            **(dict(extra_final) if isinstance(extra_final, dict) else {}), "complete": True}}
        if usage is not None:
            metadata["usage"] = usage_metadata(usage)
        # One final event: the turn's end carries its answer where clients look (status.message), once.
        await self._durable_session(turn, reserved)
        await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED,
                                    agent_message(task_id, context_id, "2", answer) if answer else None,
                                    metadata={"iac_code": metadata})
        return answer

    async def pipeline_handed_off(self, context_id: str, session: Mapping[str, Any]) -> bool:
        """Whether the runtime's pipeline for ``context_id`` handed off by its own durable state (``handed_off`` of
        the :class:`~iac_code.tasks.run_modes.ModeRouter`; ``False`` for runtimes without it)."""
        ask = getattr(self._runtime, "handed_off", None)
        if ask is None:
            return False
        try:
            return bool(await ask(context_id, session))
        except Exception:
            logger.exception("Agent runtime %r failed to say whether context %s handed off",
                             getattr(self._runtime, "name", "?"), context_id)
            return False

    async def interrupt(self, interrupt: Interrupt) -> bool:
        """Offer user text to the runtime's running turn on its context (``runtime.interrupt``, when it has one);
        whether the turn took it."""
        deliver = getattr(self._runtime, "interrupt", None)
        if deliver is None:
            return False
        try:
            return bool(await deliver(interrupt))
        except Exception:
            logger.exception("Agent runtime %r failed to take an interrupt on context %s",
                             getattr(self._runtime, "name", "?"), interrupt.context_id)
            return False

    async def _store_artifact(self, turn: TurnRequest, payload: ArtifactPayload,
                              updater: TaskUpdater) -> dict[str, Any]:
        """Store the payload, emit a TaskArtifactUpdateEvent, return its reference for tool metadata.

        The first part is the artifact's URL (the HTTP route serving it); a payload of at most
        ``artifact-inline-bytes`` also comes inline as a second, text part with the same metadata.
        """
        stored = await self._artifacts.save(turn.task_id, payload.name, payload.media_type, payload.text)
        reference = {"artifactId": stored.artifact_id, "name": stored.name, "url": stored.uri,
                     "mediaType": stored.media_type, "byteSize": stored.byte_size, "sha256": stored.sha256}
        described = {"mediaType": stored.media_type, "byteSize": stored.byte_size, "sha256": stored.sha256}
        parts = [Part(url=stored.uri, media_type=stored.media_type, filename=stored.name)]
        if stored.byte_size <= self._inline_bytes:
            parts.append(Part(text=payload.text, media_type=stored.media_type, filename=stored.name))
        for part in parts:
            part.metadata.update(described)
        await updater.add_artifact(parts, artifact_id=stored.artifact_id, name=stored.name,
                                   metadata={"iac_code": {"artifact": reference}})
        payload.stored.update(reference)  # the runtime reads it when it resumes (e.g. the artifact's URL)
        return reference

    @staticmethod
    def _tool_metadata(event: Any) -> dict[str, Any]:
        status = {ToolStarted: "started", ToolInputDelta: "input_delta", ToolInputComplete: "input_complete",
                  ToolCompleted: "completed", ToolFailed: "failed"}[type(event)]
        data: dict[str, Any] = {"status": status, "toolUseId": event.tool_use_id, "name": event.name}
        if isinstance(event, ToolInputDelta):
            data["partialJsonLength"] = len(event.delta)
        elif isinstance(event, ToolInputComplete):
            data["inputSummary"] = input_summary(event.name, event.input)
        elif isinstance(event, ToolCompleted):
            data["result"] = tool_result(dict(event.result))
        elif isinstance(event, ToolFailed):
            data["result"] = {"error": event.error[:FIELD_LIMIT]}
        return data

    async def _permission(self, request: PermissionRequest, turn: TurnRequest, updater: TaskUpdater,
                          call_context: ServerCallContext, said: str = "") -> bool:
        """Decide one permission request: by policy, or by asking the caller (the turn pauses).

        A resumable request (the runtime set ``continuation`` and has ``resume_turn``) writes its durable
        checkpoint before the question is published, and may be suspended (:meth:`_durable_answer`)."""
        task_id, context_id = turn.task_id, turn.context_id
        owner = resolve_user_scope(call_context)
        decision = self.policy.decide(request)
        input_id = ""
        if decision is None:
            input_id, answer = self.broker.register(task_id, context_id, request.tool_use_id, request.input_id)
            try:
                note = {"autoApproved": False, "pending": True, "toolName": request.tool_name,
                        "toolUseId": request.tool_use_id}
                question = envelope(request, task_id=task_id, context_id=context_id, input_id=input_id,
                                    language=turn.language)
                boundary = None
                if self.waits is not None and request.continuation is not None and hasattr(
                        self._runtime, "resume_turn"):  # durable before the question is published
                    boundary = await self.waits.checkpoint(request, turn, input_id=input_id, owner=owner,
                                                           text=said, runtime=getattr(self._runtime, "name", ""))
                paused = {"input": question, "permission": note}
                if turn.run_mode == "pipeline":  # the pending-permissions mirror (input-and-permissions §2.1)
                    paused["pendingPermissions"] = [question]
                if boundary is not None:
                    paused["permissionWait"] = dict(WAITING_WAIT)
                pause = agent_message(task_id, context_id, "permission", pause_text(request, question))
                await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, pause,
                                            metadata={"iac_code": paused})
                if self.gates:  # parked until the answer
                    self.gates.waiting(self._point(owner, context_id, task_id, "waiting", None, request), True)
                if boundary is not None:
                    decision = await self._durable_answer(answer, boundary, turn, owner, input_id, updater, pause,
                                                          paused)
                else:
                    try:
                        decision = Decision(await asyncio.wait_for(answer, self._permission_timeout) == ALLOW_ONCE,
                                            "interactive")
                    except TimeoutError:
                        decision = Decision(False, "timeout")  # nobody answered: the request is denied
            finally:
                if self.gates:
                    self.gates.waiting(self._point(owner, context_id, task_id, "waiting", None, request), False)
                self.broker.discard(task_id, input_id)
        recorded = await self._audit.append(audit_record(
            request, task_id=task_id, context_id=context_id, owner=owner, decision=decision, input_id=input_id))
        allowed = decision.allow and recorded  # an allow that cannot be audited fails closed
        request.decided_by = decision.source
        if decision.source == "interactive":
            effective = ALLOW_ONCE if allowed else DENY
            ack = ack_message(task_id=task_id, context_id=context_id, input_id=input_id,
                              tool_use_id=request.tool_use_id, decision=effective)
            await updater.update_status(TaskState.TASK_STATE_WORKING, ack, metadata={"iac_code": {"inputReceived": {
                "kind": "permission", "inputId": input_id, "toolUseId": request.tool_use_id,
                "decision": effective}}})
        elif decision.source == "timeout":
            await updater.update_status(TaskState.TASK_STATE_WORKING, metadata={"iac_code": {"inputReceived": {
                "kind": "permission", "inputId": input_id, "toolUseId": request.tool_use_id,
                "decision": DENY, "reason": "timeout"}}})
        elif self._tool_trace:
            await updater.update_status(TaskState.TASK_STATE_WORKING, metadata={"iac_code": {"permission": {
                "autoApproved": allowed, "toolName": request.tool_name, "toolUseId": request.tool_use_id,
                "inputSummary": input_summary(request.tool_name, request.input)}}})
        if input_id and self.gates:  # a safe point: answered, the tool has not run
            await self.gates.safe_point(self._point(owner, context_id, task_id, PERMISSION_ANSWERED, updater, request))
        return allowed

    async def _durable_answer(self, answer: asyncio.Future[str], boundary: dict[str, Any], turn: TurnRequest,
                              owner: str, input_id: str, updater: TaskUpdater, pause: Message,
                              paused: dict[str, Any]) -> Decision:
        """Wait for the answer to a checkpointed question through its phases (since-0.13 §4.2).

        ``WAITING`` up to the resident deadline, then ``TIMEOUT_GRACE`` (an answer still wins), then
        ``SUSPENDING``: live answers stop, the task is published INPUT_REQUIRED with ``permissionWait``
        suspended, the boundary becomes ``SUSPENDED`` and :class:`WaitSuspended` ends the live turn.
        An answer makes the boundary ``RESOLVED`` (with its decision) before it is acknowledged.
        """
        waits = self.waits
        assert waits is not None
        done, _ = await asyncio.wait({answer}, timeout=waits.resident)
        if not done and waits.grace > 0:
            boundary = await self._moved(boundary, TIMEOUT_GRACE)
            done, _ = await asyncio.wait({answer}, timeout=waits.grace)
        if not done:
            self.broker.discard(turn.task_id, input_id)  # from here on an answer goes to the checkpoint
            if not answer.done():
                boundary = await self._moved(boundary, SUSPENDING)
                again = Message()
                again.CopyFrom(pause)
                again.message_id = f"{turn.task_id}-permission-{uuid.uuid4().hex[:16]}"
                self.contexts.ending(owner, turn.context_id, turn.task_id)  # the live turn ends now
                await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, again, metadata={
                    "iac_code": {**paused, "permissionWait": dict(SUSPENDED_WAIT)}})
                await self._moved(boundary, SUSPENDED)
                raise WaitSuspended(turn.task_id)
        value = answer.result()
        await self._moved(boundary, RESOLVED, decision=value)
        return Decision(value == ALLOW_ONCE, "interactive")

    async def _moved(self, boundary: dict[str, Any], phase: str, **changes: Any) -> dict[str, Any]:
        """``boundary`` moved to ``phase``; when it changed meanwhile (a cancel) it is left as it is."""
        assert self.waits is not None
        moved = await self.waits.move(boundary, phase, **changes)
        if moved is None:
            logger.warning("Permission checkpoint of task %s changed meanwhile; not moved to %s",
                           boundary.get("taskId"), phase)
            return boundary
        return moved

    async def open_resume(self, record: dict[str, Any], reserved: ContextState, metadata: Mapping[str, Any],
                          llm_headers: Mapping[str, str]) -> Resumption:
        """Rebuild the turn of a claimed boundary and start the runtime's ``resume_turn`` up to its first event
        other than :class:`Progress`, which must be the permission request of the paused call (checked against
        the checkpoint's digest); the progress before it is published after the recovery.

        Raises the ``-32602`` of an unavailable runtime or a changed request; the context's session is then
        the boundary's (as it was at the question)."""
        resume = getattr(self._runtime, "resume_turn", None)
        frame = record.get("continuationFrame")
        if resume is None or not isinstance(frame, dict):
            raise invalid(UNAVAILABLE)
        restore_session(reserved.session, record)
        turn = restored_turn(record, history=tuple(reserved.history), session=reserved.session,
                             metadata=metadata, llm_headers=llm_headers)
        try:
            events = resume(turn, frame)
        except NotImplementedError:  # a router whose runtime for this turn cannot resume
            raise invalid(UNAVAILABLE) from None
        # Progress the runtime publishes while it gets ready again (an MCP plugin's server status, say) may come
        # before the paused call's request; it is published after the recovery, in order.
        preamble: list[Progress] = []
        try:
            first = await anext(events)
            while isinstance(first, Progress) and not first.final and len(preamble) < RESUME_PREAMBLE_LIMIT:
                preamble.append(first)
                first = await anext(events)
        except StopAsyncIteration:
            first = None
        except Exception:
            logger.exception("Agent runtime %r failed to resume task %s", getattr(self._runtime, "name", "?"),
                             turn.task_id)
            first = None
        if not isinstance(first, PermissionRequest) or request_digest(first) != record.get("payloadDigest"):
            closing = getattr(events, "aclose", None)
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing()
            raise invalid(REQUEST_CHANGED)
        return Resumption(record, turn, first, _after(preamble, events) if preamble else events)

    async def _resume(self, resumption: Resumption, reserved: ContextState, updater: TaskUpdater,
                      call_context: ServerCallContext) -> None:
        """Run a recovered answer (since-0.13 §4.3): ``permissionRecovered``, the boundary ``RESOLVED``, the audit,
        ``inputReceived`` with ``recovered: true``, then the paused call and the rest of the turn."""
        assert self.waits is not None
        record, turn, request = resumption.record, resumption.turn, resumption.request
        task_id, context_id = turn.task_id, turn.context_id
        ids = {"inputId": str(record["inputId"]), "toolUseId": str(record["toolUseId"])}
        await updater.update_status(TaskState.TASK_STATE_WORKING,
                                    metadata={"iac_code": {"permissionRecovered": ids}})
        resolved = await self.waits.move(record, RESOLVED)  # durable before it is acknowledged
        decision = Decision(record.get("decision") == ALLOW_ONCE and resolved is not None, "interactive")
        audit = audit_record(request, task_id=task_id, context_id=context_id, owner=str(record["owner"]),
                             decision=decision, input_id=ids["inputId"])
        recorded = await self._audit.append({**audit, "recovered": True})
        allowed = decision.allow and recorded  # an allow that cannot be audited fails closed
        effective = ALLOW_ONCE if allowed else DENY
        ack = ack_message(task_id=task_id, context_id=context_id, input_id=ids["inputId"],
                          tool_use_id=ids["toolUseId"], decision=effective)
        await updater.update_status(TaskState.TASK_STATE_WORKING, ack, metadata={"iac_code": {"inputReceived": {
            "kind": "permission", **ids, "decision": effective, "recovered": True, "duplicate": False}}})
        request.allowed, request.decided_by = allowed, "interactive"
        said = str(record.get("turn", {}).get("text") or "")
        answer = await self._run_events(turn, updater, call_context, resumption.events, said, reserved)
        if answer is not None:
            reserved.history.append({"role": "user", "text": turn.prompt})
            reserved.history.append({"role": "assistant", "text": answer})

    async def _run_events(self, turn: TurnRequest, updater: TaskUpdater, call_context: ServerCallContext,
                          events: Any, said: str, reserved: ContextState) -> str | None:
        """:meth:`_run` over ``events`` (``None``: a new ``run_turn``; else those of a resumed runtime, after ``said``)."""
        with tracing.tool_spans() as tool_spans:  # a span per tool call (tracing: true)
            try:
                return await self._translate(turn, updater, call_context, tool_spans, reserved, events, said)
            except WaitSuspended:  # the permission wait was suspended: the live turn ends here
                return None

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        if self.waits is not None:
            await self.waits.cancel_task(task_id)
        gates = self.gates
        updater = _Updater(event_queue, task_id, context_id, gates,
                           resolve_user_scope(context.call_context) if gates else "")
        language = getattr(context.call_context.state.get(INPUT_STATE_KEY), "language", None)
        await updater.cancel(agent_message(task_id, context_id, "5", translator(language)(m.TASK_CANCELED)))


RESUME_PREAMBLE_LIMIT = 32
"""Progress events a resuming runtime may publish before the paused call's permission request."""


async def _after(first: Sequence[Any], rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """``first``'s events, then ``rest``'s; closing this closes ``rest``."""
    try:
        for event in first:
            yield event
        async for event in rest:
            yield event
    finally:
        closing = getattr(rest, "aclose", None)
        if closing is not None:
            with contextlib.suppress(Exception):
                await closing()
