"""The turn engine: runs an AgentExecutor per message and fans its events out.

a2a-sdk's ``DefaultRequestHandler`` drives executors through ``ActiveTask``: a
producer task, a consumer task and thread-safe queues per request. Profiling
showed that machinery, not HTTP, is where a SendMessage spends most of its CPU.
This engine keeps the SDK's event semantics (its ``TaskManager`` applies every
event to the task, the same agent-response validation, push notifications,
cancellation order) with plain asyncio: events are applied inline, in order,
as the executor enqueues them, and handed to subscribers through asyncio
queues.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.cluster import TaskVersion, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import PushNotificationSender, TaskManager, TaskStore
from a2a.types.a2a_pb2 import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    UnsupportedOperationError,
)

from iac_code.base import tracing
from iac_code.base.background import spawn
from iac_code.tasks.sessions import SESSION_ID_FIELD
from iac_code.tasks.task_events import stamp, stamped_copy, version_number

logger = logging.getLogger(__name__)

TERMINAL_STATES = frozenset({
    TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
})
INTERRUPTED_STATES = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
STOP_STATES = TERMINAL_STATES | INTERRUPTED_STATES
ALREADY_WORKING = "Task is already working."
AGENT_FAILED = "Agent execution failed"
AGENT_EVENT_INVALID = "The agent produced an invalid task event."
EVENT_MISMATCH = "The agent produced an event for another task or context."
NOTHING_PRODUCED = "Agent produced neither a task nor a message"
TURN_OVER = "The task's turn has already ended."
TOO_MANY_TURNS = ("Too many active tasks for this caller (limit {limit}): wait for one to finish, "
                  "answer its pending question or cancel it.")

Event = Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


@dataclass(frozen=True)
class _Failure:
    error: BaseException


_END = object()

Outcome = Task | Message
# Chooses, from an applied task event and the task after it, what a waiting
# caller returns; ``None`` keeps it waiting.
Pick = Callable[[Event, Task], Outcome | None]


def _copy(task: Task) -> Task:
    snapshot = Task()
    snapshot.CopyFrom(task)
    return snapshot


def _public_error(error: BaseException) -> A2AError:
    return error if isinstance(error, A2AError) else InternalError(message=AGENT_FAILED)


def _observe(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as retrieved: its caller may have gone away."""
    if not future.cancelled():
        future.exception()


def state_of(event: Any) -> int | None:
    """The task state an event reports (tasks and status updates), else ``None``."""
    if isinstance(event, Task | TaskStatusUpdateEvent):
        return event.status.state
    return None


def acknowledges(event: Any) -> bool:
    """Whether telling a client about ``event`` acknowledges durable state: a task's creation, a move
    to INPUT_REQUIRED or a terminal state, an accepted permission answer (only plain WORKING
    progress of a turn a crash interrupts may be lost)."""
    if isinstance(event, Task):
        return True
    if not isinstance(event, TaskStatusUpdateEvent):
        return False
    if event.status.state in STOP_STATES:
        return True
    iac_code = event.metadata.fields.get("iac_code")
    return iac_code is not None and "inputReceived" in iac_code.struct_value.fields


def until_stop(event: Event, task: Task) -> Task | None:
    """Blocking SendMessage: the task once it is interrupted or terminal (FAILED waits for the executor's end)."""
    state = task.status.state
    if state in STOP_STATES and state != TaskState.TASK_STATE_FAILED:
        return _copy(task)
    return None


def first_event(event: Event, task: Task) -> Task:
    """``returnImmediately``: the task as soon as it exists."""
    return _copy(task)


class Subscription:
    """One consumer of a task's events.

    ``follow_next_turn`` keeps the subscription alive when a turn ends in an
    interrupted state (the A2A meaning of INPUT_REQUIRED): it then waits for the
    next turn of the task and ends only at a terminal state. ``ends_at_stop``
    ends it at the first interrupted or terminal event instead (iac-code
    turns, which may pause mid-turn for a permission answer).
    """

    def __init__(self, follow_next_turn: bool = False, ends_at_stop: bool = False) -> None:
        self.follow_next_turn = follow_next_turn
        self.ends_at_stop = ends_at_stop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()

    def push(self, item: Any) -> None:
        self._queue.put_nowait(item)

    async def events(self) -> AsyncIterator[Event]:
        """Yield events until the subscription ends; a failed turn raises its error."""
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise _public_error(item.error)
            yield item
            state = state_of(item)
            if self.ends_at_stop and state in STOP_STATES:
                return
            if self.follow_next_turn and state in TERMINAL_STATES:
                return


