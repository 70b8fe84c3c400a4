"""The aiohttp application: health, Agent Card, JSON-RPC and HTTP+JSON (unary + SSE), plugin routes.

The transport only frames: it authenticates through the kernel's
authenticator, hands bodies to the kernel's dispatcher and writes JSON or SSE.
aiohttp's automatic request decompression is off, so a JSON-RPC body whose
``Content-Encoding`` is wrong or unknown gets a JSON error (400 / 415) and the
connection stays usable; gzip and deflate bodies are decoded here, within
``max-request-bytes``. Plugin routes receive request bodies as sent.

The HTTP+JSON (REST) routes of :mod:`iac_code_transport_http.rest` are served beside
``POST /`` with the same authentication, limits and body decoding; both bindings call the
same dispatcher core and differ only in framing (REST errors are
``google.rpc.Status`` bodies with the binding's HTTP status). The routes of the installed
protocol adapters (``iac_code_protocol_adapters``: A2A 0.3's ``/v1/...``) are served the
same way, before the ``/{tenant}/...`` ones; a request an adapter's route does not accept
(a ``/v1/...`` request whose ``A2A-Version`` is not 0.x) is served by the transport's own
routes as if the adapter's were not there (the 1.0 route of a tenant named ``v1``).

Connections are served by :mod:`iac_code_transport_http.limits`: header,
keep-alive and body deadlines, a connection cap, and protocol errors logged as
one rate-limited line without the offending input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONRPCError
from aiohttp import web
from multidict import CIMultiDict

from iac_code.api import (
    ANONYMOUS_PRINCIPAL,
    ARTIFACT_ROUTE_PREFIX,
    AdapterRoute,
    CallInfo,
    HttpReply,
    InterfaceInfo,
    Principal,
    PrincipalUser,
    RateLimitedLog,
    jsonio,
    seq_of,
)
from iac_code_transport_http.idle import IdleMonitor
from iac_code_transport_http.limits import (
    CLIENT_ERRORS,
    ConnectionLimits,
    LimitedAppRunner,
    LimitedServer,
    RequestBodyTimeout,
    log_client_error,
)
from iac_code_transport_http.limits import logger as limits_logger
from iac_code_transport_http.rest import BINDING, REST_ROUTES, TENANT_PREFIX, RestBinding, RestRoute, error_reply

if TYPE_CHECKING:
    from iac_code.api import JsonRpcDispatcher, PluginContext

logger = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
# Plugin routes safe mode's projection leaves alone (their answers hold no workspace data).
UNPROJECTED_PATHS = frozenset({"/iac-code/readiness"})
HEALTH_BODY = b'{"status":"healthy"}'
UNAUTHORIZED_BODY = b'{"error":"Unauthorized"}'
PRINCIPAL_KEY = web.RequestKey("iac_code.principal", Principal)
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ErrorShape = Callable[[int, str, int], HttpReply]

ACCEPTED_ENCODINGS = "gzip, deflate"
TOO_LARGE_TEXT = "Request payload too large"
BODY_TIMEOUT_TEXT = "Request body not received in time"
BAD_BODY_TEXT = "Malformed request body"
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")


class BodyDecodingError(Exception):
    """The body does not decode as its ``Content-Encoding`` says."""


class UnsupportedEncodingError(Exception):
    """A ``Content-Encoding`` this transport cannot decode."""

    def __init__(self, coding: str) -> None:
        super().__init__(coding)
        self.coding = coding


class BodyTooLargeError(Exception):
    """The decoded body exceeds ``max-request-bytes``."""


def _inflate(data: bytes, wbits: int, limit: int, *, members: bool = False) -> bytes:
    """zlib-decode ``data`` (with ``members``: one or more gzip members) to at most ``limit`` bytes."""
    out: list[bytes] = []
    size = 0
    while data:
        decoder = zlib.decompressobj(wbits)
        try:
            chunk = decoder.decompress(data, limit + 1 - size)
        except zlib.error:
            raise BodyDecodingError from None
        size += len(chunk)
        if size > limit or decoder.unconsumed_tail:
            raise BodyTooLargeError
        if not decoder.eof:
            raise BodyDecodingError
        out.append(chunk)
        data = decoder.unused_data
        if data and not members:
            raise BodyDecodingError  # trailing bytes after the stream
    return b"".join(out)


def decode_content(body: bytes, content_encoding: str, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (codings listed in the order they were applied)."""
    for coding in reversed([c.strip().lower() for c in content_encoding.split(",")]):
        if coding in ("", "identity") or not body:
            continue
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, zlib.MAX_WBITS | 16, limit, members=True)
        elif coding == "deflate":
            try:
                body = _inflate(body, zlib.MAX_WBITS, limit)
            except BodyDecodingError:  # raw deflate without the zlib wrapper, as some clients send
                body = _inflate(body, -zlib.MAX_WBITS, limit)
        else:
            raise UnsupportedEncodingError(coding)
    return body


