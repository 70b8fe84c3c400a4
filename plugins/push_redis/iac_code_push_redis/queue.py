"""The ``redis-streams`` push queue: a Redis stream read through one consumer group (spec push.md §8).

Keys (names from the configuration):

========================  ===========  =====================================================
``push-stream``           stream       due jobs; field ``job`` = ``codec.encode(job)``
``push-retry-key``        sorted set   jobs due later; member = encoded job, score = due time
``push-dead-stream``      stream       dead letters; field ``job`` (capped, see below)
``<push-stream>:done:*``  string       highest ``seq`` done per ordering key (1 day TTL)
``<push-stream>:queued:*`` string       highest ``seq`` queued per ordering key (1 day TTL), set with the job
========================  ===========  =====================================================

Where this differs from the spec's description of the original code, on purpose:

* ``claim`` blocks on ``XREADGROUP`` for at most ``wait`` seconds (never ``BLOCK 0``),
  so due retries are promoted and expired leases reclaimed on every call whatever
  the traffic. Retries are promoted by a Lua script (``ZRANGEBYSCORE`` + ``XADD`` +
  ``ZREM`` in one step), so concurrent workers neither duplicate nor lose one.
* Expired leases are found with ``XAUTOCLAIM`` from a cursor that walks the whole
  pending list, up to ``limit`` entries per call.
* Settling a job (``ack``, ``retry``, ``dead_letter``) ``XACK``\\ s **and** ``XDEL``\\ s
  its entry in the same ``MULTI``, so the stream holds only jobs not yet settled and
  stays bounded without ``XTRIM`` (trimming by ``MINID``/``MAXLEN`` could drop jobs
  no worker has read yet, so it is not used on the job stream).
* The dead stream is capped with ``XADD MAXLEN ~ 100000``: beyond about that many dead
  letters the oldest are dropped (they are for inspection only; every dead letter is
  also logged by the worker).
* An entry that cannot be decoded is moved as-is to the dead stream (with
  ``reason: undecodable``) and a warning is logged; the queue carries on.

Availability: every call is retried with bounded exponential backoff while Redis
is unreachable or loading (about 10 s, then :class:`RedisQueueUnavailable`);
``claim`` instead returns ``[]`` after at most ``wait`` seconds and logs once per
outage, so a worker rides out a Redis restart. When the consumer group has
vanished (a restart without persistence) it is recreated. A write is durable once
Redis acknowledged it; how durable that is depends on the server's
``appendonly``/``appendfsync`` settings. A write whose reply was lost is retried, so
a job can be stored twice: delivery is at-least-once and receivers drop duplicates
by job id.

All keys of one queue are used together in scripts and transactions: on Redis
Cluster give them one hash tag (``{push}:stream``, ``{push}:retry`` ...).

The Redis URL may hold a password: only ``host:port`` (or the socket path) is
ever logged or put into an exception message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
import redis.exceptions as redis_errors
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from iac_code.api import ClaimedJob, JobCodec, PushJob, QueueContext, StartupError, redact, redis_location, url_secrets

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_LEASE_TIMEOUT_MS = 300000
DEAD_STREAM_MAXLEN = 100_000
DONE_TTL_SECONDS = 86400
PROMOTE_BATCH = 100
MAX_BLOCK_MS = 5000
SOCKET_TIMEOUT = 10.0  # must exceed MAX_BLOCK_MS
CONNECT_TIMEOUT = 2.0
HEALTH_CHECK_INTERVAL = 15
RETRY_BUDGET = 10.0
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 1.0
IDLE_CONSUMER_MS = 86_400_000

# Move up to ARGV[2] retries due at ARGV[1] (epoch seconds) from the sorted set to the stream, atomically.
_PROMOTE_LUA = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'job', member)
  redis.call('ZREM', KEYS[1], member)
end
return #due
"""

# Keep the larger of the stored and the given sequence number. Sequence numbers are
# nanosecond clocks (beyond a Lua double's exact range), so they are compared as
# decimal strings: longer is larger, else byte by byte.
_MARK_DONE_LUA = """
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return false
end
local current = redis.call('GET', KEYS[1])
if (not current) or greater(ARGV[1], current) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
  return 1
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
return 0
"""

# Delete the group's consumers that hold no pending entry and were idle at least
# ARGV[2] ms (only the consumer ARGV[3] when it is not empty). Atomic, so a consumer
# cannot gain an entry between the check and the deletion.
_PRUNE_CONSUMERS_LUA = """
local consumers = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if type(consumers) ~= 'table' or consumers.err then return 0 end
local removed = 0
for _, c in ipairs(consumers) do
  local name, pending, idle
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = c[i + 1]
    elseif c[i] == 'idle' then idle = c[i + 1] end
  end
  if name and pending == 0 and idle and idle >= tonumber(ARGV[2]) and (ARGV[3] == '' or ARGV[3] == name) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed
"""

