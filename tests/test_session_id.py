"""``metadata.iac_code.iacCodeSessionId`` (tasks-and-context.md turn sequence item 4, input-and-permissions.md
§4, since-0.13.md §2.4 and §11) through a2a-sdk's client, JSON-RPC and HTTP+JSON.

Every status the executor publishes carries it, the task objects (the streamed one, GetTask, ListTasks)
have it merged into their metadata, and it is the ``sessionId`` that ``ensure-restored`` takes.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToDict

from iac_code.api import SESSION_ID_FIELD, context_of_session, session_id_of
from iac_code.testing import A2A_HEADERS, connect_client, start_server

SECONDS = 30.0
BINDINGS = ("JSONRPC", "HTTP+JSON")


def _iac_code(item: Any) -> dict[str, Any]:
    return MessageToDict(item.metadata).get("iac_code", {})


def _request(text: str, context_id: str, cwd: Path) -> SendMessageRequest:
    message = Message(message_id=f"m-{uuid.uuid4().hex}", role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id)
    message.metadata.update({"iac_code": {"cwd": str(cwd)}})
    return SendMessageRequest(message=message)


def test_the_session_id_is_the_context_id() -> None:
    assert SESSION_ID_FIELD == "iacCodeSessionId"
    assert session_id_of("ctx-1") == "ctx-1" and context_of_session(session_id_of("ctx-1")) == "ctx-1"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_every_status_and_the_task_carry_the_session_id(binding: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    context_id = f"ctx-{uuid.uuid4().hex[:12]}"
    async with start_server({"persistence-dir": str(tmp_path / "state")}) as server, \
            connect_client(server, binding=binding) as client:
        async def turn(text: str) -> list[Any]:
            async def collect() -> list[Any]:
                return [event async for event in client.send_message(_request(text, context_id, tmp_path))]
            return await asyncio.wait_for(collect(), SECONDS)

        events = await turn("Hello, what can you do?") + await turn("And again?")  # a new task, then a follow-up
        statuses = [e.status_update for e in events if e.WhichOneof("payload") == "status_update"]
        tasks = [e.task for e in events if e.WhichOneof("payload") == "task"]
        assert len(statuses) >= 4 and tasks, events
        states = {s.status.state for s in statuses}
        assert {TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_INPUT_REQUIRED} <= states
        for update in statuses:
            assert _iac_code(update).get(SESSION_ID_FIELD) == context_id, update
        assert any(_iac_code(s).get("assistantFinal") for s in statuses)  # other entries are still there
        for task in tasks:
            assert _iac_code(task).get(SESSION_ID_FIELD) == context_id, task

        task_ids = {s.task_id for s in statuses}
        for task_id in task_ids:
            got = await client.get_task(GetTaskRequest(id=task_id))
            assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            merged = _iac_code(got)
            assert merged.get(SESSION_ID_FIELD) == context_id, got
            # the final INPUT_REQUIRED status (no message) does not wipe the turn's last entries off the task
            assert merged.get("assistantFinal") == {"complete": True}, merged
        listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
        assert {t.id for t in listed.tasks} == task_ids
        assert all(_iac_code(t).get(SESSION_ID_FIELD) == context_id for t in listed.tasks), listed

        # the same value is ensure-restored's ``sessionId``
        async with aiohttp.ClientSession() as http:
            body = {"cwd": str(tmp_path), "sessionId": _iac_code(statuses[0])[SESSION_ID_FIELD],
                    "taskId": statuses[0].task_id}
            async with http.post(server.url.rstrip("/") + "/iac-code/session/ensure-restored", json=body,
                                 headers=A2A_HEADERS) as reply:
                assert (reply.status, await reply.json()) == (200, {"status": "current"})


async def test_a_tool_trace_update_carries_the_session_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """input-and-permissions.md §4: runtime-derived (tool-trace) updates carry it, streamed and in GetTask."""
    monkeypatch.chdir(tmp_path)
    context_id = f"ctx-{uuid.uuid4().hex[:12]}"
    async with start_server({"persistence-dir": str(tmp_path / "state")}) as server, \
            connect_client(server, binding="JSONRPC") as client:
        request = _request("Create a VPC with one vSwitch in cn-hangzhou.", context_id, tmp_path)

        async def collect() -> list[Any]:
            return [event async for event in client.send_message(request)]

        events = await asyncio.wait_for(collect(), SECONDS)
        traced = [e.status_update for e in events
                  if e.WhichOneof("payload") == "status_update" and "tool" in _iac_code(e.status_update)]
        assert traced, events
        assert all(_iac_code(u)[SESSION_ID_FIELD] == context_id for u in traced)


async def test_the_pipeline_envelope_carries_the_session_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """since-0.13.md §2.4: ``iacCodeSessionId`` on each pipeline event (the journal's and the streamed ones)."""
    monkeypatch.chdir(tmp_path)
    context_id = f"ctx-{uuid.uuid4().hex[:12]}"
    prompt = "Deploy a website with a VPC, two ECS instances and an SLB in cn-hangzhou."
    async with start_server({"persistence-dir": str(tmp_path / "state")}) as server, \
            connect_client(server, binding="HTTP+JSON") as client:
        request = _request(prompt, context_id, tmp_path)
        request.message.metadata.update({"iac_code": {"cwd": str(tmp_path), "run_mode": "pipeline"}})

        async def collect() -> list[Any]:
            return [event async for event in client.send_message(request)]

        events = await asyncio.wait_for(collect(), SECONDS)
        updates = [e.status_update for e in events if e.WhichOneof("payload") == "status_update"]
        streamed = [_iac_code(u)["pipeline"] for u in updates if "pipeline" in _iac_code(u)]
        streamed += [e for u in updates for e in _iac_code(u).get("pipelineBatch", {}).get("events", [])]
        assert streamed and all(e[SESSION_ID_FIELD] == context_id for e in streamed), streamed
        assert all(_iac_code(u)[SESSION_ID_FIELD] == context_id for u in updates)
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url.rstrip("/") + "/iac-code/pipeline/state",
                                params={"contextId": context_id}, headers=A2A_HEADERS) as reply:
                journal = (await reply.json())["events"]
        assert journal and all(e[SESSION_ID_FIELD] == context_id for e in journal)