_dumps = jsonio.dumps


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)


def unauthorized(challenges: list[str]) -> web.Response:
    """The 401 of a refused request: ``{"error":"Unauthorized"}`` and one ``WWW-Authenticate`` per scheme."""
    return web.Response(body=UNAUTHORIZED_BODY, status=401, content_type="application/json",
                        headers=CIMultiDict(("WWW-Authenticate", value) for value in challenges))


def _closing(response: web.Response) -> web.Response:
    response.force_close()
    return response


def _rpc_error(code: int, message: str) -> bytes:
    return _dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


def _event_id(result: Any) -> bytes:
    """The SSE ``id:`` line of a stream event: its seq, which ``Last-Event-ID`` resumes after."""
    seq = seq_of(result) if isinstance(result, dict) else None
    return b"id: " + seq.encode() + b"\r\n" if seq is not None else b""


def _rpc_frame(frame: dict[str, Any]) -> bytes:
    return _event_id(frame.get("result")) + b"data: " + _dumps(frame) + b"\r\n\r\n"


def _rest_frame(event: tuple[str, dict[str, Any]]) -> bytes:
    name, data = event
    return ((f"event: {name}\r\n".encode() if name else b"") + _event_id(data) + b"data: " + _dumps(data)
            + b"\r\n\r\n")


def _rest_response(reply: HttpReply, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=_dumps(reply.body), status=reply.status, content_type=reply.media_type,
                        headers=headers)


def _status_reply(code: int, message: str, status: int) -> HttpReply:
    """The HTTP+JSON binding's error body (``google.rpc.Status``) for a JSON-RPC ``code`` and our ``message``."""
    return error_reply(JSONRPCError(code=code, message=message), status)


def _rest_error(code: int, message: str, status: int, headers: dict[str, str] | None = None, *,
                shape: ErrorShape = _status_reply) -> web.Response:
    """A transport-level REST error (the JSON-RPC code says which A2A error it is), as ``shape`` (the route's) frames it."""
    return _rest_response(shape(code, message, status), headers)


