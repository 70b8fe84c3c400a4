"""What a generic A2A client shows and sends (issue 28): a2a-sdk's ``ClientFactory`` client, JSON-RPC binding,
default configuration (a workspace write asks permission).

* the permission pause carries a human-readable question in ``status.message`` (the request's
  language), beside the unchanged structured envelope;
* a text answer (``allow``, ``deny`` and their forms in the seeds' languages) answers it like the
  structured answer; any other message for that task or its context is ``-32602`` saying how to answer;
* the turn's final answer is in the final ``status.message``, and only once in the task's history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from iac_code.testing import permission_answer_request, start_server

VPC_PROMPT = "Create a VPC with two vSwitches."
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
WORKING = TaskState.TASK_STATE_WORKING
ENVELOPE_KEYS = {"schemaVersion", "kind", "requestTaskId", "contextId", "inputId", "toolUseId", "toolName", "title",
                 "purpose", "effect", "target", "isReadOnly", "prompt", "safeSummary", "options", "language",
                 "required"}
SECONDS = 15


def _request(text: str, message_id: str, *, language: str | None = None, **fields: str) -> SendMessageRequest:
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)], **fields)
    if language is not None:
        metadata = Struct()
        metadata.update({"iac_code": {"preferredLanguage": language}})
        message.metadata.CopyFrom(metadata)
    return SendMessageRequest(message=message)


async def _all(client: Client, request: SendMessageRequest) -> list[Any]:
    """Every event of one SendMessage (the stream must end by itself, bounded)."""

    async def collect() -> list[Any]:
        return [event async for event in client.send_message(request)]

    return await asyncio.wait_for(collect(), SECONDS)


async def _task(client: Client, request: SendMessageRequest) -> Task:
    [reply] = await _all(client, request)
    assert reply.WhichOneof("payload") == "task"
    return reply.task


async def _refused(client: Client, request: SendMessageRequest) -> InvalidParamsError:
    try:
        result = await _all(client, request)
    except InvalidParamsError as exc:
        return exc
    raise AssertionError(f"expected -32602, got {result!r}")


def _envelope(task_or_update: Any) -> dict[str, Any] | None:
    envelope = MessageToDict(task_or_update.metadata).get("iac_code", {}).get("input")
    return envelope if isinstance(envelope, dict) else None


def _text(message: Message) -> str:
    return "".join(part.text for part in message.parts)


def _acks(task: Task) -> list[str]:
    return [MessageToDict(p)["data"]["decision"] for m in task.history for p in m.parts
            if p.HasField("data") and MessageToDict(p)["data"].get("kind") == "permission_ack"]


@contextlib.asynccontextmanager
async def _sdk_client(streaming: bool) -> AsyncIterator[Client]:
    """a2a-sdk's client (unary or streaming) against a server with the default configuration."""
    async with start_server() as server, httpx.AsyncClient(timeout=SECONDS) as http:
        made = await ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create_from_url(server.url)
        try:
            yield made
        finally:
            await made.close()


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    """a2a-sdk's unary client against a server with the default configuration (workspace: ``tmp_path``)."""
    monkeypatch.chdir(tmp_path)
    async with _sdk_client(streaming=False) as made:
        yield made


@pytest.fixture
async def streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    monkeypatch.chdir(tmp_path)
    async with _sdk_client(streaming=True) as made:
        yield made


# ---------------------------------------------------------------------------- the pause speaks to people


@pytest.mark.parametrize(("language", "question", "how"), [
    (None, "Write template.ros.yaml in the workspace?", "Reply `allow` to write template.ros.yaml once, or `deny`."),
    ("de", "template.ros.yaml im Arbeitsbereich schreiben?",
     "Antworten Sie `erlauben`, um template.ros.yaml einmal zu schreiben, oder `ablehnen`."),
    ("pt-BR", "Gravar template.ros.yaml no espaço de trabalho?",
     "Responda `permitir` para gravar template.ros.yaml uma vez, ou `negar`."),
    ("zh-CN", "在工作区中写入 template.ros.yaml？", "回复 `允许` 允许本次写入 template.ros.yaml，或回复 `拒绝`。"),
])
async def test_the_pause_asks_a_question_in_the_request_language(streaming: Client, language: str | None,
                                                                  question: str, how: str) -> None:
    events = await _all(streaming, _request(VPC_PROMPT, "m-vpc", language=language))
    pause = events[-1].status_update
    assert pause.status.state == INPUT_REQUIRED
    envelope = _envelope(pause)
    assert envelope is not None and set(envelope) == ENVELOPE_KEYS  # the structured envelope, as before
    assert envelope["prompt"] == question
    message = pause.status.message
    assert message.role == Role.ROLE_AGENT and message.task_id == envelope["requestTaskId"]
    assert [p.WhichOneof("content") for p in message.parts] == ["text"]
    lines = _text(message).split("\n")
    assert lines[0] == question and lines[-1] == how
    assert envelope["purpose"] in lines


async def test_the_paused_task_shows_the_question(client: Client, tmp_path: Path) -> None:
    paused = await _task(client, _request(VPC_PROMPT, "m-vpc"))
    assert paused.status.state == INPUT_REQUIRED and _envelope(paused) is not None
    assert paused.status.message.role == Role.ROLE_AGENT
    assert _text(paused.status.message).endswith("Reply `allow` to write template.ros.yaml once, or `deny`.")
    assert not (tmp_path / "template.ros.yaml").exists()


