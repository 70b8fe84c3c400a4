"""The ``grpc-jsonrpc`` transport: JSON-RPC objects carried in ``JsonRpcEnvelope`` messages over gRPC.

Wire contract: ``a2a_jsonrpc.proto`` (service ``iac_code.a2a.transports.proto.A2AJsonRpc``). This
transport only frames; every envelope's payload goes through :func:`iac_code.protocol.framing.serve_frame`
(size limit, authentication, the kernel's one dispatcher), with the call metadata as the channel
headers (read as the official ``grpc`` transport reads them).

* ``Send``: one envelope in, the JSON-RPC response in one envelope (``final=false``). A streaming
  method (``SendStreamingMessage``, ``SubscribeToTask``) of an authenticated caller is refused
  before dispatch with ``-32600`` "Use Stream for streaming methods" (dispatching it would start
  the turn).
* A payload that is not a JSON-RPC request object (a ``method`` that is a list ...) is answered
  like on every transport (``-32600``/``-32700``, :mod:`iac_code.protocol.framing`), never with a gRPC
  status.
* ``Stream``: one envelope per JSON-RPC response of the stream (``final=false``), then the
  terminator :func:`~iac_code.protocol.framing.final_marker` with ``final=true``. An answer that is not a
  stream (an error before the first event, or a unary method) is sent as one ``final=true``
  envelope (the reference implementation dropped a unary method's answer).
* A caller the authenticator refuses ends ``UNAUTHENTICATED`` "Unauthorized" (as over ``grpc``).
* A client that cancels a ``Stream`` only stops the stream; the turn keeps running.
* Host, TLS and the non-loopback plaintext rule as the ``grpc`` transport; the port is
  ``grpc-jsonrpc-port``, else ``grpc-port``, else (both gRPC transports configured) 50052.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import grpc
from grpc import aio

from iac_code.api import (
    UNAUTHORIZED,
    InterfaceInfo,
    dumps,
    error_response,
    final_marker,
    peek,
    serve_frame,
)
from iac_code_transport_grpc.a2a_jsonrpc_bindings import JsonRpcEnvelope, generic_handler
from iac_code_transport_grpc.server import (
    STOP_GRACE_SECONDS,
    UNAUTHENTICATED_TEXT,
    _address_host,
    bind_and_start,
    read_metadata,
    server_credentials,
)

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

TRANSPORT = "grpc-jsonrpc"
PROTOCOL_BINDING = "grpc-jsonrpc"
SCHEME = "grpc-jsonrpc"
SHARED_DEFAULT_PORT = 50052  # when the official grpc transport holds grpc-port in the same process
ENVELOPE_OVERHEAD_BYTES = 1024  # protobuf framing around a payload of max-request-bytes
USE_STREAM = {"code": -32600, "message": "Use Stream for streaming methods"}
INTERNAL = {"code": -32603, "message": "Internal error"}


def envelope(frame: Mapping[str, Any], *, final: bool) -> Any:
    """One ``JsonRpcEnvelope`` holding ``frame`` as compact UTF-8 JSON."""
    return JsonRpcEnvelope(payload=dumps(frame), final=final)


def jsonrpc_port(kernel: PluginContext) -> int:
    """The port to bind: ``grpc-jsonrpc-port``; unset, ``grpc-port`` unless the ``grpc`` transport uses it."""
    config = kernel.config
    explicit = getattr(config, "grpc_jsonrpc_port", None)
    if explicit is not None:
        return int(explicit)
    if "grpc" in kernel.transport_names:
        return SHARED_DEFAULT_PORT
    return int(getattr(config, "grpc_port", 50051))


class JsonRpcEnvelopeService:
    """The ``A2AJsonRpc`` RPCs over :func:`serve_frame`."""

    def __init__(self, kernel: PluginContext) -> None:
        self._kernel = kernel

    async def _answer(self, payload: bytes, context: aio.ServicerContext, *, unary: bool) -> Any:
        """serve_frame's answer to one payload; a refused caller aborts the call ``UNAUTHENTICATED``.

        ``unary`` (``Send``): a streaming method is refused with ``USE_STREAM`` once the caller is
        authenticated, before dispatch (dispatching it would start the turn)."""
        headers, _ = read_metadata(context)
        answer = await serve_frame(self._kernel, payload, transport=TRANSPORT, channel_headers=headers,
                                   stream_refusal=USE_STREAM if unary else None)
        if isinstance(answer, dict) and answer.get("error") == UNAUTHORIZED:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_TEXT)
        return answer

    async def send(self, request: Any, context: aio.ServicerContext) -> Any:
        """``Send``: one JSON-RPC request, its response (``final=false``)."""
        payload = bytes(request.payload)
        request_id = peek(payload, self._kernel.config.max_request_bytes).request_id
        try:
            answer = await self._answer(payload, context, unary=True)
        except aio.AbortError:
            raise
        except Exception:
            logger.exception("Unhandled error in grpc-jsonrpc Send")
            return envelope(error_response(request_id, INTERNAL), final=False)
        if not isinstance(answer, dict):  # not reached (streaming methods are refused above)
            await _aclose(answer)
            return envelope(error_response(request_id, USE_STREAM), final=False)
        return envelope(answer, final=False)

    async def stream(self, request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
        """``Stream``: one envelope per response of the stream, then the terminator (``final=true``)."""
        payload = bytes(request.payload)
        request_id = peek(payload, self._kernel.config.max_request_bytes).request_id
        try:
            answer = await self._answer(payload, context, unary=False)
        except aio.AbortError:
            raise
        except Exception:
            logger.exception("Unhandled error in grpc-jsonrpc Stream")
            yield envelope(error_response(request_id, INTERNAL), final=True)
            return
        if isinstance(answer, dict):  # an error before the first event, or a unary method's answer
            yield envelope(answer, final=True)
            return
        try:
            async for frame in answer:
                yield envelope(frame, final=False)
            yield envelope(final_marker(request_id), final=True)
        except Exception:  # the dispatcher frames its own failures; this would be a framing bug
            logger.exception("Unhandled error while streaming grpc-jsonrpc")
            yield envelope(error_response(request_id, INTERNAL), final=True)
        finally:  # also on client cancellation: stop reading; the turn itself is not canceled
            await _aclose(answer)


async def _aclose(stream: Any) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class GrpcJsonRpcTransport:
    """Serves the kernel as JSON-RPC envelopes over gRPC; one instance per running server."""

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel
        self._server: aio.Server | None = None

    async def start(self) -> list[InterfaceInfo]:
        """Bind and start; the interface advertises the bound port."""
        config = self.kernel.config
        host = str(getattr(config, "grpc_host", "") or config.host).strip()
        port = jsonrpc_port(self.kernel)
        credentials = server_credentials(config, host)
        server = aio.server(options=[
            ("grpc.max_receive_message_length", config.max_request_bytes + ENVELOPE_OVERHEAD_BYTES),
            ("grpc.so_reuseport", 0),  # a port in use is a start-up error, not a shared listener
        ])
        service = JsonRpcEnvelopeService(self.kernel)
        server.add_generic_rpc_handlers((generic_handler(service.send, service.stream),))
        bound = await bind_and_start(server, host, port, credentials, "gRPC JSON-RPC transport")
        self._server = server
        logger.info("gRPC JSON-RPC transport bound to %s:%s (%s)", host, bound, "TLS" if credentials else "plaintext")
        return [InterfaceInfo(url=f"{SCHEME}://{_address_host(host)}:{bound}", protocol_binding=PROTOCOL_BINDING)]

    async def stop(self) -> None:
        """Stop serving (in-flight calls get a short grace)."""
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(STOP_GRACE_SECONDS)
