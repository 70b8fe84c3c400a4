"""``agent-runtime: llm`` end to end: our server, the LLM runtime plugin, a scripted OpenAI-compatible server.

The provider is :class:`tests.openai_stub.OpenAIStub`, a real HTTP server on 127.0.0.1
replaying streamed chat completions (text, tool calls with streamed arguments, reasoning,
usage) and failures; the client is plain HTTP JSON-RPC with SSE, in the default
configuration (writes ask permission).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import A2A_HEADERS, parse_sse, permission_answer_body, permission_envelope, start_server
from tests.openai_stub import (
    OpenAIStub,
    Reply,
    finish_chunk,
    reasoning_chunk,
    text_chunk,
    tool_call_chunks,
    usage_chunk,
)

SERVER_KEY = "sk-server-key-0123456789"
TURN_KEY = "sk-turn-key-9876543210"
TEMPLATE = "ROSTemplateFormatVersion: '2015-09-01'\nResources:\n  Vpc:\n    Type: ALIYUN::ECS::VPC\n"
WAIT = 20.0


def _settings(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    return {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": SERVER_KEY,
            "llm-retry-backoff": 0.01, "llm-timeout": 5, **extra}


def _message(text: str, *, method: str = "SendStreamingMessage", **fields: Any) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **fields}
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": {"message": message}}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _stream(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        async with http.post(url, json=body, headers=A2A_HEADERS) as response:
            return [e["result"] for e in parse_sse(await response.text())[0]]

    return await asyncio.wait_for(read(), WAIT)


def _updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e]


def _meta(update: dict[str, Any]) -> dict[str, Any]:
    return update.get("metadata", {}).get("iac_code", {})


def _texts(events: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for u in _updates(events) if "assistantFinal" not in _meta(u)
                   for p in u["status"].get("message", {}).get("parts", []))


def _final(events: list[dict[str, Any]]) -> dict[str, Any]:
    return _updates(events)[-1]["status"]


def _status_text(status: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in status.get("message", {}).get("parts", []))


# ----------------------------------------------------------------------------- a tool-using turn


async def test_a_multi_step_turn_writes_a_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    generate = json.dumps({"request": "Create a VPC with two vSwitches"})
    write = json.dumps({"path": "vpc.ros.yaml", "content": TEMPLATE})
    async with OpenAIStub([
        Reply.stream([text_chunk("Let me generate it. "), *tool_call_chunks(0, "call-gen", "generate_template", generate),
                      finish_chunk("tool_calls"), usage_chunk(100, 20)]),
        Reply.stream([*tool_call_chunks(0, "call-write", "write_file", write, pieces=4), finish_chunk("tool_calls"),
                      usage_chunk(200, 30)]),
        Reply.stream([text_chunk("Saved "), text_chunk("vpc.ros.yaml."), finish_chunk("stop"), usage_chunk(300, 10)]),
    ]) as stub, start_server(_settings(stub)) as server:
        first = await _stream(http, server.url, _message("Make me a VPC template and save it"))
        paused = _updates(first)[-1]
        envelope = permission_envelope(paused)
        assert envelope is not None and envelope["toolName"] == "write_file" and envelope["target"] == "vpc.ros.yaml"
        assert not (tmp_path / "vpc.ros.yaml").exists()
        tools = [_meta(u)["tool"] for u in _updates(first) if "tool" in _meta(u)]
        gen = [t for t in tools if t["name"] == "generate_template"]
        assert [t["status"] for t in gen][:2] == ["started", "input_delta"] and gen[-1]["status"] == "completed"
        deltas = [t["partialJsonLength"] for t in gen if t["status"] == "input_delta"]
        assert len(deltas) == 3 and sum(deltas) == len(generate)  # the model's argument chunks, as they came
        assert gen[-1]["toolUseId"] == "call-gen"

        second = await _stream(http, server.url, permission_answer_body(envelope, method="SendStreamingMessage"))
        assert (tmp_path / "vpc.ros.yaml").read_text() == TEMPLATE
        assert any("artifactUpdate" in e for e in second)
        assert "Saved vpc.ros.yaml." in _texts(second) and "Let me generate it." in _texts(first)
        final = _updates(second)[-1]  # the turn's end carries the answer and the usage
        assert _meta(final)["usage"] == {"inputTokens": 600, "outputTokens": 60, "totalTokens": 660,
                                         "provider": "openai", "model": "stub-model"}  # no cache counts sent
        assert _final(second)["state"] == "TASK_STATE_INPUT_REQUIRED"

        assert len(stub.requests) == 3
        first_request = stub.requests[0]
        assert first_request.headers["Authorization"] == f"Bearer {SERVER_KEY}"
        assert first_request.body["model"] == "qwen-plus" and first_request.body["stream"] is True
        assert {t["function"]["name"] for t in first_request.body["tools"]} >= {
            "generate_template", "review_template", "convert_terraform", "read_file", "write_file", "aliyun_api"}
        replayed = stub.requests[1].body["messages"]
        assert replayed[-2]["tool_calls"][0]["id"] == "call-gen"
        result = json.loads(replayed[-1]["content"])
        assert replayed[-1]["tool_call_id"] == "call-gen" and "ALIYUN::ECS::VPC" in result["text"]
        written = json.loads(stub.requests[2].body["messages"][-1]["content"])
        assert written["result"]["path"] == "vpc.ros.yaml"


async def test_a_denied_permission_goes_back_to_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    write = json.dumps({"path": "main.tf", "content": "resource {}"})
    async with OpenAIStub([
        Reply.stream([*tool_call_chunks(0, "call-1", "write_file", write), finish_chunk("tool_calls")]),
        Reply.stream([text_chunk("Understood, I did not write it."), finish_chunk("stop")]),
    ]) as stub, start_server(_settings(stub)) as server:
        envelope = permission_envelope(_updates(await _stream(http, server.url, _message("write main.tf")))[-1])
        assert envelope is not None
        rest = await _stream(http, server.url, permission_answer_body(envelope, "deny", method="SendStreamingMessage"))
        assert "I did not write it" in _texts(rest) and not (tmp_path / "main.tf").exists()
        assert json.loads(stub.requests[1].body["messages"][-1]["content"]) == {"error": "permission denied"}


# ----------------------------------------------------------------------------- cancel


async def test_cancel_aborts_the_provider_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    gate = asyncio.Event()
    async with OpenAIStub([Reply.stream([text_chunk("Thinking about "), text_chunk("it...")], gate=gate)]) as stub, \
            start_server(_settings(stub)) as server:
        async with http.post(server.url, json=_message("something long"), headers=A2A_HEADERS) as response:
            task_id = ""
            async for raw in response.content:  # read until the first text delta has arrived
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                result = json.loads(line[6:])["result"]
                task_id = task_id or result.get("task", {}).get("id", "")
                if "Thinking about" in json.dumps(result):
                    break
            cancel = {"jsonrpc": "2.0", "id": "c", "method": "CancelTask", "params": {"id": task_id}}
            async with http.post(server.url, json=cancel, headers=A2A_HEADERS) as r:
                assert (await r.json())["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await asyncio.wait_for(stub.disconnected.wait(), WAIT)  # the HTTP stream to the provider was closed
        assert not gate.is_set()


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize(("replies", "state", "text", "calls"), [
    ([Reply.error(401, {"error": {"message": "Incorrect API key sk-leaked-in-body"}})],
     "TASK_STATE_FAILED", "Authentication required. Configure credentials and retry.", 1),
    ([Reply.error(500), Reply.error(503), Reply.stream([text_chunk("fine"), finish_chunk("stop")])],
     "TASK_STATE_INPUT_REQUIRED", "fine", 3),
    ([Reply.error(429, headers={"Retry-After": "0"}), Reply.stream([text_chunk("ok"), finish_chunk("stop")])],
     "TASK_STATE_INPUT_REQUIRED", "ok", 2),
    ([Reply.error(400, {"error": {"message": "secret provider detail at /srv/provider"}})],
     "TASK_STATE_FAILED", "The model provider could not answer this request (HTTP 400).", 1),
    ([Reply.stream(["{not json"])],
     "TASK_STATE_INPUT_REQUIRED", "The model provider sent an answer that could not be read. Please retry.", 1),
    ([Reply.stream([text_chunk("half an ans")], done=False)],
     "TASK_STATE_INPUT_REQUIRED", "A temporary error occurred. Please retry.", 1),
    ([Reply.error(500)] * 4, "TASK_STATE_INPUT_REQUIRED", "A temporary error occurred. Please retry.", 4),
], ids=["401", "5xx-retried", "429-retried", "400", "malformed", "truncated", "5xx-exhausted"])
async def test_provider_failures(replies: list[Reply], state: str, text: str, calls: int, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch, http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    async with OpenAIStub(replies) as stub, start_server(_settings(stub)) as server:
        events = await _stream(http, server.url, _message("hello"))
        final = _final(events)
        assert final["state"] == state
        shown = _texts(events) if state == "TASK_STATE_INPUT_REQUIRED" and text in ("fine", "ok") \
            else _status_text(final)
        assert text in shown
        assert len(stub.requests) == calls
        body = json.dumps(events)
        assert "sk-leaked" not in body and "/srv/provider" not in body and "secret provider detail" not in body


async def test_a_provider_that_never_answers_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    async with OpenAIStub([Reply.hang()]) as stub, \
            start_server(_settings(stub, **{"llm-timeout": 0.3, "llm-max-retries": 0})) as server:
        final = _final(await _stream(http, server.url, _message("hello")))
        assert final["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert _status_text(final) == "A temporary error occurred. Please retry."


async def test_missing_credentials_fail_before_any_network_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("IAC_CODE_API_KEY", raising=False)
    async with OpenAIStub([]) as stub, start_server(_settings(stub, **{"llm-api-key": ""})) as server:
        final = _final(await _stream(http, server.url, _message("hello")))
        assert final["state"] == "TASK_STATE_FAILED"
        assert _status_text(final) == "Authentication required. Configure credentials and retry."
        assert stub.requests == []


# ----------------------------------------------------------------------------- per-turn model and key


async def test_per_turn_model_and_key_never_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    async with OpenAIStub([Reply.stream([text_chunk("one"), finish_chunk("stop")]),
                           Reply.stream([text_chunk("two"), finish_chunk("stop")])]) as stub, \
            start_server(_settings(stub)) as server:
        turn = _message("hi", metadata={"iac_code": {"iac_code_model": "qwen-max", "iac_code_api_key": TURN_KEY}})
        first = await _stream(http, server.url, turn)
        context = first[0]["task"]["contextId"]
        second = await _stream(http, server.url, _message("again", contextId=context))
        assert stub.requests[0].headers["Authorization"] == f"Bearer {TURN_KEY}"
        assert stub.requests[0].body["model"] == "qwen-max"
        assert stub.requests[1].headers["Authorization"] == f"Bearer {SERVER_KEY}"  # for that turn only
        assert stub.requests[1].body["model"] == "qwen-plus"
        listed = {"jsonrpc": "2.0", "id": "l", "method": "ListTasks", "params": {"includeArtifacts": True}}
        async with http.post(server.url, json=listed, headers=A2A_HEADERS) as r:
            tasks = await r.text()
        state_dir = Path(server.kernel.state_dir)
        await server.kernel.stop()
        stored = b"".join(p.read_bytes() for p in state_dir.rglob("*") if p.is_file())
    for secret in (TURN_KEY, SERVER_KEY):
        assert secret not in json.dumps(first + second) and secret not in tasks
        assert secret.encode() not in stored
        assert not any(secret in record.getMessage() for record in caplog.records)


# ----------------------------------------------------------------------------- thinking


async def test_thinking_options_and_raw_reasoning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    reply = [reasoning_chunk("Consider the zones."), text_chunk("Use two zones."), finish_chunk("stop")]
    thinking = {"iac_code": {"thinking": {"enabled": True, "effort": "high", "budget": 2048}}}
    async with OpenAIStub([Reply.stream(reply), Reply.stream(reply), Reply.stream(reply)]) as stub:
        exposed = _settings(stub, **{"llm-provider": "dashscope", "thinking-exposure": ["tool-trace", "raw-thinking"]})
        async with start_server(exposed) as server:
            events = await _stream(http, server.url, _message("plan", metadata=thinking))
            shown = [_meta(u)["thinking"] for u in _updates(events) if "thinking" in _meta(u)]
            assert shown == [{"type": "raw_thinking", "text": "Consider the zones."}]
        assert stub.requests[0].body["enable_thinking"] is True and stub.requests[0].body["thinking_budget"] == 2048
        assert "reasoning_effort" not in stub.requests[0].body
        async with start_server(_settings(stub, **{"llm-provider": "openai"})) as server:
            events = await _stream(http, server.url, _message("plan", metadata=thinking))
            assert not any("thinking" in _meta(u) for u in _updates(events))  # raw thinking is off by default
        assert stub.requests[1].body["reasoning_effort"] == "high" and "enable_thinking" not in stub.requests[1].body
        async with start_server(_settings(stub)) as server:
            await _stream(http, server.url, _message("plan"))
        assert not {"enable_thinking", "reasoning_effort", "thinking_budget"} & set(stub.requests[2].body)


# ----------------------------------------------------------------------------- conversation state


async def test_the_conversation_survives_a_restart_and_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "state"
    big = "x" * 3_200  # about 800 tokens per prompt: two of them are over the budget
    async with OpenAIStub([Reply.stream([text_chunk(f"answer {n}"), finish_chunk("stop")]) for n in range(4)]) as stub:
        settings = _settings(stub, **{"persistence-dir": str(state), "llm-context-tokens": 1_500})
        async with start_server(settings) as server:
            first = await _stream(http, server.url, _message(f"first {big}"))
            context = first[0]["task"]["contextId"]
            await _stream(http, server.url, _message("second", contextId=context))
        async with start_server(settings) as server:  # a new process would see the same: the session is on disk
            await _stream(http, server.url, _message("third", contextId=context))
            await _stream(http, server.url, _message(f"fourth {big}", contextId=context))
        def said(n: int) -> list[str]:
            return [m["content"] for m in stub.requests[n].body["messages"] if m["role"] in ("user", "assistant")]
        assert said(1) == [f"first {big}", "answer 0", "second"]
        assert said(2) == [f"first {big}", "answer 0", "second", "answer 1", "third"]  # restored after the restart
        assert said(3) == ["second", "answer 1", "third", "answer 2", f"fourth {big}"]  # the oldest turn dropped


async def test_a_tool_name_in_pieces_and_an_unknown_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)

    def piece(**call: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}

    split = [piece(index=0, id="c1", type="function", function={"name": "review_"}),
             piece(index=0, function={"name": "template"}),
             piece(index=0, function={"arguments": json.dumps({"text": "Resources: {}"})}),
             piece(index=1, id="c2", type="function", function={"name": "launch_rockets", "arguments": "{}"})]
    async with OpenAIStub([Reply.stream([*split, finish_chunk("tool_calls")]),
                           Reply.stream([text_chunk("Reviewed."), finish_chunk("stop")])]) as stub, \
            start_server(_settings(stub)) as server:
        events = await _stream(http, server.url, _message("review this"))
        tools = [_meta(u)["tool"] for u in _updates(events) if "tool" in _meta(u)]
        assert {t["name"] for t in tools if t["status"] == "started"} == {"review_template", "launch_rockets"}
        failed = next(t for t in tools if t["status"] == "failed")
        assert failed["name"] == "launch_rockets" and failed["result"] == {"error": "unknown tool launch_rockets"}
        results = [json.loads(m["content"]) for m in stub.requests[1].body["messages"] if m["role"] == "tool"]
        assert "result" in results[0] and results[1] == {"error": "unknown tool launch_rockets"}
        assert "Reviewed." in _texts(events)


async def test_safe_mode_offers_and_runs_only_its_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       http: aiohttp.ClientSession) -> None:
    """``IAC_CODE_A2A_SAFE_MODE``: the model is offered only the safe-mode tools, and a call of another one (a
    write) is an unknown tool: nothing is asked, nothing written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IAC_CODE_A2A_SAFE_MODE", "on")
    write = json.dumps({"path": "main.tf", "content": "resource {}"})
    async with OpenAIStub([
        Reply.stream([*tool_call_chunks(0, "call-1", "write_file", write), finish_chunk("tool_calls")]),
        Reply.stream([text_chunk("I cannot write in safe mode."), finish_chunk("stop")]),
    ]) as stub, start_server(_settings(stub)) as server:
        events = await _stream(http, server.url, _message("write main.tf"))
        assert permission_envelope(_updates(events)[-1]) is None and not (tmp_path / "main.tf").exists()
        offered = {t["function"]["name"] for t in stub.requests[0].body["tools"]}
        assert "write_file" not in offered and {"generate_template", "read_file"} <= offered
        assert json.loads(stub.requests[1].body["messages"][-1]["content"]) == {"error": "unknown tool write_file"}


def test_settings_are_validated_and_the_key_masked() -> None:
    from iac_code.base.config import masked_settings
    from iac_code.base.errors import StartupError
    from iac_code.testing import make_kernel

    shown = masked_settings(make_kernel({"agent-runtime": "llm", "llm-api-key": SERVER_KEY}).config)
    assert shown["llm-api-key"] == "***" and shown["llm-context-tokens"] == 32_000
    assert shown["llm-base-url"] == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    with pytest.raises(StartupError, match="'llm-provider': must be auto, dashscope or openai"):
        make_kernel({"llm-provider": "claude"})
    with pytest.raises(StartupError, match="'llm-base-url': must be an http"):
        make_kernel({"llm-base-url": "ftp://x"})
