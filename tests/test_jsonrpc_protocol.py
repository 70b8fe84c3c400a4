"""JSON-RPC 2.0 over HTTP: envelope errors, A2A methods, streaming and cancel."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.testing import (
    A2A_HEADERS,
    RunningServer,
    next_sse_data,
    parse_sse,
    permission_answer_body,
    send_message_body,
    start_server,
)
from tests.runtimes import GatedRuntimePlugin, settings


async def rpc(http: aiohttp.ClientSession, server: RunningServer, body: Any,
              headers: dict[str, str] | None = None) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.post(server.url, data=data, headers=headers or A2A_HEADERS) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("application/json")
        return await r.json()


SEED_BODY = {
    "jsonrpc": "2.0", "id": "1", "method": "SendMessage",
    "params": {
        "message": {"messageId": "msg-1", "role": "ROLE_USER",
                    "parts": [{"text": "Create a VPC with two vSwitches."}],
                    "metadata": {"iac_code": {"cwd": "/absolute/path/to/project"}}},
        "configuration": {"acceptedOutputModes": ["text/plain"]},
    },
}


@asynccontextmanager
async def gated_turn() -> AsyncIterator[tuple[RunningServer, aiohttp.ClientSession, aiohttp.ClientResponse,
                                              dict[str, Any], GatedRuntimePlugin]]:
    """A server whose runtime blocks mid-turn; yields (server, http, open stream, task, plugin)."""
    plugin = GatedRuntimePlugin()
    async with start_server(settings(), extra_plugins={"gated": plugin}) as server, \
            aiohttp.ClientSession() as http:
        body = send_message_body("long job", method="SendStreamingMessage")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as stream:
            first = await next_sse_data(stream.content)
            await asyncio.wait_for(plugin.runtime.started.wait(), 10)
            yield server, http, stream, first["result"]["task"], plugin


def final_text(task: dict[str, Any]) -> str:
    """The turn's answer (its final status message), or, paused for permission, the last text before the pause."""
    if "input" not in task["metadata"]["iac_code"]:
        message = task["status"]["message"]
        assert message["role"] == "ROLE_AGENT"
        return message["parts"][0]["text"]  # type: ignore[no-any-return]
    agent = [m for m in task["history"] if m["role"] == "ROLE_AGENT"]
    return agent[-1]["parts"][0]["text"]  # type: ignore[no-any-return]


