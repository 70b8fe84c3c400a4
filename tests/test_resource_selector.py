"""The cloud resource selector (§9) on a real server: ``agent-runtime: llm`` against the scripted
OpenAI-compatible server (:mod:`tests.openai_stub`), a2a-sdk's client for every message.

The model calls ``select_cloud_resource``; the turn ends in input-required with the question and §9's
``inputRequired``; an answer in ``metadata.iac_code.inputResponse`` is checked before its turn starts (every bad one a
``-32602 resource_selection_resume_invalid: <reason>`` that changes nothing), acknowledged (``inputReceived``) and
goes back to the model; the same answer again is a replay, another one conflicts. The card extension and the tool
exist only when ``IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED`` is on and the request declares the capability.
"""

from __future__ import annotations

import json
import re
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, start_server
from iac_code_resource_selector.profiles import PROFILE_HASH
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks

ENV = "IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED"
URI = "urn:iac-code:resource-selector:v1"
INPUT_ID = re.compile(r"resource-[0-9a-f]{32}")
CAPABILITY = {"schemaVersion": 1, "queryMode": "ros_api_json", "profileHash": PROFILE_HASH}
CREDENTIAL_ENV = ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN")
ASK = {"selector": "vpc_id", "question": "Which VPC should the ECS instance use?",
       "association_property_metadata": {"RegionId": "cn-hangzhou"}}


def _settings(stub: OpenAIStub, state: Path) -> dict[str, Any]:
    return {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test-key-000",
            "llm-retry-backoff": 0.01, "llm-timeout": 5, "persistence-dir": str(state)}


def _select(call_id: str = "call-sel", ask: dict[str, Any] | None = None) -> Reply:
    return Reply.stream([*tool_call_chunks(0, call_id, "select_cloud_resource", json.dumps(ask or ASK)),
                         finish_chunk("tool_calls")])


def _done(text: str = "Using that VPC.") -> Reply:
    return Reply.stream([text_chunk(text), finish_chunk("stop")])


def _request(text: str, iac_code: dict[str, Any] | None = None, **ids: str) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)], **ids)
    if iac_code is not None:
        message.metadata.update({"iac_code": iac_code})
    return SendMessageRequest(message=message)


async def _send(client: Any, request: SendMessageRequest) -> list[dict[str, Any]]:
    return [MessageToDict(e) async for e in client.send_message(request)]


def _updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e]


def _meta(update: dict[str, Any]) -> dict[str, Any]:
    return update.get("metadata", {}).get("iac_code", {})


def _text(update: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in update["status"].get("message", {}).get("parts", []))


def _tool_result(request: Any, call_id: str) -> dict[str, Any]:
    [message] = [m for m in request.body["messages"] if m.get("role") == "tool" and m["tool_call_id"] == call_id]
    return json.loads(message["content"])


