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

from iac_code.base.errors import StartupError
from iac_code.testing import A2A_HEADERS, RunningServer, make_kernel, next_sse_data, send_message_body, start_server
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


def sse(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.split("\r\n") if line.startswith("data: ")]


def kind_of(event: dict[str, Any]) -> str:
    return next(iter(event["result"]))


def state_of(event: dict[str, Any]) -> str | None:
    result = event["result"]
    body = result.get("statusUpdate") or result.get("task")
    return body["status"]["state"] if body else None


async def stream(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole SSE stream: it must end by itself (bounded wait)."""
    body = {**body, "method": "SendStreamingMessage"}
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        return sse(await asyncio.wait_for(r.text(), 10))


def acks_in(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["data"] for m in task.get("history", []) for p in m["parts"]
            if p.get("data", {}).get("kind") == "permission_ack"]


async def test_interactive_allow_streams_the_whole_flow() -> None:
    async with tools_server() as (server, http, plugin):
        first = await stream(http, server, send_message_body("deploy", contextId="ctx-stream"))
        assert kind_of(first[0]) == "task"
        pause = first[-1]["result"]["statusUpdate"]
        assert pause["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the stream ended at the pause
        assert pause["metadata"]["iac_code"]["permission"] == {
            "autoApproved": False, "pending": True, "toolName": "aliyun_api", "toolUseId": "tool-deploy"}
        envelope = pause["metadata"]["iac_code"]["input"]
        assert plugin.runtime.decisions == []  # the turn waits for the answer

        rest = await stream(http, server, answer_body(envelope))
        assert kind_of(rest[0]) == "task" and state_of(rest[0]) == "TASK_STATE_INPUT_REQUIRED"
        assert rest[0]["result"]["task"]["id"] == envelope["requestTaskId"]
        resumed = rest[1]["result"]["statusUpdate"]
        assert resumed["status"]["state"] == "TASK_STATE_WORKING"
        ack = resumed["status"]["message"]
        assert ack["role"] == "ROLE_AGENT" and ack["messageId"].startswith("permission-ack-")
        assert ack["parts"][0]["data"] == {"schemaVersion": 1, "kind": "permission_ack", "inputId": envelope["inputId"],
                                           "toolUseId": "tool-deploy", "decision": "allow_once", "accepted": True}
        assert resumed["metadata"]["iac_code"]["inputReceived"] == {
            "kind": "permission", "inputId": envelope["inputId"], "toolUseId": "tool-deploy", "decision": "allow_once"}
        assert "allowed and done" in json.dumps(rest)
        assert state_of(rest[-1]) == "TASK_STATE_INPUT_REQUIRED"
        assert "assistantFinal" in rest[-1]["result"]["statusUpdate"]["metadata"]["iac_code"]
        assert [state_of(e) for e in rest[1:-1]] == ["TASK_STATE_WORKING"] * (len(rest) - 2)
        assert plugin.runtime.decisions == [("aliyun_api", True)]
    assert envelope["schemaVersion"] == 1 and envelope["kind"] == "permission"
    assert envelope["toolName"] == "aliyun_api" and envelope["isReadOnly"] is False
    assert envelope["title"] == "Create ROS stack"
    assert envelope["target"] == "demo-stack · cn-hangzhou"  # resource identifiers plus region (since 0.16)
    assert envelope["effect"] == "cloud_change"
    assert envelope["prompt"] == "Create ROS stack (demo-stack · cn-hangzhou)?"
    assert envelope["operation"] == {
        "product": "ros", "action": "CreateStack", "region": "cn-hangzhou",
        "target": {"type": "resource", "name": "demo-stack"},
        "apiCalls": [{"product": "ROS", "action": "CreateStack", "effect": "change"}]}
    assert envelope["displayParameters"] == {"format": "json", "value": {
        "StackName": "demo-stack", "secret_token": {"redacted": True}}}
    assert envelope["options"] == [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}]
    assert "hunter2" not in json.dumps(envelope)


async def test_streamed_answer_stops_at_the_next_permission() -> None:
    async with tools_server() as (server, http, plugin):
        first = await stream(http, server, send_message_body("deploy twice", contextId="ctx-twice"))
        envelope = first[-1]["result"]["statusUpdate"]["metadata"]["iac_code"]["input"]
        rest = await stream(http, server, answer_body(envelope))
        second = rest[-1]["result"]["statusUpdate"]
        assert second["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert second["metadata"]["iac_code"]["input"]["toolUseId"] == "tool-deploy-1"
        assert plugin.runtime.decisions == [("aliyun_api", True)]
        # a SubscribeToTask while paused: the task, and the stream ends there
        body = {"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": envelope["requestTaskId"]}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            subscribed = sse(await asyncio.wait_for(r.text(), 10))
        assert [kind_of(e) for e in subscribed] == ["task"]
        assert state_of(subscribed[0]) == "TASK_STATE_INPUT_REQUIRED"
        final = (await rpc(http, server, answer_body(second["metadata"]["iac_code"]["input"], "deny",
                                                     message_id="answer-2")))["result"]["task"]
        assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        assert [a["decision"] for a in acks_in(final)] == ["allow_once", "deny"]
        assert plugin.runtime.decisions == [("aliyun_api", True), ("aliyun_api", False)]


async def test_deny_and_second_answer() -> None:
    async with tools_server() as (server, http, plugin):
        task, envelope = await pending_permission(server, http)
        final = (await rpc(http, server, answer_body(envelope, "deny")))["result"]["task"]
        assert final["id"] == task["id"] and final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        assert acks_in(final) == [{"schemaVersion": 1, "kind": "permission_ack", "inputId": envelope["inputId"],
                                   "toolUseId": "tool-deploy", "decision": "deny", "accepted": True}]
        assert plugin.runtime.decisions == [("aliyun_api", False)]
        again = await rpc(http, server, answer_body(envelope, message_id="answer-2"))
        assert again["error"]["message"] == "permission_resume_invalid: pending permission is not active."


async def test_answer_with_return_immediately_gets_the_ack() -> None:
    async with tools_server() as (server, http, plugin):
        task, envelope = await pending_permission(server, http)
        body = answer_body(envelope)
        body["params"]["configuration"] = {"returnImmediately": True}
        ack = (await rpc(http, server, body))["result"]["message"]
        assert ack["taskId"] == task["id"] and ack["parts"][0]["data"]["kind"] == "permission_ack"
        assert ack["parts"][0]["data"]["decision"] == "allow_once"
        # the turn goes on by itself; a SubscribeToTask follows it to its end (or, once it has ended,
        # opens with the task resting there and waits for a next turn)
        sub = {"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": task["id"]}}
        async with http.post(server.url, json=sub, headers=A2A_HEADERS) as r:
            assert r.content_type == "text/event-stream"
            states = [state_of(await next_sse_data(r.content, 10))]
            while states[-1] != "TASK_STATE_INPUT_REQUIRED":
                states.append(state_of(await next_sse_data(r.content, 10)))
        final = (await rpc(http, server, {"jsonrpc": "2.0", "id": 4, "method": "GetTask",
                                          "params": {"id": task["id"]}}))["result"]
        assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        assert acks_in(final)[0]["inputId"] == envelope["inputId"]
        assert plugin.runtime.decisions == [("aliyun_api", True)]


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
        events = await stream(http, server, answer_body(envelope, message_id="good"))
        assert kind_of(events[0]) == "task"
        assert acks_in({"history": [e["result"]["statusUpdate"]["status"]["message"] for e in events[1:2]]})
        assert state_of(events[-1]) == "TASK_STATE_INPUT_REQUIRED"
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
        final = (await rpc(http, server, answer_body(envelope)))["result"]["task"]
        assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
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
        final = task  # decided without asking: the unary call returned at the end of the turn
        assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
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
        assert task["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
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
        english = {"prompt": "Create ROS stack (demo-stack · cn-hangzhou)?", "label": "Allow once"}
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
        assert reply["error"]["code"] == -32602 and envelope["requestTaskId"] in reply["error"]["message"]
        final = (await rpc(http, server, answer_body(envelope)))["result"]["task"]
        assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        assert plugin.runtime.decisions == [("aliyun_api", True)]


async def test_user_facing_errors_are_localised() -> None:
    async with tools_server() as (server, http, _):
        body = send_message_body("x", message_id="m1")
        body["params"]["message"]["metadata"] = {"iac_code": {"cwd": "relative", "preferredLanguage": "de"}}
        task = (await rpc(http, server, body))["result"]["task"]
    text = task["status"]["message"]["parts"][0]["text"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert text and text != "Invalid A2A workspace metadata."
