"""The ``websocket`` transport: JSON-RPC 2.0 over WebSocket text frames (aiohttp).

One route, ``ws-path`` (default ``/a2a``), on ``host``/``port``. The transport
only frames; every request goes through :func:`iac_code.protocol.framing.serve_frame`.

* The handshake is authenticated like an HTTP request (a refused one gets
  ``401 {"error":"Unauthorized"}`` before the upgrade), and its headers are the
  channel headers of every frame on that socket (a frame's own ``"headers"``
  member may add to or override them, e.g. ``A2A-Version``).
* Each inbound text frame is one JSON-RPC request. Requests on one socket are
  multiplexed: each frame is answered by its own task, sends are serialised.
* Outbound frames are ``{"id": <id>, "payload": <JSON-RPC response>, "final": <bool>}``.
  A unary answer is one final frame. A stream (SendStreamingMessage,
  SubscribeToTask) is one non-final frame per event, then
  ``{"id": <id>, "payload": {"jsonrpc": "2.0", "id": <id>}, "final": true}``; an
  error before the first event or mid-stream is the final frame itself.
* Binary frames get an error frame (``-32600``); the socket stays open. A text
  frame over ``max-request-bytes`` gets ``-32600`` "Request payload too large"
  and the socket stays open, up to twice the limit; past that aiohttp closes the
  socket with code 1009 (message too big) without buffering the rest.
* Keep-alive: aiohttp's ping/pong every ``ws-heartbeat-seconds``; a peer that
  does not answer is closed.
* A client that goes away: its pending sends are cancelled and its open streams
  closed (the turns go on; a request already being dispatched still completes,
  detached from the socket, and its answer is dropped).
* Open connections are capped by ``http-max-connections`` (503 past it), with
  the HTTP transport's header deadline before the upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType, web

from iac_code.api import (
    TOO_LARGE,
    Answer,
    InterfaceInfo,
    RateLimitedLog,
    decode_frame,
    dumps,
    error_response,
    log_client_error,
    request_id_of,
    serve_frame,
)
from iac_code_transport_http.limits import ConnectionLimits, LimitedAppRunner, LimitedServer
from iac_code_transport_http.limits import logger as limits_logger
from iac_code_transport_http.server import _url_host, unauthorized

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

TRANSPORT = "websocket"
PROTOCOL_BINDING = "websocket"
BINARY_FRAME = {"code": -32600, "message": "Binary frames are not supported: send each JSON-RPC request as one text frame"}
NOT_UPGRADE_BODY = b'{"error":"Expected a WebSocket upgrade"}'
#: Frames between ``max-request-bytes`` and this many times it are answered "too large" on an open socket.
SLACK_FACTOR = 2
MIN_SLACK = 64 * 1024
#: Seconds to wait for the peer's close frame when the server closes a socket.
CLOSE_SECONDS = 2.0


def _frame(request_id: Any, payload: Mapping[str, Any], final: bool) -> bytes:
    """One outbound frame as UTF-8 JSON."""
    return dumps({"id": request_id, "payload": payload, "final": final})


def _terminator(request_id: Any) -> dict[str, Any]:
    """The payload of the frame that ends a stream."""
    return {"jsonrpc": "2.0", "id": request_id}


async def _aclose(iterator: Any) -> None:
    """Close an async iterator (a dispatcher stream), ignoring its errors."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


