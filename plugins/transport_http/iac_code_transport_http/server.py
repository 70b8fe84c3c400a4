"""The aiohttp application: health, Agent Card, JSON-RPC (unary + SSE), plugin routes.

The transport only frames: it authenticates through the kernel's
authenticator, hands bodies to the kernel's dispatcher and writes JSON or SSE.
aiohttp's automatic request decompression is off, so a JSON-RPC body whose
``Content-Encoding`` is wrong or unknown gets a JSON error (400 / 415) and the
connection stays usable; gzip and deflate bodies are decoded here, within
``max-request-bytes``. Plugin routes receive request bodies as sent.

Connections are served by :mod:`iac_code_transport_http.limits`: header,
keep-alive and body deadlines, a connection cap, and protocol errors logged as
one rate-limited line without the offending input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from iac_code import jsonio
from iac_code.auth import ANONYMOUS_PRINCIPAL, Principal
from iac_code.dispatcher import CallInfo
from iac_code.records import InterfaceInfo
from iac_code_transport_http.limits import (
    CLIENT_ERRORS,
    ConnectionLimits,
    LimitedAppRunner,
    LimitedServer,
    RateLimitedLog,
    RequestBodyTimeout,
    log_client_error,
)
from iac_code_transport_http.limits import logger as limits_logger

if TYPE_CHECKING:
    from iac_code.kernel import Kernel

logger = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
HEALTH_BODY = b'{"status":"healthy"}'
UNAUTHORIZED_BODY = b'{"error":"Unauthorized"}'
PRINCIPAL_KEY = web.RequestKey("iac_code.principal", Principal)
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ACCEPTED_ENCODINGS = "gzip, deflate"
TOO_LARGE_TEXT = "Request payload too large"
BODY_TIMEOUT_TEXT = "Request body not received in time"
BAD_BODY_TEXT = "Malformed request body"


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


def _closing(response: web.Response) -> web.Response:
    response.force_close()
    return response


def _rpc_error(code: int, message: str) -> bytes:
    return _dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


class HttpTransport:
    """Serves the kernel over HTTP; one instance per running server."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        config = kernel.config
        self._max_body = config.max_request_bytes
        self._ping_seconds = float(getattr(config, "sse_ping_seconds", 15.0))
        self._public_url = str(getattr(config, "public_url", "") or "")
        self._public_paths = {"/health"}
        self._limits = ConnectionLimits(
            header_timeout=float(getattr(config, "http_header_timeout", 10.0)),
            keepalive_timeout=float(getattr(config, "http_keepalive_timeout", 75.0)),
            body_timeout=float(getattr(config, "http_body_timeout", 30.0)),
            max_connections=int(getattr(config, "http_max_connections", 1024)),
        )
        self._client_errors = RateLimitedLog(limits_logger, logging.INFO, "bad HTTP requests")
        self._runner: web.AppRunner | None = None

    # ------------------------------------------------------------------ app

    def build_app(self) -> web.Application:
        """The aiohttp application with the kernel's routes and every plugin route."""
        app = web.Application(client_max_size=self._max_body, middlewares=[self._guard])
        app.router.add_get("/health", self._health, allow_head=False)
        app.router.add_get(CARD_PATH, self._card, allow_head=False)
        app.router.add_post("/", self._rpc)
        for provided in self.kernel.plugins.http_routes(self.kernel):
            route = provided.record
            app.router.add_route(route.method.upper(), route.path, route.handler, name=route.name or None)
            if not route.auth:
                self._public_paths.add(route.path)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        authenticator = self.kernel.authenticator
        if authenticator.enabled and request.path not in self._public_paths:
            principal = authenticator.authenticate(request.headers)
            if principal is None:
                return _json(UNAUTHORIZED_BODY, 401)
            request[PRINCIPAL_KEY] = principal
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            if exc.status == 413:
                return _json(_rpc_error(-32600, TOO_LARGE_TEXT), 413)
            return _json(_dumps({"error": exc.reason}), exc.status,
                         headers={"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None)
        except RequestBodyTimeout:  # logged by the deadline
            return _closing(_json(_rpc_error(-32600, BODY_TIMEOUT_TEXT), 408))
        except CLIENT_ERRORS as exc:  # bad chunking etc.: the exception's text quotes the input
            log_client_error(self._client_errors, request.remote or "unknown", exc, 400)
            return _closing(_json(_rpc_error(-32600, BAD_BODY_TEXT), 400))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Unhandled error on %s %s", request.method, request.path)
            return _json(_dumps({"error": "Internal Server Error"}), 500)

    # ------------------------------------------------------------------ routes

    async def _health(self, request: web.Request) -> web.Response:
        return _json(HEALTH_BODY)

    async def _card(self, request: web.Request) -> web.Response:
        document = self.kernel.cards.document
        headers = {"Cache-Control": "public, max-age=60", "ETag": document.etag,
                   "Last-Modified": document.last_modified}
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None:
            tags = {t.strip() for t in if_none_match.split(",")}
            if document.etag in tags or "*" in tags:
                return web.Response(status=304, headers=headers)
        return _json(document.body, headers=headers)

    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > self._max_body:
            return _json(_rpc_error(-32600, TOO_LARGE_TEXT), 413)
        body = await request.read()
        headers = request.headers
        content_encoding = headers.get("Content-Encoding")
        if content_encoding is not None:
            try:
                body = decode_content(body, content_encoding, self._max_body)
            except BodyTooLargeError:
                return _json(_rpc_error(-32600, TOO_LARGE_TEXT), 413)
            except BodyDecodingError:
                return _json(_rpc_error(
                    -32700, "Parse error: request body does not match its Content-Encoding"), 400)
            except UnsupportedEncodingError as exc:
                coding = exc.coding[:40] if exc.coding.isascii() and exc.coding.isprintable() else "?"
                return _json(_rpc_error(
                    -32600, f"Content-Encoding '{coding}' is not supported: send {ACCEPTED_ENCODINGS} or identity"),
                    415, headers={"Accept-Encoding": ACCEPTED_ENCODINGS})
        call = CallInfo(
            principal=request.get(PRINCIPAL_KEY, ANONYMOUS_PRINCIPAL),
            headers=headers,
            extensions=headers.getall("A2A-Extensions", []),
            transport="http",
            query=request.query,
            content_type=headers.get("Content-Type", ""),
        )
        dispatcher = self.kernel.dispatcher
        if dispatcher is None:  # only between bind and kernel start-up completing
            return _json(_rpc_error(-32603, "Server is starting"), 503)
        result = await dispatcher.dispatch(body, call)
        if isinstance(result, dict):
            return _json(_dumps(result))
        return await self._sse(request, result)

    async def _sse(self, request: web.Request, frames: AsyncIterator[dict[str, Any]]) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await response.prepare(request)
        pinger = asyncio.get_running_loop().create_task(self._ping(response))
        try:
            async for frame in frames:
                await response.write(b"data: " + _dumps(frame) + b"\r\n\r\n")
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

    async def _ping(self, response: web.StreamResponse) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while True:
                await asyncio.sleep(self._ping_seconds)
                await response.write(b": ping\r\n\r\n")

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
        return [InterfaceInfo(url=url, protocol_binding="JSONRPC", protocol_version="1.0")]

    async def stop(self) -> None:
        if self._runner is not None:
            server = self._runner.server
            await self._runner.cleanup()
            self._runner = None
            if isinstance(server, LimitedServer):
                server.refusals.flush()
        self._client_errors.flush()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
