"""Interactive permissions, policy, audit, tool metadata, thinking exposure and localisation."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.errors import StartupError
from iac_code.testing import A2A_HEADERS, RunningServer, make_kernel, send_message_body, start_server
from tests.tool_runtime import ToolPlugin


async def rpc(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


@asynccontextmanager
async def tools_server(**settings: Any) -> AsyncIterator[tuple[RunningServer, aiohttp.ClientSession, ToolPlugin]]:
    plugin = ToolPlugin()
    async with start_server({"agent-runtime": "tools", **settings}, extra_plugins={"tools": plugin}) as server, \
            aiohttp.ClientSession() as http:
        yield server, http, plugin


def answer_body(envelope: dict[str, Any], decision: str = "allow_once", **changes: Any) -> dict[str, Any]:
    data = {"schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
            "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": decision}
    data.update(changes.pop("data", {}))
    for key in changes.pop("drop", ()):
        data.pop(key)
    body = send_message_body("x", message_id=changes.pop("message_id", "answer-1"),
                             taskId=changes.pop("task_id", envelope["requestTaskId"]),
                             contextId=envelope["contextId"])
    body["params"]["message"]["parts"] = changes.pop("parts", [{"data": data, "mediaType": "application/json"}])
    body["params"]["message"].update(changes)
    return body


async def pending_permission(server: RunningServer, http: aiohttp.ClientSession, prompt: str = "deploy",
                             **metadata: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    body = send_message_body(prompt, message_id=f"m-{prompt}", contextId=f"ctx-{prompt}")
    if metadata:
        body["params"]["message"]["metadata"] = {"iac_code": metadata}
    task = (await rpc(http, server, body))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task, task["metadata"]["iac_code"]["input"]


async def wait_for_final(http: aiohttp.ClientSession, server: RunningServer, task_id: str) -> dict[str, Any]:
    for _ in range(250):
        task = (await rpc(http, server, {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}))
        result = task["result"]
        final = result["metadata"].get("iac_code", {}).get("assistantFinal")
        if result["status"]["state"] != "TASK_STATE_WORKING" and final:
            return result
        await asyncio.sleep(0.02)
    raise AssertionError("turn did not finish")


async def test_interactive_allow_streams_the_whole_flow() -> None:
    async with tools_server() as (server, http, plugin):
        body = send_message_body("deploy", method="SendStreamingMessage", contextId="ctx-stream")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as stream:
            envelope = None
            while envelope is None:
                line = (await asyncio.wait_for(stream.content.readline(), 10)).decode()
                event = json.loads(line[6:]) if line.startswith("data: ") else {}
                update = event.get("result", {}).get("statusUpdate")
                if update and update["status"]["state"] == "TASK_STATE_INPUT_REQUIRED":
                    envelope = update["metadata"]["iac_code"]["input"]
                    assert update["metadata"]["iac_code"]["permission"] == {
                        "autoApproved": False, "pending": True, "toolName": "aliyun_api", "toolUseId": "tool-deploy"}
            ack = await rpc(http, server, answer_body(envelope))
            rest = await asyncio.wait_for(stream.text(), 10)
        data = ack["result"]["message"]["parts"][0]["data"]
        assert data == {"schemaVersion": 1, "kind": "permission_ack", "inputId": envelope["inputId"],
                        "toolUseId": "tool-deploy", "decision": "allow_once", "accepted": True}
        assert ack["result"]["message"]["role"] == "ROLE_AGENT"
        later = [json.loads(line[6:]) for line in rest.split("\r\n") if line.startswith("data: ")]
        received = [e["result"]["statusUpdate"]["metadata"]["iac_code"]["inputReceived"] for e in later
                    if "inputReceived" in e["result"].get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})]
        assert received == [{"kind": "permission", "inputId": envelope["inputId"], "toolUseId": "tool-deploy",
                             "decision": "allow_once"}]
        assert "allowed and done" in rest
        assert later[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert plugin.runtime.decisions == [("aliyun_api", True)]
    assert envelope["schemaVersion"] == 1 and envelope["kind"] == "permission"
    assert envelope["toolName"] == "aliyun_api" and envelope["isReadOnly"] is False
    assert envelope["title"] == "Create ROS stack"
    assert envelope["target"] == "ros CreateStack in cn-hangzhou; stack demo-stack"
    assert envelope["effect"] == "cloud_change"
    assert envelope["prompt"] == "Create ROS stack Allow once?"
    assert envelope["options"] == [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}]
    assert "hunter2" not in json.dumps(envelope)


async def test_deny_and_second_answer() -> None:
    async with tools_server() as (server, http, plugin):
        task, envelope = await pending_permission(server, http)
        ack = await rpc(http, server, answer_body(envelope, "deny"))
        assert ack["result"]["message"]["parts"][0]["data"]["decision"] == "deny"
        final = await wait_for_final(http, server, task["id"])
        assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert plugin.runtime.decisions == [("aliyun_api", False)]
        again = await rpc(http, server, answer_body(envelope, message_id="answer-2"))
        assert again["error"]["message"] == "permission_resume_invalid: pending permission is not active."


BAD_ANSWERS = [
    ({"role": "ROLE_AGENT"}, "Permission responses must use ROLE_USER."),
    ({"parts": [{"data": {"kind": "permission"}, "mediaType": "application/json"}, {"text": "hi"}]},
     "Permission responses must contain exactly one application/json DataPart."),
    ({"data": {"extra": 1}}, "Permission response payload fields do not match schemaVersion 1."),
    ({"drop": ["toolUseId"]}, "Permission response payload fields do not match schemaVersion 1."),
    ({"data": {"schemaVersion": "1"}}, "Permission response schemaVersion must be 1."),
    ({"data": {"decision": "allow_always"}}, "Permission decision must be allow_once or deny."),
    ({"data": {"inputId": ""}}, "Permission response correlation fields are required."),
    ({"data": {"requestTaskId": "other-task"}}, "Permission response taskId does not match requestTaskId."),
    ({"data": {"inputId": "permission-stale"}}, "input_response_mismatch: permission correlation does not match."),
    ({"data": {"toolUseId": "tool-other"}}, "input_response_mismatch: permission correlation does not match."),
    ({"data": {"kind": "permission", "requestTaskId": "nope"}, "task_id": "nope"},
     "permission_resume_invalid: pending permission is not active."),
]


async def test_bad_answers_are_refused_and_keep_the_request() -> None:
    async with tools_server() as (server, http, plugin):
        task, envelope = await pending_permission(server, http)
        for index, (changes, text) in enumerate(BAD_ANSWERS):
            reply = await rpc(http, server, answer_body(envelope, message_id=f"bad-{index}", **dict(changes)))
            assert reply["error"]["code"] == -32602, changes
            assert reply["error"]["message"] == text, changes
        streamed = answer_body(envelope, message_id="good")
        streamed["method"] = "SendStreamingMessage"
        async with http.post(server.url, json=streamed, headers=A2A_HEADERS) as r:
            events = [json.loads(line[6:]) for line in (await r.text()).split("\r\n") if line.startswith("data: ")]
        assert [next(iter(e["result"])) for e in events] == ["message"]
        assert events[0]["result"]["message"]["parts"][0]["data"]["kind"] == "permission_ack"
        await wait_for_final(http, server, task["id"])
        assert plugin.runtime.decisions == [("aliyun_api", True)]


async def test_cancel_releases_a_pending_permission() -> None:
    async with tools_server() as (server, http, _):
        task, envelope = await pending_permission(server, http)
        canceled = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask",
                                            "params": {"id": task["id"]}})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        late = await rpc(http, server, answer_body(envelope))
        assert late["error"]["message"] == "permission_resume_invalid: pending permission is not active."


async def test_waiting_context_is_not_evicted() -> None:
    async with tools_server(**{"context-idle-timeout": 0.05}) as (server, http, plugin):
        task, envelope = await pending_permission(server, http)
        contexts = server.kernel.contexts
        assert contexts.evict_idle(now=time.monotonic() + 3600) == 0  # long idle, but waiting for an answer
        assert contexts.loaded("", task["contextId"])
        await rpc(http, server, answer_body(envelope))
        await wait_for_final(http, server, task["id"])
        assert plugin.runtime.decisions == [("aliyun_api", True)]


@pytest.mark.parametrize(("settings", "prompt", "expected", "asked"), [
    ({"auto-approve-permissions": True}, "read", True, False),
    ({"auto-approve-permissions": True}, "deploy", False, False),  # protected write API: never by a blanket allow
    ({"permission-rules": {"allow": ["*"]}}, "deploy", None, True),
    ({"permission-rules": {"allow": ["read_*"]}}, "read", True, False),
    ({"permission-rules": {"allow": ["aliyun_api(ros:CreateStack)"]}}, "deploy", True, False),
    ({"permission-rules": {"allow": ["aliyun_api(ros:DeleteStack)"]}}, "deploy", None, True),
    ({"permission-rules": {"deny": ["read_file"]}, "auto-approve-permissions": True}, "read", False, False),
])
async def test_policy(tmp_path: Path, settings: dict[str, Any], prompt: str, expected: bool | None,
                      asked: bool) -> None:
    audit = tmp_path / "audit.jsonl"
    async with tools_server(**settings, **{"permission-audit-log": str(audit)}) as (server, http, plugin):
        body = send_message_body(prompt, message_id="m1")
        task = (await rpc(http, server, body))["result"]["task"]
        pending = task["metadata"].get("iac_code", {}).get("permission", {}).get("pending", False)
        assert pending is asked
        if asked:
            return
        final = await wait_for_final(http, server, task["id"])
        assert plugin.runtime.decisions == [(plugin.runtime.decisions[0][0], expected)]
        assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert len(records) == 1 and records[0]["decision"] == ("allow_once" if expected else "deny")
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600


async def test_allow_fails_closed_without_audit(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    async with tools_server(**{"auto-approve-permissions": True,
                               "permission-audit-log": str(blocker / "audit.jsonl")}) as (server, http, plugin):
        task = (await rpc(http, server, send_message_body("read", message_id="m1")))["result"]["task"]
        await wait_for_final(http, server, task["id"])
        assert plugin.runtime.decisions == [("read_file", False)]


async def test_tool_metadata_is_shape_only() -> None:
    async with tools_server(**{"permission-rules": {"allow": ["aliyun_api(ros:CreateStack)"]}}) as (server, http, _):
        body = send_message_body("deploy", method="SendStreamingMessage")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            raw = await r.text()
    events = [json.loads(line[6:]) for line in raw.split("\r\n") if line.startswith("data: ")]
    tools = [e["result"]["statusUpdate"]["metadata"]["iac_code"]["tool"] for e in events
             if "tool" in e["result"].get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})]
    assert [t["status"] for t in tools] == ["started", "input_delta", "input_complete", "completed"]
    assert tools[1]["partialJsonLength"] == 10
    summary = tools[2]["inputSummary"]
    assert summary["tool_name"] == "aliyun_api"
    assert summary["fields"]["product"] == {"type": "str"}
    params = summary["fields"]["params"]["fields"]
    assert all(k.startswith("sha256:") for k in params)
    text = json.dumps(tools)
    assert "hunter2" not in text and "demo-stack" not in text and "secret_token" not in text
    assert len(tools[3]["result"]["log"]) == 4000
    usage_free = [e for e in events if "thinking" in json.dumps(e)]
    assert usage_free == []


@pytest.mark.parametrize(("exposure", "tool_trace", "thinking", "card_types"), [
    (None, True, False, ["tool_trace"]),
    (["raw-thinking", "tool-trace"], True, True, ["raw_thinking", "tool_trace"]),
    ("raw_thinking", False, True, ["raw_thinking"]),
    ("none", False, False, None),
])
async def test_thinking_exposure(exposure: Any, tool_trace: bool, thinking: bool, card_types: list[str] | None) -> None:
    settings: dict[str, Any] = {"auto-approve-permissions": True}
    if exposure is not None:
        settings["thinking-exposure"] = exposure
    async with tools_server(**settings) as (server, http, _):
        async with http.get(server.url + ".well-known/agent-card.json") as r:
            extensions = {e["uri"]: e for e in (await r.json())["capabilities"]["extensions"]}
        for prompt in ("read", "think"):
            body = send_message_body(prompt, message_id=f"m-{prompt}", method="SendStreamingMessage")
            async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
                raw = await r.text()
            notes = [json.loads(line[6:])["result"].get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})
                     for line in raw.split("\r\n") if line.startswith("data: ")]
            if prompt == "read":
                assert any("tool" in n for n in notes) is tool_trace
            else:
                thoughts = [n["thinking"] for n in notes if "thinking" in n]
                assert thoughts == ([{"type": "raw_thinking", "text": "step one: consider the VPC"}] if thinking else [])
    extension = extensions.get("urn:iac-code:a2a:thinking-exposure:v1")
    if card_types is None:
        assert extension is None
    else:
        assert extension["params"] == {"enabledTypes": card_types}


@pytest.mark.parametrize(("value", "message"), [
    ("loud", "Unsupported A2A thinking exposure type 'loud'. Supported values: raw-thinking, tool-trace."),
    (5, "A2A thinking exposure must be a string or list of strings. Supported values: raw-thinking, tool-trace."),
])
def test_thinking_exposure_errors(value: Any, message: str) -> None:
    with pytest.raises(StartupError) as caught:
        make_kernel({"thinking-exposure": value})
    assert message in str(caught.value)


async def test_envelope_is_localised_per_turn() -> None:
    async with tools_server() as (server, http, _):
        results = await asyncio.gather(pending_permission(server, http, "deploy", preferredLanguage="zh-CN"),
                                       pending_permission(server, http, "read", preferredLanguage="de"))
        (_, zh), (_, de) = results
        english = {"prompt": "Create ROS stack Allow once?", "label": "Allow once"}
        assert zh["language"] == "zh" and de["language"] == "de"
        assert zh["prompt"] != english["prompt"] and zh["options"][0]["label"] != english["label"]
        assert de["options"][0]["label"] not in (english["label"], zh["options"][0]["label"])
        for env in (zh, de):
            assert [o["id"] for o in env["options"]] == ["allow_once", "deny"]
            assert env["kind"] == "permission" and env["effect"] in ("cloud_change", "read")


@pytest.mark.parametrize(("prompt", "state", "retryable"), [("fail", "TASK_STATE_FAILED", False),
                                                            ("fail and retry", "TASK_STATE_INPUT_REQUIRED", True)])
async def test_runtime_failure_events(prompt: str, state: str, retryable: bool) -> None:
    async with tools_server() as (server, http, _):
        task = (await rpc(http, server, send_message_body(prompt, message_id="m1")))["result"]["task"]
    assert task["status"]["state"] == state
    assert task["status"]["message"]["parts"][0]["text"] == "The quota for this operation is exhausted."
    assert task["metadata"]["iac_code"]["error"] == {"retryable": retryable}


async def test_answer_of_another_kind_is_refused_and_request_kept() -> None:
    async with tools_server() as (server, http, plugin):
        task, envelope = await pending_permission(server, http)
        wrong = answer_body(envelope, message_id="wrong-kind", data={"kind": "approval"})
        reply = await rpc(http, server, wrong)
        assert reply["error"]["code"] == -32004 and reply["error"]["message"] == "Task is already working."
        await rpc(http, server, answer_body(envelope))
        await wait_for_final(http, server, task["id"])
        assert plugin.runtime.decisions == [("aliyun_api", True)]


async def test_user_facing_errors_are_localised() -> None:
    async with tools_server() as (server, http, _):
        body = send_message_body("x", message_id="m1")
        body["params"]["message"]["metadata"] = {"iac_code": {"cwd": "relative", "preferredLanguage": "de"}}
        task = (await rpc(http, server, body))["result"]["task"]
    text = task["status"]["message"]["parts"][0]["text"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert text and text != "Invalid A2A workspace metadata."


async def test_sdk_client_permission_round_trip() -> None:
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.struct_pb2 import Struct, Value

    async with tools_server() as (server, _, plugin), httpx.AsyncClient() as http:
        client = await ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create_from_url(server.url)
        request = SendMessageRequest(message=Message(message_id="sdk-1", role=Role.ROLE_USER,
                                                     parts=[Part(text="deploy")]))
        envelope = None
        async for event in client.send_message(request):
            if event.HasField("status_update") and \
                    event.status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                envelope = MessageToDict(event.status_update.metadata)["iac_code"]["input"]
                break
        assert envelope is not None
        data = Struct()
        data.update({"schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
                     "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": "allow_once"})
        answer = SendMessageRequest(message=Message(
            message_id="sdk-2", role=Role.ROLE_USER, task_id=envelope["requestTaskId"],
            context_id=envelope["contextId"],
            parts=[Part(data=Value(struct_value=data), media_type="application/json")]))
        acks = [e async for e in client.send_message(answer)]
        assert MessageToDict(acks[0].message)["parts"][0]["data"]["kind"] == "permission_ack"
        for _ in range(250):
            task = await client.get_task(GetTaskRequest(id=envelope["requestTaskId"]))
            if "assistantFinal" in MessageToDict(task.metadata).get("iac_code", {}):
                break
            await asyncio.sleep(0.02)
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert plugin.runtime.decisions == [("aliyun_api", True)]
        await client.close()
