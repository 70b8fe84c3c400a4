"""Connection limits and quiet protocol errors for the aiohttp server.

aiohttp's ``RequestHandler`` (one per TCP connection) parses requests and
closes idle keep-alive connections (``keepalive_timeout``). This module adds
what it lacks, through the protocol and request factories that ``web.Server``
and ``AppRunner`` already have:

* a header deadline: the request line and headers must arrive within
  ``http-header-timeout`` seconds of the connection being accepted or, on a
  keep-alive connection, of the first byte of the next request (the idle wait
  before that byte is ``http-keepalive-timeout``, as in Go's net/http and
  nginx). A partial request is answered 408; a silent connection just closes;
* a body deadline: the body must arrive within ``http-body-timeout`` seconds
  of the headers. The handler's pending read fails with
  :class:`RequestBodyTimeout` (the transport answers 408) and the connection
  closes after the reply; if a reply had already started, it just closes;
* at most ``http-max-connections`` open connections, SSE streams included. A
  connection past that is answered 503 with ``Retry-After`` and closed at once,
  from the protocol callback, so nothing waits;
* protocol errors from clients (bad request line, header, chunking, sizes)
  are logged as one rate-limited line with the exception class and status,
  never the exception's message (it quotes the input, headers included) and
  never a traceback; the 400 reply does not quote the input either.

Neither deadline runs while a request is being handled, so a long response
(an SSE stream) stays open however long it lasts.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from iac_code.api import RateLimitedLog, jsonio

logger = logging.getLogger(__name__)

RequestFactory = Callable[..., web.BaseRequest]


class RequestBodyTimeout(Exception):
    """The request body did not arrive within ``http-body-timeout``."""


class MalformedRequestBody(web.RequestPayloadError):
    """The parser rejected the body of a request that is already being handled."""


#: Exceptions that mean "the client sent bad HTTP"; their text quotes the input.
CLIENT_ERRORS: tuple[type[BaseException], ...] = (HttpProcessingError, web.RequestPayloadError, RequestBodyTimeout)


@dataclass(frozen=True)
class ConnectionLimits:
    """The four ``http-*`` limits, in seconds and connections."""

    header_timeout: float = 10.0
    keepalive_timeout: float = 75.0
    body_timeout: float = 30.0
    max_connections: int = 1024

    @classmethod
    def of(cls, config: Any) -> ConnectionLimits:
        """The ``http-*`` settings of ``config`` (the defaults where a key is absent)."""
        return cls(header_timeout=float(getattr(config, "http_header_timeout", 10.0)),
                   keepalive_timeout=float(getattr(config, "http_keepalive_timeout", 75.0)),
                   body_timeout=float(getattr(config, "http_body_timeout", 30.0)),
                   max_connections=int(getattr(config, "http_max_connections", 1024)))


def log_client_error(log: RateLimitedLog, peer: str, exc: BaseException, status: int) -> None:
    """One line for a client's protocol error: class name and status, never the message."""
    log.log("Bad HTTP request from %s: %s (%d)", peer, type(exc).__name__, status)


def _raw_response(status: int, message: str, *headers: str) -> bytes:
    """A complete ``Connection: close`` response with a JSON-RPC error body, for the protocol layer."""
    code = -32600 if status < 500 else -32603
    body = jsonio.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", "Connection: close", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


HEADER_TIMEOUT_RESPONSE = _raw_response(408, "Request headers not received in time")
BUSY_RESPONSE = _raw_response(503, "Too many connections; retry later", "Retry-After: 1")