class _Connection:
    """One accepted WebSocket: reads frames, answers each in its own task, serialises sends."""

    def __init__(self, transport: WebSocketTransport, ws: web.WebSocketResponse, headers: dict[str, str]) -> None:
        self._transport = transport
        self._ws = ws
        self._headers = headers
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """Frames still being answered."""
        return len(self._tasks)

    async def serve(self) -> None:
        """Read frames until the socket closes; then cancel what is still being answered."""
        try:
            async for message in self._ws:
                if message.type is WSMsgType.TEXT:
                    self._spawn(self._answer(message.data))
                elif message.type is WSMsgType.BINARY:
                    self._spawn(self._send_error(None, BINARY_FRAME))
                elif message.type is WSMsgType.ERROR:
                    logger.debug("WebSocket closed on error: %s", type(message.data).__name__)
                    break
        finally:
            await self.abandon()

    async def abandon(self) -> None:
        """Cancel pending sends and close open streams (their turns go on)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self, code: int = WSCloseCode.GOING_AWAY) -> None:
        """Close the socket (server shutdown)."""
        with contextlib.suppress(Exception):
            await self._ws.close(code=code, message=b"Server shutting down")

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ answering

    def _prepare(self, data: str) -> tuple[bytes | str | dict[str, Any], Any]:
        """What to hand to serve_frame (a decoded object when it is one, else the raw text), and the request id."""
        limit = self._transport.max_request_bytes
        size = len(data) if len(data) * 4 <= limit else len(data.encode("utf-8", "surrogatepass"))
        frame, ok = decode_frame(data)
        request_id = request_id_of(frame) if ok else None
        if size > limit:  # serve_frame answers "too large"; the id was read only to address the answer
            return data.encode("utf-8", "surrogatepass") if len(data) <= limit else data, request_id
        if ok and isinstance(frame, dict):
            return frame, request_id
        return data, request_id

    async def _answer(self, data: str) -> None:
        """Answer one text frame: one final frame, or a stream of frames and its terminator."""
        raw, request_id = self._prepare(data)
        try:
            answer = await self._dispatch(raw)
            if isinstance(answer, dict):
                if answer.get("id") is None and answer.get("error") == TOO_LARGE:
                    answer = error_response(request_id, TOO_LARGE)
                await self._send(answer.get("id"), answer, True)
                return
            await self._stream(answer, request_id)
        except ConnectionError:
            logger.debug("WebSocket client went away before its answer (request id %r)", request_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Unhandled error answering a WebSocket frame (request id %r)", request_id)

    async def _stream(self, events: AsyncIterator[dict[str, Any]], request_id: Any) -> None:
        try:
            async for event in events:
                if "error" in event:  # a failure mid-stream ends it
                    await self._send(event.get("id", request_id), event, True)
                    return
                await self._send(event.get("id", request_id), event, False)
            await self._send(request_id, _terminator(request_id), True)
        finally:
            await _aclose(events)

    async def _dispatch(self, raw: bytes | str | dict[str, Any]) -> Answer:
        """serve_frame in a task of its own, so a client going away never interrupts a dispatch (a turn
        being started); when it does, the answer is dropped (a stream closed)."""
        task = asyncio.get_running_loop().create_task(
            serve_frame(self._transport.kernel, raw, transport=TRANSPORT, channel_headers=self._headers))
        self._transport.adopt(task)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._transport.drop_answer)
            raise

    async def _send_error(self, request_id: Any, error: Mapping[str, Any]) -> None:
        answer = error_response(request_id, error)
        log_client_error(TRANSPORT, answer)
        with contextlib.suppress(ConnectionError):
            await self._send(request_id, answer, True)

    async def _send(self, request_id: Any, payload: Mapping[str, Any], final: bool) -> None:
        if self._ws.closed:
            raise ConnectionResetError("WebSocket closed")
        data = _frame(request_id, payload, final)
        async with self._send_lock:
            await self._ws.send_frame(data, WSMsgType.TEXT)


class WebSocketTransport:
    """Serves the kernel over WebSocket; one instance per running server."""

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel
        config = kernel.config
        self.max_request_bytes = int(config.max_request_bytes)
        self.path = str(getattr(config, "ws_path", "/a2a") or "/a2a")
        self.heartbeat = float(getattr(config, "ws_heartbeat_seconds", 30.0))
        self._max_message = max(self.max_request_bytes * SLACK_FACTOR, self.max_request_bytes + MIN_SLACK)
        self._limits = ConnectionLimits.of(config)
        self._client_errors = RateLimitedLog(limits_logger, logging.INFO, "bad HTTP requests")
        self._runner: web.AppRunner | None = None
        self.connections: set[_Connection] = set()
        self.detached: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ app

    def build_app(self) -> web.Application:
        """The aiohttp application: the one WebSocket route."""
        app = web.Application()
        app.router.add_get(self.path, self._handshake, allow_head=False)
        app.on_shutdown.append(self._close_all)
        return app

    async def _handshake(self, request: web.Request) -> web.StreamResponse:
        authenticator = self.kernel.authenticator
        if authenticator.enabled and authenticator.authenticate(request.headers) is None:
            return unauthorized(authenticator.challenges())
        ws = web.WebSocketResponse(heartbeat=self.heartbeat, max_msg_size=self._max_message, timeout=CLOSE_SECONDS)
        if not ws.can_prepare(request).ok:
            return web.Response(body=NOT_UPGRADE_BODY, status=426, content_type="application/json",
                                headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        await ws.prepare(request)
        connection = _Connection(self, ws, {k: v for k, v in request.headers.items()})
        self.connections.add(connection)
        try:
            await connection.serve()
        finally:
            self.connections.discard(connection)
        return ws

    async def _close_all(self, app: web.Application) -> None:
        await asyncio.gather(*(c.close() for c in list(self.connections)), return_exceptions=True)

    # ------------------------------------------------------------------ detached dispatches

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """Keep a dispatch task referenced until it ends (it outlives its socket if the client leaves)."""
        self.detached.add(task)
        task.add_done_callback(self.detached.discard)

    def drop_answer(self, task: asyncio.Task[Any]) -> None:
        """A dispatch whose client left: close its stream, if it answered with one."""
        if task.cancelled() or task.exception() is not None:
            return
        answer = task.result()
        if not isinstance(answer, dict):
            self.adopt(asyncio.get_running_loop().create_task(_aclose(answer)))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> list[InterfaceInfo]:
        """Bind ``host``/``port`` and serve ``ws-path``."""
        config = self.kernel.config
        self._runner = LimitedAppRunner(self.build_app(), limits=self._limits, client_errors=self._client_errors,
                                        handle_signals=False, shutdown_timeout=2.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, config.host, config.port, backlog=1024)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        port = config.port
        for address in self._runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                port = int(address[1])
                break
        logger.info("WebSocket transport bound to %s:%s%s", config.host, port, self.path)
        return [InterfaceInfo(url=f"ws://{_url_host(config.host)}:{port}{self.path}", protocol_binding=PROTOCOL_BINDING,
                              protocol_version="1.0")]

    def open_connections(self) -> int:
        """Client connections open right now (the ``iac_code_a2a_connections`` gauge)."""
        return len(self.connections)

    async def stop(self) -> None:
        """Close every socket, stop listening, end the dispatches still running."""
        if self._runner is not None:
            server = self._runner.server
            await self._runner.cleanup()
            self._runner = None
            if isinstance(server, LimitedServer):
                server.refusals.flush()
        tasks = list(self.detached)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._client_errors.flush()
