"""A scripted OpenAI-compatible chat-completions server, for testing an LLM agent runtime over real HTTP.

The stub is a real aiohttp server on ``127.0.0.1`` (ephemeral port). Each ``POST {base_url}/chat/completions``
is recorded and answered with the next scripted :class:`Reply`: an SSE stream, an HTTP error, or a hang.

Example::

    gate = asyncio.Event()
    async with OpenAIStub([
        Reply.stream([reasoning_chunk("thinking"), text_chunk("Hello"), finish_chunk("stop"), usage_chunk(10, 2)]),
        Reply.stream([*tool_call_chunks(0, "call_1", "read_file", '{"path": "main.tf"}'), finish_chunk("tool_calls")]),
        Reply.error(429, headers={"Retry-After": "1"}),
        Reply.stream([text_chunk("partial")], gate=gate),  # waits after one chunk until gate.set()
        Reply.hang(),                                        # never answers: for timeouts
    ]) as stub:
        runtime = make_runtime(base_url=stub.base_url, api_key="sk-test")
        ...
        assert stub.requests[0].body["model"] == "qwen-plus"
        assert stub.requests[0].headers["Authorization"] == "Bearer sk-test"
        await asyncio.wait_for(stub.disconnected.wait(), 5)  # after the runtime cancelled a gated stream

A request that arrives when no scripted reply is left gets HTTP 500 ``{"error": {"message": "stub: no scripted reply"}}``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

__all__ = [
    "OpenAIStub",
    "Recorded",
    "Reply",
    "finish_chunk",
    "reasoning_chunk",
    "text_chunk",
    "tool_call_chunks",
    "usage_chunk",
]

STUB_MODEL = "stub-model"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass
class Recorded:
    """One request the stub received."""

    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Reply:
    """One scripted answer to one request; build it with :meth:`stream`, :meth:`error` or :meth:`hang`."""

    kind: Literal["stream", "error", "hang"]
    chunks: list[dict[str, Any] | str] = field(default_factory=list)
    done: bool = True
    gate: asyncio.Event | None = None
    gate_after: int = 1
    status: int = 200
    body: dict[str, Any] | str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def stream(
        chunks: list[dict[str, Any] | str], *, done: bool = True, gate: asyncio.Event | None = None, gate_after: int = 1
    ) -> Reply:
        """An SSE stream: dict chunks as JSON, str chunks raw; ``data: [DONE]`` at the end if ``done``.

        With ``gate``, the server sends ``gate_after`` chunks, then waits for ``gate`` before sending the rest.
        """
        return Reply("stream", chunks=list(chunks), done=done, gate=gate, gate_after=gate_after)

    @staticmethod
    def error(status: int, body: dict[str, Any] | str | None = None, headers: dict[str, str] | None = None) -> Reply:
        """A plain HTTP error; by default an OpenAI-style JSON body ``{"error": {"message", "type"}}``."""
        if body is None:
            body = {"error": {"message": f"stub error {status}", "type": _ERROR_TYPES.get(status, "api_error")}}
        return Reply("error", status=status, body=body, headers=dict(headers or {}))

    @staticmethod
    def hang() -> Reply:
        """Accept the request and never answer (until the client goes away or the stub stops)."""
        return Reply("hang")


def _chunk(delta: dict[str, Any], finish_reason: str | None = None, *, model: str = STUB_MODEL) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_chunk(text: str, *, model: str = STUB_MODEL) -> dict[str, Any]:
    """A content delta."""
    return _chunk({"content": text}, model=model)


def reasoning_chunk(text: str, *, model: str = STUB_MODEL) -> dict[str, Any]:
    """A reasoning delta, as DashScope and vLLM send it (``delta.reasoning_content``)."""
    return _chunk({"reasoning_content": text}, model=model)


def tool_call_chunks(
    index: int, call_id: str, name: str, arguments: str, pieces: int = 3, *, model: str = STUB_MODEL
) -> list[dict[str, Any]]:
    """A tool call: a header chunk (id, type, name, empty arguments), then ``arguments`` in ``pieces`` parts."""
    head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    out = [_chunk({"tool_calls": [head]}, model=model)]
    size, extra = divmod(len(arguments), max(1, pieces))
    start = 0
    for i in range(max(1, pieces)):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            part = {"index": index, "function": {"arguments": arguments[start:end]}}
            out.append(_chunk({"tool_calls": [part]}, model=model))
        start = end
    return out


def finish_chunk(reason: str, *, model: str = STUB_MODEL) -> dict[str, Any]:
    """An empty delta carrying ``finish_reason`` ("stop", "tool_calls", "length", ...)."""
    return _chunk({}, reason, model=model)


def usage_chunk(prompt_tokens: int, completion_tokens: int, *, model: str = STUB_MODEL) -> dict[str, Any]:
    """The final usage chunk OpenAI sends with ``stream_options.include_usage`` (no choices)."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class OpenAIStub:
    """The scripted server; use it as ``async with OpenAIStub([...]) as stub``."""

    def __init__(self, replies: list[Reply] | None = None) -> None:
        self.base_url = ""
        self.requests: list[Recorded] = []
        self.disconnected = asyncio.Event()
        self._replies: deque[Reply] = deque(replies or [])
        self._stop = asyncio.Event()
        self._runner: web.AppRunner | None = None

    def add(self, *replies: Reply) -> None:
        """Append more scripted replies."""
        self._replies.extend(replies)

    async def __aenter__(self) -> OpenAIStub:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        # handler_cancellation: aiohttp cancels the handler when the client disconnects (opt-in since 3.9).
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()  # releases every gated or hanging handler
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = {"_raw": await request.text()}
        self.requests.append(Recorded(headers=dict(request.headers), body=body if isinstance(body, dict) else {"_raw": body}))
        if not self._replies:
            return web.json_response({"error": {"message": "stub: no scripted reply"}}, status=500)
        reply = self._replies.popleft()
        try:
            if reply.kind == "error":
                if isinstance(reply.body, str):
                    return web.Response(status=reply.status, text=reply.body, headers=reply.headers)
                return web.json_response(reply.body, status=reply.status, headers=reply.headers)
            if reply.kind == "hang":
                await self._wait(request, None)
                return web.Response(status=503, text="stub stopped")
            return await self._stream(request, reply)
        except asyncio.CancelledError:
            if not self._stop.is_set():
                self.disconnected.set()
            raise

    async def _stream(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            for i, chunk in enumerate(reply.chunks):
                if reply.gate is not None and i == reply.gate_after and not await self._wait(request, reply.gate):
                    return resp
                await resp.write(_event(chunk))
            if reply.gate is not None and reply.gate_after >= len(reply.chunks) and not await self._wait(request, reply.gate):
                return resp
            if reply.done:
                await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:
            self.disconnected.set()
        return resp

    async def _wait(self, request: web.Request, gate: asyncio.Event | None) -> bool:
        """Wait for ``gate`` (or forever if None); False if the stub stopped or the client went away meanwhile."""

        async def client_gone() -> None:
            # A fallback for handler cancellation: notice the transport closing.
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.02)

        waiters = {asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(client_gone())}
        opened = asyncio.ensure_future(gate.wait()) if gate is not None else None
        if opened is not None:
            waiters.add(opened)
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        if self._stop.is_set():
            return False
        if opened is not None and opened.done() and not opened.cancelled():
            return True
        self.disconnected.set()
        return False


def _event(chunk: dict[str, Any] | str) -> bytes:
    data = chunk if isinstance(chunk, str) else json.dumps(chunk, separators=(",", ":"))
    return f"data: {data}\n\n".encode()