class LimitedRequestHandler(RequestHandler):
    """One client connection: aiohttp's handler plus the header and body deadlines, the connection
    cap and protocol errors logged without their text."""

    __slots__ = ("_owner", "_timer_loop", "_counted", "_header_due", "_header_handle", "_body_handle", "_active",
                 "_previous_body", "_partial")

    def __init__(self, manager: LimitedServer, *, loop: asyncio.AbstractEventLoop, **kwargs: Any) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self._owner = manager
        self._timer_loop = loop
        self._counted = False  # holds one of the server's connection slots
        self._header_due: float | None = None  # when the awaited headers are due; None: not awaiting any
        self._header_handle: asyncio.TimerHandle | None = None
        self._body_handle: asyncio.TimerHandle | None = None
        self._active: web.BaseRequest | None = None  # the request being handled
        self._previous_body: StreamReader | None = None  # payload of the last request handled (aiohttp may still drain it)
        self._partial = False  # bytes of a request whose headers are not complete yet

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        owner = self._owner
        if owner.open_connections >= owner.limits.max_connections:
            owner.refusals.log("Connection limit reached (%d open): refusing new connections",
                               owner.open_connections)
            transport.write(BUSY_RESPONSE)  # type: ignore[attr-defined]
            transport.close()
            return
        owner.open_connections += 1
        self._counted = True
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._counted:
            return  # refused: aiohttp never saw this connection
        self._counted = False
        self._owner.open_connections -= 1
        self._cancel_timers()
        self._active = self._previous_body = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._counted:
            return
        # The body still arriving: the active request's, or the last one's while aiohttp drains it.
        body = self._active.content if self._active is not None else self._previous_body
        if body is None or body.is_eof() or body.exception() is not None:
            if data and self._active is None:  # bytes of the next request
                self._partial = True
                if self._header_due is None:
                    self._arm_header_deadline()
            super().data_received(data)
            return
        before = getattr(self, "_request_count", None)
        super().data_received(data)
        # A new message while a body is still open can only be the C parser's error message: it
        # does not fail the open body, so whoever reads it would wait for the deadline instead.
        if before is not None and getattr(self, "_request_count", before) != before:
            if not body.is_eof() and body.exception() is None:
                body.set_exception(MalformedRequestBody("Malformed request body"))

    # ------------------------------------------------------------------ requests

    def request_started(self, request: web.BaseRequest) -> None:
        """Called by the server's request factory as aiohttp starts handling ``request``."""
        self._header_due = None  # the timer, if any, stays: re-armed per request, it fires once per period
        self._partial = False
        self._active = request
        if not request.content.is_eof():
            self._body_handle = self._timer_loop.call_later(
                self._owner.limits.body_timeout, self._body_deadline, request)

    async def finish_response(self, request: web.BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            if request is self._active:
                self._active = None
                self._previous_body = request.content
                if self._body_handle is not None:
                    self._body_handle.cancel()
                    self._body_handle = None
                if request.content.exception() is not None:
                    # The body failed (deadline, bad chunking): the reply is written, and the rest of
                    # the stream cannot be parsed, so close instead of draining it.
                    self.force_close()

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if not isinstance(exc, CLIENT_ERRORS):
            return super().handle_error(request, status, exc, message)
        if isinstance(exc, RequestBodyTimeout):
            status = 408
        else:
            code = getattr(exc, "code", 0)
            status = code if isinstance(code, int) and 400 <= code < 500 else 400
            log_client_error(self._owner.client_errors, self.peer, exc, status)
        if request.writer.output_size > 0:
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        response = web.Response(status=status, text=f"{status} {HTTPStatus(status).phrase}", content_type="text/plain")
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kw: Any) -> None:
        exc = kw.get("exc_info")
        if exc is True:
            exc = sys.exc_info()[1]
        if isinstance(exc, CLIENT_ERRORS):
            if not isinstance(exc, RequestBodyTimeout):  # the deadline logged it already
                log_client_error(self._owner.client_errors, self.peer, exc, 400)
            return
        super().log_exception(*args, **kw)

    # ------------------------------------------------------------------ deadlines

    @property
    def peer(self) -> str:
        """The client's address for log lines."""
        peername = self.peername
        if isinstance(peername, tuple) and peername:
            return str(peername[0])
        return str(peername) if peername else "unknown"

    def _arm_header_deadline(self) -> None:
        # One timer per connection, moved lazily (as aiohttp does for keep-alive): a busy keep-alive
        # connection does not schedule and cancel a timer for every request.
        self._header_due = due = self._timer_loop.time() + self._owner.limits.header_timeout
        if self._header_handle is None:
            self._header_handle = self._timer_loop.call_at(due, self._header_deadline)

    def _header_deadline(self) -> None:
        self._header_handle = None
        due = self._header_due
        transport = self.transport
        if due is None or transport is None or self._active is not None:
            return
        if self._timer_loop.time() < due:
            self._header_handle = self._timer_loop.call_at(due, self._header_deadline)
            return
        if self._partial:
            self._owner.client_errors.log("Request headers from %s not received within %g s", self.peer,
                                          self._owner.limits.header_timeout)
            transport.write(HEADER_TIMEOUT_RESPONSE)
        self.force_close()

    def _body_deadline(self, request: web.BaseRequest) -> None:
        self._body_handle = None
        payload = request.content
        if request is not self._active or self.transport is None or payload.is_eof() or payload.exception() is not None:
            return
        self._owner.client_errors.log("Request body from %s not received within %g s", self.peer,
                                      self._owner.limits.body_timeout)
        if request.writer.output_size > 0:
            self.force_close()  # a reply has started: nothing else can be said
        else:
            payload.set_exception(RequestBodyTimeout())

    def _cancel_timers(self) -> None:
        for handle in (self._header_handle, self._body_handle):
            if handle is not None:
                handle.cancel()
        self._header_handle = self._body_handle = None
        self._header_due = None