class _TurnWrites(TaskStore):
    """The store as one turn's ``TaskManager`` sees it: versioned writes that log the turn's events.

    Each write must find the task at the version this turn last read or wrote, so a
    turn whose task was taken over meanwhile (a survivor marked it interrupted, a
    node that lost its lease) cannot overwrite it.
    """

    def __init__(self, store: TaskStore, turn: Turn) -> None:
        self._store = store
        self._turn = turn
        self._versioned = hasattr(store, "save_event")

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if not self._versioned:
            await self._store.save(task, context)
            return
        turn = self._turn
        version = await self._store.save_event(  # type: ignore[attr-defined]
            task, turn.logging, context, prev_version=TaskVersion(turn.version))
        turn.version = version_number(version)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if not self._versioned:
            return await self._store.get(task_id, context)
        stored = await self._store.get_versioned(task_id, context)  # type: ignore[attr-defined]
        if stored is None:
            return None
        self._turn.version = version_number(stored.version)
        return stored.task

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._store.delete(task_id, context)

    async def list(self, params: Any, context: ServerCallContext) -> Any:
        return await self._store.list(params, context)


async def events_after(store: TaskStore, task_id: str, after: int, current: int,
                       context: ServerCallContext) -> list[VersionedEvent] | None:
    """The store's logged events of a task after ``after`` (``None``: not all retained, or no log)."""
    if after >= current:
        return []
    reader = getattr(store, "events_after", None)
    return await reader(task_id, after, context) if reader is not None else None


class TurnEventQueue(EventQueue):
    """The ``EventQueue`` handed to the executor: events are applied as they arrive."""

    def __init__(self, turn: Turn) -> None:
        self._turn = turn

    async def enqueue_event(self, event: Event) -> None:
        await self._turn.apply(event)


