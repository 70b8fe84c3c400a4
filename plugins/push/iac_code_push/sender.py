"""Push notifications leave through a durable queue: a2a-sdk's sender interface, enqueueing.

:class:`QueueingPushSender` is the request handler's ``PushNotificationSender``.
For each task event the ``push-events`` setting selects, it builds one
:class:`~iac_code.api.PushJob` per stored configuration of the task (across
owners) with the event's StreamResponse JSON as payload, and hands them to the
``push-queue`` plugin. The enqueue runs beside the turn, so a slow disk or Redis
never slows it; :meth:`QueueingPushSender.flushed` is awaited at the points where a
state is acknowledged to a client, so a job the client was implicitly promised is
durable first. Each enqueue waits for the task's own state to be durable before
the job exists, so a webhook never hears of a state a crash could take back.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from a2a.server.tasks import PushNotificationSender
from a2a.types.a2a_pb2 import Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from a2a.utils.proto_utils import to_stream_response

from iac_code import api
from iac_code.api import PushJob, PushQueue, message_to_json, order_key, spawn
from iac_code_push.settings import DEFAULT_EVENTS, parse_push_events

if TYPE_CHECKING:
    from iac_code_push.configs import PushConfigStore
    from iac_code_push.urls import PushUrlGuard

logger = logging.getLogger(__name__)

# Ordering memory: the last job's seq per (owner, task, config), for the jobs' ``prev_seq``.
LAST_SEQ_ENTRIES = 10_000


class QueueingPushSender(PushNotificationSender):
    """a2a-sdk's push-sender interface over the push queue: selects, builds and enqueues jobs."""

    def __init__(self, store: PushConfigStore, queue: PushQueue, guard: PushUrlGuard, *,
                 events: Iterable[str] | str = DEFAULT_EVENTS,
                 settle: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._store = store
        self._queue = queue
        self._guard = guard
        self._states, self._all = parse_push_events(events)
        self._settle = settle
        self._pending: dict[str, set[asyncio.Task[None]]] = {}
        self._last_seq: OrderedDict[str, int] = OrderedDict()
        # One enqueue chain per task: its events reach the queue in the order the turn produced them.
        self._tails: dict[str, asyncio.Task[None]] = {}

    def wants(self, event: Any) -> bool:
        """Whether ``event`` is pushed under the ``push-events`` setting."""
        if isinstance(event, Task | TaskStatusUpdateEvent):
            return self._all or event.status.state in self._states
        return isinstance(event, TaskArtifactUpdateEvent) and self._all

    async def send_notification(self, task_id: str, event: Any) -> None:
        """Start enqueueing ``event``'s jobs and return at once (see :meth:`flushed`)."""
        if not self.wants(event):
            return
        # The payload is taken now: the SDK hands the creation event over as its live task object,
        # which later events of the turn go on changing while the enqueue waits its turn.
        payload = message_to_json(to_stream_response(event))
        previous = self._tails.get(task_id)
        job = spawn(self._enqueue(task_id, payload, previous), name=f"push-enqueue-{task_id}")
        self._tails[task_id] = job
        pending = self._pending.setdefault(task_id, set())
        pending.add(job)
        job.add_done_callback(lambda done: self._forget(task_id, done))

    def _forget(self, task_id: str, done: asyncio.Task[None]) -> None:
        pending = self._pending.get(task_id)
        if pending is not None:
            pending.discard(done)
            if not pending:
                del self._pending[task_id]
        if self._tails.get(task_id) is done:
            del self._tails[task_id]

    async def flushed(self, task_id: str) -> None:
        """Wait until every job of ``task_id``'s events sent so far is durably queued."""
        pending = self._pending.get(task_id)
        if pending:
            await asyncio.gather(*list(pending), return_exceptions=True)

    async def flush_all(self) -> None:
        """Wait for every enqueue in progress (at shutdown)."""
        tasks = [t for group in self._pending.values() for t in group]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _enqueue(self, task_id: str, payload: dict[str, Any], previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            if self._settle is not None:
                await self._settle(task_id)
            targets = await self._store.dispatch_targets(task_id)
            if not targets:
                return
            trace = api.tracing.current_trace_carrier()  # the turn's context: this task inherited it
            jobs = []
            queued_through = getattr(self._queue, "queued_through", None)
            for owner_key, config in targets:
                try:
                    self._guard.check_static(config.url)
                except ValueError as exc:
                    logger.warning("Not queueing a push notification for task %s config %s: %s",
                                   task_id, config.id, exc)
                    continue
                key = order_key(owner_key, task_id, config.id or task_id)
                prev_seq = self._last_seq.get(key)
                if prev_seq is None:  # not queued by this process (restart, or another node's turn)
                    prev_seq = await queued_through(key) if queued_through is not None else 0
                job = PushJob.new(task_id=task_id, config_id=config.id, owner=owner_key, url=config.url,
                                  payload=payload, prev_seq=prev_seq, trace=trace)
                jobs.append((key, job))
            if not jobs:
                return
            await self._queue.enqueue([job for _, job in jobs])
            for key, job in jobs:
                self._last_seq[key] = job.seq
                self._last_seq.move_to_end(key)
            while len(self._last_seq) > LAST_SEQ_ENTRIES:
                self._last_seq.popitem(last=False)
        except Exception as exc:  # the turn goes on; the failure is the operator's to see
            logger.error("Failed to enqueue A2A push notification for task %s: %s", task_id, type(exc).__name__)
