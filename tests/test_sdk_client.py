"""a2a-sdk's own client (ClientFactory, JSON-RPC transport) against our server."""

from __future__ import annotations

from pathlib import Path

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
from a2a.utils.errors import TaskNotCancelableError

from iac_code.testing import start_server


def _request(text: str, **fields: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=f"m-{text[:8]}", role=Role.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


async def test_sdk_client_streaming_and_unary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server({"permission-rules": {"allow": ["write_file"]}}) as server, httpx.AsyncClient() as http:
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
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        await client.close()

        unary = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(server.url)
        results = [e async for e in unary.send_message(_request("hello", context_id="ctx-sdk"))]
        assert len(results) == 1
        assert results[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert results[0].task.context_id == "ctx-sdk"
        await unary.close()
