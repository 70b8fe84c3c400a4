"""One node's membership of the cluster: heartbeat, context leases, forwarded calls, dead nodes' turns.

* **Heartbeat.** ``node:<id>`` exists while the node lives (set with an expiry of
  ``node-lease-seconds``, renewed every third of it, together with every lease the
  node holds).
* **Leases.** A turn holds its context's ``lease:<digest>`` (``<node> <token>
  <task>``, same expiry). Each grant takes the next value of the ``fence``
  counter; the context snapshot is written back only while the lease still
  holds that token, so a node that lost its lease (stalled past the expiry)
  cannot overwrite the context a newer turn has.
* **Forwarded calls.** CancelTask and permission answers for a turn running on
  another node are pushed onto that node's ``inbox:<id>`` list; it runs them and
  pushes the answer onto ``reply:<call id>``, which the caller waits on (BLPOP).
* **Dead nodes.** Every node checks the other members; for one whose heartbeat
  expired, the turns it held (``held:<id>``) are marked FAILED "Task interrupted"
  once their leases expired, by one survivor (``reaping:<task>``), through a
  versioned write: if the dead node's turn wrote meanwhile, the write is refused
  and the next round looks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import secrets
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as redis
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion, VersionedEvent
from a2a.utils.errors import InternalError, UnsupportedOperationError

from iac_code.api import (
    ALREADY_WORKING,
    ControlHandler,
    Lease,
    NodeLink,
    NodeUnavailableError,
    StartupError,
    interruption,
    is_interrupted,
    spawn,
    task_scope,
)
from iac_code_state_redis.events import RedisTaskEventStream
from iac_code_state_redis.keys import Keys
from iac_code_state_redis.store import NOT_REACHABLE, RedisTaskStore

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

LEASE_WAIT_SECONDS = 2.0  # a lease being released as the next message arrives elsewhere
REAPING_CLAIM_MS = 30000
REPLY_TTL_SECONDS = 60
STOP_SECONDS = 10.0  # at most this long for the last writes when a node stops
HELD_SEPARATOR = "\0"

# KEYS: lease, fence, held, context. ARGV: node, task id, ttl ms, held value.
# Replies: {0} (held by another turn) | {token, context snapshot or false}.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token .. ' ' .. ARGV[2], 'PX', ARGV[3])
redis.call('HSET', KEYS[3], KEYS[1], ARGV[4])
return {token, redis.call('GET', KEYS[4])}
"""
# KEYS: lease, context, held. ARGV: the lease value, snapshot ('' keeps the stored one).
_RELEASE = """
redis.call('HDEL', KEYS[3], KEYS[1])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
redis.call('DEL', KEYS[1])
return 1
"""
# KEYS: node key, held. ARGV: node, ttl ms. Renews the heartbeat and every lease still ours.
_RENEW = """
redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
local lost = 0
for _, lease in ipairs(redis.call('HKEYS', KEYS[2])) do
  local value = redis.call('GET', lease)
  if value and string.sub(value, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. ' ' then
    redis.call('PEXPIRE', lease, ARGV[2])
  elseif not value then
    lost = lost + 1
  end
end
return lost
"""


