"""``metadata.iac_code.llm_headers`` and the usage fields (issue 37, since-0.13 §11), end to end.

Our server with ``agent-runtime: llm`` against the scripted OpenAI-compatible stub: the headers
a caller sets reach every provider call of the context from then on (also when sent on a
permission answer, for the rest of that turn), ``{}`` clears them, invalid entries are skipped,
the runtime's own headers are never replaced, and the key is never stored, echoed or logged.
The final usage carries ``provider``, ``model`` and ``cachedInputTokens``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import A2A_HEADERS, permission_answer_body, permission_envelope, start_server
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks, usage_chunk

SERVER_KEY = "sk-server-key-0123456789"
SECRET_VALUE = "gw-secret-7f3a9c"


def _settings(stub: OpenAIStub) -> dict[str, Any]:
    return {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": SERVER_KEY, "llm-timeout": 5,
            "llm-retry-backoff": 0.01}


def _body(text: str, context_id: str, *, method: str = "SendMessage", **iac_code: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}],
                               "contextId": context_id}
    if iac_code:
        message["metadata"] = {"iac_code": iac_code}
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": {"message": message}}


async def _task(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body, headers=A2A_HEADERS) as response:
        reply = await response.json()
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result["task"] if body["method"] == "SendMessage" else result


def _said(reply: str) -> Reply:
    return Reply.stream([text_chunk(reply), finish_chunk("stop")])


def _sent(stub: OpenAIStub, index: int) -> dict[str, str]:
    """The headers of the stub's ``index``-th request, names lower-cased."""
    return {k.lower(): v for k, v in stub.requests[index].headers.items()}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_headers_last_for_the_context_until_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           http: aiohttp.ClientSession,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    given = {
        "X-Gateway-Tenant": "first", "x-gateway-tenant": SECRET_VALUE,  # names are case-insensitive: the last wins
        "  X-Trimmed  ": "kept", "X-Tab": "a\tb",
        "Bad Name": "space in the name", "X-Newline": "a\r\nInjected: yes", "X-Unicode": "café",
        "X-Long": "v" * 8193, "X-Number": 5, "": "empty", "X-" + "n" * 255: "name too long",
        "Authorization": "Bearer hijack", "Content-Type": "text/plain",  # the runtime's own: never replaced
    }
    async with OpenAIStub([_said("one"), _said("two"), _said("three"), _said("four"), _said("five")]) as stub, \
            start_server(_settings(stub)) as server:
        first = await _task(http, server.url, _body("hello", "ctx-h", llm_headers=given))
        await _task(http, server.url, _body("again", "ctx-h"))  # absent: kept
        await _task(http, server.url, _body("once more", "ctx-h", llm_headers="not an object"))  # kept too
        await _task(http, server.url, _body("other context", "ctx-other"))
        await _task(http, server.url, _body("clear", "ctx-h", llm_headers={}))
        stored = await _task(http, server.url, {"jsonrpc": "2.0", "id": 9, "method": "GetTask",
                                                 "params": {"id": first["id"]}})
    for index in range(3):
        sent = _sent(stub, index)
        assert sent["x-gateway-tenant"] == SECRET_VALUE and sent["x-trimmed"] == "kept" and sent["x-tab"] == "a\tb"
        assert sent["authorization"] == f"Bearer {SERVER_KEY}" and sent["content-type"] == "application/json"
        assert not {"bad name", "x-newline", "injected", "x-unicode", "x-long", "x-number"} & set(sent)
        assert not any(name.startswith("x-nnn") for name in sent)
    assert "x-gateway-tenant" not in _sent(stub, 3)  # another context has its own headers
    assert "x-gateway-tenant" not in _sent(stub, 4) and "x-trimmed" not in _sent(stub, 4)  # {} cleared them
    for task in (first, stored):
        text = json.dumps(task)
        assert "llm_headers" not in text and SECRET_VALUE not in text  # never stored nor echoed
    assert SECRET_VALUE not in caplog.text and "llm_headers" not in caplog.text  # never logged


async def test_at_most_64_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    many = {f"X-H-{n:03d}": str(n) for n in range(80)}
    async with OpenAIStub([_said("ok")]) as stub, start_server(_settings(stub)) as server:
        await _task(http, server.url, _body("hello", "ctx-many", llm_headers=many))
    sent = [name for name in _sent(stub, 0) if name.startswith("x-h-")]
    assert len(sent) == 64 and "x-h-000" in sent and "x-h-064" not in sent


async def test_headers_sent_on_a_permission_answer_reach_the_rest_of_the_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    write = json.dumps({"path": "notes.txt", "content": "hello"})
    async with OpenAIStub([
        Reply.stream([*tool_call_chunks(0, "call-write", "write_file", write), finish_chunk("tool_calls")]),
        _said("Written."),
    ]) as stub, start_server(_settings(stub)) as server:
        paused = await _task(http, server.url, _body("write notes", "ctx-answer", llm_headers={"X-Step": "one"}))
        envelope = permission_envelope(paused)
        assert envelope is not None
        answer = permission_answer_body(envelope, "allow_once")
        answer["params"]["message"]["metadata"] = {"iac_code": {"llm_headers": {"X-Step": "two"}}}
        final = await _task(http, server.url, answer)
    assert (tmp_path / "notes.txt").read_text() == "hello"
    assert _sent(stub, 0)["x-step"] == "one" and _sent(stub, 1)["x-step"] == "two"
    assert "llm_headers" not in json.dumps(final)


async def test_usage_names_the_provider_model_and_cached_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    cached = usage_chunk(120, 8, model="qwen-plus-2025-01-25")
    cached["usage"]["prompt_tokens_details"] = {"cached_tokens": 100}
    async with OpenAIStub([Reply.stream([text_chunk("hi", model="qwen-plus-2025-01-25"), finish_chunk("stop"),
                                         cached]),
                           _said("no usage reported")]) as stub, start_server(_settings(stub)) as server:
        task = await _task(http, server.url, _body("hello", "ctx-usage"))
        bare = await _task(http, server.url, _body("hello", "ctx-usage-2"))
    assert task["metadata"]["iac_code"]["usage"] == {
        "inputTokens": 120, "outputTokens": 8, "totalTokens": 128, "provider": "openai",
        "model": "qwen-plus-2025-01-25", "cachedInputTokens": 100}
    assert "usage" not in bare["metadata"]["iac_code"]  # nothing known, nothing said