async def test_seed_send_message_returns_ros_template(server: RunningServer, http: aiohttp.ClientSession,
                                                      tmp_path: Path) -> None:
    body = json.loads(json.dumps(SEED_BODY))
    body["params"]["message"]["metadata"]["iac_code"]["cwd"] = str(tmp_path)
    paused = (await rpc(http, server, body))["result"]["task"]
    assert paused["metadata"]["iac_code"]["input"]["toolName"] == "write_file"  # writing asks first
    assert not (tmp_path / "template.ros.yaml").exists()
    task = (await rpc(http, server, permission_answer_body(paused["metadata"]["iac_code"]["input"])))["result"]["task"]
    assert task["id"] == paused["id"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["history"][0]["messageId"] == "msg-1"
    text = final_text(task)
    template = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert template["ROSTemplateFormatVersion"] == "2015-09-01"
    types = [r["Type"] for r in template["Resources"].values()]
    assert types.count("ALIYUN::ECS::VPC") == 1
    assert types.count("ALIYUN::ECS::VSwitch") == 2
    vpc_id = next(name for name, r in template["Resources"].items() if r["Type"] == "ALIYUN::ECS::VPC")
    for resource in template["Resources"].values():
        if resource["Type"] == "ALIYUN::ECS::VSwitch":
            assert resource["Properties"]["VpcId"] == {"Ref": vpc_id}
    saved = tmp_path / "template.ros.yaml"
    assert yaml.safe_load(saved.read_text()) == template  # written into the workspace once allowed


@pytest.mark.parametrize(("prompt", "count"), [("Create a VPC with 3 vSwitches in cn-shanghai", 3),
                                               ("I need a vpc with four vswitches", 4),
                                               ("create a VPC", 1)])
async def test_vswitch_count_follows_prompt(server: RunningServer, http: aiohttp.ClientSession,
                                            prompt: str, count: int) -> None:
    task = (await rpc(http, server, send_message_body(prompt)))["result"]["task"]
    template = yaml.safe_load(final_text(task).split("```yaml\n", 1)[1].split("```", 1)[0])
    assert sum(r["Type"] == "ALIYUN::ECS::VSwitch" for r in template["Resources"].values()) == count


async def test_plain_prompt_gets_streamed_text_and_usage(server: RunningServer, http: aiohttp.ClientSession) -> None:
    body = send_message_body("hello there", method="SendStreamingMessage")
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        raw = await r.text()
    assert raw.endswith("\r\n\r\n")
    events, other = parse_sse(raw)
    assert other == []
    assert all(e["jsonrpc"] == "2.0" and e["id"] == "1" for e in events)
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds[0] == "task"
    assert set(kinds[1:]) == {"statusUpdate"}
    states = [e["result"]["statusUpdate"]["status"]["state"] for e in events[1:]]
    assert states[0] == "TASK_STATE_WORKING"
    assert states[-1] == "TASK_STATE_INPUT_REQUIRED"
    deltas = [e["result"]["statusUpdate"]["status"]["message"]["parts"][0]["text"]
              for e in events[1:-1] if "message" in e["result"]["statusUpdate"]["status"]]
    assert len(deltas) >= 2
    final = events[-1]["result"]["statusUpdate"]  # the turn's end carries the whole answer
    assert final["status"]["message"]["role"] == "ROLE_AGENT"
    assert final["status"]["message"]["parts"][0]["text"] == "".join(deltas)
    usage = final["metadata"]["iac_code"]["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] > 0
    assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}


async def test_get_task_history_length(server: RunningServer, http: aiohttp.ClientSession) -> None:
    task = (await rpc(http, server, send_message_body("hello")))["result"]["task"]
    full = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}})
    assert len(full["result"]["history"]) >= 2
    one = await rpc(http, server, {"jsonrpc": "2.0", "id": 3, "method": "GetTask",
                                   "params": {"id": task["id"], "historyLength": 1}})
    assert len(one["result"]["history"]) == 1
    assert one["result"]["history"][0] == full["result"]["history"][-1]
    again = await rpc(http, server, {"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": task["id"]}})
    assert again["result"]["history"] == full["result"]["history"]
    bad = await rpc(http, server, {"jsonrpc": "2.0", "id": 5, "method": "GetTask",
                                   "params": {"id": task["id"], "historyLength": -1}})
    assert bad["error"]["code"] == -32602


async def test_list_tasks_filters_by_context(server: RunningServer, http: aiohttp.ClientSession) -> None:
    first = (await rpc(http, server, send_message_body("one", contextId="ctx-a")))["result"]["task"]
    await rpc(http, server, send_message_body("two", message_id="m2", contextId="ctx-b"))
    listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 9, "method": "ListTasks",
                                      "params": {"contextId": "ctx-a"}})
    tasks = listed["result"]["tasks"]
    assert [t["id"] for t in tasks] == [first["id"]]
    assert "artifacts" not in tasks[0]
    everything = await rpc(http, server, {"jsonrpc": "2.0", "id": 10, "method": "ListTasks", "params": {}})
    assert len(everything["result"]["tasks"]) == 2