def _answer(asked: dict[str, Any], **changes: Any) -> dict[str, Any]:
    response = {"schemaVersion": 1, "kind": "cloud_resource_selection", "status": "selected",
                "requestTaskId": asked["requestTaskId"], "contextId": asked["contextId"], "inputId": asked["inputId"],
                "toolUseId": asked["toolUseId"], "selectorId": asked["selector"]["id"], "value": "vpc-abc123",
                "label": "prod-vpc"}
    response.update(changes)
    return {key: value for key, value in response.items() if value is not None}


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Alibaba Cloud credentials: nothing is queried, values are pattern-checked (the cloud queries are
    tests/test_resource_selector_cloud.py's)."""
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Any, Any, Any]]:
    """An enabled selector, a server whose model asks once (then answers), and a client."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "true")
    async with OpenAIStub([_select(), _done(), _done("second")]) as stub, \
            start_server(_settings(stub, tmp_path / "state")) as server, connect_client(server) as client:
        yield stub, server, client


async def _asked(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    final = _updates(await _send(client, _request("Create an ECS instance", {"capabilities": {
        "resourceSelector": CAPABILITY}})))[-1]
    assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return final, _meta(final)["inputRequired"]


async def test_the_model_asks_and_the_answer_comes_back(served: tuple[Any, Any, Any], tmp_path: Path) -> None:
    stub, server, client = served
    final, asked = await _asked(client)
    task_id, context_id = final["taskId"], final["contextId"]
    assert INPUT_ID.fullmatch(asked["inputId"])
    assert asked == {"schemaVersion": 1, "kind": "cloud_resource_selection", "requestTaskId": task_id,
                     "contextId": context_id, "inputId": asked["inputId"], "toolUseId": "call-sel",
                     "prompt": ASK["question"], "required": True,
                     "selector": {"id": "vpc_id", "associationProperty": "ALIYUN::ECS::VPC::VPCId",
                                  "outputKind": "resource_id",
                                  "associationPropertyMetadata": {"RegionId": "cn-hangzhou"}, "source": None,
                                  "profileHash": PROFILE_HASH, "valueCheck": "pattern"}}
    assert _text(final) == ASK["question"]
    assert "select_cloud_resource" in {t["function"]["name"] for t in stub.requests[0].body["tools"]}
    record_path = tmp_path / "state" / "resource-selections" / f"{asked['inputId']}.json"
    assert json.loads(record_path.read_text())["state"] == "pending"
    assert stat.S_IMODE(record_path.stat().st_mode) == 0o600
    assert len(stub.requests) == 1  # the turn ended on the question

    answer = _answer(asked)
    events = await _send(client, _request("prod-vpc", {"inputResponse": answer}, task_id=task_id,
                                          context_id=context_id))
    updates = _updates(events)
    [ack] = [u for u in updates if "inputReceived" in _meta(u)]
    assert ack["status"]["state"] == "TASK_STATE_WORKING"
    assert _meta(ack)["inputReceived"] == {"schemaVersion": 1, "kind": "cloud_resource_selection",
                                           "inputId": asked["inputId"], "toolUseId": "call-sel",
                                           "status": "selected", "replayed": False}
    assert updates[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and _text(updates[-1]) == "Using that VPC."
    assert _tool_result(stub.requests[1], "call-sel") == {"result": {
        "status": "selected", "selectorId": "vpc_id", "value": "vpc-abc123", "label": "prod-vpc"}}
    users = [m["content"] for m in stub.requests[1].body["messages"] if m["role"] == "user"]
    assert users == ["Create an ECS instance"]  # the answer is the call's result, not a new request
    record = json.loads(record_path.read_text())
    assert record["state"] == "resolved" and record["answer"]["value"] == "vpc-abc123"

    # The same answer again: a replay, acknowledged in INPUT_REQUIRED; the model is not asked again.
    replay = _updates(await _send(client, _request("prod-vpc", {"inputResponse": answer}, task_id=task_id,
                                                   context_id=context_id)))
    assert replay[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert _meta(replay[-1])["inputReceived"]["replayed"] is True
    assert _meta(replay[-1])["inputReceived"]["status"] == "selected"
    assert len(stub.requests) == 2

    # A different answer conflicts with the one taken.
    with pytest.raises(InvalidParamsError,
                       match="^resource_selection_resume_invalid: answer conflicts with prior answer$"):
        await _send(client, _request("other", {"inputResponse": _answer(asked, value="vpc-other9")},
                                     task_id=task_id, context_id=context_id))
    assert len(stub.requests) == 2


@pytest.mark.parametrize(("changes", "reason"), [
    ({"schemaVersion": 2}, "unsupported schema version"),
    ({"status": "maybe"}, "status is invalid"),
    ({"label": ""}, "label is invalid"),
    ({"value": "v" * 1025}, "value is invalid"),
    ({"selectorId": 7}, "selectorId is invalid"),
    ({"toolUseId": ""}, "toolUseId is invalid"),
    ({"inputId": "resource-xyz"}, "inputId is invalid"),
    ({"source": "vpc"}, "source is invalid"),
    ({"status": "canceled", "optionsEmpty": "yes"}, "optionsEmpty is invalid"),
    ({"inputId": "resource-" + "0" * 32}, "pending input not found"),
    ({"requestTaskId": "another-task"}, "correlation mismatch"),
    ({"toolUseId": "call-other"}, "correlation mismatch"),
    ({"contextId": "another-context"}, "task context mismatch"),
    ({"selectorId": "vswitch_id"}, "selector mismatch"),
    ({"value": "subnet-123"}, "selector value is invalid"),
    ({"source": {"selector_id": "vpc_id", "value": "vpc-1"}}, "source mismatch"),
])
async def test_bad_answers_are_refused_and_change_nothing(changes: dict[str, Any], reason: str,
                                                          served: tuple[Any, Any, Any], tmp_path: Path) -> None:
    stub, server, client = served
    final, asked = await _asked(client)
    ids = {"task_id": final["taskId"], "context_id": final["contextId"]}
    with pytest.raises(InvalidParamsError, match=f"^resource_selection_resume_invalid: {re.escape(reason)}$"):
        await _send(client, _request("x", {"inputResponse": _answer(asked, **changes)}, **ids))
    record = json.loads((tmp_path / "state" / "resource-selections" / f"{asked['inputId']}.json").read_text())
    assert record["state"] == "pending" and len(stub.requests) == 1
    # The selection still waits: a good answer is taken.
    updates = _updates(await _send(client, _request("ok", {"inputResponse": _answer(asked)}, **ids)))
    assert [_meta(u)["inputReceived"]["replayed"] for u in updates if "inputReceived" in _meta(u)] == [False]


async def test_a_canceled_selection_goes_back_to_the_model(served: tuple[Any, Any, Any]) -> None:
    stub, server, client = served
    final, asked = await _asked(client)
    canceled = _answer(asked, status="canceled", value=None, label=None, optionsEmpty=True)
    updates = _updates(await _send(client, _request("none fits", {"inputResponse": canceled},
                                                    task_id=final["taskId"], context_id=final["contextId"])))
    [ack] = [_meta(u)["inputReceived"] for u in updates if "inputReceived" in _meta(u)]
    assert ack["status"] == "canceled" and ack["replayed"] is False
    assert _tool_result(stub.requests[1], "call-sel") == {"result": {
        "status": "canceled", "selectorId": "vpc_id", "optionsEmpty": True}}


async def test_a_new_request_instead_of_an_answer_abandons_the_selection(served: tuple[Any, Any, Any]) -> None:
    stub, server, client = served
    final, asked = await _asked(client)
    ids = {"task_id": final["taskId"], "context_id": final["contextId"]}
    await _send(client, _request("Forget it, use a new VPC", **ids))
    assert _tool_result(stub.requests[1], "call-sel") == {
        "error": "the user sent a new request instead of choosing a resource"}
    with pytest.raises(InvalidParamsError, match="^resource_selection_resume_invalid: pending input is unavailable$"):
        await _send(client, _request("late", {"inputResponse": _answer(asked)}, **ids))


async def _card(server: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(server.url.rstrip("/") + "/.well-known/agent-card.json") as r:
        return dict(await r.json())


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
async def test_the_card_extension_is_there_only_when_enabled(value: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, value)
    async with start_server({"persistence-dir": str(tmp_path / "on")}) as server:
        [extension] = [e for e in (await _card(server))["capabilities"]["extensions"] if e["uri"] == URI]
    assert extension.get("required", False) is False
    assert extension["params"] == {"schemaVersion": 1, "singleSelection": True, "derivedValue": True,
                                   "queryMode": "ros_api_json"}
    for off in ("", "0", "false", "enabled"):
        monkeypatch.setenv(ENV, off)
        async with start_server({"persistence-dir": str(tmp_path / f"off{off}")}) as server:
            assert URI not in [e["uri"] for e in (await _card(server))["capabilities"].get("extensions", [])]


@pytest.mark.parametrize(("enabled", "declared"), [
    (False, CAPABILITY),  # a2a_feature_disabled
    (True, None),  # client_capability_missing
    (True, {**CAPABILITY, "queryMode": "sql"}),  # client_capability_incompatible
    (True, {**CAPABILITY, "profileHash": "sha256:" + "0" * 64}),  # profile_hash_mismatch
])
async def test_the_tool_is_offered_only_with_the_capability(enabled: bool, declared: dict[str, Any] | None,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "1" if enabled else "0")
    metadata = {"capabilities": {"resourceSelector": declared}} if declared is not None else {}
    async with OpenAIStub([_done("ok")]) as stub, start_server(_settings(stub, tmp_path / "state")) as server, \
            connect_client(server) as client:
        await _send(client, _request("Create an ECS instance", metadata))
    offered = {t["function"]["name"] for t in stub.requests[0].body["tools"]}
    assert "select_cloud_resource" not in offered and "ask_user_question" in offered


async def test_a_waiting_selection_survives_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "on")
    async with OpenAIStub([_select(), _done("Restarted, using it.")]) as stub:
        settings = _settings(stub, tmp_path / "state")
        async with start_server(settings) as server, connect_client(server) as client:
            final, asked = await _asked(client)
        async with start_server(settings) as server, connect_client(server) as client:
            updates = _updates(await _send(client, _request("prod-vpc", {"inputResponse": _answer(asked)},
                                                            task_id=final["taskId"], context_id=final["contextId"])))
    [ack] = [_meta(u)["inputReceived"] for u in updates if "inputReceived" in _meta(u)]
    assert ack["replayed"] is False and _text(updates[-1]) == "Restarted, using it."
    assert _tool_result(stub.requests[1], "call-sel")["result"]["value"] == "vpc-abc123"
