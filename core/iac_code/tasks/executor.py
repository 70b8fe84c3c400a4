"""The kernel's AgentExecutor: runtime events in, A2A events out.

This is the one place that translates :mod:`iac_code.agents.runtime` events into
a2a-sdk task events. A turn of an iac-code runtime ends in
``TASK_STATE_INPUT_REQUIRED`` (the context stays open for follow-ups).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus

from iac_code.language import messages as m
from iac_code.base import tracing
from iac_code.tasks.artifacts import ArtifactStore
from iac_code.tasks.contexts import ContextRegistry, ContextState, channel_fallback
from iac_code.language.i18n import translator
from iac_code.tasks.inputs import TurnInput
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


def agent_message(task_id: str, context_id: str, kind: str, text: str) -> Message:
    """A ROLE_AGENT text message bound to the task, with a unique ``<taskId>-<kind>-<hex>`` id."""
    return Message(message_id=f"{task_id}-{kind}-{uuid.uuid4().hex[:16]}", role=Role.ROLE_AGENT,
                   parts=[Part(text=text)], task_id=task_id, context_id=context_id)


class RuntimeExecutor(AgentExecutor):
    """Runs one iac-code runtime turn per A2A message and publishes its events."""

    turn_ends_in_input_required = True

    def __init__(self, runtime: AgentRuntime, contexts: ContextRegistry, artifacts: ArtifactStore, *,
                 policy: PermissionPolicy, broker: PermissionBroker, audit: AuditLog,
                 exposure: frozenset[str] = frozenset({"tool_trace"}),
                 permission_timeout: float | None = None, inline_bytes: int = 65536) -> None:
        self._runtime = runtime
        self._inline_bytes = inline_bytes
        self.contexts = contexts
        self._artifacts = artifacts
        self.policy = policy
        self.broker = broker
        self._audit = audit
        self._tool_trace = "tool_trace" in exposure
        self._raw_thinking = "raw_thinking" in exposure
        self._permission_timeout = permission_timeout

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        state = context.call_context.state
        reserved: ContextState | None = state.pop(CONTEXT_STATE_KEY, None)
        try:
            if context.current_task is None and context.message is not None:
                await event_queue.enqueue_event(Task(
                    id=task_id, context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message]))
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
            turn = TurnRequest(
                context_id=context_id, task_id=task_id, prompt=turn_input.decoded.prompt, cwd=turn_input.cwd,
                language=turn_input.language or "en", channel=channel_fallback(reserved.channel),
                manifest=turn_input.decoded.manifest, history=tuple(reserved.history), session=reserved.session,
                metadata=turn_input.metadata, run_mode=turn_input.run_mode, pipeline_name=turn_input.pipeline_name)
            answer = await self._run(turn, updater, context.call_context, reserved)
            if answer is not None:
                reserved.history.append({"role": "user", "text": turn.prompt})
                reserved.history.append({"role": "assistant", "text": answer})
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Agent runtime %r failed on task %s", getattr(self._runtime, "name", "?"), task_id)
            language = getattr(state.get(INPUT_STATE_KEY), "language", None)
            await updater.failed(agent_message(task_id, context_id, "4",
                                               translator(language)(m.INTERNAL_FAILURE)))
        finally:
            if reserved is not None:
                await self.contexts.release(reserved)

    async def _run(self, turn: TurnRequest, updater: TaskUpdater, call_context: ServerCallContext,
                   reserved: ContextState) -> str | None:
        """Translate the runtime's events; return the final answer (``None`` if the turn failed)."""
        with tracing.tool_spans() as tool_spans:  # a span per tool call (tracing: true)
            return await self._translate(turn, updater, call_context, tool_spans, reserved)

    async def _durable_session(self, turn: TurnRequest, reserved: ContextState) -> None:
        """Before a pipeline turn's end is published: its session (the handoff, the task it waits on) on disk."""
        if turn.run_mode == "pipeline" and self.contexts is not None:
            await self.contexts.persist(reserved)

    async def _translate(self, turn: TurnRequest, updater: TaskUpdater, call_context: ServerCallContext,
                         tool_spans: Any, reserved: ContextState) -> str | None:
        task_id, context_id = turn.task_id, turn.context_id
        chunks: list[str] = []
        usage: Usage | None = None
        final: dict[str, Any] = {}  # Progress(final=True): merged into the turn's last status
        working = TaskState.TASK_STATE_WORKING
        async for event in self._runtime.run_turn(turn):
            if isinstance(event, Progress):
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
            elif isinstance(event, Thinking):
                if self._raw_thinking and event.text:
                    await updater.update_status(working, metadata={"iac_code": {"thinking": {
                        "type": "raw_thinking", "text": event.text[:FIELD_LIMIT]}}})
            elif isinstance(event, PermissionRequest):
                event.allowed = await self._permission(event, turn, updater, call_context)
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
            metadata["usage"] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                                 "totalTokens": usage.input_tokens + usage.output_tokens}
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
                          call_context: ServerCallContext) -> bool:
        """Decide one permission request: by policy, or by asking the caller (the turn pauses)."""
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
                await updater.update_status(
                    TaskState.TASK_STATE_INPUT_REQUIRED,
                    agent_message(task_id, context_id, "permission", pause_text(request, question)),
                    metadata={"iac_code": {"input": question, "permission": note}})
                try:
                    decision = Decision(await asyncio.wait_for(answer, self._permission_timeout) == ALLOW_ONCE,
                                        "interactive")
                except TimeoutError:
                    decision = Decision(False, "timeout")  # nobody answered: the request is denied
            finally:
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
        return allowed

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        language = getattr(context.call_context.state.get(INPUT_STATE_KEY), "language", None)
        await updater.cancel(agent_message(task_id, context_id, "5", translator(language)(m.TASK_CANCELED)))
