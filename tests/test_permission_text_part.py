"""Permission answers as a text part (issue 37, since-0.13 §5): ``IAC_CODE_PERMISSION:{json}``.

a2a-sdk's client against a server with the default configuration (a workspace write asks
permission), on the JSON-RPC, HTTP+JSON (REST) and gRPC bindings: the text form answers the
pause exactly like the data part (ack, the rest of the turn), a message without ``taskId`` and
``contextId`` takes them from the payload, the three extra -32602 texts and the shared ones
refuse a malformed answer and leave the question open, and prefixed text that is not a
permission object is ordinary chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from iac_code.testing import connect_client, start_server

VPC_PROMPT = "Create a VPC with two vSwitches."
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
SECONDS = 20
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")


@contextlib.asynccontextmanager
async def _client(binding: str, streaming: bool = False) -> AsyncIterator[Client]:
    """a2a-sdk's client on ``binding``; the server's configuration is the default one (gRPC: plus its transport)."""
    settings = {"transport": ["http", "grpc"]} if binding == "GRPC" else None
    async with start_server(settings) as server, \
            connect_client(server, binding=binding, streaming=streaming, timeout=SECONDS) as client:
        yield client


def _message(*parts: Part, message_id: str, task_id: str = "", context_id: str = "",
             role: Role = Role.ROLE_USER) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=message_id, role=role, parts=list(parts),
                                              task_id=task_id, context_id=context_id))


def _payload(envelope: dict[str, Any], decision: str = "allow_once", **changes: Any) -> dict[str, Any]:
    payload = {"schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
               "contextId": envelope["contextId"], "inputId": envelope["inputId"],
               "toolUseId": envelope["toolUseId"], "decision": decision}
    payload.update(changes)
    return {k: v for k, v in payload.items() if v is not None}


def _text_part(payload: dict[str, Any], separator: str = "") -> Part:
    return Part(text="IAC_CODE_PERMISSION:" + separator + json.dumps(payload))


def _data_part(envelope: dict[str, Any]) -> Part:
    data = Struct()
    data.update({k: v for k, v in _payload(envelope).items() if k != "contextId"})
    return Part(data=Value(struct_value=data), media_type="application/json")


async def _all(client: Client, request: SendMessageRequest) -> list[Any]:
    async def collect() -> list[Any]:
        return [event async for event in client.send_message(request)]

    return await asyncio.wait_for(collect(), SECONDS)


async def _task(client: Client, request: SendMessageRequest) -> Task:
    [reply] = await _all(client, request)
    assert reply.WhichOneof("payload") == "task", reply
    return reply.task


async def _refused(client: Client, request: SendMessageRequest) -> str:
    try:
        result = await _all(client, request)
    except InvalidParamsError as exc:
        return str(exc.message)
    raise AssertionError(f"expected -32602, got {result!r}")


def _envelope(task: Task) -> dict[str, Any] | None:
    envelope = MessageToDict(task.metadata).get("iac_code", {}).get("input")
    return envelope if isinstance(envelope, dict) else None


def _acks(task: Task) -> list[str]:
    return [MessageToDict(p)["data"]["decision"] for m in task.history for p in m.parts
            if p.HasField("data") and MessageToDict(p)["data"].get("kind") == "permission_ack"]


async def _paused(client: Client, context_id: str) -> tuple[Task, dict[str, Any]]:
    paused = await _task(client, _message(Part(text=VPC_PROMPT), message_id=f"m-{context_id}",
                                          context_id=context_id))
    envelope = _envelope(paused)
    assert paused.status.state == INPUT_REQUIRED and envelope is not None
    return paused, envelope


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the default workspace: where the turn writes template.ros.yaml
    return tmp_path


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_text_part_answers_like_the_data_part(binding: str, workspace: Path) -> None:
    async with _client(binding) as client:
        paused, envelope = await _paused(client, "ctx-text")
        answer = _message(_text_part(_payload(envelope)), message_id="m-answer", task_id=paused.id,
                          context_id=paused.context_id)
        final = await _task(client, answer)
        assert final.id == paused.id and final.status.state == INPUT_REQUIRED
        assert _envelope(final) is None  # the turn went on to its end
        assert _acks(final) == ["allow_once"]
        assert (workspace / "template.ros.yaml").exists()
        # answered: the same answer again gets only its acknowledgement, marked duplicate (since-0.13 §4.3)
        [again] = await _all(client, _message(_text_part(_payload(envelope)), message_id="m-again",
                                              task_id=paused.id, context_id=paused.context_id))
        assert again.WhichOneof("payload") == "message"
        ack = MessageToDict(again.message.parts[0].data)
        assert ack["kind"] == "permission_ack" and ack["duplicate"] is True and ack["decision"] == "allow_once"


@pytest.mark.parametrize("binding", BINDINGS[:2])
async def test_without_task_and_context_ids_the_payload_names_them(binding: str, workspace: Path) -> None:
    async with _client(binding) as client:
        paused, envelope = await _paused(client, "ctx-bare")
        final = await _task(client, _message(_text_part(_payload(envelope, "deny"), separator=" \n "),
                                             message_id="m-bare"))
        assert final.id == paused.id and final.context_id == paused.context_id
        assert _acks(final) == ["deny"]
        assert not (workspace / "template.ros.yaml").exists()


@pytest.mark.parametrize("binding", BINDINGS[:2])
async def test_a_streamed_text_answer_streams_the_rest_of_the_turn(binding: str, workspace: Path) -> None:
    async with _client(binding, streaming=True) as client:
        first = await _all(client, _message(Part(text=VPC_PROMPT), message_id="m-vpc", context_id="ctx-stream"))
        pause = first[-1].status_update
        envelope = MessageToDict(pause.metadata)["iac_code"]["input"]
        rest = await _all(client, _message(_text_part(_payload(envelope)), message_id="m-answer",
                                           task_id=pause.task_id))
        assert rest[0].task.id == pause.task_id
        resumed = rest[1].status_update
        assert resumed.status.state == TaskState.TASK_STATE_WORKING
        assert MessageToDict(resumed.metadata)["iac_code"]["inputReceived"] == {
            "kind": "permission", "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"],
            "decision": "allow_once"}
        ack = MessageToDict(resumed.status.message)["parts"][0]["data"]
        assert ack["kind"] == "permission_ack" and ack["decision"] == "allow_once" and ack["accepted"] is True
        assert rest[-1].status_update.status.state == INPUT_REQUIRED
        assert (workspace / "template.ros.yaml").exists()


def _bad_answers(envelope: dict[str, Any], task: Task) -> list[tuple[SendMessageRequest, str]]:
    ids = {"task_id": task.id, "context_id": task.context_id}
    good = _payload(envelope)
    return [
        (_message(_data_part(envelope), _text_part(good), message_id="b1", **ids),
         "Permission responses must use exactly one supported JSON transport."),
        (_message(_text_part(good), Part(text="and also this"), message_id="b2", **ids),
         "Permission responses must contain exactly one JSON TextPart."),
        (_message(_text_part(good), _text_part(good), message_id="b3", **ids),
         "Permission responses must contain exactly one JSON TextPart."),
        (_message(_text_part(_payload(envelope, contextId="ctx-elsewhere")), message_id="b4", **ids),
         "Permission response contextId does not match message contextId."),
        (_message(_text_part(good), message_id="b5", role=Role.ROLE_AGENT, **ids),
         "Permission responses must use ROLE_USER."),
        (_message(_text_part(_payload(envelope, contextId=None)), message_id="b6", **ids),
         "Permission response payload fields do not match schemaVersion 1."),
        (_message(_text_part(_payload(envelope, extra=1)), message_id="b7", **ids),
         "Permission response payload fields do not match schemaVersion 1."),
        (_message(_text_part(_payload(envelope, schemaVersion="1")), message_id="b8", **ids),
         "Permission response schemaVersion must be 1."),
        (_message(_text_part(_payload(envelope, decision="allow_always")), message_id="b9", **ids),
         "Permission decision must be allow_once or deny."),
        (_message(_text_part(_payload(envelope, inputId="")), message_id="b10", **ids),
         "Permission response correlation fields are required."),
        (_message(_text_part(_payload(envelope, requestTaskId="other-task")), message_id="b11", **ids),
         "Permission response taskId does not match requestTaskId."),
        (_message(_text_part(_payload(envelope, toolUseId="tool-other")), message_id="b12", **ids),
         "input_response_mismatch: permission correlation does not match."),
    ]


@pytest.mark.parametrize("binding", BINDINGS[:2])
async def test_malformed_text_answers_are_refused_and_the_question_stays_open(binding: str,
                                                                               workspace: Path) -> None:
    async with _client(binding) as client:
        paused, envelope = await _paused(client, "ctx-bad")
        for request, text in _bad_answers(envelope, paused):
            assert await _refused(client, request) == text, request.message.message_id
        assert not (workspace / "template.ros.yaml").exists()
        final = await _task(client, _message(_text_part(_payload(envelope)), message_id="m-good",
                                             task_id=paused.id, context_id=paused.context_id))
        assert _acks(final) == ["allow_once"] and (workspace / "template.ros.yaml").exists()


@pytest.mark.parametrize("text", [
    "IAC_CODE_PERMISSION: allow", "IAC_CODE_PERMISSION:[1, 2]",
    'IAC_CODE_PERMISSION:{"kind": "question", "decision": "allow_once"}', 'IAC_CODE_PERMISSION:{"kind": "permission"',
])
async def test_prefixed_text_that_is_no_permission_object_is_ordinary_chat(text: str, workspace: Path) -> None:
    async with _client("JSONRPC") as client:
        # on a paused task it is a message the task cannot take now: it says how to answer (ordinary chat's rule)
        paused, _ = await _paused(client, "ctx-chat")
        refused = await _refused(client, _message(Part(text=text), message_id="m-chat", task_id=paused.id))
        assert paused.id in refused and "`allow`" in refused
        # in a fresh context it is a turn like any other
        chat = await _task(client, _message(Part(text=text), message_id="m-fresh", context_id="ctx-fresh"))
        assert chat.status.state == INPUT_REQUIRED and _envelope(chat) is None
        assert chat.history[0].parts[0].text == text
