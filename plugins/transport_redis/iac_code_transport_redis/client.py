"""A client of the ``redis-streams`` transport: JSON-RPC requests in, answers read from its own reply stream.

Unlike the reference client (transports.md §8.5), which re-reads the whole shared
response stream from ``0-0`` for every request, each :class:`RedisStreamsClient`:

* answers on its own reply stream ``<response-stream>:<12 hex>`` by default (given
  an expiry, refreshed while in use, so an abandoned one vanishes; :meth:`aclose`
  deletes it);
* reads it with one background ``XREAD`` loop from its own position (the stream's
  last entry when the client started, then the last id seen), never from ``0-0``;
* hands each entry to the call waiting for its ``correlation_id``, so any number
  of concurrent calls share the one reader.

Example::

    client = RedisStreamsClient("redis://127.0.0.1:6379/0")
    try:
        reply = await client.request({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}},
                                     headers={"A2A-Version": "1.0"})
    finally:
        await client.aclose()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from iac_code.api import redis_location, url_secrets
from iac_code_transport_redis.common import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    describe,
    field,
    is_final,
    is_transient,
    stream_entries,
    text,
)

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_STREAM = "iac-code:a2a:requests"
DEFAULT_RESPONSE_STREAM = "iac-code:a2a:responses"
REPLY_TTL_SECONDS = 600
READ_BLOCK_MS = 1000
READ_COUNT = 100
TIMEOUT_TEXT = "Redis Streams A2A request timed out"

_Entry = tuple[dict[str, Any], bool]


class RedisStreamsClient:
    """JSON-RPC over Redis Streams: :meth:`request` for unary methods, :meth:`stream` for streaming ones."""

    def __init__(self, redis_url: str, request_stream: str = DEFAULT_REQUEST_STREAM, reply_stream: str | None = None,
                 *, response_stream: str = DEFAULT_RESPONSE_STREAM, reply_ttl_seconds: int = REPLY_TTL_SECONDS,
                 max_connections: int = 32) -> None:
        """``reply_stream`` None: a new private stream ``<response_stream>:<12 hex>`` owned (and deleted) by this client."""
        self.request_stream = request_stream
        self.owns_reply_stream = reply_stream is None
        self.reply_stream = reply_stream or f"{response_stream}:{secrets.token_hex(6)}"
        self.reply_ttl_seconds = int(reply_ttl_seconds)
        self.location = redis_location(redis_url)
        self._secrets = url_secrets(redis_url)
        # Concurrent calls wait for one of ``max_connections`` connections (one is the reader's) instead of failing.
        pool = aioredis.BlockingConnectionPool.from_url(
            redis_url, max_connections=max(2, int(max_connections)), timeout=30, decode_responses=False,
            socket_timeout=READ_BLOCK_MS / 1000 + 10, socket_connect_timeout=2.0, retry=Retry(NoBackoff(), 0))
        self._redis: aioredis.Redis = aioredis.Redis.from_pool(pool)
        self._waiters: dict[bytes, asyncio.Queue[_Entry]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._position = "0-0"
        self._last_refresh = 0.0
        self._closed = False

    # ------------------------------------------------------------------ reading

    async def _start_reader(self) -> None:
        """Start the reader once: its position is the reply stream's last entry now (``0-0`` when empty)."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            try:
                last = await self._redis.xrevrange(self.reply_stream, "+", "-", count=1)
                self._position = text(last[0][0]) if last else "0-0"
            except BaseException as exc:
                self._ready.set_exception(exc)
                self._ready.exception()  # retrieved: callers see it from the await below
                self._ready = None
                raise
            self._reader = asyncio.create_task(self._read_loop(), name="redis-streams-client-read")
            self._ready.set_result(None)
        await self._ready

    async def _read_loop(self) -> None:
        delay = BACKOFF_FIRST
        down = False
        while not self._closed:
            try:
                await self._refresh_ttl()
                reply = await self._redis.xread({self.reply_stream: self._position}, count=READ_COUNT,
                                                block=READ_BLOCK_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not down:
                    logger.warning("Redis Streams client: reading %r at %s failed (%s); retrying.",
                                   self.reply_stream, self.location, describe(exc, self._secrets))
                down = is_transient(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            delay, down = BACKOFF_FIRST, False
            for raw_id, fields in stream_entries(reply):
                self._position = text(raw_id)
                correlation = field(fields, "correlation_id")
                queue = self._waiters.get(correlation) if correlation is not None else None
                if queue is None:
                    continue  # another client's answer on a shared stream, or a call that gave up
                try:
                    payload = json.loads(field(fields, "payload") or b"null")
                except ValueError:
                    payload = None
                if not isinstance(payload, dict):
                    payload = {"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32603, "message": "Invalid response entry from the server"}}
                queue.put_nowait((payload, is_final(field(fields, "final"))))

    async def _refresh_ttl(self, force: bool = False) -> None:
        """Keep the private reply stream's expiry ahead (at most every third of the TTL unless forced)."""
        if not self.owns_reply_stream:
            return
        now = time.monotonic()
        if force or now - self._last_refresh >= self.reply_ttl_seconds / 3:
            self._last_refresh = now
            await self._redis.expire(self.reply_stream, self.reply_ttl_seconds)

    # ------------------------------------------------------------------ calls

    async def _send(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None) -> tuple[bytes, asyncio.Queue[_Entry]]:
        if self._closed:
            raise RuntimeError("RedisStreamsClient is closed")
        await self._start_reader()
        correlation = uuid.uuid4().hex.encode()
        queue: asyncio.Queue[_Entry] = asyncio.Queue()
        self._waiters[correlation] = queue
        fields: dict[str, Any] = {"correlation_id": correlation, "reply_stream": self.reply_stream,
                                  "payload": json.dumps(payload, separators=(",", ":"), ensure_ascii=False)}
        if headers:
            fields["headers"] = json.dumps(dict(headers), separators=(",", ":"))
        try:
            await self._redis.xadd(self.request_stream, fields)
            with contextlib.suppress(Exception):
                await self._refresh_ttl(force=True)
        except BaseException:
            self._waiters.pop(correlation, None)
            raise
        return correlation, queue

    async def request(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None,
                      timeout: float = 30) -> dict[str, Any]:
        """Send one JSON-RPC request; its (final) answer. ``TimeoutError`` when none came within ``timeout`` s."""
        correlation, queue = await self._send(payload, headers)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    answer, final = await queue.get()
                    if final or "result" in answer or "error" in answer:
                        return answer
        except TimeoutError:
            raise TimeoutError(TIMEOUT_TEXT) from None
        finally:
            self._waiters.pop(correlation, None)

    async def stream(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None,
                     timeout: float = 30) -> AsyncIterator[dict[str, Any]]:
        """Send one streaming request; yield each event (an error answer too), not the terminator.

        ``timeout`` bounds the whole stream; ``TimeoutError`` when it ends first.
        """
        correlation, queue = await self._send(payload, headers)
        deadline = time.monotonic() + timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(TIMEOUT_TEXT)
                try:
                    answer, final = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    raise TimeoutError(TIMEOUT_TEXT) from None
                if final:
                    if "result" in answer or "error" in answer:
                        yield answer
                    return
                yield answer
        finally:
            self._waiters.pop(correlation, None)

    async def aclose(self) -> None:
        """Stop reading, delete the private reply stream, close the connections."""
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None
        if self.owns_reply_stream:
            with contextlib.suppress(Exception):
                await self._redis.delete(self.reply_stream)
        with contextlib.suppress(Exception):
            await self._redis.aclose()

    async def __aenter__(self) -> RedisStreamsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
