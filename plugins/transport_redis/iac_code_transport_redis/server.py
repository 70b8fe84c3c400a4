"""The ``redis-streams`` transport: JSON-RPC requests read from a Redis stream through a consumer group.

Request entries (``XADD <request-stream> *``) carry ``correlation_id``, ``payload``
(the JSON-RPC request text), optionally ``reply_stream`` (default: the
``response-stream`` setting) and ``headers`` (a JSON object's text:
``Authorization``, ``A2A-Version``, ...). Every payload goes through
:func:`iac_code.protocol.framing.serve_frame`, so size limit, authentication and dispatch are
the HTTP ones; this module only frames.

Answers are ``XADD <reply_stream> MAXLEN ~ <redis-stream-maxlen>`` entries with
``correlation_id``, ``payload`` and ``final`` (``"true"``/``"false"``): a unary
answer is one final entry; a stream is one non-final entry per event, then
``{"jsonrpc":"2.0","id":<id>}`` as the final entry (an error before the first event
is the one final entry).

Where this differs from the reference on purpose (transports.md §8, README table):

* requests are served concurrently (up to ``redis-concurrency`` per process), each in
  its own task;
* a malformed entry (no payload, bad JSON, not an object, too large, bad headers)
  gets an error entry when it has a correlation id, and the server keeps serving;
* every handled entry is ``XACK``\\ ed and ``XDEL``\\ ed, in the same ``MULTI`` as its final
  answer; response streams are capped;
* leases: entries being served are re-claimed by their server every third of
  ``redis-lease-timeout-ms`` (their idle time is reset), so only the entries of a
  server that died go idle longer than the lease; those are taken over with
  ``XAUTOCLAIM`` and served by another process (at-least-once);
* Redis outages are logged once, retried with backoff, and the server keeps running;
* the card's interface URL is ``redis-streams://<host>:<port>/<db>/<request-stream>``:
  no credential appears in it, in a log line or in an error text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from iac_code.api import (
    InterfaceInfo,
    RateLimitedLog,
    StartupError,
    dumps,
    error_response,
    jsonio,
    log_client_error,
    redis_location,
    request_id_of,
    serve_frame,
    url_secrets,
)
from iac_code_transport_redis.common import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    describe,
    field,
    is_transient,
    redis_db,
    stream_entries,
    text,
)

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

T = TypeVar("T")

TRANSPORT = "redis-streams"
PROTOCOL_BINDING = "redis-streams"
MAX_BLOCK_MS = 1000
SOCKET_TIMEOUT = 10.0  # above MAX_BLOCK_MS
CONNECT_TIMEOUT = 2.0
HEALTH_CHECK_INTERVAL = 15
WRITE_BUDGET = 30.0  # seconds an answer's XADD / the XACK+XDEL are retried through an outage
MAX_HEADERS_BYTES = 64 * 1024
ORPHAN_REPLY_TTL_SECONDS = 3600  # a reply stream the server had to create (its client is gone) expires
INTERNAL_ERROR = "Internal error"

MISSING_PAYLOAD = {"code": -32600, "message": "Invalid request: the entry has no 'payload' field"}
BAD_HEADERS = {"code": -32600, "message": "Invalid request: 'headers' must be a JSON object of strings"}


def default_consumer_name() -> str:
    """``consumer-<12 random hex>``: unique per process."""
    return f"consumer-{secrets.token_hex(6)}"


def interface_url(url: str, request_stream: str) -> str:
    """``redis-streams://<host>:<port>/<db>/<request-stream>``: where the server listens, without credentials."""
    stream = urllib.parse.quote(request_stream, safe=":@!$&'()*+,;=-._~")
    return f"{TRANSPORT}://{redis_location(url)}/{redis_db(url)}/{stream}"


