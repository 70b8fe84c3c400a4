"""The official A2A gRPC binding: ``lf.a2a.v1.A2AService`` on grpcio's asyncio server.

a2a-sdk's :class:`~a2a.server.request_handlers.grpc_handler.GrpcHandler` maps the
RPCs onto the kernel's request handler (the one JSON-RPC uses) and A2A errors
onto gRPC status codes with ``google.rpc.ErrorInfo`` details. This module adds
what the SDK leaves to the host, with the HTTP transport's and the JSON-RPC
dispatcher's rules and texts:

* authentication from call metadata (``authorization``, the API-key header)
  through ``kernel.authenticator``; a refused call ends ``UNAUTHENTICATED``;
* the caller's principal as the call context's user (owner scope of tasks);
* ``a2a-version`` (Major.Minor must be 1.0) and the required ``a2a-extensions``;
* unexpected errors end ``INTERNAL`` with "Internal error" (logged here, never
  echoed: grpcio would otherwise put the exception's text in the status);
* TLS when ``grpc-tls-cert`` and ``grpc-tls-key`` are set; plaintext on a
  non-loopback address only with ``grpc-insecure: true``.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import GrpcHandler, GrpcServerCallContextBuilder
from a2a.types import a2a_pb2_grpc
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    A2AError,
    InternalError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a.utils.grpc_status import status_to_grpc
from google.protobuf import any_pb2
from google.protobuf.json_format import ParseDict
from google.rpc import error_details_pb2, status_pb2
from grpc import aio

from iac_code.api import (
    ANONYMOUS_PRINCIPAL,
    MESSAGE_METHODS,
    RAW_PARAMS_KEY,
    InterfaceInfo,
    Principal,
    PrincipalUser,
    StartupError,
    message_to_json,
    tracing,
)
from iac_code.api import protocol_error as check_protocol
from iac_code_transport_grpc.addresses import is_loopback, plaintext_refused

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

PROTOCOL_BINDING = "GRPC"
ERROR_DOMAIN = "a2a-protocol.org"
# The A2A 1.0 error table (specification §5.4) where a2a-sdk's GrpcHandler maps otherwise.
SPEC_STATUS = {
    VersionNotSupportedError: grpc.StatusCode.UNIMPLEMENTED,
    UnsupportedOperationError: grpc.StatusCode.UNIMPLEMENTED,
    PushNotificationNotSupportedError: grpc.StatusCode.UNIMPLEMENTED,
}
STOP_GRACE_SECONDS = 1.0
READERS = 1024  # callers whose GetTask call context is kept (see KernelGrpcHandler._reader)
KNOWN_METADATA = 1024  # admitted GetTask call metadata remembered (see KernelGrpcHandler.GetTask)
UNAUTHENTICATED_TEXT = "Unauthorized"
STARTING_TEXT = "Server is starting"
INTERNAL_TEXT = "Internal error"
VERSION_KEY = "a2a-version"
EXTENSIONS_KEY = HTTP_EXTENSION_HEADER.lower()

UNARY_METHODS = ("SendMessage", "GetTask", "ListTasks", "CancelTask", "CreateTaskPushNotificationConfig",
                 "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
                 "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard")
STREAM_METHODS = ("SendStreamingMessage", "SubscribeToTask")


@dataclass(frozen=True)
class AdmittedCall:
    """What the admission step learned about one call, for the call context builder."""

    principal: Principal
    method: str
    headers: Mapping[str, str]
    extensions: frozenset[str]
    raw_params: dict[str, Any] | None


# Set by admission in the RPC's own task, read by the context builder further down the same call.
_ADMITTED: contextvars.ContextVar[AdmittedCall | None] = contextvars.ContextVar("iac_code_grpc_call", default=None)


def read_metadata(context: aio.ServicerContext) -> tuple[dict[str, str], list[str]]:
    """Call metadata as lower-case text headers (first value wins) and every ``a2a-extensions`` value."""
    headers: dict[str, str] = {}
    extensions: list[str] = []
    for key, value in context.invocation_metadata() or ():
        if not isinstance(value, str):  # "-bin" metadata carries bytes: never a header we read
            continue
        key = key.lower()
        headers.setdefault(key, value)
        if key == EXTENSIONS_KEY:
            extensions.append(value)
    return headers, extensions


def protocol_error(method: str, headers: Mapping[str, str], extensions: frozenset[str],
                   required: frozenset[str]) -> A2AError | None:
    """The dispatcher's A2A-Version and required-extension checks, from call metadata."""
    return check_protocol(method, (headers.get(VERSION_KEY) or "").strip(), extensions, required)


