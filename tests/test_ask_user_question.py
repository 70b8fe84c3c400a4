"""``ask_user_question`` as a tool of normal mode: ``agent-runtime: llm`` against a scripted OpenAI-compatible
server (:mod:`tests.openai_stub`, a real HTTP server on 127.0.0.1), plain HTTP JSON-RPC with SSE.

The model calls the tool; the turn ends in input-required with the question (text and
``metadata.iac_code.inputRequired``, §3's shape); the next text message on the task answers it by §3's rules
(number, id or label, free text), is acknowledged (``inputReceived``) and goes back to the model as the call's
result.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import A2A_HEADERS, parse_sse, start_server
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks

WAIT = 20.0
QUESTION = {"question": "Which region should the stack go to?",
            "options": [{"id": "hz", "label": "Hangzhou", "description": "cn-hangzhou"},
                        {"id": "sh", "label": "Shanghai", "description": "cn-shanghai"},
                        {"id": "bj", "label": "Beijing"}],
            "free_text_prompt": "Or name another region."}


def _settings(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    return {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test-key-000",
            "llm-retry-backoff": 0.01, "llm-timeout": 5, **extra}


def _message(text: str, **fields: Any) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **fields}
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "SendStreamingMessage", "params": {"message": message}}


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


def _text(status: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in status.get("message", {}).get("parts", []))


def _ask(call_id: str = "call-ask", question: dict[str, Any] | None = None) -> Reply:
    return Reply.stream([text_chunk("One question first."),
                         *tool_call_chunks(0, call_id, "ask_user_question", json.dumps(question or QUESTION)),
                         finish_chunk("tool_calls")])


def _tool_result(request: Any, call_id: str) -> dict[str, Any]:
    [message] = [m for m in request.body["messages"] if m.get("role") == "tool" and m["tool_call_id"] == call_id]
    return json.loads(message["content"])


async def test_the_model_asks_and_the_next_message_answers_by_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    async with OpenAIStub([_ask(), Reply.stream([text_chunk("Shanghai it is."), finish_chunk("stop")])]) as stub, \
            start_server(_settings(stub)) as server:
        first = await _stream(http, server.url, _message("Deploy a VPC"))
        final = _updates(first)[-1]
        assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id, context_id = final["taskId"], final["contextId"]
        asked = _meta(final)["inputRequired"]
        assert asked == {"schemaVersion": 1, "kind": "ask_user_question", "inputId": "ask-call-ask",
                         "toolUseId": "call-ask", "question": QUESTION["question"], "prompt": QUESTION["question"],
                         "options": QUESTION["options"], "allowFreeText": True,
                         "freeTextPrompt": "Or name another region.", "requestTaskId": task_id,
                         "contextId": context_id, "required": True}
        said = _text(final["status"])
        assert said.startswith("One question first.\n\nWhich region should the stack go to?\n1. Hangzhou: cn-hangzhou")
        assert "3. Beijing" in said and "Or name another region." in said and "own words" in said
        tools = [_meta(u)["tool"] for u in _updates(first) if "tool" in _meta(u)]
        assert [t["status"] for t in tools if t["toolUseId"] == "call-ask"][-1] == "input_complete"  # not completed
        offered = {t["function"]["name"]: t["function"] for t in stub.requests[0].body["tools"]}
        assert offered["ask_user_question"]["parameters"]["required"] == ["question", "options"]
        assert len(stub.requests) == 1  # the turn ended on the question

        second = await _stream(http, server.url, _message(" 2 ", taskId=task_id, contextId=context_id))
        updates = _updates(second)
        [received] = [_meta(u)["inputReceived"] for u in updates if "inputReceived" in _meta(u)]
        assert received == {"schemaVersion": 1, "kind": "ask_user_question", "inputId": "ask-call-ask",
                            "toolUseId": "call-ask", "answerTextLength": 3, "selectedId": "sh",
                            "selectedLabel": "Shanghai", "freeText": "", "freeTextLength": 0,
                            "question": QUESTION["question"], "options": QUESTION["options"], "allowFreeText": True}
        completed = [_meta(u)["tool"] for u in updates if _meta(u).get("tool", {}).get("status") == "completed"]
        assert completed[0]["toolUseId"] == "call-ask" and completed[0]["result"]["selectedId"] == "sh"
        assert updates[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and "inputRequired" not in _meta(
            updates[-1])
        assert _text(updates[-1]["status"]) == "Shanghai it is."
        replayed = stub.requests[1].body["messages"]
        assert _tool_result(stub.requests[1], "call-ask") == {"result": {
            "question": QUESTION["question"], "selectedId": "sh", "selectedLabel": "Shanghai", "freeText": ""}}
        assert replayed[-1]["role"] == "tool" and [m["content"] for m in replayed if m["role"] == "user"] == [
            "Deploy a VPC"]  # the answer is the call's result, not a new user message


@pytest.mark.parametrize(("answer", "allow_free", "expected"), [
    ("sh", True, {"selectedId": "sh", "selectedLabel": "Shanghai", "freeText": ""}),
    ("Beijing", True, {"selectedId": "bj", "selectedLabel": "Beijing", "freeText": ""}),
    ("4", True, {"selectedId": "", "selectedLabel": "", "freeText": "4"}),  # out of range: free text
    ("  somewhere in Shenzhen ", True, {"selectedId": "", "selectedLabel": "", "freeText": "  somewhere in Shenzhen "}),
    ("Shenzhen", False, {"selectedId": "", "selectedLabel": "Shenzhen", "freeText": ""}),
])
async def test_answers_by_id_label_and_free_text(answer: str, allow_free: bool, expected: dict[str, str],
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    question = {**QUESTION, "allow_free_text": allow_free}
    async with OpenAIStub([_ask(question=question), Reply.stream([text_chunk("ok"), finish_chunk("stop")])]) as stub, \
            start_server(_settings(stub)) as server:
        final = _updates(await _stream(http, server.url, _message("Deploy a VPC")))[-1]
        assert _meta(final)["inputRequired"]["allowFreeText"] is allow_free
        assert ("own words" in _text(final["status"])) is allow_free
        second = await _stream(http, server.url, _message(answer, taskId=final["taskId"], contextId=final["contextId"]))
        [received] = [_meta(u)["inputReceived"] for u in _updates(second) if "inputReceived" in _meta(u)]
        assert {k: received[k] for k in expected} == expected
        assert received["freeTextLength"] == len(expected["freeText"]) and received["answerTextLength"] == len(answer)
        assert _tool_result(stub.requests[1], "call-ask")["result"] == {"question": QUESTION["question"], **expected}


async def test_a_new_task_instead_of_an_answer_is_a_new_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    async with OpenAIStub([_ask(), Reply.stream([text_chunk("Fine, a bucket."), finish_chunk("stop")])]) as stub, \
            start_server(_settings(stub)) as server:
        final = _updates(await _stream(http, server.url, _message("Deploy a VPC")))[-1]
        other = await _stream(http, server.url, _message("Forget it, make an OSS bucket",
                                                         contextId=final["contextId"]))
        assert not [u for u in _updates(other) if "inputReceived" in _meta(u)]
        failed = [_meta(u)["tool"] for u in _updates(other) if _meta(u).get("tool", {}).get("status") == "failed"]
        assert failed[0]["toolUseId"] == "call-ask"
        assert _tool_result(stub.requests[1], "call-ask") == {
            "error": "the user sent a new request instead of answering"}
        users = [m["content"] for m in stub.requests[1].body["messages"] if m["role"] == "user"]
        assert users == ["Deploy a VPC", "Forget it, make an OSS bucket"]


async def test_a_bad_question_goes_back_to_the_model_and_later_calls_wait(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    bad = json.dumps({"question": "Which?", "options": []})
    generate = json.dumps({"request": "Create a VPC"})
    async with OpenAIStub([
        Reply.stream([*tool_call_chunks(0, "call-bad", "ask_user_question", bad), finish_chunk("tool_calls")]),
        Reply.stream([*tool_call_chunks(0, "call-ask", "ask_user_question", json.dumps(QUESTION)),
                      *tool_call_chunks(1, "call-gen", "generate_template", generate), finish_chunk("tool_calls")]),
        Reply.stream([text_chunk("Done."), finish_chunk("stop")]),
    ]) as stub, start_server(_settings(stub)) as server:
        final = _updates(await _stream(http, server.url, _message("Deploy a VPC")))[-1]
        assert _tool_result(stub.requests[1], "call-bad") == {
            "error": "invalid question: options must be a non-empty list"}
        assert _meta(final)["inputRequired"]["toolUseId"] == "call-ask"
        await _stream(http, server.url, _message("1", taskId=final["taskId"], contextId=final["contextId"]))
        assert _tool_result(stub.requests[2], "call-ask")["result"]["selectedId"] == "hz"
        assert "not run: the turn paused" in _tool_result(stub.requests[2], "call-gen")["error"]
        ids = [m["tool_call_id"] for m in stub.requests[2].body["messages"] if m["role"] == "tool"]
        assert ids == ["call-bad", "call-ask", "call-gen"]  # every call of each round answered, in order


async def test_a_waiting_question_survives_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    async with OpenAIStub([_ask(), Reply.stream([text_chunk("Beijing."), finish_chunk("stop")])]) as stub:
        settings = _settings(stub, **{"persistence-dir": str(tmp_path / "state")})
        async with start_server(settings) as server:
            final = _updates(await _stream(http, server.url, _message("Deploy a VPC")))[-1]
        async with start_server(settings) as server:
            second = await _stream(http, server.url, _message("bj", taskId=final["taskId"],
                                                              contextId=final["contextId"]))
        [received] = [_meta(u)["inputReceived"] for u in _updates(second) if "inputReceived" in _meta(u)]
        assert received["selectedId"] == "bj" and _text(_updates(second)[-1]["status"]) == "Beijing."
