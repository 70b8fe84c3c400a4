"""a2a-sdk's JSON-RPC client transport over a custom transport's :class:`JsonRpcChannel`.

The SDK's ``JsonRpcTransport`` builds every request, maps JSON-RPC errors to its typed
errors and parses results; only the framing differs per transport, so this subclass
replaces its two framing methods (``_send_request``, ``_send_stream_request``) with calls
on a channel that a transport plugin's ``TransportSpec.connect`` opens on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import Any

import httpx
from a2a.client.client import ClientCallContext, ClientConfig
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import AgentCard, StreamResponse
from a2a.utils.proto_utils import parse_lenient

from iac_code.api import ClientTarget, JsonRpcChannel

Connect = Callable[[ClientTarget], Awaitable[JsonRpcChannel]]


class ChannelUnavailableError(A2AClientError):
    """The channel could not be opened or broke (refused, closed, unreachable)."""


@contextlib.contextmanager
def _as_client_errors() -> Iterator[None]:
    """A channel's own failures as the SDK's client errors (a timeout, or the connection is unusable)."""
    try:
        yield
    except (A2AClientError, StopAsyncIteration):
        raise
    except TimeoutError as exc:
        raise A2AClientTimeoutError("Client Request timed out") from exc
    except Exception as exc:
        raise ChannelUnavailableError(f"Network communication error: {type(exc).__name__}") from exc


class ChannelTransport(JsonRpcTransport):
    """JSON-RPC over a :class:`JsonRpcChannel`; ``target`` carries the headers sent on every call."""

    def __init__(self, card: AgentCard, target: ClientTarget, connect: Connect) -> None:
        # The SDK's transport keeps an httpx client for HTTP framing; ours never uses it.
        super().__init__(httpx.AsyncClient(), card, target.url)
        self.target = target
        self._connect = connect
        self._channel: JsonRpcChannel | None = None
        self._lock = asyncio.Lock()

    async def _open(self) -> JsonRpcChannel:
        async with self._lock:
            if self._channel is None:
                with _as_client_errors():
                    self._channel = await asyncio.wait_for(self._connect(self.target), self.target.timeout)
            return self._channel

    def _headers(self, context: ClientCallContext | None) -> dict[str, str]:
        headers = {"A2A-Version": "1.0", **self.target.headers}
        if context is not None and context.service_parameters:
            headers.update(context.service_parameters)
        return headers

    @staticmethod
    def _timeout(context: ClientCallContext | None, default: float | None) -> float | None:
        return context.timeout if context is not None and context.timeout is not None else default

    async def _send_request(self, payload: dict[str, Any],
                            context: ClientCallContext | None = None) -> dict[str, Any]:
        channel = await self._open()
        with _as_client_errors():
            reply = await asyncio.wait_for(channel.request(payload, headers=self._headers(context)),
                                           self._timeout(context, self.target.timeout))
        return self._check_jsonrpc_response(reply)

    async def _send_stream_request(self, rpc_request_payload: dict[str, Any],
                                   context: ClientCallContext | None = None) -> AsyncGenerator[StreamResponse]:
        channel = await self._open()
        frames = channel.stream(rpc_request_payload, headers=self._headers(context))
        try:
            while True:
                try:
                    with _as_client_errors():
                        frame = await anext(frames)
                except StopAsyncIteration:
                    return
                response = self._check_jsonrpc_response(frame)
                yield parse_lenient(response["result"], StreamResponse())
        finally:
            close = getattr(frames, "aclose", None)
            if close is not None:
                await close()

    async def close(self) -> None:
        await self.httpx_client.aclose()
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.aclose()


def producer(connect: Connect, headers: dict[str, str], timeout: float | None,
             options: dict[str, Any]) -> Callable[[AgentCard, str, ClientConfig], ChannelTransport]:
    """A ``ClientFactory.register`` producer building a :class:`ChannelTransport` for the chosen interface."""

    def produce(card: AgentCard, url: str, config: ClientConfig) -> ChannelTransport:
        return ChannelTransport(card, ClientTarget(url=url, headers=headers, timeout=timeout, options=options),
                                connect)

    return produce
