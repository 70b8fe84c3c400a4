"""The shared task store: every node reads and writes the same tasks in one Redis.

Implements a2a-sdk's ``TaskStore`` plus the kernel's extras, with the surface
and semantics of :class:`iac_code.tasks.task_store.KernelTaskStore` (versions, the
event log, JSON views, ListTasks order and page tokens). A task is one hash;
ListTasks reads lexicographic sorted sets whose members sort like the local
index (status timestamp, then task id, both descending); a task's writes are a
stream whose entry ids are its versions. Each write is one Lua script, so the
task, its index entries and its log entry change together, and a write is
acknowledged only once Redis has acknowledged it (``settle``/``sync`` have
nothing to wait for).

Redis errors never reach a client as they are (their text may hold the URL):
writes fail with :data:`iac_code.api.NOT_STORED`, reads with
:data:`NOT_REACHABLE`. The client must be built with ``decode_responses=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask, TaskVersion, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, StreamResponse, Task, TaskState
from a2a.utils.errors import InternalError
from a2a.utils.proto_utils import to_stream_response
from redis.exceptions import RedisError

from iac_code.api import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_RETAINED_EVENTS,
    NOT_STORED,
    Event,
    PageTokens,
    SortKey,
    message_to_json,
    missed,
    sort_key,
    spawn,
    version_number,
)
from iac_code_state_redis.keys import Keys

logger = logging.getLogger(__name__)

NOT_REACHABLE = "The task store is not reachable. Retry shortly."
TERMINAL_STATES = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
                             TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED})
PAGE_TOKEN_KEY_BYTES = 32
PLACEMENT_CACHE_SIZE = 4096
MAX_ATTEMPTS = 8

# KEYS: task, events, finished, 4 new index sets, 4 index sets of the stored placement (as the caller guessed it).
# ARGV: owner, ctx, state, member, doc (the task after the last event), event count n, expected version
#       ('' = none), maxlen, finished (1/0), now ms, task id, guessed stored ctx, guessed stored state,
#       then the n events (empty: a write with no event), logged as versions v+1 .. v+n.
# Replies: {'ok', v} | {'conflict', v} | {'owner'} | {'moved', ctx, state} (guess wrong: call again with these).
_WRITE = """
local cur = redis.call('HMGET', KEYS[1], 'owner', 'v', 'm', 'ctx', 'state')
local v = tonumber(cur[2]) or 0
if cur[1] and cur[1] ~= ARGV[1] then return {'owner'} end
if ARGV[7] ~= '' and tonumber(ARGV[7]) ~= v then return {'conflict', v} end
if cur[1] and (cur[4] ~= ARGV[12] or cur[5] ~= ARGV[13]) then return {'moved', cur[4], cur[5]} end
if not cur[1] then redis.call('DEL', KEYS[2]) end
local n = tonumber(ARGV[6])
for i = 1, n do
  redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[8], (v + i) .. '-1', 'e', ARGV[13 + i])
end
local nv = v + n
if cur[1] and cur[3] then
  for i = 8, 11 do redis.call('ZREM', KEYS[i], cur[3]) end
end
redis.call('HSET', KEYS[1], 'doc', ARGV[5], 'owner', ARGV[1], 'ctx', ARGV[2], 'state', ARGV[3], 'v', nv, 'm', ARGV[4])
for i = 4, 7 do redis.call('ZADD', KEYS[i], 0, ARGV[4]) end
if ARGV[9] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[10], ARGV[11])
else
  redis.call('ZREM', KEYS[3], ARGV[11])
end
return {'ok', nv}
"""

# KEYS: task, events, finished, push configs, 4 index sets of the stored placement (as the caller read it).
# ARGV: owner, ctx, state, task id.  Replies: {'gone'} | {'owner'} | {'moved', ctx, state} | {'ok'}.
_DELETE = """
local cur = redis.call('HMGET', KEYS[1], 'owner', 'm', 'ctx', 'state')
if not cur[1] then
  redis.call('ZREM', KEYS[3], ARGV[4])
  return {'gone'}
end
if cur[1] ~= ARGV[1] then return {'owner'} end
if cur[3] ~= ARGV[2] or cur[4] ~= ARGV[3] then return {'moved', cur[3], cur[4]} end
if cur[2] then
  for i = 5, 8 do redis.call('ZREM', KEYS[i], cur[2]) end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
