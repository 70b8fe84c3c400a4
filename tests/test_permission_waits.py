"""Durable permission waits (since-0.13 §4): kill -9 while a permission waits, suspension, the recovered answer.

Servers run in the default configuration (the built-in offline runtime, writes ask permission), as
their own processes where they are killed (``kill -9`` the moment the pause is acknowledged), in
process otherwise; the client is a2a-sdk's own. The LLM runtime resumes against the scripted
OpenAI-compatible server the other LLM tests use. That a tool ran exactly once is shown by the
task's artifacts (each ``write_file`` that ran stores one), the workspace file and the audit log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from iac_code.base.errors import ConfigProblems
from iac_code.testing import connect_client, make_kernel, run_cli, start_server
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks, usage_chunk
from tests.test_crash_and_limits import server_process

VPC_PROMPT = "Create a VPC with two vSwitches."
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
SUSPENDED = {"status": "suspended", "resumable": True}
SECONDS = 30.0
INVALID = "permission_resume_invalid: "


# ----------------------------------------------------------------------------- helpers


def _message(*parts: Part, message_id: str, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=message_id, role=Role.ROLE_USER, parts=list(parts),
                                              task_id=task_id, context_id=context_id))


def _answer(envelope: dict[str, Any], decision: str = "allow_once", *, message_id: str,
            context_id: str | None = None, **changes: Any) -> SendMessageRequest:
    data = Struct()
    data.update({"schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
                 "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": decision,
                 **changes})
    return _message(Part(data=Value(struct_value=data), media_type="application/json"), message_id=message_id,
                    task_id=envelope["requestTaskId"], context_id=context_id or envelope["contextId"])


def _iac_code(item: Any) -> dict[str, Any]:
    return MessageToDict(item.metadata).get("iac_code", {})


def _envelope(task: Task) -> dict[str, Any]:
    envelope = _iac_code(task).get("input")
    assert isinstance(envelope, dict), task
    return envelope


async def _events(client: Client, request: SendMessageRequest) -> list[Any]:
    async def collect() -> list[Any]:
        return [event async for event in client.send_message(request)]

    return await asyncio.wait_for(collect(), SECONDS)


async def _task(client: Client, request: SendMessageRequest) -> Task:
    [reply] = await _events(client, request)
    assert reply.WhichOneof("payload") == "task", reply
    return reply.task


async def _refused(client: Client, request: SendMessageRequest) -> str:
    try:
        result = await _events(client, request)
    except InvalidParamsError as exc:
        return str(exc.message)
    raise AssertionError(f"expected -32602, got {result!r}")


async def _get(client: Client, task_id: str) -> Task:
    return await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), SECONDS)


async def _paused(client: Client, context_id: str, prompt: str = VPC_PROMPT) -> Task:
    task = await _task(client, _message(Part(text=prompt), message_id=f"m-{context_id}", context_id=context_id))
    assert task.status.state == INPUT_REQUIRED and "input" in _iac_code(task), task
    return task


def _acks(task: Task) -> list[dict[str, Any]]:
    return [MessageToDict(p)["data"] for m in task.history for p in m.parts
            if p.HasField("data") and MessageToDict(p)["data"].get("kind") == "permission_ack"]


def _ack_of(event: Any) -> dict[str, Any]:
    assert event.WhichOneof("payload") == "message", event
    return MessageToDict(event.message.parts[0].data)


def _audit(state: Path, input_id: str) -> list[dict[str, Any]]:
    log = state / "audit" / "permissions.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [row for row in rows if row["inputId"] == input_id]


def _boundaries(state: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((state / "permission-waits").glob("pwb_*.json"))]


async def _until(condition: Callable[[], Awaitable[bool]], seconds: float = SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def _suspended(client: Client, task_id: str) -> bool:
    return _iac_code(await _get(client, task_id)).get("permissionWait") == SUSPENDED


@contextlib.asynccontextmanager
async def _process(state: Path, workspace: Path, *options: str) -> AsyncIterator[tuple[Any, Client]]:
    """``iac-code a2a`` as its own process and a2a-sdk's client on it."""
    async with server_process(state, workspace, *options) as (proc, url), \
            connect_client(url, streaming=False, timeout=SECONDS) as client:
        yield proc, client