_FATAL_CONNECTION_ERRORS = (redis_errors.AuthenticationError, redis_errors.AuthorizationError)
_TRANSIENT_ERRORS = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError, redis_errors.ReadOnlyError,
                     redis_errors.TryAgainError, redis_errors.OutOfMemoryError)


class RedisQueueError(RuntimeError):
    """A Redis command of the push queue failed for good (wrong credentials, wrong key type, ...)."""


class RedisQueueUnavailable(RedisQueueError):
    """Redis stayed unreachable for the whole retry budget; the change may or may not have been applied."""


def default_consumer_name() -> str:
    """``<hostname>-<pid>-<12 hex>``: unique per process, recognisable in ``XINFO CONSUMERS``."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(6)}"



def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def _stream_entries(reply: Any) -> list[tuple[Any, Any]]:
    """The ``(id, fields)`` entries of an ``XREADGROUP`` reply (RESP2 list or RESP3/unified dict shape)."""
    if not reply:
        return []
    groups: Iterable[Any] = reply.values() if isinstance(reply, dict) else (item[1] for item in reply)
    entries: list[tuple[Any, Any]] = []
    for group in groups:
        # RESP3 parsing wraps the entry list in one more list.
        if isinstance(group, list) and group and isinstance(group[0], list):
            group = group[0]
        entries.extend(tuple(entry[:2]) for entry in group or [])
    return entries


class RedisStreamsQueue:
    """A :class:`~iac_code.api.PushQueue` on a Redis stream read through one consumer group.

    Every process is one consumer of the group; all of them share the jobs. Nothing
    held in process memory grows with traffic (one reclaim cursor, one outage flag).
    """

    def __init__(self, *, url: str, codec: JobCodec, stream: str = "iac-code:a2a:push",
                 retry_key: str = "iac-code:a2a:push:retry", dead_stream: str = "iac-code:a2a:push:dead",
                 group: str = "iac-code-push", consumer: str = "",
                 lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS) -> None:
        if len({stream, retry_key, dead_stream}) != 3:
            raise StartupError("push-stream, push-retry-key and push-dead-stream must be three different Redis keys.")
        if int(lease_timeout_ms) < 1:
            raise StartupError("push-lease-timeout-ms must be at least 1.")
        self.codec = codec
        self.stream = stream
        self.retry_key = retry_key
        self.dead_stream = dead_stream
        self.group = group
        self.consumer = consumer or default_consumer_name()
        self.lease_timeout_ms = int(lease_timeout_ms)
        self.location = redis_location(url)
        self._secrets = url_secrets(url)
        try:
            self._redis: aioredis.Redis = aioredis.Redis.from_url(
                url, decode_responses=False, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT,
                health_check_interval=HEALTH_CHECK_INTERVAL, retry=Retry(NoBackoff(), 0))
        except (ValueError, TypeError) as exc:
            raise StartupError(
                f"push-redis-url is not a valid Redis URL (redis://, rediss:// or unix://): {self._clean(exc)}") from None
        self._promote = self._redis.register_script(_PROMOTE_LUA)
        self._mark_done = self._redis.register_script(_MARK_DONE_LUA)
        self._prune = self._redis.register_script(_PRUNE_CONSUMERS_LUA)
        self.retry_budget = RETRY_BUDGET
        self._reclaim_cursor = "0-0"
        self._outage: str | None = None
        self._acks: list[tuple[str, asyncio.Future[None]]] = []
        self._ack_flusher: asyncio.Task[None] | None = None

    @classmethod
    def from_context(cls, ctx: QueueContext) -> RedisStreamsQueue:
        """The queue the settings describe (plugin keys plus the push plugin's ``push_lease_timeout_ms``)."""
        config = ctx.config
        return cls(
            url=str(getattr(config, "push_redis_url", "")), codec=ctx.codec,
            stream=getattr(config, "push_stream", "iac-code:a2a:push"),
            retry_key=getattr(config, "push_retry_key", "iac-code:a2a:push:retry"),
            dead_stream=getattr(config, "push_dead_stream", "iac-code:a2a:push:dead"),
            group=getattr(config, "push_consumer_group", "iac-code-push"),
            consumer=getattr(config, "push_consumer_name", "") or "",
            lease_timeout_ms=int(getattr(config, "push_lease_timeout_ms", DEFAULT_LEASE_TIMEOUT_MS)),
        )

    # ------------------------------------------------------------------ helpers

    def done_key(self, key: str) -> str:
        """The Redis key holding ordering key ``key``'s highest done ``seq``."""
        return f"{self.stream}:done:{key}"

    def queued_key(self, key: str) -> str:
        """The Redis key holding ordering key ``key``'s highest queued ``seq``."""
        return f"{self.stream}:queued:{key}"

    def _clean(self, exc: BaseException) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self._secrets)

    def _went_down(self, exc: BaseException) -> None:
        reason = self._clean(exc)
        if self._outage is None:
            log.warning("Redis push queue at %s is unavailable (%s); retrying.", self.location, reason)
        self._outage = reason

    def _came_back(self) -> None:
        if self._outage is not None:
            self._outage = None
            log.warning("Redis push queue at %s is available again.", self.location)

    @staticmethod
    def _transient(exc: BaseException) -> bool:
        return isinstance(exc, _TRANSIENT_ERRORS) and not isinstance(exc, _FATAL_CONNECTION_ERRORS)

    @staticmethod
    def _no_group(exc: BaseException) -> bool:
        return isinstance(exc, ResponseError) and "NOGROUP" in str(exc)

    async def _ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self.stream, self.group, id="0-0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _call(self, what: str, op: Callable[[], Awaitable[T]], budget: float | None = None) -> T:
        """Run ``op`` until it succeeds, retrying outages with backoff for ``budget`` (default
        :attr:`retry_budget`) seconds."""
        budget = self.retry_budget if budget is None else budget
        deadline = time.monotonic() + budget
        delay = BACKOFF_FIRST
        while True:
            try:
                try:
                    result = await op()
                except ResponseError as exc:
                    if not self._no_group(exc):
                        raise
                    log.warning("Redis push queue at %s: consumer group %r is missing; recreating it.",
                                self.location, self.group)
                    await self._ensure_group()
                    result = await op()
            except Exception as exc:
                if not self._transient(exc):
                    if isinstance(exc, RedisError):
                        raise RedisQueueError(
                            f"Redis push queue at {self.location}: {what} failed: {self._clean(exc)}") from None
                    raise
                self._went_down(exc)
                if time.monotonic() + delay > deadline:
                    raise RedisQueueUnavailable(
                        f"Redis push queue at {self.location} is unavailable: {what} gave up after {budget:g} s "
                        f"({self._clean(exc)})") from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            self._came_back()
            return result

    async def _settle(self, receipt: Any, first: Callable[[Any], Any] | None = None, budget: float | None = None) -> None:
        """One MULTI: ``first(pipe)`` (if any), then XACK and XDEL of the entry ``receipt``."""
        entry_id = _text(receipt)

        async def op() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                if first is not None:
                    first(pipe)
                pipe.xack(self.stream, self.group, entry_id)
                pipe.xdel(self.stream, entry_id)
                await pipe.execute()

        await self._call("settle", op, budget)

    # ------------------------------------------------------------------ PushQueue

    async def start(self) -> None:
        """Create the consumer group (``MKSTREAM``; an existing one is kept) and prune long-idle empty consumers."""
        await self._call("start", self._ensure_group)
        try:
            await self._prune(keys=[self.stream], args=[self.group, IDLE_CONSUMER_MS, ""])
        except (RedisError, OSError) as exc:  # housekeeping only
            log.debug("Redis push queue: pruning idle consumers failed: %s", self._clean(exc))

    async def enqueue(self, jobs: Sequence[PushJob]) -> None:
        """Store ``jobs`` in one transaction: due ones on the stream, later ones in the retry set."""
        if not jobs:
            return
        now = time.time()
        encoded = [(job.next_attempt_at, self.codec.encode(job)) for job in jobs]

        marks: dict[str, int] = {}
        for job in jobs:
            marks[job.order_key] = max(job.seq, marks.get(job.order_key, 0))

        async def op() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                for due, data in encoded:
                    if due > now:
                        pipe.zadd(self.retry_key, {data: due})
                    else:
                        pipe.xadd(self.stream, {"job": data})
                for key, seq in marks.items():
                    await self._mark_done(keys=[self.queued_key(key)], args=[str(seq), DONE_TTL_SECONDS],
                                          client=pipe)
                await pipe.execute()

        await self._call("enqueue", op)

    async def claim(self, limit: int, wait: float) -> list[ClaimedJob]:
        """Promote due retries, reclaim expired leases, then read new entries (blocking at most ``wait`` s).

        While Redis is unavailable this returns ``[]`` (after about ``wait`` seconds) instead of raising.
        """
        if limit <= 0:
            return []
        started = time.monotonic()
        claimed: list[ClaimedJob] = []
        try:
            try:
                await self._claim(limit, wait, claimed)
            except ResponseError as exc:
                if not self._no_group(exc):
                    raise
                log.warning("Redis push queue at %s: consumer group %r is missing; recreating it.",
                            self.location, self.group)
                await self._ensure_group()
                await self._claim(limit, wait, claimed)
        except (RedisError, OSError) as exc:
            self._went_down(exc)
            if not claimed:  # jobs already leased are returned; the rest wait for the next call
                await asyncio.sleep(max(0.0, min(wait, MAX_BLOCK_MS / 1000) - (time.monotonic() - started)))
            return claimed
        self._came_back()
        return claimed

    async def _claim(self, limit: int, wait: float, claimed: list[ClaimedJob]) -> None:
        """Append to ``claimed`` until it holds ``limit`` jobs: due retries promoted, expired leases, new entries."""
        await self._promote(keys=[self.retry_key, self.stream], args=[repr(time.time()), max(PROMOTE_BATCH, limit)])
        if len(claimed) < limit:
            claimed += await self._reclaim(limit - len(claimed))
        if len(claimed) < limit:
            block = None if claimed or wait <= 0 else max(1, min(int(wait * 1000), MAX_BLOCK_MS))
            reply = await self._redis.xreadgroup(self.group, self.consumer, {self.stream: ">"},
                                                 count=limit - len(claimed), block=block)
            claimed += await self._decode(_stream_entries(reply))

    async def _reclaim(self, limit: int) -> list[ClaimedJob]:
        """Take over entries leased longer than the lease timeout, walking the pending list with a cursor."""
        reply = await self._redis.xautoclaim(self.stream, self.group, self.consumer, self.lease_timeout_ms,
                                             start_id=self._reclaim_cursor, count=limit)
        self._reclaim_cursor = _text(reply[0]) if reply and reply[0] else "0-0"
        entries = list(reply[1]) if reply and len(reply) > 1 and reply[1] else []
        return await self._decode([tuple(e[:2]) for e in entries])

    async def _decode(self, entries: Sequence[tuple[Any, Any]]) -> list[ClaimedJob]:
        claimed: list[ClaimedJob] = []
        for raw_id, fields in entries:
            if raw_id is None:
                continue
            entry_id = _text(raw_id)
            if not fields:  # deleted while leased (Redis 6.2 reports these; an entry always has a field)
                with contextlib.suppress(RedisError, OSError):
                    await self._redis.xack(self.stream, self.group, entry_id)
                continue
            data = fields.get(b"job", fields.get("job")) if isinstance(fields, dict) else None
            try:
                if data is None:
                    raise ValueError("the entry has no 'job' field")
                job = self.codec.decode(data)
            except Exception as exc:  # any codec failure: a bad entry must never stop the queue
                log.warning("Redis push queue at %s: stream entry %s cannot be read (%s); moved to %s as is.",
                            self.location, entry_id, type(exc).__name__, self.dead_stream)
                await self._bury(entry_id, data)
                continue
            claimed.append(ClaimedJob(job=job, receipt=entry_id))
        return claimed

    async def _bury(self, entry_id: str, data: Any) -> None:
        """Move an unreadable entry to the dead stream unchanged; left to lease recovery if Redis fails."""
        raw = data if isinstance(data, bytes | str) else b""
        try:
            await self._settle(entry_id, lambda pipe: pipe.xadd(
                self.dead_stream, {"job": raw, "reason": "undecodable", "entry": entry_id},
                maxlen=DEAD_STREAM_MAXLEN, approximate=True), budget=2.0)
        except (RedisError, OSError, RedisQueueError) as exc:
            log.warning("Redis push queue at %s: moving entry %s to %s failed (%s); it stays leased.",
                        self.location, entry_id, self.dead_stream, self._clean(exc))

    async def ack(self, claimed: ClaimedJob) -> None:
        """``XACK`` + ``XDEL`` the entry; acks arriving together share one ``MULTI`` (one round trip)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._acks.append((_text(claimed.receipt), future))
        if self._ack_flusher is None:
            self._ack_flusher = asyncio.get_running_loop().create_task(self._flush_acks())
        await future

    async def _flush_acks(self) -> None:
        try:
            await asyncio.sleep(0)  # the acks of deliveries finishing in this same loop pass join the batch
            while self._acks:
                batch, self._acks = self._acks, []
                ids = [entry_id for entry_id, _ in batch]

                async def op(ids: list[str] = ids) -> None:
                    async with self._redis.pipeline(transaction=True) as pipe:
                        pipe.xack(self.stream, self.group, *ids)
                        pipe.xdel(self.stream, *ids)
                        await pipe.execute()

                try:
                    await self._call("ack", op)
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
        finally:
            self._ack_flusher = None

    async def retry(self, claimed: ClaimedJob, job: PushJob) -> None:
        """``ZADD`` ``job`` to the retry set at its ``next_attempt_at``, then ``XACK`` + ``XDEL`` (one ``MULTI``)."""
        data = self.codec.encode(job)
        await self._settle(claimed.receipt, lambda pipe: pipe.zadd(self.retry_key, {data: job.next_attempt_at}))

    async def dead_letter(self, claimed: ClaimedJob, job: PushJob) -> None:
        """``XADD`` ``job`` to the dead stream (``MAXLEN ~ 100000``), then ``XACK`` + ``XDEL`` (one ``MULTI``)."""
        data = self.codec.encode(job)
        await self._settle(claimed.receipt, lambda pipe: pipe.xadd(
            self.dead_stream, {"job": data}, maxlen=DEAD_STREAM_MAXLEN, approximate=True))

    async def mark_done(self, key: str, seq: int) -> None:
        """Raise ``key``'s done mark to ``seq`` (never lowers it); the mark expires a day after its last update."""
        value = int(seq)
        if value < 0:
            raise ValueError("seq must not be negative")
        await self._call("mark_done", lambda: self._mark_done(
            keys=[self.done_key(key)], args=[str(value), DONE_TTL_SECONDS]))

    async def done_through(self, key: str) -> int:
        """The highest ``seq`` marked done for ``key`` (0 when none is known)."""
        return await self._read_mark("done_through", self.done_key(key))

    async def queued_through(self, key: str) -> int:
        """The highest ``seq`` queued for ``key`` (0 when none is known)."""
        return await self._read_mark("queued_through", self.queued_key(key))

    async def _read_mark(self, what: str, name: str) -> int:
        raw = await self._call(what, lambda: self._redis.get(name))
        if raw is None:
            return 0
        try:
            return int(raw)
        except ValueError:
            log.warning("Redis push queue at %s: ordering mark %s is not a number; ignored.", self.location, name)
            return 0

    async def depth(self) -> dict[str, int]:
        """``pending`` (unleased stream entries + scheduled retries), ``inflight`` (leased), ``dead``."""

        async def op() -> list[Any]:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xlen(self.stream)
                pipe.zcard(self.retry_key)
                pipe.xlen(self.dead_stream)
                pipe.xpending(self.stream, self.group)
                return list(await pipe.execute(raise_on_error=False))

        length, scheduled, dead, pending = await self._call("depth", op)
        for value in (length, scheduled, dead):
            if isinstance(value, Exception):
                raise RedisQueueError(f"Redis push queue at {self.location}: depth failed: {self._clean(value)}")
        if isinstance(pending, Exception):
            if not self._no_group(pending):
                raise RedisQueueError(f"Redis push queue at {self.location}: depth failed: {self._clean(pending)}")
            inflight = 0
        else:
            inflight = int(pending.get("pending", 0) if isinstance(pending, dict) else pending[0])
        return {"pending": max(0, int(length) - inflight) + int(scheduled), "inflight": inflight, "dead": int(dead)}

    async def dead_letters(self, limit: int = 100) -> list[PushJob]:
        """Up to ``limit`` dead letters, oldest first; entries that cannot be decoded are skipped."""
        if limit <= 0:
            return []
        entries = await self._call("dead_letters", lambda: self._redis.xrange(self.dead_stream, count=limit))
        jobs: list[PushJob] = []
        for entry_id, fields in entries or []:
            data = fields.get(b"job") if isinstance(fields, dict) else None
            try:
                if data is None:
                    raise ValueError("no job field")
                jobs.append(self.codec.decode(data))
            except Exception as exc:  # raw (undecodable) dead letters count in depth only
                log.debug("Redis push queue: dead letter %s cannot be read (%s).", _text(entry_id), type(exc).__name__)
        return jobs

    async def close(self) -> None:
        """Leave the group if this consumer holds no lease, then close the connections."""
        try:
            await self._prune(keys=[self.stream], args=[self.group, 0, self.consumer])
        except (RedisError, OSError) as exc:  # housekeeping only
            log.debug("Redis push queue: removing consumer failed: %s", self._clean(exc))
        await self._redis.aclose()