class _BodyError(Exception):
    """The request body cannot be read as sent: HTTP ``status``, JSON-RPC ``code``, our ``message``."""

    def __init__(self, status: int, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


class HttpTransport:
    """Serves the kernel over HTTP; one instance per running server."""

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel
        config = kernel.config
        self._max_body = config.max_request_bytes
        self._ping_seconds = float(getattr(config, "sse_ping_seconds", 15.0))
        self._public_url = str(getattr(config, "public_url", "") or "")
        self._public_paths = {"/health", "/ready"}
        if getattr(config, "card_public", False):
            self._public_paths.add(CARD_PATH)  # the card only advertises schemes; the rest stays protected
        self._limits = ConnectionLimits.of(config)
        self._client_errors = RateLimitedLog(limits_logger, logging.INFO, "bad HTTP requests")
        self._runner: web.AppRunner | None = None
        self._rest_resources: set[Any] = set()
        # The transport's own HTTP+JSON routes alone: where a request an adapter's route does not accept goes.
        self._own_routes = web.UrlDispatcher()
        self._own_route_of: dict[Any, RestRoute] = {}
        idle_timeout = getattr(config, "idle_shutdown_seconds", 0)
        self._idle: IdleMonitor | None = (
            IdleMonitor(kernel, float(idle_timeout)) if isinstance(idle_timeout, (int, float))
            and not isinstance(idle_timeout, bool) and idle_timeout > 0 else None)

    # ------------------------------------------------------------------ app

    def build_app(self) -> web.Application:
        """The aiohttp application with the kernel's routes and every plugin route."""
        app = web.Application(client_max_size=self._max_body, middlewares=[self._guard])
        self._own_routes, self._own_route_of = web.UrlDispatcher(), {}
        app.router.add_get("/health", self._health, allow_head=False)
        app.router.add_get("/ready", self._ready, allow_head=False)
        app.router.add_get(CARD_PATH, self._card, allow_head=False)
        app.router.add_post("/", self._rpc)
        app.router.add_get("/" + ARTIFACT_ROUTE_PREFIX + "{artifact_id}/{name}", self._artifact, allow_head=False)
        for route in self.kernel.http_routes():
            handler = route.handler if route.path in UNPROJECTED_PATHS else self._projected(route.handler)
            app.router.add_route(route.method.upper(), route.path, handler, name=route.name or None)
            if not route.auth:
                self._public_paths.add(route.path)
        # After plugin routes, so a plugin's literal path wins over "/{tenant}/...";
        # the adapters' routes before "/{tenant}/...", which "/v1/..." would match too.
        for adapter in self.kernel.protocol_adapters:
            for adapter_route in adapter.http_routes:
                added = app.router.add_route(adapter_route.http_method, adapter_route.path,
                                             self._adapter_endpoint(adapter_route))
                self._rest_resources.add(added.resource)
        for prefix in ("", TENANT_PREFIX):
            for rest_route in REST_ROUTES:
                added = app.router.add_route(rest_route.http_method, prefix + rest_route.path,
                                             self._rest_endpoint(rest_route))
                self._rest_resources.add(added.resource)
                own = self._own_routes.add_route(rest_route.http_method, prefix + rest_route.path,
                                                 self._rest_endpoint(rest_route))
                self._own_route_of[own] = rest_route
        return app

    def _projected(self, handler: Handler) -> Handler:
        """A plugin route whose JSON answers get safe mode's path projection (``IAC_CODE_A2A_SAFE_MODE``, read per
        response); other bodies (SSE a plugin streams itself, files) pass as they are."""
        async def projected(request: web.Request) -> web.StreamResponse:
            response = await handler(request)
            projection = getattr(self.kernel, "projection", None)
            if projection is None or not projection.enabled() or not isinstance(response, web.Response) \
                    or "json" not in (response.content_type or "") or not isinstance(response.body, bytes):
                return response
            try:
                document = jsonio.loads(response.body)
            except ValueError:
                return response  # undecodable: unchanged
            principal = request.get(PRINCIPAL_KEY, ANONYMOUS_PRINCIPAL)
            projected_body = await projection.project(
                document, principal, {"query": dict(request.query), "path": dict(request.match_info)})
            response.body = _dumps(projected_body)
            return response
        return projected

    def _is_rest(self, request: web.Request) -> bool:
        return getattr(request.match_info.route, "resource", None) in self._rest_resources

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        idle = self._idle
        if idle is None:
            return await self._guarded(request, handler)
        idle.request_started()  # an open SSE stream stays in flight until it ends
        try:
            return await self._guarded(request, handler)
        finally:
            idle.request_finished()

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        authenticator = self.kernel.authenticator
        if authenticator.enabled and request.path not in self._public_paths:
            principal = authenticator.authenticate(request.headers)
            if principal is None:
                return unauthorized(authenticator.challenges())
            request[PRINCIPAL_KEY] = principal
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            if exc.status == 413:
                return self._framed_error(request, 413, -32600, TOO_LARGE_TEXT)
            return _json(_dumps({"error": exc.reason}), exc.status,
                         headers={"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None)
        except RequestBodyTimeout:  # logged by the deadline
            return _closing(self._framed_error(request, 408, -32600, BODY_TIMEOUT_TEXT))
        except CLIENT_ERRORS as exc:  # bad chunking etc.: the exception's text quotes the input
            log_client_error(self._client_errors, request.remote or "unknown", exc, 400)
            return _closing(self._framed_error(request, 400, -32600, BAD_BODY_TEXT))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Unhandled error on %s %s", request.method, request.path)
            if self._is_rest(request):
                return _rest_error(-32603, "Internal error", 500)
            return _json(_dumps({"error": "Internal Server Error"}), 500)

    def _framed_error(self, request: web.Request, status: int, code: int, message: str,
                      headers: dict[str, str] | None = None) -> web.Response:
        """A body-level error in the framing of the route that failed: REST Status, else JSON-RPC."""
        if self._is_rest(request):
            return _rest_error(code, message, status, headers)
        return _json(_rpc_error(code, message), status, headers=headers)

    # ------------------------------------------------------------------ routes

    async def _health(self, request: web.Request) -> web.Response:
        return _json(HEALTH_BODY)

    async def _ready(self, request: web.Request) -> web.Response:
        """Readiness: 200 once the stores are restored and every transport is bound; 503 before and while stopping."""
        state = self.kernel.readiness
        return _json(_dumps({"status": state}), 200 if state == "ready" else 503)

    async def _card(self, request: web.Request) -> web.Response:
        document = self.kernel.card_document
        headers = {"Cache-Control": "public, max-age=60", "ETag": document.etag,
                   "Last-Modified": document.last_modified}
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None:
            tags = {t.strip() for t in if_none_match.split(",")}
            if document.etag in tags or "*" in tags:
                return web.Response(status=304, headers=headers)
        return _json(document.body, headers=headers)

    async def _artifact(self, request: web.Request) -> web.Response:
        """A stored artifact, to a caller who may read its task (anyone else: the same 404 as none)."""
        found = await self.kernel.artifacts.find(request.match_info["artifact_id"], request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound
        stored, data = found
        context = ServerCallContext(user=PrincipalUser(request.get(PRINCIPAL_KEY, ANONYMOUS_PRINCIPAL)))
        if await self.kernel.task_store.get(stored.task_id, context) is None:
            raise web.HTTPNotFound
        etag = f'"{stored.sha256}"'
        headers = {"ETag": etag, "Cache-Control": "private, no-cache", "X-Content-Type-Options": "nosniff",
                   "Content-Disposition": f'attachment; filename="{stored.name}"'}
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None:
            tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
            if etag in tags or "*" in tags:
                return web.Response(status=304, headers=headers)
        media_type = stored.media_type.partition(";")[0].strip().lower()
        if not _MEDIA_TYPE.fullmatch(media_type):
            media_type = "application/octet-stream"
        # Payloads are stored as UTF-8 text (iac_code.tasks.artifacts), so every text type is UTF-8.
        charset = "utf-8" if media_type.startswith("text/") else None
        return web.Response(body=data, headers=headers, content_type=media_type, charset=charset)

    async def _read_body(self, request: web.Request) -> bytes:
        """The body, decoded as its ``Content-Encoding`` says, within ``max-request-bytes``."""
        if request.content_length is not None and request.content_length > self._max_body:
            raise _BodyError(413, -32600, TOO_LARGE_TEXT)
        body = await request.read()
        content_encoding = request.headers.get("Content-Encoding")
        if content_encoding is not None:
            try:
                body = decode_content(body, content_encoding, self._max_body)
            except BodyTooLargeError:
                raise _BodyError(413, -32600, TOO_LARGE_TEXT) from None
            except BodyDecodingError:
                raise _BodyError(400, -32700, "Parse error: request body does not match its Content-Encoding") from None
            except UnsupportedEncodingError as exc:
                coding = exc.coding[:40] if exc.coding.isascii() and exc.coding.isprintable() else "?"
                raise _BodyError(
                    415, -32600, f"Content-Encoding '{coding}' is not supported: send {ACCEPTED_ENCODINGS} or identity",
                    headers={"Accept-Encoding": ACCEPTED_ENCODINGS}) from None
        return body

    @staticmethod
    def _call_info(request: web.Request) -> CallInfo:
        headers = request.headers
        return CallInfo(
            principal=request.get(PRINCIPAL_KEY, ANONYMOUS_PRINCIPAL),
            headers=headers,
            extensions=headers.getall("A2A-Extensions", []),
            transport="http",
            query=request.query,
            content_type=headers.get("Content-Type", ""),
        )

    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await self._read_body(request)
        except _BodyError as exc:
            return _json(_rpc_error(exc.code, exc.message), exc.status, headers=exc.headers)
        call = self._call_info(request)
        dispatcher = self.kernel.dispatcher
        if dispatcher is None:  # only between bind and kernel start-up completing
            return _json(_rpc_error(-32603, "Server is starting"), 503)
        result = await dispatcher.dispatch(body, call)
        if isinstance(result, dict):
            return _json(_dumps(result))
        return await self._sse(request, result, _rpc_frame)

    def _rest_endpoint(self, route: RestRoute) -> Handler:
        async def endpoint(request: web.Request) -> web.StreamResponse:
            return await self._rest(request, route)
        return endpoint

    def _adapter_endpoint(self, route: AdapterRoute) -> Handler:
        async def endpoint(request: web.Request) -> web.StreamResponse:
            return await self._adapted(request, route)
        return endpoint

    async def _adapted(self, request: web.Request, route: AdapterRoute) -> web.StreamResponse:
        """A protocol adapter's route: its answer, framed as the HTTP+JSON binding's; or, for a call it does
        not accept, the transport's own route for the path (a 404 when there is none)."""
        call = self._call_info(request)
        if route.accepts is not None and not route.accepts(call):
            own = await self._own_routes.resolve(request)
            rest_route = self._own_route_of.get(own.route)
            if rest_route is None:
                raise web.HTTPNotFound
            return await self._rest(request, rest_route, dict(own))
        taken = await self._rest_input(request, route.error)
        if isinstance(taken, web.StreamResponse):
            return taken
        body, dispatcher = taken
        reply = await route.handle(dispatcher, request.match_info, body, call)
        if isinstance(reply, HttpReply):
            return _rest_response(reply)
        return await self._sse(request, reply.events, _rest_frame)

    async def _rest_input(self, request: web.Request,
                          shape: ErrorShape = _status_reply) -> tuple[bytes, JsonRpcDispatcher] | web.StreamResponse:
        """A REST request's body (read and bounded even where the binding ignores it) and the
        dispatcher, or the error response (as the route's ``shape`` frames it) when either is not to be had."""
        body = b""
        if request.method == "POST":
            try:
                body = await self._read_body(request)
            except _BodyError as exc:
                return _rest_error(exc.code, exc.message, exc.status, exc.headers, shape=shape)
        dispatcher = self.kernel.dispatcher
        if dispatcher is None:  # only between bind and kernel start-up completing
            return _rest_error(-32603, "Server is starting", 503, shape=shape)
        return body, dispatcher

    async def _rest(self, request: web.Request, route: RestRoute,
                    path_params: Mapping[str, str] | None = None) -> web.StreamResponse:
        taken = await self._rest_input(request)
        if isinstance(taken, web.StreamResponse):
            return taken
        body, dispatcher = taken
        reply = await RestBinding(dispatcher).handle(route, request.match_info if path_params is None else path_params,
                                                     body, self._call_info(request))
        if isinstance(reply, HttpReply):
            return _rest_response(reply)
        return await self._sse(request, reply.events, _rest_frame)

    async def _sse(self, request: web.Request, frames: AsyncIterator[Any],
                   encode: Callable[[Any], bytes]) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await response.prepare(request)
        pinger = asyncio.get_running_loop().create_task(self._ping(request, response, asyncio.current_task()))
        try:
            async for frame in frames:
                await response.write(encode(frame))
        except (ConnectionError, asyncio.CancelledError):
            logger.debug("SSE client went away")
        finally:
            pinger.cancel()
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    async def _ping(self, request: web.Request, response: web.StreamResponse,
                    stream: asyncio.Task[Any] | None) -> None:
        """Keep-alive comments every ``sse-ping-seconds``; a client that went away (its connection closed, or
        a ping that cannot be written) ends ``stream``, the handler writing the events, at once: a stream
        nobody reads does not hold the task's subscription (nor keep an idle server up) until its next event."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        try:
            while True:
                await asyncio.sleep(min(1.0, self._ping_seconds))
                transport = request.transport
                if transport is None or transport.is_closing():
                    raise ConnectionResetError
                if loop.time() - last >= self._ping_seconds:
                    await response.write(b": ping\r\n\r\n")
                    last = loop.time()
        except ConnectionError:
            if stream is not None:
                stream.cancel()
        except asyncio.CancelledError:
            pass

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> list[InterfaceInfo]:
        config = self.kernel.config
        self._runner = LimitedAppRunner(self.build_app(), limits=self._limits, client_errors=self._client_errors,
                                        handle_signals=False, shutdown_timeout=2.0, access_log=None,
                                        auto_decompress=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, config.host, config.port, backlog=1024)
        await site.start()
        port = config.port
        for address in self._runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                port = int(address[1])
                break
        logger.info("HTTP transport bound to %s:%s", config.host, port)
        url = self._public_url or f"http://{_url_host(config.host)}:{port}/"
        if not url.endswith("/"):
            url += "/"
        self.kernel.artifacts.base_url = url  # artifact URLs are served here (/iac-code/artifacts/...)
        if self._idle is not None:
            self._idle.start()
        return [InterfaceInfo(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
                InterfaceInfo(url=url.rstrip("/"), protocol_binding=BINDING, protocol_version="1.0")]

    def open_connections(self) -> int:
        """Client connections open right now (the ``iac_code_a2a_connections`` gauge)."""
        return self._runner.open_connections() if self._runner is not None else 0

    async def stop(self) -> None:
        if self._idle is not None:
            await self._idle.stop()
        if self._runner is not None:
            server = self._runner.server
            await self._runner.cleanup()
            self._runner = None
            if isinstance(server, LimitedServer):
                server.refusals.flush()
        self._client_errors.flush()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