class LimitedServer(web.Server):
    """aiohttp's ``web.Server`` making :class:`LimitedRequestHandler` connections that share one budget."""

    def __init__(self, handler: Callable[..., Any], *, limits: ConnectionLimits, client_errors: RateLimitedLog,
                 request_factory: RequestFactory | None = None, handler_cancellation: bool = False,
                 loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> None:
        super().__init__(handler, request_factory=request_factory, handler_cancellation=handler_cancellation,
                         loop=loop, **kwargs)
        self.limits = limits
        self.client_errors = client_errors
        self.refusals = RateLimitedLog(logger, logging.WARNING, "refused connections", burst=1)
        self.open_connections = 0
        self._handler_loop = loop or asyncio.get_running_loop()
        self._handler_kwargs = kwargs
        make_request: RequestFactory = self.request_factory

        def start_request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
            request = make_request(message, payload, protocol, writer, task)
            if isinstance(protocol, LimitedRequestHandler):
                protocol.request_started(request)
            return request

        self.request_factory = start_request

    def __call__(self) -> LimitedRequestHandler:
        return LimitedRequestHandler(self, loop=self._handler_loop, keepalive_timeout=self.limits.keepalive_timeout,
                                     **self._handler_kwargs)


class LimitedAppRunner(web.AppRunner):
    """``web.AppRunner`` serving the application through a :class:`LimitedServer`."""

    def __init__(self, app: web.Application, *, limits: ConnectionLimits, client_errors: RateLimitedLog,
                 handle_signals: bool = False, shutdown_timeout: float = 60.0, **handler_kwargs: Any) -> None:
        super().__init__(app, handle_signals=handle_signals, shutdown_timeout=shutdown_timeout, **handler_kwargs)
        self.limits = limits
        self.client_errors = client_errors
        self._handler_kwargs = handler_kwargs

    def open_connections(self) -> int:
        """Client connections open right now (0 before start and after cleanup)."""
        server = self.server
        return int(server.open_connections) if isinstance(server, LimitedServer) else 0

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts the application exactly as AppRunner does
        return LimitedServer(plain.request_handler, request_factory=plain.request_factory,
                             handler_cancellation=plain.handler_cancellation, limits=self.limits,
                             client_errors=self.client_errors, **self._handler_kwargs)
