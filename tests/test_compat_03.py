"""A2A 0.3 clients (no A2A-Version header) over JSON-RPC and HTTP+JSON, on a real server.

0.3 method names and the ``/v1/...`` routes are served 0.3-shaped through
a2a-sdk's 0.3 layer, over the same call core as 1.0: auth, owner scoping,
permission pauses and push settings apply unchanged.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

from iac_code.testing import A2A_HEADERS, RunningServer, next_sse_data, parse_sse, start_server

VPC_PROMPT = "Create a VPC with two vSwitches."
HOOK = "https://8.8.8.8/a2a-hook"
JSON = {"Content-Type": "application/json"}  # no A2A-Version: a 0.3 client


def message(text: str = "hello", message_id: str = "m1", **fields: Any) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": text}],
            "messageId": message_id, **fields}


def rpc_body(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


async def rpc(http: aiohttp.ClientSession, server: RunningServer, method: str, params: Any = None,
              headers: dict[str, str] | None = None) -> dict[str, Any]:
    async with http.post(server.url, json=rpc_body(method, params), headers=headers or JSON) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("application/json")
        reply: dict[str, Any] = await r.json()
        return reply


@pytest.fixture
async def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningServer]:
    monkeypatch.chdir(tmp_path)  # the default workspace: generated files land here
    async with start_server({"push-notifications": True}) as running:
        yield running


def assert_v03_task(task: dict[str, Any], state: str) -> None:
    assert task["kind"] == "task"
    assert task["status"]["state"] == state
    for item in task.get("history", []):
        assert item["kind"] == "message" and item["role"] in ("user", "agent")
        assert all("kind" in part for part in item["parts"])


# ----------------------------------------------------------------------------- JSON-RPC


async def test_send_and_get_are_0_3_shaped(server: RunningServer, http: aiohttp.ClientSession) -> None:
    reply = await rpc(http, server, "message/send", {"message": message()})
    assert reply["jsonrpc"] == "2.0" and reply["id"] == 1
    task = reply["result"]
    assert_v03_task(task, "input-required")  # the iac-code runtime's turns end in INPUT_REQUIRED
    assert task["history"][0] == {**message(), "taskId": task["id"], "contextId": task["contextId"]}
    assert "TASK_STATE_INPUT_REQUIRED" not in str(task)

    got = (await rpc(http, server, "tasks/get", {"id": task["id"], "historyLength": 1}))["result"]
    assert_v03_task(got, "input-required")
    assert got["id"] == task["id"] and len(got["history"]) == 1

    missing = await rpc(http, server, "tasks/get", {"id": "no-such-task"})
    assert missing["error"] == {"code": -32001, "message": "Task not found"}  # 0.3: no ErrorInfo data


async def test_a_0_3_name_is_0_3_whatever_the_version_says(server: RunningServer,
                                                         http: aiohttp.ClientSession) -> None:
    for version in ("1.0", "2.0", "0.3"):
        reply = await rpc(http, server, "message/send", {"message": message(message_id=f"m-{version}")},
                          headers={**JSON, "A2A-Version": version})
        assert_v03_task(reply["result"], "input-required")
    # A 1.0 name without A2A-Version is still refused, as before.
    refused = await rpc(http, server, "GetTask", {"id": "x"})
    assert refused["error"]["code"] == -32009
    assert refused["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    wrong = await rpc(http, server, "GetTask", {"id": "x"}, headers={**A2A_HEADERS, "A2A-Version": "2.0"})
    assert wrong["error"]["code"] == -32009


async def test_invalid_0_3_params(server: RunningServer, http: aiohttp.ClientSession) -> None:
    reply = await rpc(http, server, "message/send", {"message": {"kind": "message", "parts": []}})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("Invalid params: field 'params.message.")
    reply = await rpc(http, server, "tasks/get", {"taskId": "x"})
    assert reply["error"] == {"code": -32602, "message": "Invalid params: field 'params.id' has an invalid value"}
    # The core's own validation answers too (ids are 1-128 safe characters).
    reply = await rpc(http, server, "tasks/get", {"id": "bad id!"})
    assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("Invalid A2A id")


async def test_stream_frames_are_0_3_shaped(server: RunningServer, http: aiohttp.ClientSession) -> None:
    body = rpc_body("message/stream", {"message": message(message_id="m-stream")}, request_id="s1")
    async with http.post(server.url, json=body, headers=JSON) as r:
        assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        events, other = parse_sse(await asyncio.wait_for(r.text(), 10))
    assert other == [] and len(events) >= 3
    assert all(e["jsonrpc"] == "2.0" and e["id"] == "s1" for e in events)
    kinds = [e["result"]["kind"] for e in events]
    assert kinds[0] == "task" and set(kinds[1:]) <= {"status-update", "artifact-update"}
    assert_v03_task(events[0]["result"], "submitted")
    last = events[-1]["result"]
    assert last["kind"] == "status-update" and last["status"]["state"] == "input-required"
    assert "statusUpdate" not in str(events)

    # The turn is over, the task rests: a resubscription shows it, then waits for its next turn.
    async with http.post(server.url, json=rpc_body("tasks/resubscribe", {"id": last["taskId"]}), headers=JSON) as r:
        assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        first = await next_sse_data(r.content, 10)
    assert first["result"]["kind"] == "task" and first["result"]["status"]["state"] == "input-required"


async def test_cancel_a_turn_paused_at_a_permission(server: RunningServer, http: aiohttp.ClientSession) -> None:
    paused = (await rpc(http, server, "message/send", {"message": message(VPC_PROMPT, "m-vpc")}))["result"]
    assert_v03_task(paused, "input-required")
    assert paused["metadata"]["iac_code"]["input"]["kind"] == "permission"
    assert paused["metadata"]["iac_code"]["input"]["schemaVersion"] == 1  # integers stay integers

    canceled = (await rpc(http, server, "tasks/cancel", {"id": paused["id"]}))["result"]
    assert_v03_task(canceled, "canceled")
    again = await rpc(http, server, "tasks/cancel", {"id": paused["id"]})
    assert again["error"]["code"] == -32002


async def test_answer_a_permission_with_a_0_3_data_part(server: RunningServer, http: aiohttp.ClientSession) -> None:
    paused = (await rpc(http, server, "message/send", {"message": message(VPC_PROMPT, "m-vpc")}))["result"]
    envelope = paused["metadata"]["iac_code"]["input"]
    answer = {"kind": "message", "role": "user", "messageId": "m-answer", "taskId": paused["id"],
              "contextId": paused["contextId"], "parts": [{"kind": "data", "data": {
                  "schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
                  "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": "deny"}}]}
    reply = await rpc(http, server, "message/send", {"message": answer})
    task = reply["result"]
    assert_v03_task(task, "input-required")
    assert task["metadata"]["iac_code"].get("input", {}).get("inputId") != envelope["inputId"]


async def test_push_configs(server: RunningServer, http: aiohttp.ClientSession) -> None:
    task = (await rpc(http, server, "message/send", {"message": message()}))["result"]
    config = {"taskId": task["id"], "pushNotificationConfig": {"id": "p1", "url": HOOK, "token": "tok"}}
    created = await rpc(http, server, "tasks/pushNotificationConfig/set", config)
    assert created["result"] == config
    got = await rpc(http, server, "tasks/pushNotificationConfig/get",
                    {"id": task["id"], "pushNotificationConfigId": "p1"})
    assert got["result"] == config
    listed = await rpc(http, server, "tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert listed["result"] == [config]
    deleted = await rpc(http, server, "tasks/pushNotificationConfig/delete",
                        {"id": task["id"], "pushNotificationConfigId": "p1"})
    assert deleted == {"jsonrpc": "2.0", "id": 1, "result": None}
    listed = await rpc(http, server, "tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert listed["result"] == []
    # The core's URL checks apply to 0.3 callers too.
    unsafe = {"taskId": task["id"], "pushNotificationConfig": {"url": "http://127.0.0.1:9/x"}}
    assert (await rpc(http, server, "tasks/pushNotificationConfig/set", unsafe))["error"]["code"] == -32602


async def test_push_configs_follow_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server() as server, aiohttp.ClientSession() as http:
        task = (await rpc(http, server, "message/send", {"message": message()}))["result"]
        config = {"taskId": task["id"], "pushNotificationConfig": {"url": HOOK}}
        refused = await rpc(http, server, "tasks/pushNotificationConfig/set", config)
        assert refused["error"]["code"] == -32003


async def test_extended_card_is_a_0_3_card(server: RunningServer, http: aiohttp.ClientSession) -> None:
    card = (await rpc(http, server, "agent/getAuthenticatedExtendedCard"))["result"]
    assert card["name"] == "iac-code"
    assert card["protocolVersion"] == "0.3" and card["preferredTransport"] == "JSONRPC"
    assert card["url"] == server.url
    assert {"transport": "HTTP+JSON", "url": server.url.rstrip("/")} in card["additionalInterfaces"]
    assert "iac_code_runtime_details" in [s["id"] for s in card["skills"]]


async def test_auth_and_owner_scope_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server({"token": "t", "api-key": "k"}) as server, aiohttp.ClientSession() as http:
        body = rpc_body("message/send", {"message": message()})
        async with http.post(server.url, json=body, headers=JSON) as r:
            assert r.status == 401
        async with http.get(server.url + "v1/card") as r:
            assert r.status == 401
        bearer = {**JSON, "Authorization": "Bearer t"}
        task = (await rpc(http, server, "message/send", {"message": message()}, bearer))["result"]
        assert (await rpc(http, server, "tasks/get", {"id": task["id"]}, bearer))["result"]["id"] == task["id"]
        other = {**JSON, "X-API-Key": "k"}
        assert (await rpc(http, server, "tasks/get", {"id": task["id"]}, other))["error"]["code"] == -32001


async def test_required_extensions_accept_the_legacy_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    uri = "urn:example:required"
    async with start_server({"required-extensions": [uri]}) as server, aiohttp.ClientSession() as http:
        refused = await rpc(http, server, "tasks/get", {"id": "x"})
        assert refused["error"]["code"] == -32603  # 0.3 has no -32008: the SDK's 0.3 mapping
        assert "Required A2A extensions" in refused["error"]["message"]
        for header in ("A2A-Extensions", "X-A2A-Extensions"):
            reply = await rpc(http, server, "tasks/get", {"id": "x"}, {**JSON, header: uri})
            assert reply["error"]["code"] == -32001


# ----------------------------------------------------------------------------- HTTP+JSON (/v1)


async def test_rest_v1_send_and_get(server: RunningServer, http: aiohttp.ClientSession) -> None:
    base = server.url.rstrip("/")
    body = {"message": {"messageId": "r1", "role": "ROLE_USER", "content": [{"text": "hello"}]}}
    async with http.post(base + "/v1/message:send", json=body) as r:
        assert r.status == 200
        task = (await r.json())["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # 0.3 proto-JSON
    assert task["history"][0]["content"] == [{"text": "hello"}]
    async with http.get(f"{base}/v1/tasks/{task['id']}", params={"historyLength": "1"}) as r:
        got = await r.json()
    assert got["id"] == task["id"] and len(got["history"]) == 1
    async with http.get(base + "/v1/tasks/no-such-task") as r:
        assert r.status == 404
        assert await r.json() == {"message": "Task not found"}  # a2a-sdk 0.3's REST error body
    # A 1.0 client: "/v1" is then a tenant, as before.
    async with http.get(f"{base}/v1/tasks/{task['id']}", headers={"A2A-Version": "1.0"}) as r:
        assert r.status == 200
        assert (await r.json())["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    async with http.get(base + "/v1/card", headers={"A2A-Version": "1.0"}) as r:
        assert r.status == 404


async def test_rest_v1_stream_push_and_card(server: RunningServer, http: aiohttp.ClientSession) -> None:
    base = server.url.rstrip("/")
    body = {"message": {"messageId": "r2", "role": "ROLE_USER", "content": [{"text": "hello"}]}}
    async with http.post(base + "/v1/message:stream", json=body) as r:
        assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        events, _ = parse_sse(await asyncio.wait_for(r.text(), 10))
    assert "task" in events[0] and events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task_id = events[0]["task"]["id"]
    config = {"name": f"tasks/{task_id}/pushNotificationConfigs/p1",
              "pushNotificationConfig": {"id": "p1", "url": HOOK}}
    async with http.post(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs",
                         json={"parent": f"tasks/{task_id}", "configId": "p1", "config": config}) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["pushNotificationConfig"]["url"] == HOOK
    async with http.get(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs/p1") as r:
        assert (await r.json())["pushNotificationConfig"]["id"] == "p1"
    async with http.get(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs") as r:
        assert len((await r.json())["configs"]) == 1
    async with http.delete(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs/p1") as r:
        assert r.status == 200
    async with http.get(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs") as r:
        assert (await r.json()).get("configs", []) == []
    async with http.get(base + "/v1/card") as r:
        card = await r.json()
    assert card["name"] == "iac-code" and card["protocolVersion"] == "0.3"
    async with http.post(base + "/v1/message:send", data=b"{not json", headers=JSON) as r:
        assert r.status == 400


# ----------------------------------------------------------------------------- a2a-sdk's 0.3 clients


def sdk_request(text: str, message_id: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)]))


async def test_sdk_0_3_jsonrpc_client(server: RunningServer) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        transport = CompatJsonRpcTransport(client, None, server.url)
        sent = await transport.send_message(sdk_request("hello", "c1"))
        assert sent.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        got = await transport.get_task(GetTaskRequest(id=sent.task.id))
        assert got.id == sent.task.id and got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        events = [event async for event in transport.send_message_streaming(sdk_request("hello", "c2"))]
        assert events[0].HasField("task")
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_sdk_0_3_rest_client(server: RunningServer) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        transport = CompatRestTransport(client, None, server.url)
        # This client always sends a configuration, whose 0.3 proto ``blocking`` reads false:
        # the answer comes at the first event, as with a2a-sdk's own 0.3 REST server.
        sent = await transport.send_message(sdk_request("hello", "c3"))
        assert sent.task.id
        for _ in range(100):
            got = await transport.get_task(GetTaskRequest(id=sent.task.id))
            if got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                break
            await asyncio.sleep(0.05)
        assert got.id == sent.task.id and got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        card = await transport.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card.name == "iac-code"


# ----------------------------------------------------------------------------- the card a 0.3 client reads


@pytest.fixture
async def legacy_card_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningServer]:
    """A server whose card lists its 0.3 interfaces (``card-legacy-fields: true``)."""
    monkeypatch.chdir(tmp_path)
    async with start_server({"card-legacy-fields": True}) as running:
        yield running


async def test_the_public_card_carries_the_0_3_fields(legacy_card_server: RunningServer,
                                                      http: aiohttp.ClientSession) -> None:
    """transports.md (cards): the HTTP card also carries the legacy fields, naming the 0.3 interfaces served."""
    from a2a.client.card_resolver import parse_agent_card
    from a2a.compat.v0_3 import types as types_v03

    server = legacy_card_server

    async with http.get(server.url + ".well-known/agent-card.json") as r:
        assert r.status == 200
        document = await r.json()
    rest_url = server.url.rstrip("/")
    assert document["url"] == server.url
    assert document["preferredTransport"] == "JSONRPC" and document["protocolVersion"] == "0.3"
    assert document["additionalInterfaces"] == [{"url": rest_url, "transport": "HTTP+JSON"}]
    assert [(i["protocolBinding"], i["protocolVersion"]) for i in document["supportedInterfaces"]] == [
        ("JSONRPC", "1.0"), ("HTTP+JSON", "1.0")]  # the 1.0 list as it was
    legacy = types_v03.AgentCard.model_validate(document)  # what an a2a-sdk 0.3 client parses
    assert (legacy.url, legacy.protocol_version, legacy.supports_authenticated_extended_card) == (
        server.url, "0.3", True)
    assert parse_agent_card(dict(document)) == server.kernel.cards.card  # a 1.0 reader sees the 1.0 card


async def test_the_default_card_is_the_strict_1_0_card(server: RunningServer, http: aiohttp.ClientSession) -> None:
    """By default only the 1.0 card's own fields (what the conformance kit's schema check, CARD-STRUCT-001, accepts)."""
    async with http.get(server.url + ".well-known/agent-card.json") as r:
        document = await r.json()
    for legacy in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces",
                   "supportsAuthenticatedExtendedCard"):
        assert legacy not in document
    assert [(i["protocolBinding"], i["protocolVersion"]) for i in document["supportedInterfaces"]] == [
        ("JSONRPC", "1.0"), ("HTTP+JSON", "1.0")]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_0_3_client_discovers_the_server_from_the_card(legacy_card_server: RunningServer,
                                                               http: aiohttp.ClientSession, binding: str) -> None:
    """A 0.3-era card reader (no ``supportedInterfaces``) finds the 0.3 interfaces and talks 0.3 through them."""
    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.card_resolver import parse_agent_card

    server = legacy_card_server

    async with http.get(server.url + ".well-known/agent-card.json") as r:
        document = await r.json()
    document.pop("supportedInterfaces")
    card = parse_agent_card(document)
    assert {(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces} == {
        ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")}
    async with httpx.AsyncClient(timeout=10) as client:
        sdk = ClientFactory(ClientConfig(streaming=True, httpx_client=client,
                                         supported_protocol_bindings=[binding])).create(card)
        try:
            events = [event async for event in sdk.send_message(sdk_request("hello", f"card-{binding}"))]
        finally:
            await sdk.close()
    assert events[0].HasField("task")
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


# ----------------------------------------------------------------------------- file bytes on every binding

TEXT_FILE = "héllo wörld\nzweite Zeile\n".encode()
BINARY_FILE = bytes(range(256)) + b"\x00\xff\xfe"
FILES = (("notes.txt", "text/plain", TEXT_FILE), ("blob.bin", "application/octet-stream", BINARY_FILE))


async def _send_files(binding: str, server: RunningServer, http: aiohttp.ClientSession) -> tuple[str, list[bytes]]:
    """Send a text and a binary file over ``binding``; the task id and the files as that binding reads them back."""
    b64 = [base64.b64encode(data).decode() for _, _, data in FILES]
    if binding == "JSONRPC-0.3":
        parts = [{"kind": "text", "text": "look"}, *({"kind": "file", "file": {"bytes": b, "mimeType": m, "name": n}}
                                                    for (n, m, _), b in zip(FILES, b64, strict=True))]
        task = (await rpc(http, server, "message/send", {"message": message(message_id="f03", parts=parts)}))["result"]
        got = (await rpc(http, server, "tasks/get", {"id": task["id"]}))["result"]
        return task["id"], [base64.b64decode(p["file"]["bytes"]) for p in got["history"][0]["parts"][1:]]
    if binding == "HTTP+JSON-0.3":
        content = [{"text": "look"}, *({"file": {"fileWithBytes": b, "mimeType": m, "name": n}}
                                       for (n, m, _), b in zip(FILES, b64, strict=True))]
        body = {"message": {"messageId": "f03r", "role": "ROLE_USER", "content": content}}
        async with http.post(server.url + "v1/message:send", json=body) as r:
            assert r.status == 200, await r.text()
            task = (await r.json())["task"]
        async with http.get(server.url + f"v1/tasks/{task['id']}") as r:
            got = await r.json()
        return task["id"], [base64.b64decode(p["file"]["fileWithBytes"]) for p in got["history"][0]["content"][1:]]
    from tests.bindings_support import fetch_card

    async with httpx.AsyncClient(timeout=15) as client:
        card = await fetch_card(server, client)
        config = ClientConfig(streaming=False, supported_protocol_bindings=[binding], httpx_client=client,
                              grpc_channel_factory=grpc.aio.insecure_channel)
        sdk = ClientFactory(config).create(card)
        try:
            parts = [Part(text="look"), *(Part(raw=d, media_type=m, filename=n) for n, m, d in FILES)]
            request = SendMessageRequest(message=Message(message_id=f"f-{binding}", role=Role.ROLE_USER, parts=parts))
            [reply] = [event async for event in sdk.send_message(request)]
            got = await sdk.get_task(GetTaskRequest(id=reply.task.id))
        finally:
            await sdk.close()
    return reply.task.id, [p.raw for p in got.history[0].parts[1:]]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC", "JSONRPC-0.3", "HTTP+JSON-0.3"])
async def test_file_bytes_are_stored_byte_exact(binding: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text and a binary file, sent as bytes over each 1.0 and 0.3 binding, are stored and read back unchanged."""
    monkeypatch.chdir(tmp_path)
    async with start_server({"transport": ["http", "grpc"], "grpc-port": 0}) as server, \
            aiohttp.ClientSession() as http:
        task_id, read_back = await _send_files(binding, server, http)
        assert read_back == [data for _, _, data in FILES]
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            stored = (await r.json())["result"]["history"][0]["parts"][1:]
    assert [(p["filename"], p["mediaType"], base64.b64decode(p["raw"])) for p in stored] == list(FILES)


