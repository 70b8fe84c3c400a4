"""The A2A 1.0 HTTP+JSON (REST) binding, served beside JSON-RPC by the HTTP transport.

a2a-sdk's own client over HTTP+JSON for the happy paths, raw aiohttp requests for
the wire details (error shapes, statuses, media types, auth, limits).
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import (
    A2A_HEADERS,
    RunningServer,
    next_sse_data,
    parse_sse,
    permission_answer_body,
    permission_answer_request,
    permission_envelope,
    send_message_body,
    start_server,
)

VPC_PROMPT = "Create a VPC with two vSwitches."
PUBLIC_HOOK = "https://8.8.8.8/a2a-hook"
REST_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/a2a+json"}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def rest_url(server: RunningServer) -> str:
    return server.url.rstrip("/")


def _request(text: str, **fields: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=f"m-{text[:8]}", role=Role.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


@asynccontextmanager
async def rest_client(server: RunningServer, http: httpx.AsyncClient, *, streaming: bool) -> AsyncIterator[Client]:
    config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=["HTTP+JSON"])
    client = await ClientFactory(config).create_from_url(server.url)
    try:
        yield client
    finally:
        await client.close()


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    """Every event; the stream must end by itself (bounded wait)."""

    async def run() -> list[Any]:
        return [e async for e in stream]

    return await asyncio.wait_for(run(), 15)


def assert_status_error(body: dict[str, Any], code: int, status: str, reason: str) -> str:
    """``body`` is a google.rpc.Status error with ErrorInfo ``reason``; returns its message."""
    error = body["error"]
    assert set(error) == {"code", "status", "message", "details"}
    assert error["code"] == code and error["status"] == status
    assert error["details"] == [{"@type": ERROR_INFO, "reason": reason, "domain": "a2a-protocol.org", "metadata": {}}]
    message = error["message"]
    assert "Traceback" not in message and ".py" not in message and "/tmp" not in message
    return str(message)


# ---------------------------------------------------------------------------- the card


async def test_card_lists_both_bindings() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + ".well-known/agent-card.json") as r:
            card = await r.json()
    assert card["supportedInterfaces"] == [
        {"url": server.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": rest_url(server), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]


# ---------------------------------------------------------------------------- a2a-sdk's REST client


async def test_sdk_rest_client_unary_get_list_cancel_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server() as server, httpx.AsyncClient() as http, \
            rest_client(server, http, streaming=False) as client:
        [hello] = await collect(client.send_message(_request("hello", context_id="ctx-rest")))
        task = hello.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert task.context_id == "ctx-rest"
        with pytest.raises(TaskNotCancelableError):  # the turn is over: nothing runs
            await client.cancel_task(CancelTaskRequest(id=task.id))

        [paused] = await collect(client.send_message(_request(VPC_PROMPT)))
        envelope = MessageToDict(paused.task.metadata)["iac_code"]["input"]
        assert envelope["toolName"] == "write_file"

        got = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert got.id == task.id and len(got.history) == 1
        full = await client.get_task(GetTaskRequest(id=task.id))
        assert len(full.history) > 1
        listed = await client.list_tasks(ListTasksRequest())
        assert sorted(t.id for t in listed.tasks) == sorted([task.id, paused.task.id])
        only = await client.list_tasks(ListTasksRequest(context_id="ctx-rest"))
        assert [t.id for t in only.tasks] == [task.id]
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))

        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert any(s.id == "iac_code_runtime_details" for s in card.skills)

        canceled = await client.cancel_task(CancelTaskRequest(id=paused.task.id))  # paused: cancelable
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("decision", ["allow_once", "deny"])
async def test_sdk_rest_streaming_answers_the_permission(decision: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "template.ros.yaml"
    async with start_server() as server, httpx.AsyncClient() as http, \
            rest_client(server, http, streaming=True) as client:
        events = await collect(client.send_message(_request(VPC_PROMPT)))
        assert events[0].WhichOneof("payload") == "task"
        last = events[-1].status_update
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        envelope = MessageToDict(last.metadata)["iac_code"]["input"]
        assert not template.exists()

        rest = await collect(client.send_message(permission_answer_request(envelope, decision, message_id="m-answer")))
        assert rest[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        resumed = rest[1].status_update
        assert resumed.status.state == TaskState.TASK_STATE_WORKING
        assert MessageToDict(resumed.status.message)["parts"][0]["data"]["decision"] == decision
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert template.exists() is (decision == "allow_once")

        hello = await collect(client.send_message(_request("hello")))
        assert hello[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_sdk_rest_subscribe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server() as server, httpx.AsyncClient() as http, \
            rest_client(server, http, streaming=True) as client:
        paused = await collect(client.send_message(_request(VPC_PROMPT)))
        task_id = paused[0].task.id
        stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
        first = await asyncio.wait_for(anext(stream), 10)
        assert first.task.id == task_id
        assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        await stream.aclose()
        with pytest.raises(TaskNotFoundError):
            await collect(client.subscribe(SubscribeToTaskRequest(id="no-such-task")))


async def test_sdk_rest_push_config_crud() -> None:
    async with start_server({"push-notifications": True}) as server, httpx.AsyncClient() as http, \
            rest_client(server, http, streaming=False) as client:
        [hello] = await collect(client.send_message(_request("hello")))
        task_id = hello.task.id
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id="hook-1", url=PUBLIC_HOOK, token="t-1"))
        assert created.id == "hook-1" and created.url == PUBLIC_HOOK and created.task_id == task_id
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"))
        assert got.url == PUBLIC_HOOK
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id))
        assert [c.id for c in listed.configs] == ["hook-1"]
        with pytest.raises(InvalidParamsError):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, id="bad", url="http://127.0.0.1:9/x"))
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"))
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id))
        assert list(listed.configs) == []


# ---------------------------------------------------------------------------- same results as JSON-RPC


async def rpc(http: aiohttp.ClientSession, server: RunningServer, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


async def test_rest_results_equal_jsonrpc_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        sent = send_message_body("hello", contextId="ctx-same")["params"]
        async with http.post(base + "/message:send", json=sent, headers=REST_HEADERS) as r:
            assert r.status == 200
            assert r.headers["Content-Type"] == "application/json"  # A2A 1.0 §11.1
            task = (await r.json())["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id = task["id"]

        async with http.get(f"{base}/tasks/{task_id}", params={"historyLength": "1"}, headers=REST_HEADERS) as r:
            rest_task = await r.json()
        assert rest_task == (await rpc(http, server, "GetTask", {"id": task_id, "historyLength": 1}))["result"]
        assert len(rest_task["history"]) == 1

        query = {"contextId": "ctx-same", "includeArtifacts": "true", "pageSize": "10"}
        async with http.get(base + "/tasks", params=query, headers=REST_HEADERS) as r:
            listed = await r.json()
        assert listed == (await rpc(http, server, "ListTasks", {
            "contextId": "ctx-same", "includeArtifacts": True, "pageSize": 10}))["result"]
        assert [t["id"] for t in listed["tasks"]] == [task_id]

        hook = {"id": "hook-1", "url": PUBLIC_HOOK}
        async with http.post(f"{base}/tasks/{task_id}/pushNotificationConfigs", json=hook,
                             headers=REST_HEADERS) as r:
            assert r.status == 200
            created = await r.json()
        assert created == (await rpc(http, server, "GetTaskPushNotificationConfig",
                                     {"taskId": task_id, "id": "hook-1"}))["result"]
        async with http.get(f"{base}/tasks/{task_id}/pushNotificationConfigs/hook-1", headers=REST_HEADERS) as r:
            assert await r.json() == created
        async with http.delete(f"{base}/tasks/{task_id}/pushNotificationConfigs/hook-1", headers=REST_HEADERS) as r:
            assert r.status == 200 and await r.json() == {}

        async with http.get(base + "/extendedAgentCard", headers=REST_HEADERS) as r:
            assert await r.json() == (await rpc(http, server, "GetExtendedAgentCard", {}))["result"]


async def test_rest_streaming_frames_and_permission_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server() as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        body = send_message_body(VPC_PROMPT)["params"]
        async with http.post(base + "/message:stream", json=body, headers=REST_HEADERS) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            events, other = parse_sse(await asyncio.wait_for(r.text(), 15))
        assert other == []
        assert all(len(e) == 1 and next(iter(e)) in ("task", "statusUpdate", "artifactUpdate") for e in events)
        assert "task" in events[0]
        envelope = permission_envelope(events[-1]["statusUpdate"])
        assert envelope is not None and envelope["toolName"] == "write_file"

        task_id = events[0]["task"]["id"]
        for method in ("GET", "POST"):  # paused for the answer: the subscription shows the task, then ends
            async with http.request(method, f"{base}/tasks/{task_id}:subscribe", headers=REST_HEADERS) as r:
                assert r.status == 200
                [current], _ = parse_sse(await asyncio.wait_for(r.text(), 10))
            assert current["task"]["id"] == task_id
            assert permission_envelope(current["task"]) == envelope

        answer = permission_answer_body(envelope)["params"]
        async with http.post(base + "/message:send", json=answer, headers=REST_HEADERS) as r:
            task = (await r.json())["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert permission_envelope(task) is None
        assert (tmp_path / "template.ros.yaml").exists()

        async with http.get(f"{base}/tasks/{task['id']}:subscribe", headers=REST_HEADERS) as r:
            assert r.status == 200  # the turn is over, the task rests: its snapshot, then its next turn
            rest = (await next_sse_data(r.content, 10))["task"]
        assert rest["id"] == task["id"] and rest["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_tenant_prefix() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        body = send_message_body("hello")["params"]
        async with http.post(base + "/acme/message:send", json=body, headers=REST_HEADERS) as r:
            assert r.status == 200
            task_id = (await r.json())["task"]["id"]
        async with http.get(f"{base}/acme/tasks/{task_id}", headers=REST_HEADERS) as r:
            assert r.status == 200 and (await r.json())["id"] == task_id
        async with http.get(f"{base}/acme/tasks", headers=REST_HEADERS) as r:
            assert [t["id"] for t in (await r.json())["tasks"]] == [task_id]


# ---------------------------------------------------------------------------- errors on the wire


async def test_unknown_task_is_404_status_shaped() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        for method, path in (("GET", "/tasks/no-such-task"), ("POST", "/tasks/no-such-task:cancel"),
                             ("GET", "/tasks/no-such-task:subscribe")):
            async with http.request(method, base + path, headers=REST_HEADERS) as r:
                assert r.status == 404, path
                assert r.headers["Content-Type"] == "application/json"
                assert_status_error(await r.json(), 404, "NOT_FOUND", "TASK_NOT_FOUND")
        reply = await rpc(http, server, "GetTask", {"id": "no-such-task"})
        async with http.get(base + "/tasks/no-such-task", headers=REST_HEADERS) as r:
            assert (await r.json())["error"]["message"] == reply["error"]["message"]


async def test_bad_bodies_and_params_are_400() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        async with http.post(base + "/message:send", data=b"{not json", headers=REST_HEADERS) as r:
            assert r.status == 400
            message = assert_status_error(await r.json(), 400, "INVALID_ARGUMENT", "INVALID_REQUEST")
        assert message == "Parse error: request body is not valid JSON"
        async with http.post(base + "/message:send", data=b"[1]", headers=REST_HEADERS) as r:
            assert_status_error(await r.json(), 400, "INVALID_ARGUMENT", "INVALID_REQUEST")
        bad = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 5}]}}
        async with http.post(base + "/message:send", json=bad, headers=REST_HEADERS) as r:
            message = assert_status_error(await r.json(), 400, "INVALID_ARGUMENT", "INVALID_PARAMS")
        reply = await rpc(http, server, "SendMessage", bad)
        assert message == reply["error"]["message"]
        async with http.get(base + "/tasks", params={"pageSize": "many"}, headers=REST_HEADERS) as r:
            assert r.status == 400
            message = assert_status_error(await r.json(), 400, "INVALID_ARGUMENT", "INVALID_PARAMS")
        assert message == "Invalid params: field 'pageSize' has an invalid value"
        async with http.post(base + "/message:send", data=b"\x00", headers={
                "A2A-Version": "1.0", "Content-Type": "text/plain"}) as r:
            assert_status_error(await r.json(), 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")


async def test_version_and_extension_checks() -> None:
    async with start_server({"required-extensions": ["urn:example:must:v1"]}) as server, \
            aiohttp.ClientSession() as http:
        base = rest_url(server)
        async with http.get(base + "/tasks", headers={"A2A-Version": "0.3"}) as r:
            assert r.status == 400
            message = assert_status_error(await r.json(), 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
        assert message.startswith("A2A version '0.3' is not supported")
        async with http.get(base + "/tasks") as r:
            assert_status_error(await r.json(), 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
        async with http.get(base + "/tasks", params={"A2A-Version": "1.0"}) as r:
            assert_status_error(await r.json(), 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED")
        async with http.get(base + "/tasks", headers={**REST_HEADERS, "A2A-Extensions": "urn:example:must:v1"}) as r:
            assert r.status == 200
        async with http.get(base + "/extendedAgentCard", headers=REST_HEADERS) as r:
            assert r.status == 200  # exempt from the extension check, as over JSON-RPC


async def test_push_disabled_is_failed_precondition() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.post(rest_url(server) + "/tasks/t/pushNotificationConfigs",
                             json={"url": PUBLIC_HOOK}, headers=REST_HEADERS) as r:
            assert r.status == 400
            assert_status_error(await r.json(), 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")


async def test_auth_applies_to_rest_routes() -> None:
    async with start_server({"token": "secret"}) as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        async with http.get(base + "/tasks", headers=REST_HEADERS) as r:
            assert r.status == 401
            assert await r.json() == {"error": "Unauthorized"}
        async with http.post(base + "/acme/message:send", json={}, headers=REST_HEADERS) as r:
            assert r.status == 401
        async with http.get(base + "/tasks", headers={**REST_HEADERS, "Authorization": "Bearer secret"}) as r:
            assert r.status == 200 and (await r.json())["tasks"] == []


async def test_body_limits_and_encodings() -> None:
    async with start_server({"max-request-bytes": 2048}) as server, aiohttp.ClientSession() as http:
        base = rest_url(server)
        big = send_message_body("x" * 4096)["params"]
        async with http.post(base + "/message:send", json=big, headers=REST_HEADERS) as r:
            assert r.status == 413
            assert_status_error(await r.json(), 413, "INVALID_ARGUMENT", "INVALID_REQUEST")
        async with http.post(base + "/tasks/t:cancel", data=b"x" * 4096, headers=REST_HEADERS) as r:
            assert r.status == 413  # bounded even where the binding ignores the body
        small = json.dumps(send_message_body("hello")["params"]).encode()
        async with http.post(base + "/message:send", data=gzip.compress(small),
                             headers={**REST_HEADERS, "Content-Encoding": "gzip"}) as r:
            assert r.status == 200 and "task" in await r.json()
        async with http.post(base + "/message:send", data=small,
                             headers={**REST_HEADERS, "Content-Encoding": "br"}) as r:
            assert r.status == 415 and r.headers["Accept-Encoding"] == "gzip, deflate"
            assert_status_error(await r.json(), 415, "INVALID_ARGUMENT", "INVALID_REQUEST")
        async with http.post(base + "/message:send", data=b"not gzip",
                             headers={**REST_HEADERS, "Content-Encoding": "gzip"}) as r:
            assert r.status == 400
            assert_status_error(await r.json(), 400, "INVALID_ARGUMENT", "INVALID_REQUEST")