class Turn:
    """One run of ``AgentExecutor.execute`` for one task."""

    def __init__(self, engine: TurnEngine, request: RequestContext, call_context: ServerCallContext,
                 existing: Task | None) -> None:
        self.engine = engine
        self.task_id = request.task_id or ""
        self.context_id = request.context_id or ""
        self.request = request
        self.call_context = call_context
        self.version = 0  # the task's version this turn last read or wrote (iac_code.tasks.task_events)
        self.logging: Event | None = None  # the event the store write in progress records
        self.manager = TaskManager(_TurnWrites(engine.store, self), call_context, self.task_id, self.context_id,
                                   request.message if existing is None else None)
        self.queue = TurnEventQueue(self)
        self.subscribers: list[Subscription] = []
        self.lock = asyncio.Lock()
        self.done = asyncio.Event()
        self.producer: asyncio.Task[None] | None = None
        self.owner = ""
        self._waiters: list[tuple[Pick, asyncio.Future[Outcome]]] = []
        self._message_to_save = request.message
        self._task_created = existing is not None
        self._follow_up = existing is not None
        self._mode: bool | None = None  # True: task events, False: a single Message
        self._finished = False
        self._failed_task: Task | None = None
        self.trace_context = tracing.turn_context()  # the starting call's span: the turn's parent
        self.on_end: Callable[[], Awaitable[None]] | None = None  # run once the executor is done, before callers hear

    # ------------------------------------------------------------------ callers

    def wait(self, pick: Pick = until_stop) -> asyncio.Future[Outcome]:
        """A future for what ``pick`` chooses from the coming events (or the turn's end)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_observe)
        if self._finished:
            future.set_exception(InternalError(message=TURN_OVER))
        else:
            self._waiters.append((pick, future))
        return future

    def _resolve(self, event: Event, task: Task | None) -> None:
        waiting = []
        for pick, future in self._waiters:
            if future.done():
                continue
            outcome = event if task is None else pick(event, task)
            if outcome is None:
                waiting.append((pick, future))
            else:
                future.set_result(outcome)
        self._waiters = waiting

    # ------------------------------------------------------------------ events

    async def apply(self, event: Event) -> None:
        """Validate one executor event, apply it to the task and fan it out."""
        async with self.lock:
            if self._finished:
                raise InvalidAgentResponseError(f"Received {type(event).__name__} after the task finished")
            if isinstance(event, Message):
                if self._mode is not None:
                    raise InvalidAgentResponseError(
                        "Received Message object in task mode. Use TaskStatusUpdateEvent or "
                        "TaskArtifactUpdateEvent instead." if self._mode else "Multiple Message objects received.")
                self._mode = False
                self._finished = True
                self._publish(event)
                self._resolve(event, None)
                return
            if not isinstance(event, Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent):
                raise InvalidAgentResponseError(f"Unsupported event type {type(event).__name__}")
            if self._mode is False:
                raise InvalidAgentResponseError(
                    f"Received {type(event).__name__} in message mode. Use Task with TaskStatusUpdateEvent "
                    "and TaskArtifactUpdateEvent instead.")
            task = await self._apply_task_event(event)
            self._mode = True
            state = task.status.state
            if state in TERMINAL_STATES:
                self._finished = True
            await self._push(task, event)
            published = _copy(task) if isinstance(event, Task) else event
            if self.subscribers:  # a stream shows the seq; a blocking caller does not need it
                stamp(published, self.version)
            self._publish(published)
            if state == TaskState.TASK_STATE_FAILED:
                self._failed_task = _copy(task)  # an executor exception may still follow
            self._resolve(event, task)

    async def _apply_task_event(self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> Task:
        manager = self.manager
        if not isinstance(event, Task) and (
                event.task_id != self.task_id or (event.context_id and event.context_id != self.context_id)):
            logger.error("Agent event for task %s / context %s does not belong to task %s / context %s",
                         event.task_id, event.context_id, self.task_id, self.context_id)
            raise InvalidAgentResponseError(EVENT_MISMATCH)
        message, self._message_to_save = self._message_to_save, None
        if self._follow_up:
            if message is not None:  # always appended: clients may reuse message ids across turns
                task = await manager.ensure_task_id(self.task_id, self.context_id)
                await self._save(manager.update_with_message(message, task), logged=False)
            if isinstance(event, Task):
                logger.error("Task %s already exists. Ignoring task replacement.", self.task_id)
            else:
                await self._save(event)
        elif isinstance(event, Task):
            if self._task_created:
                logger.error("Task %s already exists. Ignoring task replacement.", self.task_id)
            else:
                await self._save(event)
        else:
            if not self._task_created:
                # An executor written to the SDK's older contract: its first event creates the task
                # (holding the first message, as the TaskManager builds it).
                self._publish(_copy(await manager.ensure_task_id(self.task_id, self.context_id)))
            await self._save(event)
        self._task_created = True
        task = await manager.get_task()
        if task is None:  # pragma: no cover - TaskManager just saved it
            raise InternalError(message=f"Task {self.task_id} was not saved")
        return task

    async def _save(self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent, *,
                    logged: bool = True) -> None:
        """``TaskManager.save_task_event``; its complaints are about the agent's events, in our words."""
        self.logging = event if logged else None
        try:
            await self.manager.save_task_event(await self._merged_form(event))
        except InvalidAgentResponseError as exc:
            logger.error("Agent event rejected on task %s: %s", self.task_id, exc.message)
            raise InvalidAgentResponseError(AGENT_EVENT_INVALID) from None
        except InvalidParamsError as exc:
            logger.error("Agent event rejected on task %s: %s", self.task_id, exc.message)
            raise InvalidAgentResponseError(EVENT_MISMATCH) from None
        finally:
            self.logging = None

    async def _merged_form(self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> Any:
        """What the task merges from ``event``: a status whose only metadata is the session id the task
        already holds is saved without it, so it does not replace the task's other ``iac_code`` entries
        (a Struct merge replaces ``iac_code`` whole); the event itself (streamed, logged) keeps it."""
        if not isinstance(event, TaskStatusUpdateEvent) or len(event.metadata.fields) != 1:
            return event
        iac_code = event.metadata.fields.get("iac_code")
        if iac_code is None or list(iac_code.struct_value.fields) != [SESSION_ID_FIELD]:
            return event
        task = await self.manager.get_task()
        held = task.metadata.fields.get("iac_code") if task is not None else None
        if held is None or held.struct_value.fields.get(SESSION_ID_FIELD) != iac_code.struct_value.fields[SESSION_ID_FIELD]:
            return event
        bare = TaskStatusUpdateEvent()
        bare.CopyFrom(event)
        bare.ClearField("metadata")
        return bare

    async def _push(self, task: Task, event: Event) -> None:
        sender = self.engine.push_sender
        if sender is None:
            return
        try:
            await sender.send_notification(self.task_id, task if isinstance(event, Task) else event)
        except Exception:  # push delivery is best effort and must not fail the task
            logger.exception("Push notification for task %s failed", self.task_id)

    def _publish(self, item: Any) -> None:
        for subscription in self.subscribers:
            subscription.push(item)

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """The producer: run the executor, record a failure, then end the turn."""
        error: BaseException | None = None
        with tracing.turn_span(self.trace_context, self.task_id, self.context_id):
            try:
                await self.engine.executor.execute(self.request, self.queue)
            except asyncio.CancelledError:
                logger.debug("Turn of task %s cancelled", self.task_id)
            except Exception as exc:
                logger.exception("Agent executor failed on task %s", self.task_id)
                error = exc
                await self._mark_failed()
            finally:
                await self._finish(error)

    async def _mark_failed(self) -> None:
        async with self.lock:
            task = await self.manager.get_task()
            if task is None:
                task = await self.manager.ensure_task_id(self.task_id, self.context_id)
            if task.status.state in TERMINAL_STATES:
                return
            status = TaskStatus(state=TaskState.TASK_STATE_FAILED)
            status.timestamp.FromDatetime(datetime.now(UTC))
            event = TaskStatusUpdateEvent(task_id=self.task_id, context_id=task.context_id or self.context_id,
                                          status=status)
            await self.logged_save(event)
            self._finished = True
            if self.subscribers:
                stamp(event, self.version)
            self._publish(event)

    async def _finish(self, error: BaseException | None) -> None:
        if self.on_end is not None:
            try:
                await self.on_end()
            except Exception as exc:  # the turn is over either way; its callers must hear of it
                logger.warning("Ending the turn of task %s: %s", self.task_id, type(exc).__name__)
        async with self.lock:
            self._finished = True
            if error is not None:
                self._publish(_Failure(error))
            task = await self.manager.get_task()
            final = self._failed_task or task
            for _, future in self._waiters:
                if future.done():
                    continue
                if error is not None:
                    future.set_exception(_public_error(error))
                elif final is None:
                    future.set_exception(InternalError(message=NOTHING_PRODUCED))
                else:
                    future.set_result(_copy(final))
            self._waiters.clear()
            terminal = task is None or task.status.state in TERMINAL_STATES or self._mode is False
            for subscription in self.subscribers:
                if subscription.follow_next_turn and not terminal and error is None:
                    self.engine.park(self.task_id, subscription)
                else:
                    subscription.push(_END)
            self.subscribers.clear()
            self.engine.release(self)
        self.done.set()

    async def add_message(self, message: Message) -> bool:
        """Append a message that arrived mid-turn (an interrupt the runtime took) to the task's history;
        whether it was added (not after the turn finished)."""
        async with self.lock:
            if self._finished or not self._task_created:
                return False
            task = await self.manager.get_task()
            if task is None:
                return False
            await self._save(self.manager.update_with_message(message, task), logged=False)
            return True

    async def logged_save(self, event: TaskStatusUpdateEvent) -> None:
        """Save a status change the kernel itself makes (failed, canceled), recorded in the task's log."""
        self.logging = event
        try:
            await self.manager.save_task_event(event)
        finally:
            self.logging = None

    async def attach(self, subscription: Subscription, after: int | None = None) -> tuple[Task | None, Any]:
        """Subscribe; return the task at that moment (stamped with its version) and, with ``after``,
        the logged events since that version (``None`` when they are no longer all retained)."""
        async with self.lock:
            task = await self.manager.get_task()
            self.subscribers.append(subscription)
            replay = None
            if after is not None:
                replay = await events_after(self.engine.store, self.task_id, after, self.version,
                                            self.call_context)
            return (stamped_copy(task, self.version) if task is not None else None), replay

    def detach(self, subscription: Subscription) -> None:
        if subscription in self.subscribers:
            self.subscribers.remove(subscription)


class TurnEngine:
    """Starts turns, serialises turns of one task, cancels and subscribes."""

    def __init__(self, executor: AgentExecutor, store: TaskStore, push_sender: PushNotificationSender | None,
                 *, turn_ends_in_input_required: bool, max_turns_per_owner: int = 0) -> None:
        self.executor = executor
        self.store = store
        self.push_sender = push_sender
        self.turn_ends_in_input_required = turn_ends_in_input_required
        self.max_turns_per_owner = max_turns_per_owner
        self._turns: dict[str, Turn] = {}
        self._per_owner: dict[str, int] = {}
        self._parked: dict[str, list[Subscription]] = {}
        self._background: set[asyncio.Task[None]] = set()

    def running(self, task_id: str) -> Turn | None:
        return self._turns.get(task_id)

    def turns(self) -> list[Turn]:
        """The turns running now."""
        return list(self._turns.values())

    def active(self) -> int:
        """How many turns are running (the ``turns_active`` gauge reads this at scrape time)."""
        return len(self._turns)

    async def start(self, request: RequestContext, call_context: ServerCallContext, existing: Task | None, *,
                    subscription: Subscription | None = None,
                    on_end: Callable[[], Awaitable[None]] | None = None) -> Turn:
        """Start a turn; a second message to a task mid-turn waits (SDK) or is refused (iac-code).

        ``on_end`` runs when the executor is done, before the turn's callers and subscribers hear of its end.
        """
        task_id = request.task_id or ""
        while (current := self._turns.get(task_id)) is not None:
            if self.turn_ends_in_input_required:
                raise UnsupportedOperationError(message=ALREADY_WORKING)
            await current.done.wait()
        owner = self.ensure_capacity(call_context)
        turn = Turn(self, request, call_context, existing)
        turn.owner = owner
        turn.on_end = on_end
        self._per_owner[owner] = self._per_owner.get(owner, 0) + 1
        self._turns[task_id] = turn
        turn.subscribers.extend(self._parked.pop(task_id, ()))
        if subscription is not None:
            turn.subscribers.append(subscription)
        producer = spawn(turn.run(), name=f"turn:{task_id}")
        turn.producer = producer
        self._background.add(producer)
        producer.add_done_callback(self._background.discard)
        return turn

    def ensure_capacity(self, call_context: ServerCallContext) -> str:
        """The caller's owner scope, if it may start another turn (``max-active-turns-per-caller``)."""
        owner = resolve_user_scope(call_context)
        if self.max_turns_per_owner and self._per_owner.get(owner, 0) >= self.max_turns_per_owner:
            raise UnsupportedOperationError(message=TOO_MANY_TURNS.format(limit=self.max_turns_per_owner))
        return owner

    def release(self, turn: Turn) -> None:
        if self._turns.get(turn.task_id) is turn:
            del self._turns[turn.task_id]
            left = self._per_owner.get(turn.owner, 1) - 1
            if left > 0:
                self._per_owner[turn.owner] = left
            else:
                self._per_owner.pop(turn.owner, None)

    def park(self, task_id: str, subscription: Subscription) -> None:
        """Keep a subscription waiting for the task's next turn."""
        self._parked.setdefault(task_id, []).append(subscription)

    def unpark(self, task_id: str, subscription: Subscription) -> None:
        waiting = self._parked.get(task_id)
        if waiting and subscription in waiting:
            waiting.remove(subscription)
            if not waiting:
                del self._parked[task_id]

    async def cancel(self, turn: Turn, call_context: ServerCallContext) -> Task:
        """Cancel a running turn the way the SDK does: executor.cancel first, then the producer."""
        task = await turn.manager.get_task()
        context = RequestContext(call_context=call_context, task_id=turn.task_id,
                                 context_id=task.context_id if task else turn.context_id, task=task)
        try:
            await self.executor.cancel(context, turn.queue)
        except Exception:
            logger.exception("Agent cancel failed for task %s", turn.task_id)
            raise
        finally:
            if turn.producer is not None:
                turn.producer.cancel()
        await turn.done.wait()
        task = await turn.manager.get_task()
        if task is None:
            raise InternalError(message="Task should have been created")
        if task.status.state not in TERMINAL_STATES:
            status = TaskStatus(state=TaskState.TASK_STATE_CANCELED)
            status.timestamp.FromDatetime(datetime.now(UTC))
            await turn.logged_save(TaskStatusUpdateEvent(task_id=turn.task_id, context_id=task.context_id,
                                                         status=status))
            task = await turn.manager.get_task() or task
        return _copy(task)

    async def aclose(self) -> None:
        """Cancel every running turn and wait for them (server shutdown)."""
        for producer in list(self._background):
            producer.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for waiting in self._parked.values():
            for subscription in waiting:
                subscription.push(_END)
        self._parked.clear()