def _reachable(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Redis failing under a request: the caller's clear ``-32603``, never a Redis error text."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except (redis.RedisError, OSError) as exc:
            logger.warning("Shared state unreachable in %s: %s", method.__name__, type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None

    return call


def default_node_id() -> str:
    """``<hostname>-<pid>-<8 hex>``: unique per process."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


def _snapshot(raw: Any) -> dict[str, Any] | None:
    """A stored context snapshot (``None``: none, or one that does not parse)."""
    if not isinstance(raw, bytes | str):
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


class RedisNodeLink(NodeLink):
    """:class:`iac_code.api.NodeLink` on Redis (see the module docstring for the keys)."""

    def __init__(self, client: redis.Redis, keys: Keys, store: RedisTaskStore, events: RedisTaskEventStream, *,
                 blocking: redis.Redis | None = None, node_id: str = "", lease_seconds: float = 10.0,
                 location: str = "redis") -> None:
        self._blocking = blocking if blocking is not None else client  # BLPOP waits on its own pool
        self._location = location
        self.node_id = node_id or default_node_id()
        self._client = client
        self._keys = keys
        self._store = store
        self._events = events
        self._lease_ms = max(int(lease_seconds * 1000), 100)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._loops: list[asyncio.Task[None]] = []
        self._calls: set[asyncio.Task[None]] = set()
        self._down = False

    # ------------------------------------------------------------------ membership

    async def start(self) -> None:
        try:
            await self._store.start()
            await self._reap(self.node_id, force=True)  # what an earlier process with this id left
            await self._client.sadd(self._keys.nodes, self.node_id)
            await self._renew(keys=[self._keys.node(self.node_id), self._keys.held(self.node_id)],
                              args=[self.node_id, self._lease_ms])
        except (InternalError, redis.RedisError, OSError):
            raise StartupError(f"task-store: redis cannot reach Redis at {self._location}.") from None
        self._loops.append(spawn(self._heartbeat(), name="cluster-heartbeat"))
        self._loops.append(spawn(self._watch(), name="cluster-watch"))
        logger.info("Joined the cluster as node %s", self.node_id)

    async def serve(self, control: ControlHandler) -> None:
        self._loops.append(spawn(self._serve(control), name="cluster-inbox"))

    async def stop(self) -> None:
        for loop in [*self._loops, *self._calls]:
            loop.cancel()
        for loop in [*self._loops, *self._calls]:
            with contextlib.suppress(BaseException):
                await loop
        self._loops.clear()
        with contextlib.suppress(InternalError, TimeoutError):
            async with asyncio.timeout(STOP_SECONDS):
                await self._store.sync()  # the turns' last writes, before the connection closes
        with contextlib.suppress(redis.RedisError, OSError):
            held = await self._client.hkeys(self._keys.held(self.node_id))
            async with self._client.pipeline(transaction=True) as pipe:
                for lease in held:
                    pipe.delete(lease)
                pipe.delete(self._keys.held(self.node_id), self._keys.node(self.node_id),
                            self._keys.inbox(self.node_id))
                pipe.srem(self._keys.nodes, self.node_id)
                await pipe.execute()
        await self._client.aclose()
        if self._blocking is not self._client:
            await self._blocking.aclose()

    async def _heartbeat(self) -> None:
        interval = self._lease_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                lost = await self._renew(keys=[self._keys.node(self.node_id), self._keys.held(self.node_id)],
                                         args=[self.node_id, self._lease_ms])
                if lost:
                    logger.warning("%d context lease(s) of this node expired before they were renewed", lost)
                if self._down:
                    self._down = False
                    logger.info("Shared state reachable again")
            except (redis.RedisError, OSError) as exc:
                if not self._down:
                    self._down = True
                    logger.warning("Shared state unreachable (%s): leases cannot be renewed", type(exc).__name__)

    # ------------------------------------------------------------------ leases and contexts

    @_reachable
    async def lease(self, owner: str, context_id: str, task_id: str, *, wait: float | None = None) -> Lease:
        key = self._keys.lease(owner, context_id)
        held = HELD_SEPARATOR.join((owner, context_id, task_id))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (LEASE_WAIT_SECONDS if wait is None else wait)
        delay = 0.005
        while True:
            reply = await self._acquire(
                keys=[key, self._keys.fence, self._keys.held(self.node_id), self._keys.context(owner, context_id)],
                args=[self.node_id, task_id, self._lease_ms, held])
            token = int(reply[0])
            if token:
                return Lease(owner, context_id, task_id, token, _snapshot(reply[1] if len(reply) > 1 else None))
            if loop.time() + delay > deadline:
                raise UnsupportedOperationError(message=ALREADY_WORKING)
            await asyncio.sleep(delay)  # contention only: the holder is finishing its turn
            delay = min(delay * 2, 0.2)

    @_reachable
    async def release(self, lease: Lease, snapshot: dict[str, Any] | None) -> None:
        # The turn's task writes land before its context is free: the next turn, on any node, reads them.
        with contextlib.suppress(InternalError):
            await self._store.settle_task(lease.task_id)
        value = f"{self.node_id} {lease.token} {lease.task_id}"
        released = await self._release(
            keys=[self._keys.lease(lease.owner, lease.context_id), self._keys.context(lease.owner, lease.context_id),
                  self._keys.held(self.node_id)],
            args=[value, json.dumps(snapshot, separators=(",", ":")) if snapshot is not None else ""])
        if not released:
            logger.warning("The lease of a context expired during its turn (task %s): its state was not written",
                           lease.task_id)

    @_reachable
    async def runner(self, owner: str, context_id: str, task_id: str) -> str | None:
        leases = await self._client.mget(self._keys.lease(owner, context_id), self._keys.lease(owner, task_scope(task_id)))
        for raw in leases:
            if raw is None:
                continue
            node, _, rest = _text(raw).partition(" ")
            if rest.partition(" ")[2] != task_id:
                continue
            if node != self.node_id and not await self._client.exists(self._keys.node(node)):
                return None
            return node
        return None

    # ------------------------------------------------------------------ forwarded calls

    @_reachable
    async def call(self, node_id: str, op: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not await self._client.exists(self._keys.node(node_id)):
            raise NodeUnavailableError(node_id)
        call_id = uuid.uuid4().hex
        request = json.dumps({"id": call_id, "op": op, "payload": payload}, separators=(",", ":"))
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.rpush(self._keys.inbox(node_id), request)
            pipe.expire(self._keys.inbox(node_id), REPLY_TTL_SECONDS)
            await pipe.execute()
        reply = await self._blocking.blpop([self._keys.reply(call_id)], timeout=timeout)
        if reply is None:
            raise NodeUnavailableError(node_id)
        answer = json.loads(reply[1])
        return answer if isinstance(answer, dict) else {}

    async def _serve(self, control: ControlHandler) -> None:
        inbox = self._keys.inbox(self.node_id)
        while True:
            try:
                item = await self._blocking.blpop([inbox], timeout=1)
            except (redis.RedisError, OSError):
                await asyncio.sleep(0.5)
                continue
            if item is None:
                continue
            try:
                request = json.loads(item[1])
                call_id, op, payload = str(request["id"]), str(request["op"]), dict(request["payload"])
            except (ValueError, KeyError, TypeError):
                logger.warning("Ignoring a malformed forwarded call")
                continue
            handling = spawn(self._answer(control, call_id, op, payload), name=f"cluster-call:{op}")
            self._calls.add(handling)
            handling.add_done_callback(self._calls.discard)

    async def _answer(self, control: ControlHandler, call_id: str, op: str, payload: dict[str, Any]) -> None:
        try:
            reply = await control.on_control(op, payload)
        except Exception:
            logger.exception("Forwarded %s call failed", op)
            reply = {"error": {"code": -32603, "message": "Internal error"}}
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.rpush(self._keys.reply(call_id), json.dumps(reply, separators=(",", ":")))
            pipe.expire(self._keys.reply(call_id), REPLY_TTL_SECONDS)
            await pipe.execute()

    def follow(self, task_id: str, after: int) -> AsyncIterator[VersionedEvent]:
        return self._events.subscribe(task_id, after=TaskVersion(after))

    # ------------------------------------------------------------------ dead nodes

    async def _watch(self) -> None:
        interval = self._lease_ms / 2000
        while True:
            await asyncio.sleep(interval * (0.75 + secrets.randbelow(50) / 100))
            try:
                for member in await self._client.smembers(self._keys.nodes):
                    node = _text(member)
                    if node != self.node_id and not await self._client.exists(self._keys.node(node)):
                        await self._reap(node)
                await self._store.sweep()
            except (redis.RedisError, OSError) as exc:
                logger.debug("Cluster watch round failed: %s", type(exc).__name__)
            except Exception:
                logger.exception("Cluster watch round failed")

    async def _reap(self, node: str, *, force: bool = False) -> None:
        """Mark the turns a dead node held interrupted, release its leases, forget it once done."""
        held_key = self._keys.held(node)
        for lease_key, value in (await self._client.hgetall(held_key)).items():
            lease_key = _text(lease_key)
            if not force and await self._client.exists(lease_key):
                continue  # not expired yet: the next round
            owner, context_id, task_id = _text(value).split(HELD_SEPARATOR, 2)
            if not await self._client.set(self._keys.reaping(task_id), self.node_id, nx=True, px=REAPING_CLAIM_MS):
                continue
            try:
                await self._interrupt(owner, task_id)
            except Exception as exc:  # changed meanwhile, or Redis failed: the next round (any survivor) tries again
                with contextlib.suppress(redis.RedisError, OSError):
                    await self._client.delete(self._keys.reaping(task_id))
                if isinstance(exc, ConcurrentTaskModificationError):
                    continue
                raise
            if force:
                await self._client.delete(lease_key)
            await self._client.hdel(held_key, lease_key)
            logger.info("Marked task %s of stopped node %s interrupted", task_id, node)
        if not await self._client.hlen(held_key):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.srem(self._keys.nodes, node)
                pipe.delete(self._keys.inbox(node))
                await pipe.execute()

    async def _interrupt(self, owner: str, task_id: str) -> None:
        stored = await self._store.load(owner, task_id)
        if stored is None or not is_interrupted(stored.task):
            return
        task, event = interruption(stored.task)
        await self._store.write(owner, task, event, stored.version)
