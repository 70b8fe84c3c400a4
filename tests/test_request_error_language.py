"""``-32602`` request-error sentences in the request's ``preferredLanguage`` (since-0.13.md, header: "sentence-style
messages are localised by ``preferredLanguage``"), through a2a-sdk's client on JSON-RPC and HTTP+JSON.

English stays the default and exactly the digest's text; the code and ``data`` do not change with the language.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError

from iac_code.language.i18n import translator
from iac_code.testing import A2A_HEADERS, connect_client, start_server

SECONDS = 30.0
BINDINGS = ("JSONRPC", "HTTP+JSON")
PIPELINE_PROMPT = "Deploy a website with a VPC, two ECS instances and an SLB in cn-hangzhou."

CHECKS = [  # (metadata.iac_code, English (the digest's text), Simplified Chinese)
    ({"run_mode": "fast"}, "Unsupported run mode.", "不支持的运行模式。"),
    ({"run_mode": "pipeline", "pipeline_name": "selling_v2"}, "Unsupported pipeline name.", "不支持的流水线名称。"),
    ({"alibaba_cloud_region_id": "CN_HANGZHOU"}, "Unsupported Alibaba Cloud region ID.", "不支持的阿里云地域 ID。"),
]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _request(*parts: Part, metadata: dict[str, Any], context_id: str = "", task_id: str = "") -> SendMessageRequest:
    message = Message(message_id=f"m-{uuid.uuid4().hex}", role=Role.ROLE_USER, parts=list(parts or [Part(text="hi")]),
                      context_id=context_id, task_id=task_id)
    message.metadata.update({"iac_code": metadata})
    return SendMessageRequest(message=message)


async def _refusal(client: Client, request: SendMessageRequest) -> InvalidParamsError:
    async def collect() -> list[Any]:
        return [event async for event in client.send_message(request)]

    try:
        result = await asyncio.wait_for(collect(), SECONDS)
    except InvalidParamsError as exc:
        return exc
    raise AssertionError(f"expected -32602, got {result!r}")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_request_checks_speak_the_preferred_language(binding: str, workspace: Path) -> None:
    async with start_server() as server, connect_client(server, binding=binding, streaming=False) as client:
        for metadata, english, chinese in CHECKS:
            assert (await _refusal(client, _request(metadata=metadata))).message == english  # the default
            assert (await _refusal(client, _request(metadata={**metadata, "preferredLanguage": "en"}))).message == english
            zh = await _refusal(client, _request(metadata={**metadata, "preferredLanguage": "zh-CN"}))
            assert zh.message == chinese and not getattr(zh, "data", None)
            ja = await _refusal(client, _request(metadata={**metadata, "preferred_language": "ja"}))
            assert ja.message == translator("ja")(english) != english


async def test_the_wire_error_keeps_its_code(workspace: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m-zh", "role": "ROLE_USER", "parts": [{"text": "x"}],
        "metadata": {"iac_code": {"run_mode": "fast", "preferredLanguage": "zh-CN"}}}}}
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
            error = (await reply.json())["error"]
        assert error["code"] == -32602 and error["message"] == "不支持的运行模式。"
        async with http.post(server.url + "message:send", json=body["params"], headers=A2A_HEADERS) as reply:
            assert reply.status == 400
            assert "不支持的运行模式。" in json.dumps(await reply.json(), ensure_ascii=False)


def _answer_text(context_id: str, **changes: Any) -> Part:
    payload = {"schemaVersion": 1, "kind": "permission", "requestTaskId": "task-x", "contextId": context_id,
               "inputId": "permission-" + "0" * 32, "toolUseId": "tool-1", "decision": "allow_once", **changes}
    return Part(text="IAC_CODE_PERMISSION:" + json.dumps(payload))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_permission_answer_shape_errors_speak_the_preferred_language(binding: str, workspace: Path) -> None:
    """§5's three sentences (refused before any task is looked up)."""
    data = Part(text="{}")
    answers = [
        ((_answer_text("ctx-a"), _answer_text("ctx-a")),
         "Permission responses must contain exactly one JSON TextPart.", "权限响应必须恰好包含一个 JSON TextPart。"),
        ((_answer_text("ctx-b"),),
         "Permission response contextId does not match message contextId.",
         "权限响应的 contextId 与消息的 contextId 不一致。"),
        ((_answer_text("ctx-a"), data), "Permission responses must contain exactly one JSON TextPart.",
         "权限响应必须恰好包含一个 JSON TextPart。"),
    ]
    async with start_server() as server, connect_client(server, binding=binding, streaming=False) as client:
        for parts, english, chinese in answers:
            assert (await _refusal(client, _request(*parts, metadata={}, context_id="ctx-a"))).message == english
            zh = _request(*parts, metadata={"preferredLanguage": "zh-CN"}, context_id="ctx-a")
            assert (await _refusal(client, zh)).message == chinese


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_pipeline_switch_is_localised_and_keeps_its_data(binding: str, workspace: Path) -> None:
    context_id = f"ctx-{uuid.uuid4().hex[:10]}"
    async with start_server() as server, aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": f"m-{context_id}", "role": "ROLE_USER", "contextId": context_id,
            "parts": [{"text": PIPELINE_PROMPT}], "metadata": {"iac_code": {"run_mode": "pipeline"}}}}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
            assert (await reply.json())["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        switch = {"run_mode": "pipeline", "pipeline_name": "selling_solution_first", "preferredLanguage": "zh-CN"}
        rpc = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
            "messageId": "m-switch", "role": "ROLE_USER", "contextId": context_id, "parts": [{"text": "x"}],
            "metadata": {"iac_code": switch}}}}
        if binding == "JSONRPC":
            async with http.post(server.url, json=rpc, headers=A2A_HEADERS) as reply:
                error = (await reply.json())["error"]
            assert error["code"] == -32602
            assert error["message"] == "此会话已在运行流水线 selling，无法切换到 selling_solution_first。"
            assert error["data"] == {"durablePipelineName": "selling", "requestedPipelineName": "selling_solution_first"}
        async with connect_client(server, binding=binding, streaming=False) as client:
            refused = await _refusal(client, _request(metadata=switch, context_id=context_id))
            assert refused.message == "此会话已在运行流水线 selling，无法切换到 selling_solution_first。"
            english = await _refusal(client, _request(metadata={**switch, "preferredLanguage": "en"},
                                                      context_id=context_id))
            assert english.message == ("This session already runs pipeline selling; "
                                       "it cannot switch to selling_solution_first.")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_cleanup_only_without_a_handoff_is_localised(binding: str, workspace: Path) -> None:
    cleanup = {"run_mode": "pipeline", "cleanupOnly": True}
    async with start_server() as server, connect_client(server, binding=binding, streaming=False) as client:
        english = await _refusal(client, _request(metadata=cleanup, context_id="ctx-never-ran"))
        assert english.message == "Cleanup-only continuation requires a completed Pipeline handoff."
        zh = await _refusal(client, _request(metadata={**cleanup, "preferredLanguage": "zh-CN"},
                                             context_id="ctx-never-ran"))
        assert zh.message == "仅清理的续接需要已完成的流水线交接。"
