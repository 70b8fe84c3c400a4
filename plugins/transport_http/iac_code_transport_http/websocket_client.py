"""The client side of the ``websocket`` transport: JSON-RPC over one aiohttp WebSocket, multiplexed by request id.

The transport's ``connect`` returns it (``iac-code a2a-client``), and tests and scripts use it
on its own (real connections, no mocks).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import aiohttp

from iac_code.api import request_frame


class WebSocketClient:
    """A JSON-RPC client for the ``websocket`` transport (aiohttp), multiplexed by request id.

    Each request is one text frame; the server answers with
    ``{"id": ..., "payload": <JSON-RPC response>, "final": <bool>}`` frames. Ids
    must be unique among the requests in flight (a missing id gets one). A frame
    whose id is null (the server could not read the request's id) goes to the
    oldest request in flight that has had no frame yet.

    The handshake sends ``A2A-Version: 1.0`` unless ``headers`` set it.
    """

    def __init__(self, session: Any, ws: Any) -> None:
        self._session = session
        self._ws = ws
        self._queues: dict[Any, asyncio.Queue[dict[str, Any] | None]] = {}
        self._answered: set[Any] = set()
        self._ids = itertools.count(1)
        self._send_lock = asyncio.Lock()
        self._closed = False
        self.close_code: int | None = None
        self._pump = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, url: str, headers: Mapping[str, str] | None = None, *,
                      max_msg_size: int = 0, heartbeat: float | None = None) -> WebSocketClient:
        """Open a socket to ``url`` (``ws://host:port/a2a``); ``headers`` go on the handshake.

        A refused handshake raises ``aiohttp.WSServerHandshakeError`` (``.status`` 401 when unauthenticated).
        """
        handshake = {"A2A-Version": "1.0"}
        for name, value in (headers or {}).items():
            handshake = {k: v for k, v in handshake.items() if k.lower() != name.lower()}
            handshake[name] = value
        session = aiohttp.ClientSession()
        try:
            ws = await session.ws_connect(url, headers=handshake, max_msg_size=max_msg_size, heartbeat=heartbeat)
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    @property
    def closed(self) -> bool:
        """Whether the socket is closed (by either side)."""
        return self._closed or bool(self._ws.closed)

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        try:
            async for message in self._ws:
                if message.type is not aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    frame = json.loads(message.data)
                except ValueError:
                    continue
                if not isinstance(frame, dict):
                    continue
                request_id = frame.get("id")
                if request_id is None:
                    request_id = next((i for i in self._queues if i not in self._answered), None)
                queue = self._queues.get(request_id)
                if queue is not None:
                    self._answered.add(request_id)
                    queue.put_nowait(frame)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self.close_code = self._ws.close_code
            for queue in self._queues.values():
                queue.put_nowait(None)

    # ------------------------------------------------------------------ calls

    def _prepare(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any]:
        return request_frame(payload, headers, f"ws-{next(self._ids)}", self._queues)

    async def _frames(self, payload: Mapping[str, Any],
                      headers: Mapping[str, str] | None) -> AsyncGenerator[dict[str, Any], None]:
        """Send one request; yield its frames (the envelopes) up to and including the final one."""
        frame = self._prepare(payload, headers)
        request_id = frame["id"]
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._queues[request_id] = queue
        try:
            if self.closed or self._pump.done():
                raise ConnectionError("the WebSocket is closed")
            async with self._send_lock:
                await self._ws.send_str(json.dumps(frame, separators=(",", ":")))
            while True:
                envelope = await queue.get()
                if envelope is None:
                    raise ConnectionError(f"the server closed the WebSocket (code {self.close_code})")
                yield envelope
                if envelope.get("final") is True:
                    return
        finally:
            self._queues.pop(request_id, None)
            self._answered.discard(request_id)

    async def request(self, payload: Mapping[str, Any], *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one request; return the ``payload`` of its final frame (a JSON-RPC response)."""
        frames = self._frames(payload, headers)
        try:
            async for envelope in frames:
                if envelope.get("final") is True:
                    return dict(envelope.get("payload") or {})
        finally:
            await frames.aclose()
        raise ConnectionError("the WebSocket closed before the answer")  # pragma: no cover - _frames raises first

    async def stream(self, payload: Mapping[str, Any], *,
                     headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send a streaming request; yield the payloads of its non-final frames.

        A final frame carrying an ``error`` (refused before the first event, or failed mid-stream)
        is yielded too, then the stream ends; the plain terminator is not yielded.
        """
        frames = self._frames(payload, headers)
        try:
            async for envelope in frames:
                body = envelope.get("payload")
                if envelope.get("final") is True:
                    if isinstance(body, dict) and ("error" in body or "result" in body):
                        yield body
                    return
                yield body if isinstance(body, dict) else {}
        finally:
            await frames.aclose()

    async def send_raw(self, data: str | bytes) -> None:
        """Send ``data`` as one text frame (``str``) or binary frame (``bytes``), as is (tests of bad frames)."""
        async with self._send_lock:
            if isinstance(data, bytes):
                await self._ws.send_bytes(data)
            else:
                await self._ws.send_str(data)

    async def aclose(self) -> None:
        """Close the socket and the session."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self._ws.close()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._pump
        await self._session.close()

    async def __aenter__(self) -> WebSocketClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