redis.call('ZREM', KEYS[3], ARGV[4])
return {'ok'}
"""


@dataclass(frozen=True, slots=True)
class _Write:
    """One script call's worth of a task's writes: its state after them, and their events in order."""

    owner: str
    task_id: str
    ctx: str
    state: str
    member: str
    doc: bytes
    finished: str
    events: tuple[bytes, ...]

    @classmethod
    def of(cls, owner: str, task: Task, event: Event | None, expires: bool) -> _Write:
        """Serialised now: the caller (a2a-sdk's TaskManager) goes on changing ``task``."""
        return cls(owner, task.id, task.context_id, str(int(task.status.state)), index_member(sort_key(task)),
                   task.SerializeToString(), "1" if expires and task.status.state in TERMINAL_STATES else "0",
                   (to_stream_response(event).SerializeToString() if event is not None else b"",))

    @classmethod
    def merge(cls, group: list[_Write]) -> _Write:
        last = group[-1]
        if len(group) == 1:
            return last
        return cls(last.owner, last.task_id, last.ctx, last.state, last.member, last.doc, last.finished,
                   tuple(e for w in group for e in w.events))


@dataclass
class _Queue:
    """A turn's writes of one task not yet acknowledged by Redis (see ``RedisTaskStore.save_event``)."""

    owner: str
    confirmed: int  # the version Redis has acknowledged
    last: int = -1  # the version the last queued write will get
    pending: list[_Write] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    error: BaseException | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        if self.last < 0:
            self.last = self.confirmed
        self.idle.set()


def index_member(key: SortKey) -> str:
    """The lex index member of a sort key: ``<has ts><ts, 20 digits>:<task id>`` (sorts like the key)."""
    has_ts, ts, task_id = key
    return f"{int(has_ts)}{max(ts, 0):020d}:{task_id}"


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def event_from_bytes(data: bytes) -> Event | None:
    """The event a log entry holds (``None``: a placeholder, or an entry that does not parse)."""
    if not data:
        return None
    response = StreamResponse.FromString(data)
    which = response.WhichOneof("payload")
    if which is None:
        return None
    event: Event = getattr(response, which)
    return event


def entry_version(entry_id: bytes | str) -> int:
    """The task version an event stream entry id (``<version>-1``) stands for."""
    return int(_text(entry_id).partition("-")[0])


class RedisTaskStore(TaskStore):
    """Owner-scoped tasks shared by every node through one Redis (same surface as ``KernelTaskStore``)."""

    def __init__(self, client: aioredis.Redis, keys: Keys, *, retained_events: int = DEFAULT_RETAINED_EVENTS,
                 finished_ttl: float = 0.0) -> None:
        self.client = client
        self.keys = keys
        self.retained_events = max(1, retained_events)
        self.finished_ttl = finished_ttl
        self._write_script = client.register_script(_WRITE)
        self._delete_script = client.register_script(_DELETE)
        self._tokens: PageTokens | None = None
        # Where each task was last seen in the index (context, state): a write names the index sets to leave.
        self._placement: OrderedDict[str, tuple[str, str]] = OrderedDict()
        # Turns' writes on their way to Redis, per task (bounded by the tasks whose turns run here).
        self._queues: dict[str, _Queue] = {}

    async def start(self) -> None:
        """Load the scripts and the page-token key every node shares (created by the first node)."""
        try:
            await self.client.script_load(_WRITE)
            await self.client.script_load(_DELETE)
            await self.client.set(self.keys.page_token_key, secrets.token_bytes(PAGE_TOKEN_KEY_BYTES), nx=True)
            key = await self.client.get(self.keys.page_token_key)
        except (RedisError, OSError) as exc:
            logger.error("The Redis task store could not start: %s", type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None
        if not isinstance(key, bytes) or len(key) != PAGE_TOKEN_KEY_BYTES:
            raise InternalError(message="The shared ListTasks page-token key in Redis is malformed.")
        self._tokens = PageTokens(key)

    async def _page_tokens(self) -> PageTokens:
        if self._tokens is None:
            await self.start()
        assert self._tokens is not None
        return self._tokens

    def _remember(self, task_id: str, ctx: str, state: str) -> None:
        self._placement[task_id] = (ctx, state)
        self._placement.move_to_end(task_id)
        while len(self._placement) > PLACEMENT_CACHE_SIZE:
            self._placement.popitem(last=False)

    def _index_keys(self, owner: str, ctx: str, state: int) -> list[str]:
        return [self.keys.index(owner), self.keys.index(owner, ctx), self.keys.index(owner, state=state),
                self.keys.index(owner, ctx, state)]

    # ------------------------------------------------------------------ writes

    async def write(self, owner: str, task: Task, event: Event | None, prev_version: TaskVersion | None) -> TaskVersion:
        """Store ``task`` as its next version and log ``event`` under it, atomically (one script), now.

        Raises ``ConcurrentTaskModificationError`` when ``prev_version`` is given and the stored
        version differs, or when the id belongs to another owner's task.
        """
        await self._settled(task.id)
        expected = version_number(prev_version) if prev_version is not None else None
        return TaskVersion(await self._send(_Write.of(owner, task, event, self.finished_ttl > 0), expected))

    async def _send(self, write: _Write, expected: int | None) -> int:
        """One script call storing ``write`` (its events as the versions after ``expected``); the new version."""
        keys = [self.keys.task(write.task_id), self.keys.events(write.task_id), self.keys.finished,
                *self._index_keys(write.owner, write.ctx, int(write.state))]
        guess = self._placement.get(write.task_id, (write.ctx, write.state))
        try:
            for _ in range(MAX_ATTEMPTS):
                old = self._index_keys(write.owner, guess[0], int(guess[1]))
                reply = await self._write_script(keys=[*keys, *old], args=[
                    write.owner, write.ctx, write.state, write.member, write.doc, len(write.events),
                    "" if expected is None else str(expected), self.retained_events, write.finished,
                    int(time.time() * 1000), write.task_id, guess[0], guess[1], *write.events])
                outcome = _text(reply[0])
                if outcome == "ok":
                    self._remember(write.task_id, write.ctx, write.state)
                    return int(reply[1])
                if outcome != "moved":
                    raise ConcurrentTaskModificationError(write.task_id)
                guess = (_text(reply[1]), _text(reply[2]) or "0")
        except (RedisError, OSError) as exc:
            logger.error("Could not store task %s in Redis: %s", write.task_id, type(exc).__name__)
            raise InternalError(message=NOT_STORED) from None
        raise ConcurrentTaskModificationError(write.task_id)

    # ------------------------------------------------------------------ a turn's writes, in groups

    def _enqueue(self, owner: str, task: Task, event: Event | None, prev: int) -> int:
        """Queue a turn's write (versioned on ``prev``); one flusher per task sends what queued up at once."""
        queue = self._queues.get(task.id)
        if queue is None:
            queue = self._queues[task.id] = _Queue(owner, confirmed=prev)
        if queue.error is not None:
            raise ConcurrentTaskModificationError(task.id)
        if prev != queue.last:
            raise ConcurrentTaskModificationError(task.id)
        queue.pending.append(_Write.of(owner, task, event, self.finished_ttl > 0))
        queue.last += 1
        queue.idle.clear()
        if queue.flusher is None:
            queue.flusher = spawn(self._flush(task.id, queue), name=f"task-writes:{task.id}")
        return queue.last

    async def _flush(self, task_id: str, queue: _Queue) -> None:
        """Send the queued writes of one task, each group in one script call, until none are left."""
        try:
            while queue.pending:
                group, queue.pending = queue.pending, []
                merged = _Write.merge(group)
                queue.confirmed = await self._send(merged, queue.confirmed)
        except (InternalError, ConcurrentTaskModificationError) as exc:
            queue.error = exc
            queue.pending.clear()
        finally:
            queue.flusher = None
            queue.idle.set()
            if self._queues.get(task_id) is queue and queue.error is None and not queue.pending:
                del self._queues[task_id]

    async def _settled(self, task_id: str) -> None:
        """Wait until this node's queued writes of the task are in Redis; their failure raises ``NOT_STORED``."""
        queue = self._queues.get(task_id)
        if queue is None:
            return
        await queue.idle.wait()
        if queue.error is not None:
            if self._queues.get(task_id) is queue:
                del self._queues[task_id]  # reported once: the next turn starts afresh
            raise InternalError(message=NOT_STORED)

    async def settle_task(self, task_id: str) -> None:
        """Wait until every write of the task this node made is acknowledged by Redis."""
        await self._settled(task_id)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self.write(resolve_user_scope(context), task, None, None)

    async def save_event(self, task: Task, event: Event | None, context: ServerCallContext,
                         prev_version: TaskVersion | None = None) -> TaskVersion:
        """Store ``task`` as its next version and log ``event`` (``None``: a write with no event) under it.

        With ``prev_version`` the write is refused (``ConcurrentTaskModificationError``) unless the
        stored task is still at that version, as a2a-sdk's ``VersionedTaskStore`` does. Such a
        versioned write (a turn's) returns at once with its version and goes to Redis with the
        writes queued behind it in one script call; :meth:`settle` waits for it, and the kernel
        settles every state before a client hears of it (acknowledged means durable). A
        refused or failed write fails the task's next write and its settle.
        """
        owner = resolve_user_scope(context)
        if prev_version is None:
            return await self.write(owner, task, event, None)
        return TaskVersion(self._enqueue(owner, task, event, version_number(prev_version)))

    async def _remove(self, owner: str, task_id: str) -> bool:
        """Delete one task of ``owner`` with everything that belongs to it; whether it was there."""
        await self._caught_up(task_id)
        try:
            stored = await self.client.hmget(self.keys.task(task_id), "owner", "ctx", "state")
            if stored[0] is None:
                await self.client.zrem(self.keys.finished, task_id)
                return False
            ctx, state = _text(stored[1]), _text(stored[2]) or "0"
            for _ in range(MAX_ATTEMPTS):
                reply = await self._delete_script(keys=[
                    self.keys.task(task_id), self.keys.events(task_id), self.keys.finished,
                    self.keys.push_configs(task_id), *self._index_keys(owner, ctx, int(state))],
                    args=[owner, ctx, state, task_id])
                outcome = _text(reply[0])
                if outcome != "moved":
                    self._placement.pop(task_id, None)
                    return outcome == "ok"
                ctx, state = _text(reply[1]), _text(reply[2]) or "0"
        except (RedisError, OSError) as exc:
            logger.error("Could not delete task %s in Redis: %s", task_id, type(exc).__name__)
            raise InternalError(message=NOT_STORED) from None
        return False

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._remove(resolve_user_scope(context), task_id)

    async def sweep(self, limit: int = 100) -> int:
        """Delete up to ``limit`` tasks that finished more than ``finished_ttl`` seconds ago; how many."""
        if self.finished_ttl <= 0:
            return 0
        cutoff = int((time.time() - self.finished_ttl) * 1000)
        try:
            due = await self.client.zrangebyscore(self.keys.finished, "-inf", cutoff, start=0, num=limit)
            owners = await self._pipeline_hget([_text(t) for t in due], "owner")
        except (RedisError, OSError) as exc:
            logger.warning("The finished-task sweep could not read Redis: %s", type(exc).__name__)
            return 0
        removed = 0
        for task_id, owner in owners:
            if owner is None:
                await self._remove("", task_id)  # no task left: forget the entry
            elif await self._remove(_text(owner), task_id):
                removed += 1
        return removed

    async def _pipeline_hget(self, task_ids: Sequence[str], field: str) -> list[tuple[str, Any]]:
        if not task_ids:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.hget(self.keys.task(task_id), field)
            values = await pipe.execute()
        return list(zip(task_ids, values, strict=True))

    # ------------------------------------------------------------------ reads

    async def _caught_up(self, task_id: str | None = None) -> None:
        """Reads on this node see its own writes: wait for the queued ones (of one task, or all)."""
        queues = [self._queues.get(task_id)] if task_id is not None else list(self._queues.values())
        for queue in queues:
            if queue is not None:
                await queue.idle.wait()

    async def load(self, owner: str, task_id: str) -> StoredTask | None:
        """The task of ``owner`` with its version (read atomically), or ``None``."""
        await self._caught_up(task_id)
        queue = self._queues.get(task_id)
        if queue is not None and queue.error is not None:
            del self._queues[task_id]  # a fresh read is the next writer's baseline; Redis refuses stale ones
        try:
            doc, stored_owner, version, ctx, state = await self.client.hmget(
                self.keys.task(task_id), "doc", "owner", "v", "ctx", "state")
        except (RedisError, OSError) as exc:
            logger.error("Could not read task %s from Redis: %s", task_id, type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None
        if doc is None or _text(stored_owner) != owner:
            return None
        self._remember(task_id, _text(ctx), _text(state) or "0")
        return StoredTask(Task.FromString(doc), TaskVersion(int(version or 0)))

    async def get_versioned(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task with its version (the seq of its latest stream event), or ``None``."""
        return await self.load(resolve_user_scope(context), task_id)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        stored = await self.get_versioned(task_id, context)
        return stored.task if stored is not None else None

    async def events_after(self, task_id: str, after: int, context: ServerCallContext) -> list[VersionedEvent] | None:
        """The logged events of the task after version ``after``; ``None`` when not all are retained."""
        owner = resolve_user_scope(context)
        await self._caught_up(task_id)
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hmget(self.keys.task(task_id), "owner", "v")
                pipe.xrange(self.keys.events(task_id), f"{after + 1}-0", "+")
                (stored_owner, version), entries = await pipe.execute()
        except (RedisError, OSError) as exc:
            logger.error("Could not read the events of task %s from Redis: %s", task_id, type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None
        if stored_owner is None or _text(stored_owner) != owner:
            return missed((), after, 0)
        current = int(version or 0)
        log: list[tuple[int, Event | None]] = []
        for entry_id, fields in entries:
            number = entry_version(entry_id)
            if number > current:
                break
            log.append((number, event_from_bytes(fields.get(b"e", b""))))
        return missed(log, after, current)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page, next_token, total, size = await self._page(params, context)
        return ListTasksResponse(tasks=page, next_page_token=next_token, total_size=total, page_size=size)

    async def _page(self, params: ListTasksRequest, context: ServerCallContext) -> tuple[list[Task], str, int, int]:
        """One ListTasks page (up to ``size`` tasks after the cursor, newest first), its next token and the total."""
        owner = resolve_user_scope(context)
        tokens = await self._page_tokens()
        await self._caught_up()
        size = params.page_size or DEFAULT_PAGE_SIZE
        key = self.keys.index(owner, params.context_id, params.status or None)
        low = "-"
        if params.HasField("status_timestamp_after"):
            low = f"[1{max(params.status_timestamp_after.ToNanoseconds(), 0):020d}:"
        high = "(" + index_member(tokens.decode(params.page_token)) if params.page_token else "+"
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.zrevrangebylex(key, high, low, start=0, num=size + 1)
                pipe.zlexcount(key, low, "+")
                members, total = await pipe.execute()
            cursors = [_parse_member(m) for m in members]
            chosen = cursors[:size]
            page: list[Task] = []
            if chosen:
                async with self.client.pipeline(transaction=False) as pipe:
                    for _, _, task_id in chosen:
                        pipe.hmget(self.keys.task(task_id), "doc", "owner")
                    rows = await pipe.execute()
                page = [Task.FromString(doc) for doc, stored_owner in rows
                        if doc is not None and _text(stored_owner) == owner]
        except (RedisError, OSError) as exc:
            logger.error("Could not list tasks from Redis: %s", type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None
        next_token = tokens.encode(chosen[-1]) if len(cursors) > size else ""
        return page, next_token, int(total), size

    # ------------------------------------------------------------------ JSON views

    async def get_view(self, task_id: str, context: ServerCallContext) -> dict[str, Any] | None:
        """The task as camelCase JSON (``MessageToDict``), or ``None``."""
        task = await self.get(task_id, context)
        return message_to_json(task) if task is not None else None

    async def list_view(self, params: ListTasksRequest, context: ServerCallContext) -> dict[str, Any]:
        """ListTasks as JSON, shaped like ``KernelTaskStore.list_view``."""
        page, next_token, total, size = await self._page(params, context)
        return {"tasks": [message_to_json(t) for t in page], "nextPageToken": next_token,
                "pageSize": size, "totalSize": total}

    # ------------------------------------------------------------------ durability and lifecycle

    async def settle(self, task_ids: Iterable[str], context: ServerCallContext) -> None:
        """Wait until the tasks' writes made on this node are acknowledged by Redis (``NOT_STORED`` if not)."""
        for task_id in task_ids:
            await self._settled(task_id)

    async def sync(self) -> None:
        """Wait until every write made on this node is acknowledged by Redis."""
        for task_id in list(self._queues):
            await self._settled(task_id)

    def restore(self) -> int:
        """Nothing to rebuild: the state lives in Redis (interrupted turns are the node reaper's job)."""
        return 0

    async def close(self) -> None:
        """Wait for the writes still on their way (the Redis client is closed by whoever made it)."""
        with contextlib.suppress(InternalError):
            await self.sync()

    def count(self) -> int:
        """Not tracked for the shared store (counting would scan every owner's index): always 0."""
        return 0

    def cached(self) -> int:
        """Whole tasks in memory: none, every read goes to Redis."""
        return 0


def _parse_member(member: bytes | str) -> SortKey:
    text = _text(member)
    head, _, task_id = text.partition(":")
    return head[0] == "1", int(head[1:]), task_id
