"""a2a-sdk's own client (ClientFactory, JSON-RPC transport) against our server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import permission_answer_request, start_server


def _request(text: str, **fields: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=f"m-{text[:8]}", role=Role.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


async def test_sdk_client_streaming_and_unary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server() as server, httpx.AsyncClient() as http:
        factory = ClientFactory(ClientConfig(streaming=True, httpx_client=http))
        client = await factory.create_from_url(server.url)
        events = [e async for e in client.send_message(_request("Create a VPC with two vSwitches."))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds[0] == "task"
        assert kinds.count("status_update") >= 3
        last = events[-1].status_update
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        task_id = events[0].task.id

        task = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert len(task.history) == 1
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task_id]
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert any(s.id == "iac_code_runtime_details" for s in card.skills)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))  # paused for a permission: cancelable
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await client.close()

        unary = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(server.url)
        results = [e async for e in unary.send_message(_request("hello", context_id="ctx-sdk"))]
        assert len(results) == 1
        assert results[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert results[0].task.context_id == "ctx-sdk"
        with pytest.raises(TaskNotCancelableError):  # the turn is over: nothing runs
            await unary.cancel_task(CancelTaskRequest(id=results[0].task.id))
        await unary.close()


# ---------------------------------------------------------------------------- default configuration, permission pause

VPC_PROMPT = "Create a VPC with two vSwitches."


def _events_until_end(client: Any, request: SendMessageRequest) -> Any:
    """Every event of ``client.send_message``; the stream must end by itself (bounded wait)."""

    async def collect() -> list[Any]:
        return [e async for e in client.send_message(request)]

    return asyncio.wait_for(collect(), 15)


def _envelope(event: Any) -> dict[str, Any]:
    update = event.status_update
    assert update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    return MessageToDict(update.metadata)["iac_code"]["input"]


def _acks(task: Any) -> list[dict[str, Any]]:
    return [MessageToDict(p)["data"] for m in task.history for p in m.parts
            if p.HasField("data") and MessageToDict(p)["data"].get("kind") == "permission_ack"]


@pytest.mark.parametrize("decision", ["allow_once", "deny"])
async def test_sdk_streaming_client_answers_the_permission(decision: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "template.ros.yaml"
    async with start_server() as server, httpx.AsyncClient() as http:
        client = await ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create_from_url(server.url)
        events = await _events_until_end(client, _request(VPC_PROMPT))
        assert events[0].WhichOneof("payload") == "task"
        envelope = _envelope(events[-1])
        assert envelope["toolName"] == "write_file"
        assert envelope["schemaVersion"] == 1
        assert not template.exists()  # paused before the write

        rest = await _events_until_end(client, permission_answer_request(envelope, decision, message_id="m-answer"))
        assert rest[0].WhichOneof("payload") == "task"
        assert rest[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        resumed = rest[1].status_update
        assert resumed.status.state == TaskState.TASK_STATE_WORKING
        ack = MessageToDict(resumed.status.message)
        assert ack["parts"][0]["data"] == {"schemaVersion": 1, "kind": "permission_ack",
                                           "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"],
                                           "decision": decision, "accepted": True}
        assert MessageToDict(resumed.metadata)["iac_code"]["inputReceived"]["decision"] == decision
        last = rest[-1].status_update
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "input" not in MessageToDict(last.metadata).get("iac_code", {})
        assert template.exists() is (decision == "allow_once")
        await client.close()


@pytest.mark.parametrize("decision", ["allow_once", "deny"])
async def test_sdk_unary_client_answers_the_permission(decision: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "template.ros.yaml"
    async with start_server() as server, httpx.AsyncClient() as http:
        client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(server.url)
        [paused] = await _events_until_end(client, _request(VPC_PROMPT))
        task = paused.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        envelope = MessageToDict(task.metadata)["iac_code"]["input"]
        assert envelope["toolName"] == "write_file" and not template.exists()

        [done] = await _events_until_end(client, permission_answer_request(envelope, decision, message_id="m-answer"))
        final = done.task
        assert final.id == task.id and final.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert MessageToDict(final.metadata)["iac_code"]["assistantFinal"] == {"complete": True}
        assert [a["decision"] for a in _acks(final)] == [decision]
        assert template.exists() is (decision == "allow_once")
        ids = [m.message_id for m in final.history]
        assert len(ids) == len(set(ids))  # every message has its own id
        await client.close()


async def test_follow_up_by_task_id_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A message naming only ``taskId`` continues that task in its context (both kinds of runtime)."""
    monkeypatch.chdir(tmp_path)
    for settings, first, follow_up, end_state in (
            ({}, "hello", "and now in French?", TaskState.TASK_STATE_INPUT_REQUIRED),
            ({"agent-executor": "tests.byo_agent:ShoutExecutor"}, "why?", "because", TaskState.TASK_STATE_COMPLETED)):
        async with start_server(settings) as server, httpx.AsyncClient() as http:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(server.url)
            [opened] = await _events_until_end(client, _request(first))
            task = opened.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            [again] = await _events_until_end(client, _request(follow_up, task_id=task.id))
            assert again.task.id == task.id and again.task.context_id == task.context_id
            assert again.task.status.state == end_state
            texts = [p.text for m in again.task.history for p in m.parts if m.role == Role.ROLE_USER]
            assert follow_up in texts

            other = _request("wrong context", task_id=task.id, context_id="ctx-somewhere-else")
            with pytest.raises(InvalidParamsError):
                await _events_until_end(client, other)
            kept = await client.get_task(GetTaskRequest(id=task.id))
            assert kept.status.state == end_state
            await client.close()