async def test_cancel_finished_turn_is_not_cancelable(server: RunningServer, http: aiohttp.ClientSession) -> None:
    task = (await rpc(http, server, send_message_body("hello")))["result"]["task"]
    reply = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}})
    assert reply["error"]["code"] == -32002
    after = await rpc(http, server, {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}})
    assert after["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_cancel_unknown_task(server: RunningServer, http: aiohttp.ClientSession) -> None:
    reply = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": "nope"}})
    assert reply["error"]["code"] == -32001


async def test_cancel_running_turn() -> None:
    async with gated_turn() as (server, http, stream, task, plugin):
        task_id = task["id"]
        reply = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask",
                                         "params": {"id": task_id}})
        assert reply["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        rest, _ = parse_sse(await asyncio.wait_for(stream.text(), 10))
        await asyncio.wait_for(plugin.runtime.cancelled.wait(), 10)
        got = await rpc(http, server, {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task_id}})
        assert got["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        states = [e["result"]["statusUpdate"]["status"]["state"] for e in rest if "statusUpdate" in e.get("result", {})]
        assert "TASK_STATE_INPUT_REQUIRED" not in states
        again = await rpc(http, server, {"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": task_id}})
        assert again["error"]["code"] == -32002
        plugin.runtime.release.set()  # the context is free again: a new turn runs to its end
        follow = await rpc(http, server, send_message_body("next", message_id="m-next", contextId=task["contextId"]))
        assert follow["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_subscribe_to_running_task_then_finished() -> None:
    async with gated_turn() as (server, http, stream, task, plugin):
        task_id = task["id"]
        sub_body = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": task_id}}
        async with http.post(server.url, json=sub_body, headers=A2A_HEADERS) as sub:
            assert sub.headers["Content-Type"].startswith("text/event-stream")
            head = await next_sse_data(sub.content)
            assert head["result"]["task"]["id"] == task_id
            plugin.runtime.release.set()
            events, _ = parse_sse(await asyncio.wait_for(sub.text(), 10))
        await stream.text()
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # The turn is over, the task rests: a new subscription opens with it and waits for the next turn.
        async with http.post(server.url, json=sub_body, headers=A2A_HEADERS) as sub:
            assert sub.headers["Content-Type"].startswith("text/event-stream")
            rest = (await next_sse_data(sub.content))["result"]["task"]
        assert rest["id"] == task_id and rest["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_follow_up_on_same_task(server: RunningServer, http: aiohttp.ClientSession) -> None:
    task = (await rpc(http, server, send_message_body("hello")))["result"]["task"]
    follow = await rpc(http, server, send_message_body("create a vpc", message_id="m2", taskId=task["id"],
                                                       contextId=task["contextId"]))
    assert follow["result"]["task"]["id"] == task["id"]
    assert follow["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_extended_card(server: RunningServer, http: aiohttp.ClientSession) -> None:
    reply = await rpc(http, server, {"jsonrpc": "2.0", "id": 8, "method": "GetExtendedAgentCard", "params": {}})
    skills = [s["id"] for s in reply["result"]["skills"]]
    assert skills[-1] == "iac_code_runtime_details" and "iac_generation" in skills


async def test_extended_card_requires_auth_when_configured() -> None:
    async with start_server({"token": "t"}) as server, aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 8, "method": "GetExtendedAgentCard", "params": {}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            assert r.status == 401
        async with http.post(server.url, json=body, headers={**A2A_HEADERS, "Authorization": "Bearer t"}) as r:
            assert (await r.json())["result"]["name"] == "iac-code"


async def test_tasks_are_scoped_to_the_caller() -> None:
    settings_ = {"token": "t", "api-key": "k"}
    async with start_server(settings_) as server, aiohttp.ClientSession() as http:
        bearer = {**A2A_HEADERS, "Authorization": "Bearer t"}
        api_key = {**A2A_HEADERS, "X-API-Key": "k"}
        task = (await rpc(http, server, send_message_body("hello"), bearer))["result"]["task"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        assert (await rpc(http, server, get, bearer))["result"]["id"] == task["id"]
        assert (await rpc(http, server, get, api_key))["error"]["code"] == -32001
        listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}}, api_key)
        assert listed["result"]["tasks"] == []


# ----------------------------------------------------------------------------- malformed requests

MALFORMED = [
    (b"{not json", -32700, None),
    (b"[]", -32600, None),
    (b'[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]', -32600, None),
    (b'"just a string"', -32600, None),
    (b'{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}', -32600, 1),
    (b'{"id":1,"method":"GetTask","params":{"id":"x"}}', -32600, 1),
    (b'{"jsonrpc":"2.0","id":1}', -32600, 1),
    (b'{"jsonrpc":"2.0","id":1,"method":5}', -32600, 1),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask","params":{"id":"x"}}', -32600, None),
    (b'{"jsonrpc":"2.0","id":true,"method":"GetTask","params":{"id":"x"}}', -32600, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"tasks/frobnicate","params":{}}', -32601, 1),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1,2]}', -32602, 1),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":{"nested":true}}}', -32602, 1),
    (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_NOPE"}}}', -32602, 1),
    (b'{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":"x"}}', -32602, "s"),
    (b'\xff\xfe\x00garbage', -32700, None),
]


@pytest.mark.parametrize(("body", "code", "request_id"), MALFORMED)
async def test_malformed_requests(server: RunningServer, http: aiohttp.ClientSession, body: bytes, code: int,
                                  request_id: Any) -> None:
    reply = await rpc(http, server, body)
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == request_id
    assert reply["error"]["code"] == code
    text = json.dumps(reply)
    assert "Traceback" not in text and "/work/" not in text and ".py" not in text


async def test_missing_message_fields_are_invalid_params(server: RunningServer,
                                                         http: aiohttp.ClientSession) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER"}}}
    reply = await rpc(http, server, body)
    assert reply["error"]["code"] == -32602


async def test_a2a_version_header(server: RunningServer, http: aiohttp.ClientSession) -> None:
    get = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    missing = await rpc(http, server, get, {"Content-Type": "application/json"})
    assert missing["error"]["code"] == -32009
    wrong = await rpc(http, server, get, {**A2A_HEADERS, "A2A-Version": "2.0"})
    assert wrong["error"]["code"] == -32009
    patch = await rpc(http, server, get, {**A2A_HEADERS, "A2A-Version": "1.0.3"})
    assert patch["error"]["code"] == -32001
    stream = await rpc(http, server, send_message_body("hi", method="SendStreamingMessage"),
                       {"Content-Type": "application/json"})
    assert stream["error"]["code"] == -32009


async def test_oversized_body_is_refused() -> None:
    async with start_server({"max-request-bytes": 2048}) as server, aiohttp.ClientSession() as http:
        body = send_message_body("x" * 5000)
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            assert r.status == 413
            reply = await r.json()
        assert reply["error"]["code"] == -32600
        async with http.post(server.url, data=_chunks(json.dumps(body).encode()),
                             headers=A2A_HEADERS) as r:  # chunked: no Content-Length
            assert r.status == 413
            assert (await r.json())["error"]["code"] == -32600
        assert (await rpc(http, server, send_message_body("small")))["result"]["task"]


async def _chunks(data: bytes) -> Any:
    for i in range(0, len(data), 1000):
        yield data[i:i + 1000]


async def test_unsupported_part_is_a_content_type_error(server: RunningServer,
                                                        http: aiohttp.ClientSession) -> None:
    body = send_message_body("x")
    body["params"]["message"]["parts"] = [{"raw": "AAAA", "mediaType": "application/x-unknown"}]
    reply = await rpc(http, server, body)
    assert reply["error"]["code"] == -32005
    listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
    assert listed["result"]["tasks"] == []


async def test_empty_text_fails_the_task(server: RunningServer, http: aiohttp.ClientSession) -> None:
    body = send_message_body("x")
    body["params"]["message"]["parts"] = [{"data": {"a": 1}, "mediaType": "application/json"}]
    ok = await rpc(http, server, body)
    assert ok["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    body["params"]["message"]["parts"] = [{"text": "   "}]
    body["params"]["message"]["messageId"] = "m-empty"
    reply = await rpc(http, server, body)
    status = reply["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == "A2A server currently accepts text input only."


async def test_required_extensions() -> None:
    uri = "urn:example:required:v1"
    async with start_server({"required-extensions": [uri]}) as server, aiohttp.ClientSession() as http:
        get = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        missing = await rpc(http, server, get)
        assert missing["error"]["code"] == -32008
        assert uri in missing["error"]["message"]
        ok = await rpc(http, server, get, {**A2A_HEADERS, "A2A-Extensions": f"urn:other, {uri}"})
        assert ok["error"]["code"] == -32001
        card = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetExtendedAgentCard"})
        extensions = card["result"]["capabilities"]["extensions"]
        # spec order: programmatic ones before the pipeline-events extension; plugins' extensions (execution control) after
        uris = [e["uri"] for e in extensions]
        pipeline = uris.index("urn:iac-code:a2a:pipeline-events:v1")
        assert uris[pipeline + 1:] == ["urn:iac-code:a2a:execution-control:v1"]
        assert extensions[pipeline - 1] == {
            "uri": uri, "description": "Required by this server.", "required": True}


async def test_second_message_mid_turn_is_refused() -> None:
    async with gated_turn() as (server, http, stream, task, plugin):
        again = await rpc(http, server, send_message_body("more", message_id="m2", taskId=task["id"],
                                                          contextId=task["contextId"]))
        assert again["error"]["code"] == -32004
        assert again["error"]["message"] == "Task is already working."
        plugin.runtime.release.set()
        events, _ = parse_sse(await asyncio.wait_for(stream.text(), 10))
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        got = await rpc(http, server, {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}})
        assert [m["messageId"] for m in got["result"]["history"] if m["role"] == "ROLE_USER"] == ["msg-1"]