def _parse_headers(raw: bytes | None) -> dict[str, str] | None:
    """The ``headers`` field as a dict of strings (``{}`` when absent); ``None`` when it is invalid."""
    if raw is None or not raw.strip():
        return {}
    if len(raw) > MAX_HEADERS_BYTES:
        return None
    try:
        value = jsonio.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return {str(k): v for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class _Reply:
    """Where one request entry's answers go, and which entry the final answer settles."""

    entry_id: str
    stream: str
    correlation: bytes


class RedisStreamsTransport:
    """A :class:`~iac_code.base.records.TransportServer` reading one request stream through a consumer group."""

    def __init__(self, kernel: PluginContext) -> None:
        config = kernel.config
        self.kernel = kernel
        self.url = str(getattr(config, "redis_url", "") or "").strip()
        if not self.url:
            raise StartupError("redis-url is required in --config for --transport redis-streams.")
        self.request_stream = str(getattr(config, "request_stream", "iac-code:a2a:requests"))
        self.response_stream = str(getattr(config, "response_stream", "iac-code:a2a:responses"))
        self.group = str(getattr(config, "consumer_group", "iac-code"))
        self.consumer = str(getattr(config, "consumer_name", "") or "") or default_consumer_name()
        self.lease_timeout_ms = int(getattr(config, "redis_lease_timeout_ms", 60000))
        self.maxlen = int(getattr(config, "redis_stream_maxlen", 10000))
        self.concurrency = int(getattr(config, "redis_concurrency", 64))
        self.grace = float(getattr(config, "shutdown_grace_seconds", 10.0))
        if self.request_stream == self.response_stream:
            raise StartupError("request-stream and response-stream must be different Redis keys.")
        self.location = redis_location(self.url)
        self._secrets = url_secrets(self.url)
        self._redis: aioredis.Redis | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._lease_task: asyncio.Task[None] | None = None
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()
        # Entries dropped as unanswerable: a client can send them over and over.
        self._dropped = RateLimitedLog(logger, logging.WARNING, "dropped request entries")
        self._outage: str | None = None
        self._reclaim_cursor = "0-0"
        # Both at least every second, and several times per lease.
        self._reclaim_every = min(1.0, max(0.01, self.lease_timeout_ms / 2000))
        self._renew_every = max(0.01, self.lease_timeout_ms / 3000)

    # ------------------------------------------------------------------ helpers

    def _clean(self, exc: BaseException) -> str:
        return describe(exc, self._secrets)

    def _went_down(self, exc: BaseException) -> None:
        reason = self._clean(exc)
        if self._outage is None:
            logger.warning("Redis Streams transport: Redis at %s is unavailable (%s); retrying.", self.location, reason)
        self._outage = reason

    def _came_back(self) -> None:
        if self._outage is not None:
            self._outage = None
            logger.warning("Redis Streams transport: Redis at %s is available again.", self.location)

    @property
    def redis(self) -> aioredis.Redis:
        assert self._redis is not None, "the transport is not started"
        return self._redis

    async def _ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.request_stream, self.group, id="0-0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _retry(self, what: str, op: Callable[[], Awaitable[T]], budget: float = WRITE_BUDGET) -> T:
        """Run ``op``, retrying outages with backoff for ``budget`` seconds; other errors propagate."""
        deadline = time.monotonic() + budget
        delay = BACKOFF_FIRST
        while True:
            try:
                result = await op()
            except Exception as exc:
                if not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
                self._went_down(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            self._came_back()
            return result

    # ------------------------------------------------------------------ TransportServer

    async def start(self) -> list[InterfaceInfo]:
        """Connect, create the consumer group (at ``0-0``, ``MKSTREAM``) and start reading."""
        try:
            # Callers wait for a free connection rather than fail: each request task writes, one reader blocks.
            pool = aioredis.BlockingConnectionPool.from_url(
                self.url, max_connections=self.concurrency + 4, timeout=SOCKET_TIMEOUT, decode_responses=False,
                socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT,
                health_check_interval=HEALTH_CHECK_INTERVAL, retry=Retry(NoBackoff(), 0))
            self._redis = aioredis.Redis.from_pool(pool)
        except (ValueError, TypeError) as exc:
            raise StartupError(
                f"redis-url is not a valid Redis URL (redis://, rediss:// or unix://): {self._clean(exc)}") from None
        try:
            await self._ensure_group()
        except Exception as exc:
            if not is_transient(exc):
                await self._close_redis()
                raise StartupError(f"Redis Streams transport: Redis at {self.location} refused the consumer group "
                                   f"set-up: {self._clean(exc)}") from None
            self._went_down(exc)  # the loop creates the group once Redis is back
        self._stopping.clear()
        self._loop_task = asyncio.create_task(self._read_loop(), name="redis-streams-read")
        self._lease_task = asyncio.create_task(self._renew_loop(), name="redis-streams-leases")
        logger.info("Redis Streams transport: consumer %s of group %r reading %r at %s",
                    self.consumer, self.group, self.request_stream, self.location)
        return [InterfaceInfo(url=interface_url(self.url, self.request_stream), protocol_binding=PROTOCOL_BINDING)]

    async def stop(self) -> None:
        """Stop reading, let in-flight requests finish (``shutdown-grace-seconds``), then close."""
        self._stopping.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
            self._loop_task = None
        pending = list(self._inflight.values())
        if pending:
            _, late = await asyncio.wait(pending, timeout=max(0.0, self.grace))
            for task in late:  # left pending in Redis: another server takes them over after the lease
                task.cancel()
            if late:
                logger.warning("Redis Streams transport: %d request(s) still running after %g s were cancelled",
                               len(late), self.grace)
                await asyncio.wait(late, timeout=1.0)
        if self._lease_task is not None:
            self._lease_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._lease_task
            self._lease_task = None
        await self._close_redis()
        self._dropped.flush()

    async def _close_redis(self) -> None:
        if self._redis is not None:
            with contextlib.suppress(Exception):
                await self._redis.aclose()
            self._redis = None

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        """Claim expired leases and read new entries while there are free slots; never ends on an error."""
        delay = BACKOFF_FIRST
        last_reclaim = 0.0
        while not self._stopping.is_set():
            if self.kernel.dispatcher is None:  # the kernel is still starting: keep the backlog for later
                await asyncio.sleep(0.02)
                continue
            free = self.concurrency - len(self._inflight)
            if free <= 0:
                await asyncio.wait(list(self._inflight.values()), timeout=self._reclaim_every,
                                   return_when=asyncio.FIRST_COMPLETED)
                continue
            try:
                try:
                    if time.monotonic() - last_reclaim >= self._reclaim_every:
                        last_reclaim = time.monotonic()
                        free -= self._spawn(await self._reclaim(free))
                    if free > 0:
                        block = max(1, min(MAX_BLOCK_MS, int(self._reclaim_every * 1000)))
                        reply = await self.redis.xreadgroup(self.group, self.consumer, {self.request_stream: ">"},
                                                            count=free, block=block)
                        self._spawn(stream_entries(reply))
                except ResponseError as exc:
                    if "NOGROUP" not in str(exc):
                        raise
                    logger.warning("Redis Streams transport: consumer group %r on %r is missing; recreating it.",
                                   self.group, self.request_stream)
                    await self._ensure_group()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._went_down(exc)  # logged once per outage (wrong credentials, a wrong key type ... too)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            delay = BACKOFF_FIRST
            self._came_back()

    async def _reclaim(self, limit: int) -> list[tuple[Any, Any]]:
        """Entries pending longer than the lease on another (dead) consumer, walking the pending list."""
        reply = await self.redis.xautoclaim(self.request_stream, self.group, self.consumer, self.lease_timeout_ms,
                                            start_id=self._reclaim_cursor, count=limit)
        self._reclaim_cursor = text(reply[0]) if reply and reply[0] else "0-0"
        entries = [tuple(e[:2]) for e in (reply[1] if reply and len(reply) > 1 and reply[1] else [])]
        if entries:
            logger.info("Redis Streams transport: took over %d request(s) whose lease expired", len(entries))
        return entries

    def _spawn(self, entries: list[tuple[Any, Any]]) -> int:
        """Start one task per entry not already being served here; the number started."""
        started = 0
        for raw_id, fields in entries:
            if raw_id is None:
                continue
            entry_id = text(raw_id)
            if entry_id in self._inflight:
                continue
            task = asyncio.create_task(self._handle(entry_id, fields), name=f"redis-streams-{entry_id}")
            self._inflight[entry_id] = task
            task.add_done_callback(lambda _t, key=entry_id: self._inflight.pop(key, None))
            started += 1
        return started

    async def _renew_loop(self) -> None:
        """Reset the idle time of the entries this process is serving, so no one else takes them over."""
        while True:
            await asyncio.sleep(self._renew_every)
            ids = list(self._inflight)
            if not ids:
                continue
            try:
                await self.redis.xclaim(self.request_stream, self.group, self.consumer, 0, ids, justid=True)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_transient(exc):
                    self._went_down(exc)
                else:
                    logger.warning("Redis Streams transport: renewing leases failed: %s", self._clean(exc))

    # ------------------------------------------------------------------ serving one entry

    async def _handle(self, entry_id: str, fields: Mapping[Any, Any] | None) -> None:
        """Serve one request entry; its final answer is written together with its XACK + XDEL.

        An entry that gets no answer (dropped as unanswerable, or its serving failed
        before the final answer) is settled on its own afterwards.
        """
        correlation = field(fields, "correlation_id")
        reply_raw = field(fields, "reply_stream")
        reply_stream = reply_raw.decode("utf-8", "replace") if reply_raw else self.response_stream
        settle = True
        try:
            if correlation is None:
                self._dropped.log("Redis Streams transport: request entry %s has no correlation_id; dropped", entry_id)
                return
            if reply_stream == self.request_stream:  # answering there would feed the answer back in as a request
                self._dropped.log("Redis Streams transport: request entry %s names the request stream as its "
                                  "reply_stream; dropped", entry_id)
                return
            await self._serve(_Reply(entry_id, reply_stream, correlation), fields)
            settle = False  # the final answer settled it
        except asyncio.CancelledError:
            settle = False  # shutting down: the entry stays pending and is taken over after the lease
            raise
        except Exception as exc:
            error_id = secrets.token_hex(6)
            if isinstance(exc, RedisError | OSError):
                # The answer could not be written: leave the entry pending so another attempt serves it.
                settle = False
                logger.error("Redis Streams transport: answering entry %s failed (error_id %s): %s",
                             entry_id, error_id, self._clean(exc))
            else:
                logger.exception("Redis Streams transport: serving entry %s failed (error_id %s)", entry_id, error_id)
        finally:
            if settle:
                await self._settle(entry_id)

    async def _serve(self, reply: _Reply, fields: Mapping[Any, Any] | None) -> None:
        payload = field(fields, "payload")
        if payload is None:
            answer = error_response(None, MISSING_PAYLOAD)
            log_client_error(TRANSPORT, answer)
            await self._write(reply, answer, True)
            return
        headers = _parse_headers(field(fields, "headers"))
        if headers is None:
            bad_id = None
            if len(payload) <= self.kernel.config.max_request_bytes:
                with contextlib.suppress(ValueError, UnicodeDecodeError):
                    bad_id = request_id_of(jsonio.loads(payload))
            answer = error_response(bad_id, BAD_HEADERS)
            log_client_error(TRANSPORT, answer)
            await self._write(reply, answer, True)
            return
        answer = await serve_frame(self.kernel, payload, transport=TRANSPORT, channel_headers=headers)
        if isinstance(answer, dict):
            await self._write(reply, answer, True)
            return
        request_id: Any = None
        try:
            async for event in answer:
                request_id = event.get("id", request_id)
                await self._write(reply, event, False)
        except Exception:
            error_id = secrets.token_hex(6)
            logger.exception("Redis Streams transport: a stream failed (error_id %s)", error_id)
            failure = error_response(request_id, {"code": -32603, "message": INTERNAL_ERROR,
                                                  "data": {"error_id": error_id}})
            await self._write(reply, failure, True)
            return
        finally:
            aclose = getattr(answer, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        if request_id is None:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                request_id = request_id_of(jsonio.loads(payload))
        await self._write(reply, {"jsonrpc": "2.0", "id": request_id}, True)

    async def _write(self, reply: _Reply, frame: Mapping[str, Any], final: bool) -> None:
        """``XADD <reply_stream> MAXLEN ~ <maxlen>`` one answer entry (retried through outages).

        The final answer goes in one ``MULTI`` with the request's ``XACK`` + ``XDEL``, so a
        process killed in between can neither leave an answered entry pending (served
        twice after the lease) nor an acknowledged one unanswered.
        """
        entry = {"correlation_id": reply.correlation, "payload": dumps(frame), "final": "true" if final else "false"}

        async def op() -> None:
            async with self.redis.pipeline(transaction=final) as pipe:
                pipe.xadd(reply.stream, entry, maxlen=self.maxlen, approximate=True)
                if reply.stream != self.response_stream:
                    # A client's own stream has its TTL; one re-created after its client left gets one too.
                    pipe.expire(reply.stream, ORPHAN_REPLY_TTL_SECONDS, nx=True)
                if final:
                    pipe.xack(self.request_stream, self.group, reply.entry_id)
                    pipe.xdel(self.request_stream, reply.entry_id)
                await pipe.execute()

        await self._retry("answer", op)

    async def _settle(self, entry_id: str) -> None:
        """``XACK`` and ``XDEL`` a handled request entry in one ``MULTI``."""

        async def op() -> None:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.xack(self.request_stream, self.group, entry_id)
                pipe.xdel(self.request_stream, entry_id)
                await pipe.execute()

        try:
            await self._retry("acknowledge", op)
        except Exception as exc:
            logger.error("Redis Streams transport: acknowledging entry %s failed (it may be served again): %s",
                         entry_id, self._clean(exc))