async def test_rest_v1_errors_are_0_3_shaped(server: RunningServer, http: aiohttp.ClientSession) -> None:
    """a2a-sdk 0.3's REST handler answered errors as ``{"message": ...}`` with its own HTTP statuses."""
    async with http.get(server.url + "v1/tasks/no-such-task") as r:
        assert (r.status, await r.json()) == (404, {"message": "Task not found"})
    async with http.post(server.url + "v1/tasks/no-such-task:cancel", json={}) as r:
        assert (r.status, await r.json()) == (404, {"message": "Task not found"})
    async with http.post(server.url + "v1/message:send", json={"message": {"role": "ROLE_USER", "content": 7}}) as r:
        assert r.status == 422
        assert set(await r.json()) == {"message"}
    async with http.post(server.url + "v1/message:send", data=b"{not json", headers=JSON) as r:
        assert r.status == 400
        assert set(await r.json()) == {"message"}


async def test_the_last_event_of_a_0_3_stream_is_final(server: RunningServer, http: aiohttp.ClientSession) -> None:
    body = rpc_body("message/stream", {"message": message(message_id="m-final")}, request_id="f1")
    async with http.post(server.url, json=body, headers=JSON) as r:
        events, _ = parse_sse(await asyncio.wait_for(r.text(), 10))
    updates = [e["result"] for e in events if e["result"]["kind"] == "status-update"]
    assert updates[-1]["final"] is True and updates[-1]["status"]["state"] == "input-required"
    assert not any(u["final"] for u in updates[:-1])
    rest_body = {"message": {"messageId": "m-final-rest", "role": "ROLE_USER", "content": [{"text": "hello"}]}}
    async with http.post(server.url + "v1/message:stream", json=rest_body) as r:
        events, _ = parse_sse(await asyncio.wait_for(r.text(), 10))
    assert events[-1]["statusUpdate"]["final"] is True
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert not any(e.get("statusUpdate", {}).get("final") for e in events[:-1])