# ----------------------------------------------------------------------------- kill -9


async def test_kill_9_loop_every_paused_task_resumes_its_call_once(tmp_path: Path) -> None:
    """Five times: kill -9 the moment a pause is acknowledged. After each restart every paused task is still
    INPUT_REQUIRED with its envelope and its wait suspended; answering resumes exactly that call (allow: the
    file written once; deny: nothing written), a repeated answer is only acknowledged again."""
    home, workspace = tmp_path / "home", tmp_path / "work"
    state = home / "a2a"
    workspace.mkdir()
    pending: list[Task] = []  # paused, not answered yet
    answered: dict[str, tuple[str, int]] = {}  # task id -> (decision, artifacts it ended with)
    for trial in range(6):
        async with _process(home, workspace) as (proc, client):
            for task in pending:  # acknowledged pauses survive, unanswered
                now = await _get(client, task.id)
                assert now.status.state == INPUT_REQUIRED, now
                assert _iac_code(now)["permissionWait"] == SUSPENDED
                assert _envelope(now) == _envelope(task)
            for task_id, (_, artifacts) in answered.items():  # acknowledged outcomes stay
                now = await _get(client, task_id)
                assert now.status.state == INPUT_REQUIRED and len(now.artifacts) == artifacts
                assert _iac_code(now).get("assistantFinal") == {"complete": True}
            if pending:
                task = pending.pop(0)
                envelope = _envelope(task)
                decision = "allow_once" if trial % 2 else "deny"
                final = await _task(client, _answer(envelope, decision, message_id=f"answer-{trial}"))
                assert final.id == task.id and final.status.state == INPUT_REQUIRED
                assert _iac_code(final)["assistantFinal"] == {"complete": True}
                assert [a["decision"] for a in _acks(final)] == [decision]
                assert len(final.artifacts) == (1 if decision == "allow_once" else 0)
                text = "".join(p.text for p in final.status.message.parts)
                assert ("Saved" if decision == "allow_once" else "was not written") in text, text
                rows = _audit(state, envelope["inputId"])
                assert [(r["decision"], r.get("recovered")) for r in rows] == [(decision, True)]
                answered[task.id] = (decision, len(final.artifacts))
                # the same answer again: only its acknowledgement, nothing runs twice
                [again] = await _events(client, _answer(envelope, decision, message_id=f"again-{trial}"))
                ack = _ack_of(again)
                assert ack["duplicate"] is True and ack["decision"] == decision
                assert _iac_code(again.message)["inputReceived"]["duplicate"] is True
                assert len((await _get(client, task.id)).artifacts) == len(final.artifacts)
                assert len(_audit(state, envelope["inputId"])) == 1
            if trial == 5:
                break
            pending.append(await _paused(client, f"ctx-{trial}"))
            proc.kill()  # kill -9 the moment the pause is acknowledged
            await proc.wait()
    assert not pending and len(answered) == 5
    assert (workspace / "template.ros.yaml").exists()
    for boundary in _boundaries(state):
        assert boundary["phase"] == "RESOLVED" and boundary["recovered"] is True
        assert boundary["permissionClass"] == "normal" and boundary["payloadDigest"].startswith("sha256:")
    assert not [p for p in state.rglob("*.tmp")]


