"""A client of the ``grpc-jsonrpc`` transport (``iac_code.a2a.transports.proto.A2AJsonRpc``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc
from grpc import aio

from iac_code.api import jsonio
from iac_code_transport_grpc.a2a_jsonrpc_bindings import SEND_PATH, STREAM_PATH, JsonRpcEnvelope

SCHEME_PREFIX = "grpc-jsonrpc://"


def _target(target: str) -> str:
    """``host:port`` from ``host:port`` or an advertised ``grpc-jsonrpc://host:port`` URL."""
    return target[len(SCHEME_PREFIX):] if target.startswith(SCHEME_PREFIX) else target


def _decode(message: Any) -> dict[str, Any]:
    payload = jsonio.loads(bytes(message.payload))
    if not isinstance(payload, dict):
        raise ValueError("gRPC A2A envelope must contain a JSON object")
    return payload


class GrpcJsonRpcClient:
    """JSON-RPC over ``grpc-jsonrpc``: :meth:`request` (``Send``) and :meth:`stream` (``Stream``).

    ``metadata`` is sent on every call; ``headers`` of one call are added to it as lower-case
    metadata keys (``{"Authorization": "Bearer t"}`` → ``authorization``). Pass ``credentials``
    for a TLS channel. A refused call raises :class:`grpc.aio.AioRpcError` (``UNAUTHENTICATED``).
    """

    def __init__(self, target: str, metadata: Sequence[tuple[str, str]] = (), *,
                 credentials: grpc.ChannelCredentials | None = None,
                 options: Sequence[tuple[str, Any]] | None = None) -> None:
        address = _target(target)
        self._channel = (aio.secure_channel(address, credentials, options=options) if credentials is not None
                         else aio.insecure_channel(address, options=options))
        self._metadata = tuple((key.lower(), value) for key, value in metadata)
        self._send = self._channel.unary_unary(
            SEND_PATH, request_serializer=JsonRpcEnvelope.SerializeToString, response_deserializer=JsonRpcEnvelope.FromString)
        self._stream = self._channel.unary_stream(
            STREAM_PATH, request_serializer=JsonRpcEnvelope.SerializeToString, response_deserializer=JsonRpcEnvelope.FromString)

    def _call_metadata(self, headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
        return (*self._metadata, *((str(k).lower(), str(v)) for k, v in (headers or {}).items()))

    async def request(self, payload: Mapping[str, Any], *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one JSON-RPC request (``Send``); its JSON-RPC response."""
        reply = await self._send(JsonRpcEnvelope(payload=jsonio.dumps(payload)), metadata=self._call_metadata(headers))
        return _decode(reply)

    async def stream(self, payload: Mapping[str, Any], *,
                     headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send one JSON-RPC request over ``Stream``; yield each JSON-RPC response, not the terminator.

        A final envelope with a ``result`` or an ``error`` (an error before the first event, a unary
        method's answer) is yielded. Closing the iterator early cancels the call.
        """
        call = self._stream(JsonRpcEnvelope(payload=jsonio.dumps(payload)), metadata=self._call_metadata(headers))
        try:
            async for message in call:
                frame = _decode(message)
                if not message.final or "result" in frame or "error" in frame:
                    yield frame
                if message.final:
                    return
        finally:
            call.cancel()

    async def aclose(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def __aenter__(self) -> GrpcJsonRpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