class AdmittedContextBuilder(GrpcServerCallContextBuilder):
    """The call context the JSON-RPC dispatcher would build: principal as user, headers, raw params."""

    def build(self, context: aio.ServicerContext) -> ServerCallContext:
        call = _ADMITTED.get()
        if call is None:  # an RPC that skipped admission: fail closed, never serve it anonymously
            raise InternalError(message=INTERNAL_TEXT)
        return call_context(call, context)


def call_context(call: AdmittedCall, context: aio.ServicerContext) -> ServerCallContext:
    """The request handler's call context for an admitted call."""
    state: dict[str, Any] = {"headers": call.headers, "method": call.method, "transport": "grpc",
                             "grpc_context": context}
    if call.raw_params is not None:
        state[RAW_PARAMS_KEY] = call.raw_params
    return ServerCallContext.model_construct(
        user=PrincipalUser(call.principal), state=state, requested_extensions=set(call.extensions), tenant="")


class KernelRequestHandlerRef:
    """``kernel.request_handler``, looked up per call: the kernel builds it after the transports bind."""

    def __init__(self, kernel: PluginContext) -> None:
        self._kernel = kernel

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel.request_handler, name)


async def _projected(kernel: PluginContext, request: Any, response: Any) -> Any:
    """``response`` with safe mode's path projection (``IAC_CODE_A2A_SAFE_MODE``): as JSON, projected, parsed
    back into the same message type; ``response`` itself when safe mode is off."""
    projection = getattr(kernel, "projection", None)
    if projection is None or response is None or not projection.enabled():
        return response
    call = _ADMITTED.get(None)
    scope = projection.scope(call.principal if call is not None else ANONYMOUS_PRINCIPAL, message_to_json(request))
    return _parsed(response, await scope.project(message_to_json(response)))


def _parsed(template: Any, data: Any) -> Any:
    out = type(template)()
    ParseDict(data, out, ignore_unknown_fields=True)
    return out


def _unary(method: str) -> Callable[..., Any]:
    served = getattr(GrpcHandler, method)

    async def rpc(self: KernelGrpcHandler, request: Any, context: aio.ServicerContext) -> Any:
        with tracing.method_span(method, lambda: read_metadata(context)[0], "grpc"):
            await self.admit(method, request, context)
            try:
                return await _projected(self._kernel, request, await served(self, request, context))
            except aio.AbortError:
                raise
            except Exception:
                logger.exception("Unhandled error in gRPC %s", method)
                await self.abort_context(InternalError(message=INTERNAL_TEXT), context)
                raise  # not reached: abort raises

    rpc.__name__ = rpc.__qualname__ = method
    return rpc