# ---------------------------------------------------------------------------- text answers


@pytest.mark.parametrize(("answer", "allowed"), [
    ("allow", True), ("Allow once.", True), ("  YES! ", True), ("`allow`", True), ("允许", True), ("允许 一次", True),
    ("是", True), ("Einmal erlauben", True), ("ja", True), ("permitir uma vez", True), ("Sim!", True),
    ("deny", False), ("No.", False), ("拒绝", False), ("不行！", False), ("Nein", False), ("verweigern", False),
    ("não", False), ("Recusar", False), ("negar", False),
])
async def test_a_text_answer_answers_the_permission(client: Client, tmp_path: Path, answer: str,
                                                    allowed: bool) -> None:
    paused = await _task(client, _request(VPC_PROMPT, "m-vpc"))
    final = await _task(client, _request(answer, "m-answer", task_id=paused.id))
    assert final.id == paused.id and final.status.state == INPUT_REQUIRED
    assert _envelope(final) is None  # the turn went on to its end
    assert _acks(final) == ["allow_once" if allowed else "deny"]
    assert (tmp_path / "template.ros.yaml").exists() is allowed


async def test_a_streamed_text_answer_streams_the_rest_of_the_turn(streaming: Client, tmp_path: Path) -> None:
    paused = await _all(streaming, _request(VPC_PROMPT, "m-vpc", language="de"))
    task_id = paused[0].task.id
    rest = await _all(streaming, _request("erlauben", "m-answer", task_id=task_id))
    assert rest[0].task.id == task_id
    resumed = rest[1].status_update
    assert resumed.status.state == WORKING
    ack = MessageToDict(resumed.status.message)["parts"][0]["data"]
    assert ack["kind"] == "permission_ack" and ack["decision"] == "allow_once"
    assert rest[-1].status_update.status.state == INPUT_REQUIRED
    assert (tmp_path / "template.ros.yaml").exists()


@pytest.mark.parametrize("text", ["maybe later", "allow always", "yes, and also add a NAT gateway", "a llow", ""])
async def test_other_text_on_the_paused_task_says_how_to_answer(client: Client, tmp_path: Path, text: str) -> None:
    paused = await _task(client, _request(VPC_PROMPT, "m-vpc"))
    refused = await _refused(client, _request(text, "m-other", task_id=paused.id))
    assert paused.id in refused.message
    assert "`allow`" in refused.message and "`deny`" in refused.message and '"kind": "permission"' in refused.message
    assert "already working" not in refused.message
    # The question is still open: the structured answer still works.
    final = await _task(client, permission_answer_request(_envelope(paused) or {}, "deny", message_id="m-deny"))
    assert _acks(final) == ["deny"] and not (tmp_path / "template.ros.yaml").exists()


async def test_a_message_without_task_id_on_the_paused_context_names_the_task(client: Client) -> None:
    paused = await _task(client, _request(VPC_PROMPT, "m-vpc", context_id="ctx-paused"))
    for text in ("hello", "allow"):
        refused = await _refused(client, _request(text, f"m-{text}", context_id="ctx-paused", language="de"))
        assert paused.id in refused.message
        assert "erlauben" in refused.message  # in the request's language
    other = await _task(client, _request("hello", "m-elsewhere", context_id="ctx-other"))
    assert other.status.state == INPUT_REQUIRED  # other contexts are not affected
    final = await _task(client, _request("allow", "m-allow", task_id=paused.id))
    assert _acks(final) == ["allow_once"]


# ---------------------------------------------------------------------------- the answer where clients look


async def test_the_final_answer_is_the_final_status_message_once(client: Client) -> None:
    first = await _task(client, _request("hello", "m-1"))
    answer = first.status.message
    assert answer.role == Role.ROLE_AGENT
    assert "offline engine" in _text(answer)
    assert MessageToDict(first.metadata)["iac_code"]["assistantFinal"] == {"complete": True}

    second = await _task(client, _request("hello again", "m-2", task_id=first.id))
    assert second.status.message.role == Role.ROLE_AGENT and second.status.message.message_id != answer.message_id
    stored = await client.get_task(GetTaskRequest(id=first.id))
    kept = [m for m in stored.history if m.message_id == answer.message_id]
    assert kept == [answer]  # the first turn's answer moved to the history, once
    assert [m.message_id for m in stored.history].count(stored.status.message.message_id) == 0
    assert sum(_text(m) == _text(answer) for m in stored.history) == 1


async def test_the_stream_ends_with_the_answer(streaming: Client) -> None:
    events = await _all(streaming, _request("hello", "m-1"))
    last = events[-1].status_update
    assert last.status.state == INPUT_REQUIRED
    deltas = [_text(e.status_update.status.message) for e in events[1:-1]
              if e.HasField("status_update") and e.status_update.status.HasField("message")]
    assert last.status.message.role == Role.ROLE_AGENT and _text(last.status.message) == "".join(deltas)
    assert MessageToDict(last.metadata)["iac_code"]["assistantFinal"] == {"complete": True}
    assert all(e.status_update.status.state == WORKING for e in events[1:-1])
