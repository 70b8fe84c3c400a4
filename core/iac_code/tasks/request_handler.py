"""a2a-sdk's DefaultRequestHandler with the kernel's execution path.

Kept from the SDK: the request/response types, validation helpers, the task
store interface, ``TaskManager`` event application, push-config methods,
ListTasks and the extended card. Replaced: the per-request ``ActiveTask``
machinery, by :mod:`iac_code.tasks.turns` (same semantics, a fraction of the CPU).

Two kernel additions:

1. Input parts are decoded (through the decoder plugins) while the request
   context is built, before a task exists, so refused input is a JSON-RPC error.
2. For runtimes whose turns end in ``INPUT_REQUIRED`` (iac-code runtimes), a
   task resting there has *finished* its turn: it is not cancelable, a
   subscription gets the task and then follows its next turn to that turn's
   end, and a second message mid-turn is refused. A turn
   may also *pause* in INPUT_REQUIRED for a permission answer: every stream
   closes at that update, a streamed answer streams the continuation up to the
   next stop, and a unary answer returns at the next stop (or at once with the
   ``permission_ack`` when ``returnImmediately`` is set). Brought-in SDK
   executors keep the A2A meaning, where INPUT_REQUIRED is an interrupted,
   live state whose subscribers follow the next turn.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection
from dataclasses import replace
from typing import Any

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.input_mode_validator import validate_input_modes
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size

from iac_code.agents.runtime import Interrupt
from iac_code.base.cluster import Lease, NodeLink, task_scope
from iac_code.tasks.contexts import ContextRegistry
from iac_code.protocol.dispatcher import RAW_PARAMS_KEY
from iac_code.tasks.executor import CONTEXT_STATE_KEY, INPUT_STATE_KEY
from iac_code.tasks.gating import TurnGates
from iac_code.tasks.inputs import (
    CLEANUP_WITHOUT_HANDOFF,
    SWITCHED_PIPELINE,
    InputDecoder,
    TurnInput,
    check_region_only,
    cleanup_only,
    iac_code_metadata,
    normalise_channel,
    normalise_language,
    read_run_mode,
    strip_turn_secrets,
)
from iac_code.base.jsonio import message_to_json
from iac_code.tasks.permissions import (
    PERMISSION_NOT_ACTIVE,
    Answer,
    PermissionBroker,
    acknowledgement,
    awaited_answer,
    message_text,
    pending_error,
    read_answer,
    text_decision,
)
from iac_code.tasks.llm_headers import LlmHeaderStore, take_llm_headers
from iac_code.tasks.permission_recovery import PermissionRecovery
from iac_code.tasks.permission_waits import PermissionWaits
from iac_code.tasks.remote_turns import RemoteTurns
from iac_code.tasks.task_store import is_suspended
from iac_code.tasks.run_modes import durable_pipeline, pipeline_handed_off, pipeline_waiting_task
from iac_code.tasks.task_events import replayed, resume_after, stamped_copy, version_number
from iac_code.tasks.turns import (
    ALREADY_WORKING,
    STOP_STATES,
    TERMINAL_STATES,
    Subscription,
    Turn,
    TurnEngine,
    acknowledges,
    events_after,
    first_event,
    state_of,
    until_stop,
)
from iac_code.security.workspace import WorkspaceError, resolve_workspace
from iac_code.language import messages as m
from iac_code.language.i18n import translator

logger = logging.getLogger(__name__)

ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# The push URL this call already screened (one DNS look-up per CreateTaskPushNotificationConfig).
_CHECKED_PUSH_URL: contextvars.ContextVar[str | None] = contextvars.ContextVar("iac_code_checked_push_url",
                                                                              default=None)
INTERRUPT_SECONDS = 10.0  # a stopping node marks its cut turns interrupted within this
INVALID_ID = "Invalid A2A id: ids are 1-128 characters of letters, digits, '_', '.', ':' or '-'."


def _limit_history(view: dict[str, Any], params: GetTaskRequest | ListTasksRequest) -> dict[str, Any]:
    """``apply_history_length`` for a JSON task view (returns a new dict when it changes)."""
    if params.HasField("history_length") and "history" in view:
        keep = params.history_length
        if keep == 0:
            return {k: v for k, v in view.items() if k != "history"}
        if len(view["history"]) > keep:
            return {**view, "history": view["history"][-keep:]}
    return view


def _task_id_of(item: Any) -> str:
    return item.id if isinstance(item, Task) else str(getattr(item, "task_id", "") or "")


def validate_id(value: str) -> None:
    """Task and context ids: 1-128 letters, digits, ``_ . : -``."""
    if not ID_PATTERN.fullmatch(value):
        raise InvalidParamsError(message=INVALID_ID)


def _require_id(params: GetTaskRequest | CancelTaskRequest | SubscribeToTaskRequest) -> None:
    if not params.id:
        raise InvalidParamsError(message="Validation failed",
                                 data={"errors": [{"field": "id", "message": "Field is required"}]})
    validate_id(params.id)


class RunningTurn(Exception):  # noqa: N818 - control flow, never leaves the handler
    """Raised by ``_prepare`` for a pipeline-mode message meant for the turn that holds its context: the caller
    offers ``interrupt`` to that turn instead of starting one."""

    def __init__(self, turn: Turn, interrupt: Interrupt) -> None:
        super().__init__(turn.task_id)
        self.turn = turn
        self.interrupt = interrupt


class DecodingContextBuilder(SimpleRequestContextBuilder):
    """Builds the SDK request context after reading the message: workspace, metadata and parts.

    The result is a :class:`~iac_code.tasks.inputs.TurnInput` in the call state. A part
    the decoders refuse raises here, before any task exists; an invalid
    workspace is recorded so the turn fails with a clear, path-free message.
    """

    def __init__(self, decoder: InputDecoder, *, default_mode: str = "normal",
                 pipelines: Collection[str] = ()) -> None:
        super().__init__(should_populate_referred_tasks=False, task_store=None)
        self._decoder = decoder
        self._default_mode = default_mode
        self._pipelines = frozenset(pipelines)

    async def build(self, context: ServerCallContext, params: SendMessageRequest | None = None,
                    task_id: str | None = None, context_id: str | None = None,
                    task: Task | None = None) -> RequestContext:
        if params is not None:
            context.state[INPUT_STATE_KEY] = self._read(params.message, context.state.get(RAW_PARAMS_KEY))
        return await super().build(context, params=params, task_id=task_id, context_id=context_id, task=task)

    def run_mode(self, metadata: dict[str, Any]) -> str:
        """The run mode a message's ``metadata.iac_code`` chooses (``""`` when it names an unsupported one:
        :meth:`build` refuses it)."""
        try:
            return read_run_mode(metadata, self._default_mode, self._pipelines)[0]
        except ValueError:
            return ""

    def _read(self, message: Message, raw_params: Any) -> TurnInput:
        raw_message = raw_params.get("message") if isinstance(raw_params, dict) else None
        raw_message = raw_message if isinstance(raw_message, dict) else None
        metadata, llm_headers = take_llm_headers(iac_code_metadata(message, raw_message))
        strip_turn_secrets(message)  # the runtime reads them from ``metadata``; the stored message must not hold them
        language = normalise_language(metadata.get("preferredLanguage", metadata.get("preferred_language")))
        channel = normalise_channel(metadata.get("channel"))
        try:
            run_mode, pipeline = read_run_mode(metadata, self._default_mode, self._pipelines)
            check_region_only(metadata)
        except ValueError as exc:  # the protocol's sentence, in the request's preferredLanguage (English by default)
            raise InvalidParamsError(message=translator(language)(str(exc))) from None
        try:
            cwd = resolve_workspace(metadata.get("cwd"))
        except WorkspaceError as exc:
            if run_mode == "pipeline":  # pipeline mode: input problems are the request's error, no task (§14)
                t = translator(language)
                raise InvalidParamsError(message=f"{t(str(exc))} {t(exc.explanation)}",
                                         data={"code": "invalid_workspace", "reason": exc.reason}) from None
            return TurnInput(metadata=metadata, language=language, channel=channel, error=str(exc),
                             error_detail=exc.explanation, run_mode=run_mode, pipeline_name=pipeline,
                             error_info={"code": "invalid_workspace", "reason": exc.reason},
                             llm_headers=llm_headers)
        raw_parts = raw_message.get("parts") if raw_message is not None else None
        decoded = self._decoder.decode(message, cwd, raw_parts if isinstance(raw_parts, list) else None)
        if run_mode == "pipeline" and not decoded.prompt.strip() and not decoded.manifest:
            raise InvalidParamsError(message=translator(language)(m.EMPTY_INPUT))
        return TurnInput(decoded=decoded, cwd=cwd, metadata=metadata, language=language, channel=channel,
                         run_mode=run_mode, pipeline_name=pipeline, llm_headers=llm_headers)


LOCALISED_ANSWER_ERRORS = frozenset({m.ANSWER_ONE_TRANSPORT, m.ANSWER_ONE_TEXT_PART, m.ANSWER_CONTEXT_MISMATCH})


class KernelRequestHandler(PermissionRecovery, RemoteTurns, DefaultRequestHandler):
    """DefaultRequestHandler whose message, cancel and subscribe paths run on the turn engine."""

    def __init__(self, *args: Any, turn_ends_in_input_required: bool = False,
                 contexts: ContextRegistry | None = None, permissions: PermissionBroker | None = None,
                 max_active_turns_per_caller: int = 0,
                 check_push_url: Callable[[str], Awaitable[None]] | None = None,
                 push_flushed: Callable[[str], Awaitable[None]] | None = None,
                 link: NodeLink | None = None, forward_timeout: float = 30.0,
                 llm_headers: LlmHeaderStore | None = None, gates: TurnGates | None = None,
                 waits: PermissionWaits | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waits = waits  # durable permission waits: answers that find a checkpoint (permission_recovery)
        self._llm_headers = llm_headers
        self._gates = gates or TurnGates()  # may refuse a new turn on a context (execution control's pause)
        self._link = link
        self._forward_timeout = forward_timeout
        self._check_push_url = check_push_url
        self._push_flushed = push_flushed
        self.turn_ends_in_input_required = turn_ends_in_input_required
        self._contexts = contexts
        self._permissions = permissions
        self.engine = TurnEngine(self.agent_executor, self.task_store, self._push_sender,
                                 turn_ends_in_input_required=turn_ends_in_input_required,
                                 max_turns_per_owner=max_active_turns_per_caller)

    async def _settle(self, item: Any, context: ServerCallContext) -> None:
        """Wait until the task state ``item`` reports is durable (before it leaves the process)."""
        settle = getattr(self.task_store, "settle", None)
        task_id = _task_id_of(item)
        if task_id and settle is not None:
            await settle((task_id,), context)
        if task_id and self._push_flushed is not None:
            await self._push_flushed(task_id)

    async def _reject_unsafe_push_url(self, url: str) -> None:
        """The push service's callback URL guard (static rules and every resolved address); its message as ``-32602``."""
        if self._check_push_url is None or _CHECKED_PUSH_URL.get() == url:
            return
        try:
            await self._check_push_url(url)
        except ValueError as exc:
            raise InvalidParamsError(message=str(exc)) from None

    # ------------------------------------------------------------------ messages

    async def _prepare(self, params: SendMessageRequest,
                       context: ServerCallContext) -> tuple[RequestContext, Task | None]:
        validate_proto_required_fields(params)
        validate_history_length(params.configuration)
        self.engine.ensure_capacity(context)
        if self._validate_input_modes:
            validate_input_modes(params.message, self._agent_card)
        task_id = params.message.task_id or None
        context_id = params.message.context_id or None
        for value in (task_id, context_id):
            if value is not None:
                validate_id(value)
        existing: Task | None = None
        pipeline_mode = self._pipeline_mode(params, context)
        if pipeline_mode and not task_id and context_id:
            task_id = await self._rehydrated_task(params, context, context_id)
        if task_id:
            existing = await self.task_store.get(task_id, context)
            if existing is None:
                raise TaskNotFoundError(f"Task {task_id} not found")
            if context_id and existing.context_id != context_id:
                raise InvalidParamsError(
                    message=f"Context {context_id} does not match context {existing.context_id} of task {task_id}")
            if not context_id:  # a follow-up naming only the task continues the task's context
                context_id = existing.context_id
                params.message.context_id = context_id
            if existing.status.state in TERMINAL_STATES:
                raise UnsupportedOperationError(
                    message=f"Task {task_id} is in terminal state: {TaskState.Name(existing.status.state)}")
        if pipeline_mode:
            await self._check_cleanup_only(params, context, context_id or "")
        if context_id and self._waits is not None:
            if self._contexts is not None:  # a turn that has just suspended its wait: let it end first
                await self._contexts.settled(resolve_user_scope(context), context_id)
            await self._refuse_beside_suspended(params, context, context_id)
        request = await self._request_context_builder.build(
            params=params, task_id=task_id, context_id=context_id, task=existing, context=context)
        turn_input = context.state.get(INPUT_STATE_KEY)
        if self._gates:
            refusal = await self._gates.admit(resolve_user_scope(context), request.context_id or "", request.task_id or "")
            if not refusal and isinstance(turn_input, TurnInput):
                refusal = await self._gates.admit_message(resolve_user_scope(context), request.context_id or "",
                                                          params.message.task_id or "", turn_input.metadata)
            if refusal:
                raise InvalidParamsError(message=refusal)
        if self._contexts is not None and isinstance(turn_input, TurnInput) and turn_input.error is None:
            try:
                context.state[CONTEXT_STATE_KEY] = await self._contexts.reserve(
                    resolve_user_scope(context), request.context_id or "", turn_input.cwd, turn_input.channel,
                    request.task_id or "")
            except UnsupportedOperationError as exc:
                if exc.message == ALREADY_WORKING:
                    await self._explain_busy_context(params, context)
                    if turn_input.run_mode == "pipeline":
                        self._offer_to_running_turn(request, turn_input, context)
                raise
            await self._keep_session_pipeline(turn_input, context)
        config = params.configuration
        if self._push_config_store and config.HasField("task_push_notification_config"):
            await self._reject_unsafe_push_url(config.task_push_notification_config.url)
            await self._push_config_store.set_info(request.task_id, config.task_push_notification_config, context)
        return request, existing

    async def _keep_session_pipeline(self, turn_input: TurnInput, context: ServerCallContext) -> None:
        """A session fixed to one pipeline refuses a request naming another (the reservation is released); so does
        a ``cleanupOnly`` request the shared backend's session shows to have no handoff (see :meth:`_prepare`)."""
        reserved = context.state.get(CONTEXT_STATE_KEY)
        if reserved is None or turn_input.run_mode != "pipeline":
            return
        if self._link is not None and cleanup_only(turn_input.metadata) and not pipeline_handed_off(reserved.session):
            context.state.pop(CONTEXT_STATE_KEY, None)
            if self._contexts is not None:
                await self._contexts.release(reserved)
            raise InvalidParamsError(message=translator(turn_input.language)(CLEANUP_WITHOUT_HANDOFF))
        if not turn_input.pipeline_name:
            return
        durable = durable_pipeline(reserved.session)
        if durable and durable != turn_input.pipeline_name:
            context.state.pop(CONTEXT_STATE_KEY, None)
            if self._contexts is not None:
                await self._contexts.release(reserved)
            raise InvalidParamsError(
                message=translator(turn_input.language)(SWITCHED_PIPELINE, durable=durable,
                                                        requested=turn_input.pipeline_name),
                data={"durablePipelineName": durable, "requestedPipelineName": turn_input.pipeline_name})

    def _pipeline_mode(self, params: SendMessageRequest, context: ServerCallContext) -> bool:
        """Whether the message runs in pipeline mode (its own ``run_mode``, else the server's)."""
        reader = getattr(self._request_context_builder, "run_mode", None)
        if reader is None or self._contexts is None:
            return False
        raw = context.state.get(RAW_PARAMS_KEY)
        return bool(reader(iac_code_metadata(params.message, raw.get("message") if isinstance(raw, dict) else None))
                    == "pipeline")

    async def _rehydrated_task(self, params: SendMessageRequest, context: ServerCallContext,
                               context_id: str) -> str | None:
        """Pipeline mode, no ``taskId``: the context's task whose turn runs (the message becomes an interrupt) or
        the task its pipeline waits on for input (the message answers it), as the session remembers it; ``None``
        (a new task) when there is neither, or the caller cannot see it, or it is over."""
        assert self._contexts is not None
        owner = resolve_user_scope(context)
        session = self._contexts.session_of(owner, context_id) or {}
        candidate = self._contexts.running_task(owner, context_id) or pipeline_waiting_task(session)
        if not candidate:
            return None
        task = await self.task_store.get(candidate, context)
        if task is None or task.context_id != context_id or task.status.state in TERMINAL_STATES:
            return None
        params.message.task_id = candidate
        return candidate

    async def _check_cleanup_only(self, params: SendMessageRequest, context: ServerCallContext,
                                  context_id: str) -> None:
        """Pipeline mode: ``cleanupOnly: true`` needs a context whose pipeline has handed off (-32602), checked
        before anything is reserved; with a shared backend a context held elsewhere is checked once reserved.
        A session that does not say so is checked against the pipeline's own durable state (a crash may have cut
        the turn that handed off before the session was written)."""
        assert self._contexts is not None
        raw = context.state.get(RAW_PARAMS_KEY)
        metadata = iac_code_metadata(params.message, raw.get("message") if isinstance(raw, dict) else None)
        if not cleanup_only(metadata):
            return
        session = self._contexts.session_of(resolve_user_scope(context), context_id) if context_id else None
        if session is None and context_id and self._link is not None:
            return  # its session is in the shared backend: _keep_session_pipeline reads it
        if pipeline_handed_off(session or {}):
            return
        ask = getattr(self.agent_executor, "pipeline_handed_off", None)
        if session is None or ask is None or not await ask(context_id, session):
            raise InvalidParamsError(message=translator(self._language(params, context))(CLEANUP_WITHOUT_HANDOFF))

    def _offer_to_running_turn(self, request: RequestContext, turn_input: TurnInput,
                               context: ServerCallContext) -> None:
        """A pipeline-mode message for the task whose turn holds the context: raise :class:`RunningTurn` so the
        caller offers it to that turn as an interrupt (other busy cases keep "already working")."""
        assert self._contexts is not None
        running = self._contexts.running_task(resolve_user_scope(context), request.context_id or "")
        turn = self.engine.running(running) if running else None
        if turn is None or running != request.task_id:
            return
        raise RunningTurn(turn, Interrupt(context_id=turn.context_id, task_id=turn.task_id,
                                          text=turn_input.decoded.prompt, language=turn_input.language or "en",
                                          metadata=dict(turn_input.metadata)))

    async def _deliver(self, running: RunningTurn, params: SendMessageRequest) -> bool:
        """Offer the interrupt to the runtime; once taken, the message joins the running task's history."""
        deliver = getattr(self.agent_executor, "interrupt", None)
        if deliver is None or not await deliver(running.interrupt):
            return False
        message = Message()
        message.CopyFrom(params.message)
        message.task_id, message.context_id = running.turn.task_id, running.turn.context_id
        await running.turn.add_message(message)
        return True

    async def _follow_interrupted(self, running: RunningTurn, params: SendMessageRequest,
                                  immediately: bool) -> Task | Message:
        """SendMessage that became an interrupt: the running task at its next stop (``returnImmediately``: now)."""
        turn = running.turn
        outcome = None if immediately else turn.wait(until_stop)  # registered before the turn hears of it
        if (outcome is not None and outcome.done()) or not await self._deliver(running, params):
            if outcome is not None:
                outcome.cancel()
            raise UnsupportedOperationError(message=ALREADY_WORKING)
        if outcome is not None:
            return await outcome
        probe = Subscription()
        snapshot, _ = await turn.attach(probe)
        turn.detach(probe)
        if snapshot is None:
            raise UnsupportedOperationError(message=ALREADY_WORKING)
        return snapshot

    async def _start(self, request: RequestContext, context: ServerCallContext, existing: Task | None,
                     **options: Any) -> Turn:
        link, lease = self._link, None
        try:
            if link is not None and CONTEXT_STATE_KEY not in context.state:
                lease = await self._lease_task(link, request, context)
                options["on_end"] = lambda: link.release(lease, None)
            return await self.engine.start(request, context, existing, **options)
        except BaseException:
            reserved = context.state.pop(CONTEXT_STATE_KEY, None)
            if reserved is not None and self._contexts is not None:
                await self._contexts.release(reserved)
            if link is not None and lease is not None:
                await link.release(lease, None)
            raise

    async def _lease_task(self, link: NodeLink, request: RequestContext, context: ServerCallContext) -> Lease:
        """With a shared backend, a turn that holds no context lease (an SDK executor's) leases its task.

        Every node then finds the node running it (cancel, subscribe), and a survivor marks it
        interrupted if that node dies. A second message for the task waits for the running turn,
        as on one node, up to the forwarding timeout.
        """
        task_id = request.task_id or ""
        current = self.engine.running(task_id)
        if current is not None and not self.turn_ends_in_input_required:
            await current.done.wait()
        wait = None if self.turn_ends_in_input_required else self._forward_timeout
        return await link.lease(resolve_user_scope(context), task_scope(task_id), task_id, wait=wait)

    def _permission_answer(self, params: SendMessageRequest, context: ServerCallContext) -> Answer | None:
        """The validated permission answer this message carries, or ``None`` for an ordinary message."""
        if self._permissions is None:
            return None
        raw = context.state.get(RAW_PARAMS_KEY)
        raw_message = raw.get("message") if isinstance(raw, dict) else None
        try:
            answer = read_answer(params.message, raw_message)
        except InvalidParamsError as exc:  # §5's sentences, in the request's preferredLanguage
            if exc.message not in LOCALISED_ANSWER_ERRORS:
                raise
            raise InvalidParamsError(message=translator(self._language(params, context))(exc.message),
                                     data=getattr(exc, "data", None)) from None
        if answer is not None:
            validate_id(answer.task_id)
            validate_id(answer.context_id)
        return answer

    def _answer_llm_headers(self, params: SendMessageRequest, context: ServerCallContext) -> dict[str, str] | None:
        """The ``llm_headers`` an answer sets (``None``: keeps them), taken out of the message."""
        raw = context.state.get(RAW_PARAMS_KEY)
        metadata = iac_code_metadata(params.message, raw.get("message") if isinstance(raw, dict) else None)
        strip_turn_secrets(params.message)
        return take_llm_headers(metadata)[1]

    def _resolve(self, answer: Answer, headers: dict[str, str] | None, context: ServerCallContext) -> None:
        """Deliver the answer; then (before the turn runs again) the context's new LLM headers."""
        self._permissions.resolve(answer)  # type: ignore[union-attr]
        if self._llm_headers is not None:
            self._llm_headers.apply(resolve_user_scope(context), answer.context_id, headers)

    async def _text_answer(self, params: SendMessageRequest, context: ServerCallContext) -> Answer | None:
        """A text answer (``allow``, ``deny``, ...) to the caller's task paused for permission.

        Any other message for that task, and a message without ``taskId`` in a context where one
        of the caller's tasks waits for an answer, is refused with how to answer (-32602).
        """
        broker = self._permissions
        message = params.message
        if broker is None or not message.task_id:
            return None
        waiting = broker.waiting_answer(message.task_id)
        if waiting is None and self._link is None and self._waits is None:
            return None
        stored = await self.task_store.get(message.task_id, context)  # the caller's task only
        if stored is None:
            return None
        if waiting is None and (self.engine.running(message.task_id) is None or self._waits is not None):
            waiting = awaited_answer(stored)  # paused on another node, or its wait is (being) suspended
        if waiting is None:
            return None
        text = message_text(message) if message.role == Role.ROLE_USER else None
        decision = text_decision(text) if text is not None else None
        if decision is None:
            raise pending_error(message.task_id, self._language(params, context))
        return replace(waiting, context_id=message.context_id or waiting.context_id, decision=decision)

    async def _explain_busy_context(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        """A context refused as busy because one of the caller's tasks waits for permission: say so (-32602)."""
        context_id = params.message.context_id
        if self._permissions is None or not context_id:
            return
        for task_id in self._permissions.waiting_in_context(context_id):
            if await self.task_store.get(task_id, context) is not None:
                raise pending_error(task_id, self._language(params, context))
        if self._link is not None:  # the turn may wait on another node: its task is the context's latest
            latest = await self.task_store.list(ListTasksRequest(context_id=context_id, page_size=5), context)
            for task in latest.tasks:
                if awaited_answer(task) is not None:
                    raise pending_error(task.id, self._language(params, context))

    @staticmethod
    def _language(params: SendMessageRequest, context: ServerCallContext) -> str | None:
        raw = context.state.get(RAW_PARAMS_KEY)
        metadata = iac_code_metadata(params.message, raw.get("message") if isinstance(raw, dict) else None)
        return normalise_language(metadata.get("preferredLanguage", metadata.get("preferred_language")))

    async def _paused_turn(self, answer: Answer, context: ServerCallContext) -> Turn:
        """The running turn waiting for ``answer`` (the task must be the caller's)."""
        turn = self.engine.running(answer.task_id)
        if turn is None or await self.task_store.get(answer.task_id, context) is None:
            raise InvalidParamsError(message=PERMISSION_NOT_ACTIVE)
        return turn

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        immediately = params.configuration.return_immediately
        outcome: Awaitable[Task | Message]
        answer = self._permission_answer(params, context) or await self._text_answer(params, context)
        recovery = await self._recovery(answer, context) if answer is not None else None
        if answer is not None and recovery is not None:  # no live turn waits: its checkpoint takes the answer
            result = await self._answer_recovery(recovery, answer, params, context, immediately)
            await self._settle(result, context)
            return apply_history_length(result, params.configuration) if isinstance(result, Task) else result
        if answer is not None and self._link is not None and self.engine.running(answer.task_id) is None:
            result = await self._answer_elsewhere(answer, context, immediately)
            await self._settle(result, context)
            return apply_history_length(result, params.configuration) if isinstance(result, Task) else result
        if answer is not None:
            headers = self._answer_llm_headers(params, context)
            turn = await self._paused_turn(answer, context)
            self._resolve(answer, headers, context)
            outcome = turn.wait(acknowledgement(answer.input_id) if immediately else until_stop)
        else:
            try:
                request, existing = await self._prepare(params, context)
            except RunningTurn as running:  # pipeline mode: the message is an interrupt of the running turn
                outcome = self._follow_interrupted(running, params, immediately)  # awaited below
            else:
                turn = await self._start(request, context, existing)
                # Registered before the producer first runs, so no event is missed.
                outcome = turn.wait(first_event if immediately else until_stop)
        result = await outcome
        await self._settle(result, context)
        if isinstance(result, Task):
            return apply_history_length(result, params.configuration)
        return result

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any, None]:
        if not self._agent_card.capabilities.streaming:
            raise UnsupportedOperationError(message="Streaming is not supported by the agent")
        subscription = Subscription(ends_at_stop=self.turn_ends_in_input_required)
        snapshot: Task | None = None
        answer = self._permission_answer(params, context) or await self._text_answer(params, context)
        recovery = await self._recovery(answer, context) if answer is not None else None
        if answer is not None and recovery is not None:  # no live turn waits: its checkpoint takes the answer
            async for event in self._stream_recovery(recovery, answer, params, context):
                yield event
            return
        if answer is not None and self._link is not None and self.engine.running(answer.task_id) is None:
            async for event in self._stream_answer_elsewhere(answer, context, params):
                yield event
            return
        if answer is not None:
            headers = self._answer_llm_headers(params, context)
            turn = await self._paused_turn(answer, context)
            snapshot, _ = await turn.attach(subscription)
            try:
                self._resolve(answer, headers, context)
            except BaseException:
                turn.detach(subscription)
                raise
        else:
            try:
                request, existing = await self._prepare(params, context)
            except RunningTurn as running:  # pipeline mode: an interrupt; the caller follows the running task
                turn = running.turn
                snapshot, _ = await turn.attach(subscription)
                if not await self._deliver(running, params):
                    turn.detach(subscription)
                    raise UnsupportedOperationError(message=ALREADY_WORKING) from None
            else:
                turn = await self._start(request, context, existing, subscription=subscription)
        try:
            if snapshot is not None:  # the paused task, then the continuation up to the next stop
                yield apply_history_length(snapshot, params.configuration)
            async for event in self._settled(subscription.events(), context):
                yield apply_history_length(event, params.configuration) if isinstance(event, Task) else event
        finally:
            turn.detach(subscription)

    # ------------------------------------------------------------------ tasks

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        _require_id(params)
        validate_history_length(params)
        task = await self.task_store.get(params.id, context)
        if task is None:
            raise TaskNotFoundError
        await self._settle(task, context)
        return apply_history_length(task, params)

    async def get_task_shared(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        """GetTask as the store's own task proto once durable, not a copy (same result as ``on_get_task``;
        do not mutate it): the gRPC read path, which serialises it at once."""
        get = getattr(self.task_store, "get_shared", None)
        if get is None:
            task = await self.on_get_task(params, context)
            if task is None:
                raise TaskNotFoundError
            return task
        _require_id(params)
        validate_history_length(params)
        task = await get(params.id, context)
        if task is None:
            raise TaskNotFoundError
        return apply_history_length(task, params)

    def peek_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """GetTask answered at once when the store holds the task in memory with nothing on its way to disk
        and the whole history is asked for (same result as :meth:`get_task_shared`, do not mutate it);
        ``None`` sends the call down :meth:`get_task_shared`, which also raises its errors."""
        peek = getattr(self.task_store, "peek_shared", None)
        if peek is None or params.HasField("history_length") or not ID_PATTERN.fullmatch(params.id):
            return None
        task: Task | None = peek(params.id, context)
        return task

    async def get_task_view(self, params: GetTaskRequest, context: ServerCallContext) -> dict[str, Any]:
        """GetTask answered from the store's cached JSON view (same result as ``on_get_task``)."""
        _require_id(params)
        validate_history_length(params)
        store = self.task_store
        if not hasattr(store, "get_view"):
            return message_to_json(await self.on_get_task(params, context))
        view = await store.get_view(params.id, context)
        if view is None:
            raise TaskNotFoundError
        return _limit_history(view, params)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> Any:
        if params.context_id:
            validate_id(params.context_id)
        return await super().on_list_tasks(params, context)

    # Push-config methods: the task id follows the id rule like every other method's.

    async def on_create_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        validate_id(params.task_id)
        await self._reject_unsafe_push_url(params.url)  # first, even with push off (spec: push.md §1.1)
        checked = _CHECKED_PUSH_URL.set(params.url)  # a2a-sdk checks again after its own checks: once is enough
        try:
            return await super().on_create_task_push_notification_config(params, context)
        finally:
            _CHECKED_PUSH_URL.reset(checked)

    async def on_get_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        validate_id(params.task_id)
        return await super().on_get_task_push_notification_config(params, context)

    async def on_list_task_push_notification_configs(self, params: Any, context: ServerCallContext) -> Any:
        """The caller's configurations of a task by id, ``pageSize`` (default 50) at a time."""
        validate_id(params.task_id)
        validate_proto_required_fields(params)
        if await self.task_store.get(params.task_id, context) is None:  # before the capability check
            raise TaskNotFoundError
        store = self._push_config_store
        if not hasattr(store, "list_page") or not self._agent_card.capabilities.push_notifications:
            return await super().on_list_task_push_notification_configs(params, context)
        if params.page_size < 0:
            raise InvalidParamsError(message="pageSize must not be negative")
        configs, next_token = await store.list_page(params.task_id, context, params.page_size, params.page_token)
        return ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token=next_token)

    async def on_delete_task_push_notification_config(self, params: Any, context: ServerCallContext) -> None:
        validate_id(params.task_id)
        await super().on_delete_task_push_notification_config(params, context)

    async def list_tasks_view(self, params: ListTasksRequest, context: ServerCallContext) -> dict[str, Any]:
        """ListTasks answered from the store's cached JSON views (same result as ``on_list_tasks``)."""
        validate_history_length(params)
        if params.context_id:
            validate_id(params.context_id)
        if params.HasField("page_size"):
            validate_page_size(params.page_size)
        store = self.task_store
        if not hasattr(store, "list_view"):
            return message_to_json(await self.on_list_tasks(params, context), always_print_fields_with_no_presence=True)
        result = await store.list_view(params, context)
        tasks = []
        for view in result["tasks"]:
            if not params.include_artifacts and "artifacts" in view:
                view = {k: v for k, v in view.items() if k != "artifacts"}
            tasks.append(_limit_history(view, params))
        return {**result, "tasks": tasks}

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        _require_id(params)
        task = await self.task_store.get(params.id, context)
        if task is None:
            raise TaskNotFoundError
        if task.status.state in TERMINAL_STATES:
            raise TaskNotCancelableError
        turn = self.engine.running(params.id)
        if turn is not None:
            canceled = await self.engine.cancel(turn, context)
            await self._settle(canceled, context)
            return canceled
        if self._link is not None:
            node = await self._link.runner(resolve_user_scope(context), task.context_id, task.id)
            if node is not None and node != self._link.node_id:
                reply = await self._forward(node, "cancel", {"owner": resolve_user_scope(context), "taskId": task.id})
                return Task.FromString(base64.b64decode(reply["task"]))
        if self._waits is not None and is_suspended(task):
            return await self._cancel_suspended(task, context)
        if self.turn_ends_in_input_required:
            raise TaskNotCancelableError  # the turn is over: nothing is running
        canceled = Task()
        canceled.CopyFrom(task)
        canceled.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_CANCELED))
        canceled.status.timestamp.GetCurrentTime()
        await self.task_store.save(canceled, context)
        await self._settle(canceled, context)
        if self._push_sender is not None:
            await self._push_sender.send_notification(canceled.id, TaskStatusUpdateEvent(
                task_id=canceled.id, context_id=canceled.context_id, status=canceled.status))
        return canceled

    async def _stored(self, task_id: str, context: ServerCallContext) -> tuple[Task, int] | None:
        """The task with its version (the seq of its latest stream event; 0 for a store without versions)."""
        reader = getattr(self.task_store, "get_versioned", None)
        if reader is None:
            task = await self.task_store.get(task_id, context)
            return (task, 0) if task is not None else None
        stored = await reader(task_id, context)
        return (stored.task, version_number(stored.version)) if stored is not None else None

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Any, None]:
        _require_id(params)
        after = resume_after(context)
        stored = await self._stored(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        task, version = stored
        turn = self.engine.running(params.id)
        iac_turn = self.turn_ends_in_input_required
        if after is None and task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(  # A2A 1.0: nothing to follow, refused before any stream opens
                message=f"Task {params.id} is in terminal state: {TaskState.Name(task.status.state)}")
        if turn is None and self._link is not None and task.status.state not in TERMINAL_STATES:
            node = await self._link.runner(resolve_user_scope(context), task.context_id, task.id)
            # A turn elsewhere is followed in the shared log; so is a task's next turn, on any node
            # (an iac-code task between turns: from its rest to the end of that next turn).
            between = node is None and (not iac_turn or after is None)
            if (node is not None and node != self._link.node_id) or between:
                async for event in self._follow_elsewhere(task, version, after, context,
                                                          between_turns=between and iac_turn):
                    yield event
                return
        if after is not None:
            async for event in self._resume(params.id, after, turn, task, version, context):
                yield event
            return
        # Between turns (iac-code: the task rests after its turn) the subscription waits for the next turn.
        subscription = Subscription(follow_next_turn=not iac_turn, ends_at_stop=iac_turn)
        if turn is not None:
            current, _ = await turn.attach(subscription)
        else:
            self.engine.park(params.id, subscription)
            current = stamped_copy(task, version)
        try:
            if current is not None:
                await self._settle(current, context)
                yield current
                if iac_turn and turn is not None and current.status.state in STOP_STATES:
                    return  # paused for a permission answer: the stream of this turn ends here
            async for event in self._settled(subscription.events(), context):
                yield event
        finally:
            if turn is not None:
                turn.detach(subscription)
            self.engine.unpark(params.id, subscription)

    async def _resume(self, task_id: str, after: int, turn: Turn | None, task: Task, version: int,
                      context: ServerCallContext) -> AsyncGenerator[Any, None]:
        """SubscribeToTask after event ``after``: exactly the events since, then the live ones.

        When the missed events are no longer all retained the stream starts from the
        task snapshot instead, as a new subscription does. A turn that is over has no
        live events: its stream ends after the missed ones (none: an empty stream).
        """
        iac_turn = self.turn_ends_in_input_required
        subscription = Subscription(follow_next_turn=not iac_turn, ends_at_stop=iac_turn)
        if turn is not None:
            current, replay = await turn.attach(subscription, after)
        else:
            current = stamped_copy(task, version)
            replay = await events_after(self.task_store, task_id, after, version, context)
            if not iac_turn and task.status.state not in TERMINAL_STATES:
                self.engine.park(task_id, subscription)
        resting = current is None or current.status.state in (STOP_STATES if iac_turn else TERMINAL_STATES)
        live = (turn is not None and not resting) or (not iac_turn and not resting)
        try:
            items: list[Any] = [current] if replay is None else [replayed(e) for e in replay]
            for item in items:
                if acknowledges(item):
                    await self._settle(item, context)
                yield item
                if self._ends(item):
                    return
            if not live:
                return
            async for event in self._settled(subscription.events(), context):
                yield event
        finally:
            if turn is not None:
                turn.detach(subscription)
            self.engine.unpark(task_id, subscription)

    def _ends(self, item: Any) -> bool:
        """Whether a subscription ends after ``item``: iac-code turns at a stop, SDK executors at a terminal state."""
        state = state_of(item)
        return (self.turn_ends_in_input_required and state in STOP_STATES) or state in TERMINAL_STATES

    async def _settled(self, events: AsyncIterator[Any], context: ServerCallContext) -> AsyncGenerator[Any, None]:
        """The events, each one that acknowledges a state only once that state is durable."""
        async for event in events:
            if acknowledges(event):
                await self._settle(event, context)
            yield event

    async def aclose(self) -> None:
        running = list(self.engine.turns())
        await self.engine.aclose()
        if self._link is not None:  # no restart of this node will find them: mark them now, for every node
            try:
                async with asyncio.timeout(INTERRUPT_SECONDS):
                    for turn in running:
                        await self._interrupt(turn)
            except TimeoutError:  # the shared store is too slow or gone: the rest keep their last state
                logger.warning("Stopped before every running turn was marked interrupted")
        await super().aclose()