def _stream(method: str) -> Callable[..., Any]:
    served = getattr(GrpcHandler, method)

    async def rpc(self: KernelGrpcHandler, request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
        with tracing.method_span(method, lambda: read_metadata(context)[0], "grpc"):
            await self.admit(method, request, context)
            try:
                projection = getattr(self._kernel, "projection", None)
                if projection is None or not projection.enabled():
                    async for item in served(self, request, context):
                        yield item
                else:
                    call = _ADMITTED.get(None)
                    scope = projection.scope(call.principal if call is not None else ANONYMOUS_PRINCIPAL,
                                             message_to_json(request))
                    async for item in served(self, request, context):
                        yield _parsed(item, await scope.project(message_to_json(item)))
            except aio.AbortError:
                raise
            except Exception:
                logger.exception("Unhandled error while streaming gRPC %s", method)
                await self.abort_context(InternalError(message=INTERNAL_TEXT), context)

    rpc.__name__ = rpc.__qualname__ = method
    return rpc


class KernelGrpcHandler(GrpcHandler):
    """a2a-sdk's GrpcHandler over the kernel's request handler, behind authentication and protocol checks."""

    def __init__(self, kernel: PluginContext) -> None:
        super().__init__(KernelRequestHandlerRef(kernel), AdmittedContextBuilder())  # type: ignore[arg-type]
        self._kernel = kernel
        self._required = frozenset(kernel.config.required_extensions)
        self._readers: dict[Principal, ServerCallContext] = {}
        self._known: dict[Any, ServerCallContext] = {}

    async def admit(self, method: str, request: Any, context: aio.ServicerContext) -> None:
        """Authenticate and check the protocol metadata; abort the call when refused."""
        _ADMITTED.set(await self.admission(method, request, context))

    def _reader(self, principal: Principal) -> ServerCallContext:
        """The call context of a GetTask by ``principal``: a read needs only the caller's identity (its owner
        scope), so one context per principal serves all of them (at most :data:`READERS` kept)."""
        reader = self._readers.get(principal)
        if reader is None:
            if len(self._readers) >= READERS:
                self._readers.clear()
            reader = self._readers[principal] = ServerCallContext.model_construct(
                user=PrincipalUser(principal), state={"method": "GetTask", "transport": "grpc"},
                requested_extensions=set(), tenant="")
        return reader

    async def admission(self, method: str, request: Any, context: aio.ServicerContext) -> AdmittedCall:
        """What :meth:`admit` learns of a call; aborts the call when it is refused."""
        headers, extensions = read_metadata(context)
        principal = self._kernel.authenticator.authenticate(headers)
        if principal is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_TEXT)
        if self._kernel.request_handler is None:  # only between bind and kernel start-up completing
            await context.abort(grpc.StatusCode.UNAVAILABLE, STARTING_TEXT)
        requested = frozenset(get_requested_extensions(extensions))
        error = protocol_error(method, headers, requested, self._required)
        if error is not None:
            await self.abort_context(error, context)
        assert principal is not None
        handler = self._kernel.request_handler
        # The request as JSON feeds the input decoders and permission answers of iac-code runtimes;
        # a brought-in a2a-sdk executor reads neither.
        raw = message_to_json(request) if method in MESSAGE_METHODS and getattr(
            handler, "turn_ends_in_input_required", True) else None
        return AdmittedCall(principal, method, headers, requested, raw)

    async def GetTask(self, request: Any, context: aio.ServicerContext) -> Any:  # noqa: N802 (gRPC method name)
        """GetTask straight to the request handler, without the SDK handler's per-call layers: the most
        frequent read, where grpcio's own call machinery leaves little else to save. Same errors and status
        mapping as the other RPCs.

        Admission depends only on the call metadata and the server's settings, so metadata admitted once
        (same credentials, version and extensions) skips it next time, and a task held in memory with
        nothing on its way to disk is answered without a coroutine hop; anything else takes the full path.
        """
        metadata = context.invocation_metadata()
        projection = getattr(self._kernel, "projection", None)
        projected = projection is not None and projection.enabled()
        reader = None if tracing.enabled() or projected else self._known.get(metadata)
        if reader is not None:
            peek = getattr(self._kernel.request_handler, "peek_task", None)
            task = peek(request, reader) if peek is not None else None
            if task is not None:
                return task
        with tracing.method_span("GetTask", lambda: read_metadata(context)[0], "grpc"):
            call = await self.admission("GetTask", request, context)
            reader = self._reader(call.principal)
            try:
                task = await self._kernel.request_handler.get_task_shared(request, reader)
            except A2AError as error:
                await self.abort_context(error, context)
            except aio.AbortError:
                raise
            except Exception:
                logger.exception("Unhandled error in gRPC GetTask")
                await self.abort_context(InternalError(message=INTERNAL_TEXT), context)
            else:
                if len(self._known) >= KNOWN_METADATA:
                    self._known.clear()
                self._known[metadata] = reader
                return await _projected(self._kernel, request, task) if projected else task
            raise AssertionError("not reached: abort raises")

    async def abort_context(self, error: A2AError, context: aio.ServicerContext) -> None:
        """a2a-sdk's status mapping, except where it departs from the A2A 1.0 table (§5.4: these three
        are ``UNIMPLEMENTED``, the SDK says ``FAILED_PRECONDITION``); same ``ErrorInfo`` details."""
        code = SPEC_STATUS.get(type(error))
        if code is None:
            await super().abort_context(error, context)
            return
        status = status_pb2.Status(code=code.value[0], message=error.message)
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=A2A_ERROR_REASONS.get(type(error), "UNKNOWN_ERROR"),
                                                domain=ERROR_DOMAIN))
        status.details.append(detail)
        rich = status_to_grpc(status)
        context.set_trailing_metadata((*(context.trailing_metadata() or ()), *rich.trailing_metadata))
        await context.abort(rich.code, rich.details)

    SendMessage = _unary("SendMessage")
    ListTasks = _unary("ListTasks")
    CancelTask = _unary("CancelTask")
    CreateTaskPushNotificationConfig = _unary("CreateTaskPushNotificationConfig")
    GetTaskPushNotificationConfig = _unary("GetTaskPushNotificationConfig")
    ListTaskPushNotificationConfigs = _unary("ListTaskPushNotificationConfigs")
    DeleteTaskPushNotificationConfig = _unary("DeleteTaskPushNotificationConfig")
    GetExtendedAgentCard = _unary("GetExtendedAgentCard")
    SendStreamingMessage = _stream("SendStreamingMessage")
    SubscribeToTask = _stream("SubscribeToTask")