async def test_a_recovered_answer_streams_the_rest_of_the_turn(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "work"
    state = home / "a2a"
    workspace.mkdir()
    async with _process(home, workspace) as (proc, client):
        paused = await _paused(client, "ctx-stream")
        proc.kill()
        await proc.wait()
    [boundary] = _boundaries(state)
    path = next((state / "permission-waits").glob("pwb_*.json"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stem == boundary["boundaryId"]
    assert len(boundary["boundaryId"]) == len("pwb_") + 32
    envelope = _envelope(paused)
    assert (boundary["taskId"], boundary["contextId"], boundary["inputId"], boundary["toolUseId"]) == (
        paused.id, paused.context_id, envelope["inputId"], envelope["toolUseId"])
    assert boundary["phase"] == "WAITING" and boundary["continuationFrame"]["call"]["name"] == "write_file"
    async with server_process(home, workspace) as (_, url), \
            connect_client(url, streaming=True, timeout=SECONDS) as client:
        assert _boundaries(state)[0]["phase"] == "SUSPENDED"  # reconciled at start-up: its owner is gone
        events = await _events(client, _answer(envelope, message_id="answer"))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and events[0].task.id == paused.id
    assert _iac_code(events[0].task)["permissionWait"] == SUSPENDED
    updates = [e.status_update for e in events if e.WhichOneof("payload") == "status_update"]
    recovered, received = updates[0], updates[1]
    ids = {"inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"]}
    assert recovered.status.state == TaskState.TASK_STATE_WORKING
    assert _iac_code(recovered)["permissionRecovered"] == ids
    assert _iac_code(received)["inputReceived"] == {"kind": "permission", **ids, "decision": "allow_once",
                                                     "recovered": True, "duplicate": False}
    assert MessageToDict(received.status.message.parts[0].data)["kind"] == "permission_ack"
    assert "artifact_update" in kinds
    tools = [_iac_code(u)["tool"] for u in updates if "tool" in _iac_code(u)]
    assert [(t["name"], t["status"]) for t in tools] == [("write_file", "completed")]  # no earlier call again
    final = updates[-1]
    assert final.status.state == INPUT_REQUIRED and _iac_code(final)["assistantFinal"] == {"complete": True}
    answer_text = "".join(p.text for p in final.status.message.parts)
    assert "```yaml" in answer_text and "Saved" in answer_text  # the whole turn's answer: before and after
    assert (workspace / "template.ros.yaml").exists()
    assert _boundaries(state)[0]["phase"] == "RESOLVED"


async def test_the_llm_runtime_resumes_its_conversation_after_kill_9(tmp_path: Path) -> None:
    """Frame = the transcript up to the assistant's tool call: the call runs after the restart, its result
    goes to the model in the next round, and the earlier round is not asked again."""
    home, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    template = "ROSTemplateFormatVersion: '2015-09-01'\nResources: {}\n"
    write = json.dumps({"path": "vpc.ros.yaml", "content": template})
    async with OpenAIStub([
        Reply.stream([text_chunk("Writing it. "), *tool_call_chunks(0, "call-write", "write_file", write),
                      finish_chunk("tool_calls"), usage_chunk(100, 20)]),
        Reply.stream([text_chunk("Saved vpc.ros.yaml."), finish_chunk("stop"), usage_chunk(200, 10)]),
    ]) as stub:
        config = tmp_path / "llm.yml"
        config.write_text(json.dumps({"agent-runtime": "llm", "llm-base-url": stub.base_url,
                                      "llm-api-key": "sk-test-key-0123", "llm-retry-backoff": 0.01}))
        async with _process(home, workspace, "--config", str(config)) as (proc, client):
            paused = await _paused(client, "ctx-llm", "Save a VPC template")
            proc.kill()
            await proc.wait()
        assert _envelope(paused)["toolName"] == "write_file" and not (workspace / "vpc.ros.yaml").exists()
        frame = _boundaries(home / "a2a")[0]["continuationFrame"]
        assert [m["role"] for m in frame["messages"]] == ["user", "assistant"]
        assert "sk-test-key" not in json.dumps(_boundaries(home / "a2a"))
        async with _process(home, workspace, "--config", str(config)) as (_, client):
            assert await _suspended(client, paused.id)
            final = await _task(client, _answer(_envelope(paused), message_id="answer"))
        assert (workspace / "vpc.ros.yaml").read_text() == template
        assert final.status.state == INPUT_REQUIRED
        text = "".join(p.text for p in final.status.message.parts)
        assert text == "Writing it. Saved vpc.ros.yaml."
        assert _iac_code(final)["usage"]["inputTokens"] == 300  # counted on from the first round
        assert len(stub.requests) == 2  # the first round is not asked again
        sent = stub.requests[1].body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
        assert sent[2]["tool_calls"][0]["id"] == "call-write" and sent[3]["tool_call_id"] == "call-write"
        assert json.loads(sent[3]["content"])["result"]["path"] == "vpc.ros.yaml"


# ----------------------------------------------------------------------------- suspension by timeout


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the default workspace: where the turn writes template.ros.yaml
    return tmp_path


SUSPEND_FAST = {"permission-wait": {"resident-timeout-seconds": 0.2, "timeout-grace-seconds": 0}}


async def test_the_resident_timeout_suspends_and_a_text_answer_resumes(workspace: Path) -> None:
    async with start_server(SUSPEND_FAST) as server, \
            connect_client(server, streaming=False, timeout=SECONDS) as client:
        paused = await _paused(client, "ctx-timeout")
        assert _iac_code(paused)["permissionWait"] == {"status": "waiting", "resumable": True}
        await _until(lambda: _suspended(client, paused.id))
        now = await _get(client, paused.id)
        assert now.status.state == INPUT_REQUIRED and _envelope(now) == _envelope(paused)
        assert not (workspace / "template.ros.yaml").exists()
        # the live turn has ended, but the context still waits for this answer
        busy = await _refused(client, _message(Part(text="hello"), message_id="m-new", context_id=paused.context_id))
        assert paused.id in busy and "allow" in busy
        other = await _refused(client, _message(Part(text="what?"), message_id="m-what", task_id=paused.id))
        assert paused.id in other
        final = await _task(client, _message(Part(text="allow"), message_id="m-allow", task_id=paused.id))
        assert final.id == paused.id and _iac_code(final)["assistantFinal"] == {"complete": True}
        assert [a["decision"] for a in _acks(final)] == ["allow_once"]
        assert (workspace / "template.ros.yaml").exists()
        follow = await _task(client, _message(Part(text="hello"), message_id="m-next", context_id=paused.context_id))
        assert follow.status.state == INPUT_REQUIRED  # the context is free again


async def test_an_answer_in_the_grace_window_still_wins_live(workspace: Path) -> None:
    settings = {"permission-wait": {"resident-timeout-seconds": 0.1, "timeout-grace-seconds": 60}}
    async with start_server(settings) as server, \
            connect_client(server, streaming=False, timeout=SECONDS) as client:
        state = server.kernel.state_dir
        paused = await _paused(client, "ctx-grace")

        async def in_grace() -> bool:
            return _boundaries(state)[0]["phase"] == "TIMEOUT_GRACE"

        await _until(in_grace)
        final = await _task(client, _answer(_envelope(paused), "deny", message_id="answer"))
        assert [a["decision"] for a in _acks(final)] == ["deny"]
        assert _boundaries(state)[0]["phase"] == "RESOLVED" and _boundaries(state)[0]["recovered"] is False
        assert not (workspace / "template.ros.yaml").exists()


async def test_permission_timeout_suspends_a_resumable_wait_instead_of_denying(workspace: Path) -> None:
    settings = {"permission-timeout": 0.2, "permission-wait": {"timeout-grace-seconds": 0}}
    async with start_server(settings) as server, \
            connect_client(server, streaming=False, timeout=SECONDS) as client:
        paused = await _paused(client, "ctx-legacy-timeout")
        await _until(lambda: _suspended(client, paused.id))
        assert not _audit(server.kernel.state_dir, _envelope(paused)["inputId"])  # not decided: no deny
        final = await _task(client, _answer(_envelope(paused), message_id="answer"))
        assert [a["decision"] for a in _acks(final)] == ["allow_once"]


async def test_recovered_answers_are_checked_against_the_checkpoint(workspace: Path) -> None:
    settings = {**SUSPEND_FAST, "token": "t-bearer", "api-key": "k-other-caller"}
    bearer = {"Authorization": "Bearer t-bearer"}
    async with start_server(settings) as server, \
            connect_client(server, streaming=False, timeout=SECONDS, headers=bearer) as client, \
            connect_client(server, streaming=False, timeout=SECONDS, headers={"X-API-Key": "k-other-caller"}) as other:
        paused = await _paused(client, "ctx-checks")
        cancel_me = await _paused(client, "ctx-cancel")
        for task in (paused, cancel_me):
            await _until(lambda task=task: _suspended(client, task.id))
        envelope = _envelope(paused)
        assert await _refused(other, _answer(envelope, message_id="a-owner")) == INVALID + "permission_task_owner_changed"
        assert await _refused(client, _answer(envelope, message_id="a-ctx", context_id="ctx-elsewhere")) == \
            "input_response_mismatch: permission task context changed."
        assert await _refused(client, _answer(envelope, message_id="a-tool", toolUseId="tool-other")) == \
            INVALID + "permission response conflicts with checkpoint."
        assert await _refused(client, _answer(envelope, message_id="a-input", inputId="permission-other")) == \
            INVALID + "pending permission is not active."
        assert _boundaries(server.kernel.state_dir)[0]["phase"] == "SUSPENDED"  # none of them changed anything
        final = await _task(client, _answer(envelope, "deny", message_id="a-deny"))
        assert [a["decision"] for a in _acks(final)] == ["deny"]
        assert await _refused(client, _answer(envelope, "allow_once", message_id="a-allow")) == \
            INVALID + "permission decision conflicts with receipt."
        [again] = await _events(client, _answer(envelope, "deny", message_id="a-deny-again"))
        assert _ack_of(again)["duplicate"] is True and _ack_of(again)["decision"] == "deny"
        assert not (workspace / "template.ros.yaml").exists()
        # a suspended task can be cancelled: its checkpoint goes with it
        canceled = await asyncio.wait_for(client.cancel_task(CancelTaskRequest(id=cancel_me.id)), SECONDS)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert await _refused(client, _answer(_envelope(cancel_me), message_id="a-late")) == \
            INVALID + "suspended permission is unavailable."
        phases = sorted(b["phase"] for b in _boundaries(server.kernel.state_dir))
        assert phases == ["CANCELED", "RESOLVED"]


async def test_cancelling_a_live_wait_cancels_its_checkpoint(workspace: Path) -> None:
    async with start_server() as server, connect_client(server, streaming=False, timeout=SECONDS) as client:
        paused = await _paused(client, "ctx-live-cancel")
        assert [b["phase"] for b in _boundaries(server.kernel.state_dir)] == ["WAITING"]
        canceled = await asyncio.wait_for(client.cancel_task(CancelTaskRequest(id=paused.id)), SECONDS)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert [b["phase"] for b in _boundaries(server.kernel.state_dir)] == ["CANCELED"]
        assert await _refused(client, _answer(_envelope(paused), message_id="late")) == \
            INVALID + "suspended permission is unavailable."
        follow = await _task(client, _message(Part(text="hello"), message_id="m-after", context_id=paused.context_id))
        assert follow.status.state == INPUT_REQUIRED


async def test_two_answers_at_once_resume_the_turn_once(workspace: Path) -> None:
    async with start_server(SUSPEND_FAST) as server, \
            connect_client(server, streaming=False, timeout=SECONDS) as client, \
            connect_client(server, streaming=True, timeout=SECONDS) as streaming:
        paused = await _paused(client, "ctx-race")
        await _until(lambda: _suspended(client, paused.id))
        envelope = _envelope(paused)
        first, second = await asyncio.gather(_events(streaming, _answer(envelope, message_id="race-1")),
                                             _events(streaming, _answer(envelope, message_id="race-2")))
        resumed = [r for r in (first, second) if r[0].WhichOneof("payload") == "task"]
        duplicates = [r for r in (first, second) if r[0].WhichOneof("payload") == "message"]
        assert len(resumed) == 1 and len(duplicates) == 1 and len(duplicates[0]) == 1
        assert _ack_of(duplicates[0][0])["duplicate"] is True
        final = await _get(client, paused.id)
        assert len(final.artifacts) == 1 and [a["decision"] for a in _acks(final)] == ["allow_once"]
        assert len(_audit(server.kernel.state_dir, envelope["inputId"])) == 1


async def test_the_llm_runtime_resumes_with_a_denial(workspace: Path) -> None:
    write = json.dumps({"path": "main.tf", "content": "resource {}"})
    async with OpenAIStub([
        Reply.stream([*tool_call_chunks(0, "call-1", "write_file", write), finish_chunk("tool_calls")]),
        Reply.stream([text_chunk("Understood, I did not write it."), finish_chunk("stop")]),
    ]) as stub, start_server({**SUSPEND_FAST, "agent-runtime": "llm", "llm-base-url": stub.base_url,
                              "llm-api-key": "sk-test-key-0123"}) as server, \
            connect_client(server, streaming=False, timeout=SECONDS) as client:
        paused = await _paused(client, "ctx-llm-deny", "write main.tf")
        await _until(lambda: _suspended(client, paused.id))
        final = await _task(client, _answer(_envelope(paused), "deny", message_id="answer"))
        assert "I did not write it" in "".join(p.text for p in final.status.message.parts)
        assert not (workspace / "main.tf").exists()
        assert json.loads(stub.requests[1].body["messages"][-1]["content"]) == {"error": "permission denied"}


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(("value", "error"), [
    (3, "permission-wait must be an object."),
    ({"resident-timeout": 3, "other": 1}, "Unknown permission-wait fields: other, resident-timeout."),
    ({"resident-timeout-seconds": "soon"}, "permission-wait.resident-timeout-seconds must be null or a finite number."),
    ({"resident-timeout-seconds": float("inf")},
     "permission-wait.resident-timeout-seconds must be null or a finite number."),
    ({"resident-timeout-seconds": True}, "permission-wait.resident-timeout-seconds must be null or a finite number."),
    ({"resident-timeout-seconds": 0},
     "permission-wait.resident-timeout-seconds must be null or a finite positive number."),
    ({"sub-pipeline-timeout-seconds": -1},
     "permission-wait.sub-pipeline-timeout-seconds must be null or a finite positive number."),
    ({"timeout-grace-seconds": -0.5},
     "permission-wait.timeout-grace-seconds must be null or a finite non-negative number."),
])
def test_permission_wait_is_validated(value: Any, error: str) -> None:
    with pytest.raises(ConfigProblems) as raised:
        make_kernel({"permission-wait": value})
    assert str(raised.value) == f"Invalid configuration: {error}"


async def test_the_command_line_checks_permission_wait(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text("permission-wait: {resident-timeout-seconds: .inf}\n")
    env = {"IAC_CODE_CONFIG_DIR": str(tmp_path)}
    result = await run_cli("a2a", "--check-config", "--config", str(config), env=env)
    assert result.code == 2
    assert "permission-wait.resident-timeout-seconds must be null or a finite number." in result.err, result.err
    config.write_text("permission-wait:\n  resident-timeout-seconds: null\n  sub-pipeline-timeout-seconds: 600\n"
                      "  timeout-grace-seconds: 0\n")
    result = await run_cli("a2a", "--check-config", "--config", str(config), env=env)
    assert result.code == 0, result.err
