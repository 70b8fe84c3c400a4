"""Self-test of the scripted OpenAI-compatible stub, over real HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.openai_stub import (
    OpenAIStub,
    Reply,
    finish_chunk,
    reasoning_chunk,
    text_chunk,
    tool_call_chunks,
    usage_chunk,
)

REQUEST = {"model": "qwen-plus", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def read_sse(resp: aiohttp.ClientResponse) -> list[Any]:
    """Parse ``data:`` lines; JSON payloads become dicts, ``[DONE]`` stays a string."""
    events: list[Any] = []
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


async def test_stream_text_tool_call_usage_and_recording() -> None:
    chunks = [
        reasoning_chunk("think"),
        text_chunk("Hel"),
        text_chunk("lo"),
        *tool_call_chunks(0, "call_1", "read_file", '{"path": "main.tf"}', pieces=3),
        finish_chunk("tool_calls"),
        usage_chunk(12, 5),
    ]
    async with OpenAIStub([Reply.stream(chunks)]) as stub, aiohttp.ClientSession() as http:
        assert stub.base_url.startswith("http://127.0.0.1:") and stub.base_url.endswith("/v1")
        async with http.post(
            f"{stub.base_url}/chat/completions", json=REQUEST, headers={"Authorization": "Bearer sk-test"}
        ) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            events = await read_sse(resp)

    assert events[-1] == "[DONE]"
    parsed = events[:-1]
    assert parsed == chunks
    assert parsed[0]["choices"][0]["delta"] == {"reasoning_content": "think"}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in parsed if c["choices"])
    assert text == "Hello"
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0] for c in parsed if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert calls[0] == {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    assert len(calls) == 4
    assert "".join(c["function"]["arguments"] for c in calls) == '{"path": "main.tf"}'
    assert parsed[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert parsed[-1]["choices"] == []
    assert parsed[-1]["usage"] == {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}

    assert len(stub.requests) == 1
    assert stub.requests[0].body == REQUEST
    assert stub.requests[0].headers["Authorization"] == "Bearer sk-test"


async def test_malformed_and_truncated_stream() -> None:
    async with OpenAIStub([Reply.stream([text_chunk("a"), "{not json"], done=False)]) as stub, aiohttp.ClientSession() as http:
        async with http.post(f"{stub.base_url}/chat/completions", json=REQUEST) as resp:
            lines = [raw.decode() async for raw in resp.content]
    assert "data: {not json\n" in lines
    assert not any("[DONE]" in line for line in lines)


async def test_error_429_with_retry_after() -> None:
    async with OpenAIStub() as stub, aiohttp.ClientSession() as http:
        stub.add(Reply.error(429, headers={"Retry-After": "2"}))
        async with http.post(f"{stub.base_url}/chat/completions", json=REQUEST) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "2"
            body = await resp.json()
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["message"]


async def test_gated_stream_notices_client_disconnect() -> None:
    gate = asyncio.Event()
    reply = Reply.stream([text_chunk("first"), text_chunk("second")], gate=gate, gate_after=1)
    async with OpenAIStub([reply]) as stub, aiohttp.ClientSession() as http:
        resp = await http.post(f"{stub.base_url}/chat/completions", json=REQUEST)
        first = await resp.content.readuntil(b"\n\n")
        assert json.loads(first.decode()[len("data: ") :]) == text_chunk("first")
        assert not stub.disconnected.is_set()
        resp.close()  # drop the connection while the server waits on the gate
        await asyncio.wait_for(stub.disconnected.wait(), timeout=5)


async def test_gate_release_sends_the_rest() -> None:
    gate = asyncio.Event()
    reply = Reply.stream([text_chunk("first"), text_chunk("second")], gate=gate)
    async with OpenAIStub([reply]) as stub, aiohttp.ClientSession() as http:
        async with http.post(f"{stub.base_url}/chat/completions", json=REQUEST) as resp:
            await resp.content.readuntil(b"\n\n")
            gate.set()
            events = await read_sse(resp)
    assert events == [text_chunk("second"), "[DONE]"]
    assert not stub.disconnected.is_set()


async def test_hang_is_released_on_stop() -> None:
    async with aiohttp.ClientSession() as http:
        async with OpenAIStub([Reply.hang()]) as stub:
            post = asyncio.ensure_future(http.post(f"{stub.base_url}/chat/completions", json=REQUEST))
            done, _ = await asyncio.wait({post}, timeout=0.3)
            assert not done, "hang() answered"
        # stopping the stub released the handler: the pending request ends promptly, one way or another
        try:
            (await asyncio.wait_for(post, timeout=5)).close()
        except aiohttp.ClientError:
            pass
    assert len(stub.requests) == 1
    assert not stub.disconnected.is_set()


async def test_no_scripted_reply_is_500_and_recorded() -> None:
    async with OpenAIStub() as stub, aiohttp.ClientSession() as http:
        async with http.post(f"{stub.base_url}/chat/completions", json=REQUEST) as resp:
            assert resp.status == 500
            assert await resp.json() == {"error": {"message": "stub: no scripted reply"}}
    assert len(stub.requests) == 1