def _address_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _read_pem(key: str, path: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise StartupError(f"Cannot read the '{key}' file: {exc.strerror or type(exc).__name__}.") from None


def server_credentials(config: Any, host: str) -> grpc.ServerCredentials | None:
    """TLS credentials from ``grpc-tls-cert``/``grpc-tls-key``; ``None`` for plaintext, refused on a
    non-loopback ``host`` unless ``grpc-insecure`` is set (shared by every gRPC transport)."""
    cert = str(getattr(config, "grpc_tls_cert", "") or "")
    key = str(getattr(config, "grpc_tls_key", "") or "")
    if bool(cert) != bool(key):
        raise StartupError("gRPC TLS needs both 'grpc-tls-cert' and 'grpc-tls-key'; only one is set.")
    if cert:
        chain, private_key = _read_pem("grpc-tls-cert", cert), _read_pem("grpc-tls-key", key)
        if b"-----BEGIN" not in chain or b"-----BEGIN" not in private_key:
            raise StartupError("'grpc-tls-cert' and 'grpc-tls-key' must be PEM files.")
        return grpc.ssl_server_credentials([(private_key, chain)])
    if not is_loopback(host):
        if not getattr(config, "grpc_insecure", False):
            raise StartupError(plaintext_refused(host))
        logger.warning("grpc-insecure: serving gRPC without TLS on the non-loopback address %s", host)
    return None


async def bind_and_start(server: aio.Server, host: str, port: int, credentials: grpc.ServerCredentials | None,
                         what: str) -> int:
    """Bind ``server`` to ``host:port`` (TLS with ``credentials``) and start it; the bound port.

    A port that cannot be bound stops start-up with one line naming ``what`` and the address.
    """
    address = f"{_address_host(host)}:{port}"
    try:
        bound = (server.add_secure_port(address, credentials) if credentials is not None
                 else server.add_insecure_port(address))
    except RuntimeError:
        bound = 0
    if not bound:
        await server.stop(None)
        raise StartupError(f"Cannot bind the {what} to {address}.")
    await server.start()
    return int(bound)


class GrpcTransport:
    """Serves the kernel over the official A2A gRPC binding; one instance per running server."""

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel
        self._server: aio.Server | None = None

    def _credentials(self, host: str) -> grpc.ServerCredentials | None:
        return server_credentials(self.kernel.config, host)

    async def start(self) -> list[InterfaceInfo]:
        config = self.kernel.config
        host = str(getattr(config, "grpc_host", "") or config.host).strip()
        port = int(getattr(config, "grpc_port", 50051))
        credentials = self._credentials(host)
        server = aio.server(options=[
            ("grpc.max_receive_message_length", config.max_request_bytes),
            ("grpc.so_reuseport", 0),  # a port in use is a start-up error, not a shared listener
        ])
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(KernelGrpcHandler(self.kernel), server)
        bound = await bind_and_start(server, host, port, credentials, "gRPC transport")
        self._server = server
        logger.info("gRPC transport bound to %s:%s (%s)", host, bound, "TLS" if credentials else "plaintext")
        return [InterfaceInfo(url=f"{_address_host(host)}:{bound}", protocol_binding=PROTOCOL_BINDING,
                              protocol_version="1.0")]

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(STOP_GRACE_SECONDS)
