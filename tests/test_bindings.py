"""The same scenarios over every A2A 1.0 binding the server offers: JSONRPC, HTTP+JSON and GRPC.

One server per test (``transport: [http, grpc]``, ``grpc-port: 0``, otherwise a new
user's configuration plus what the scenario needs), a2a-sdk's ``ClientFactory``
unchanged, built from the Agent Card fetched over HTTP. ``test_scenario`` runs each
scenario over each binding with the same expectations; ``test_same_results_over_every_binding``
runs it over all three against one server and compares the normalised results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from a2a.client import A2AClientError, AgentCardResolutionError, ClientCallContext
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Role,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import permission_answer_request, start_server
from tests.bindings_support import (
    BASE_SETTINGS,
    BINDINGS,
    STREAM_SECONDS,
    UNAUTHENTICATED,
    Run,
    Scenario,
    agent_texts,
    bearer,
    collect,
    envelope_of,
    error_of,
    fetch_card,
    payload,
    run_scenario,
    slug,
    task_id_of,
    text_request,
)

VPC_PROMPT = "Create a VPC with two vSwitches."
PUBLIC_HOOK = "https://8.8.8.8/a2a-hook"
TOKEN = "s3cret"
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
WORKING = TaskState.TASK_STATE_WORKING
CANCELED = TaskState.TASK_STATE_CANCELED


@dataclass(frozen=True)
class Spec:
    run: Scenario
    settings: dict[str, Any] = field(default_factory=dict)
    card_headers: dict[str, str] | None = None


SCENARIOS: dict[str, Spec] = {}

# (scenario, binding) -> a server bug that makes it fail there (strict xfail: fixing it turns the test red).
KNOWN_BUGS: dict[tuple[str, str], str] = {}


def scenario(name: str, **spec: Any) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = Spec(fn, **spec)
        return fn

    return register


# ---------------------------------------------------------------------------- 1. unary send


@scenario("unary-send")
async def unary_send(run: Run) -> Any:
    client = run.client(streaming=False)
    [reply] = await collect(client.send_message(text_request("hello", "m-hello")))
    assert reply.WhichOneof("payload") == "task"
    task = reply.task
    assert task.status.state == INPUT_REQUIRED  # the runtime's turn end
    assert agent_texts(task), "the agent answered"
    assert [m.role for m in task.history][0] == Role.ROLE_USER
    assert task.history[0].parts[0].text == "hello"
    return run.normalise(task)


# ---------------------------------------------------------------------------- 2. streaming send


@scenario("streaming-send")
async def streaming_send(run: Run) -> Any:
    client = run.client(streaming=True)
    events = await collect(client.send_message(text_request("hello", "m-stream")))
    assert events[0].WhichOneof("payload") == "task"
    last = events[-1]
    assert last.WhichOneof("payload") == "status_update"
    assert last.status_update.status.state == INPUT_REQUIRED
    assert {task_id_of(e) for e in events} == {events[0].task.id}
    assert all(e.status_update.status.state == WORKING for e in events[1:-1] if e.HasField("status_update"))
    return run.normalise([MessageToDict(e) for e in events])


# ---------------------------------------------------------------------------- 3. get and list


@scenario("get-and-list")
async def get_and_list(run: Run) -> Any:
    client = run.client(streaming=False)
    context = f"ctx-{run.tag}"
    run.normalise.paths[context] = "<context>"
    [first] = await collect(client.send_message(text_request("hello", "m-1", context_id=context)))
    [other] = await collect(client.send_message(text_request("hello", "m-2")))  # another context
    task = first.task
    last = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
    assert last.id == task.id and last.status.state == INPUT_REQUIRED
    assert list(last.history) == list(task.history)[-1:]
    full = await client.get_task(GetTaskRequest(id=task.id))
    assert list(full.history) == list(task.history)
    listed = await client.list_tasks(ListTasksRequest(context_id=context))
    assert [t.id for t in listed.tasks] == [task.id]
    assert listed.total_size == 1
    none = await client.list_tasks(ListTasksRequest(context_id=f"ctx-{run.tag}-nothing-here"))
    assert list(none.tasks) == []
    assert other.task.id not in [t.id for t in listed.tasks]
    return run.normalise({"last": last, "full": full, "listed": listed, "none": none})


# ---------------------------------------------------------------------------- 4. permission round trip


def _assert_ack(update: Any, envelope: dict[str, Any]) -> None:
    assert update.status.state == WORKING
    ack = MessageToDict(update.status.message)
    assert ack["role"] == "ROLE_AGENT"
    assert ack["parts"][0]["data"] == {"schemaVersion": 1.0, "kind": "permission_ack", "inputId": envelope["inputId"],
                                       "toolUseId": envelope["toolUseId"], "decision": "allow_once", "accepted": True}


@scenario("permission-streamed")
async def permission_streamed(run: Run) -> Any:
    client = run.client(streaming=True)
    template = run.workspace / "template.ros.yaml"
    paused = await collect(client.send_message(text_request(VPC_PROMPT, "m-vpc")))
    assert paused[0].WhichOneof("payload") == "task"
    pause = paused[-1].status_update
    assert pause.status.state == INPUT_REQUIRED
    envelope = envelope_of(pause)
    assert envelope is not None
    assert envelope["toolName"] == "write_file" and envelope["requestTaskId"] == paused[0].task.id
    assert not template.exists()  # paused before the write

    rest = await collect(client.send_message(permission_answer_request(envelope, "allow_once", message_id="m-vpc-answer")))
    assert rest[0].WhichOneof("payload") == "task"
    assert rest[0].task.id == envelope["requestTaskId"] and rest[0].task.status.state == INPUT_REQUIRED
    _assert_ack(rest[1].status_update, envelope)
    final = rest[-1].status_update
    assert final.status.state == INPUT_REQUIRED and envelope_of(final) is None  # the turn went on to its end
    assert template.exists()
    return run.normalise({"paused": [MessageToDict(e) for e in paused], "rest": [MessageToDict(e) for e in rest]})


@scenario("permission-unary")
async def permission_unary(run: Run) -> Any:
    client = run.client(streaming=False)
    template = run.workspace / "template.ros.yaml"
    [paused] = await collect(client.send_message(text_request(VPC_PROMPT, "m-vpc")))
    assert paused.task.status.state == INPUT_REQUIRED
    envelope = envelope_of(paused.task)
    assert envelope is not None and envelope["toolName"] == "write_file"
    assert not template.exists()

    [done] = await collect(client.send_message(permission_answer_request(envelope, "allow_once", message_id="m-vpc-answer")))
    final = done.task
    assert final.id == paused.task.id and final.status.state == INPUT_REQUIRED
    assert envelope_of(final) is None
    assert MessageToDict(final.metadata)["iac_code"]["assistantFinal"] == {"complete": True}
    acks = [MessageToDict(p)["data"] for m in final.history for p in m.parts
            if p.HasField("data") and MessageToDict(p)["data"].get("kind") == "permission_ack"]
    assert [a["decision"] for a in acks] == ["allow_once"]
    assert template.exists()
    return run.normalise({"paused": paused.task, "final": final})


@scenario("permission-text-answer")
async def permission_text_answer(run: Run) -> Any:
    """A generic client: the pause's question in status.message, a text answer, -32602 for anything else."""
    client = run.client(streaming=False)
    template = run.workspace / "template.ros.yaml"
    [paused] = await collect(client.send_message(text_request(VPC_PROMPT, "m-vpc")))
    task = paused.task
    assert task.status.state == INPUT_REQUIRED and envelope_of(task) is not None
    question = task.status.message
    assert question.role == Role.ROLE_AGENT
    assert question.parts[0].text.endswith("Reply `allow` to write template.ros.yaml once, or `deny`.")

    other = await error_of(collect(client.send_message(text_request("what will it cost?", "m-other", task_id=task.id))))
    assert type(other) is InvalidParamsError, repr(other)
    elsewhere = await error_of(collect(client.send_message(text_request("hi", "m-ctx", context_id=task.context_id))))
    assert type(elsewhere) is InvalidParamsError, repr(elsewhere)
    for error in (other, elsewhere):
        assert task.id in str(error) and "`allow`" in str(error) and "already working" not in str(error)
    assert not template.exists()

    [done] = await collect(client.send_message(text_request("Allow", "m-allow", task_id=task.id)))
    final = done.task
    assert final.id == task.id and final.status.state == INPUT_REQUIRED and envelope_of(final) is None
    acks = [MessageToDict(p)["data"]["decision"] for m in final.history for p in m.parts
            if p.HasField("data") and MessageToDict(p)["data"].get("kind") == "permission_ack"]
    assert acks == ["allow_once"] and template.exists()
    assert final.status.message.role == Role.ROLE_AGENT  # the turn's answer, where clients look
    assert "template.ros.yaml" in final.status.message.parts[0].text
    return run.normalise({"paused": task, "other": other, "elsewhere": elsewhere, "final": final})


# ---------------------------------------------------------------------------- 5. cancel


@scenario("cancel")
async def cancel(run: Run) -> Any:
    client = run.client(streaming=False)
    [paused] = await collect(client.send_message(text_request(VPC_PROMPT, "m-vpc")))
    assert envelope_of(paused.task) is not None
    canceled = await client.cancel_task(CancelTaskRequest(id=paused.task.id))
    assert canceled.id == paused.task.id and canceled.status.state == CANCELED
    assert (await client.get_task(GetTaskRequest(id=paused.task.id))).status.state == CANCELED
    assert not (run.workspace / "template.ros.yaml").exists()

    [ended] = await collect(client.send_message(text_request("hello", "m-hello")))
    not_cancelable = await error_of(client.cancel_task(CancelTaskRequest(id=ended.task.id)))
    assert type(not_cancelable) is TaskNotCancelableError, repr(not_cancelable)
    again = await error_of(client.cancel_task(CancelTaskRequest(id=paused.task.id)))  # already canceled
    assert type(again) is TaskNotCancelableError, repr(again)
    assert (await client.get_task(GetTaskRequest(id=ended.task.id))).status.state == INPUT_REQUIRED
    return run.normalise({"canceled": canceled, "ended": not_cancelable, "again": again})


# ---------------------------------------------------------------------------- 6. subscribe


@scenario("subscribe")
async def subscribe(run: Run) -> Any:
    unary, streaming = run.client(streaming=False), run.client(streaming=True)
    [paused] = await collect(unary.send_message(text_request(VPC_PROMPT, "m-vpc")))
    envelope = envelope_of(paused.task)
    assert envelope is not None
    events = await collect(streaming.subscribe(SubscribeToTaskRequest(id=paused.task.id)))
    assert [e.WhichOneof("payload") for e in events] == ["task"]  # the paused task, then the stream ends
    assert events[0].task.id == paused.task.id and events[0].task.status.state == INPUT_REQUIRED
    assert envelope_of(events[0].task) == envelope

    ended = await subscribe_between_turns(run)
    canceled = await unary.cancel_task(CancelTaskRequest(id=paused.task.id))
    assert canceled.status.state == CANCELED
    terminal = await error_of(collect(streaming.subscribe(SubscribeToTaskRequest(id=paused.task.id))))
    assert type(terminal) is UnsupportedOperationError, repr(terminal)  # at once, not an empty stream
    assert "terminal state" in str(terminal)
    return run.normalise({"paused": [MessageToDict(e) for e in events], "ended": ended, "terminal": terminal})


async def subscribe_between_turns(run: Run) -> Any:
    """A2A 1.0: a task that is not terminal can be subscribed to. A task resting after its turn
    (INPUT_REQUIRED) gives its current Task, then the next turn's events, and the stream ends with that turn."""
    unary, streaming = run.client(streaming=False), run.client(streaming=True)
    [ended] = await collect(unary.send_message(text_request("hello", "m-hello")))
    task_id = ended.task.id
    stream = streaming.subscribe(SubscribeToTaskRequest(id=task_id))
    first = await asyncio.wait_for(anext(stream), STREAM_SECONDS)
    assert first.WhichOneof("payload") == "task", MessageToDict(first)
    assert first.task.id == task_id and first.task.status.state == INPUT_REQUIRED
    rest = asyncio.ensure_future(collect(stream))
    [again] = await collect(unary.send_message(text_request("again", "m-again", task_id=task_id)))
    followed = await rest
    assert again.task.status.state == INPUT_REQUIRED
    assert followed and {task_id_of(e) for e in followed} == {task_id}
    assert followed[-1].status_update.status.state == INPUT_REQUIRED  # the next turn's end closes the stream
    assert any(e.status_update.status.state == WORKING for e in followed)
    return [MessageToDict(e) for e in [first, *followed]]


def _seq(event: StreamResponse) -> int:
    seq = MessageToDict(payload(event).metadata).get("iac_code", {}).get("seq")  # type: ignore[attr-defined]
    assert isinstance(seq, int | float), MessageToDict(event)
    return int(seq)


@scenario("resume-stream")
async def resume_stream(run: Run) -> Any:
    """Every stream event carries its seq; ``Last-Event-ID`` (a header, gRPC metadata) resumes after it."""
    client = run.client(streaming=True)
    events = await collect(client.send_message(text_request(VPC_PROMPT, "m-vpc")))
    seqs = [_seq(e) for e in events]
    assert seqs == sorted(set(seqs)) and len(seqs) >= 3
    task_id = events[0].task.id
    for cut in range(len(events)):
        context = ClientCallContext(service_parameters={"last-event-id": str(seqs[cut])})
        resumed = await collect(client.subscribe(SubscribeToTaskRequest(id=task_id), context=context))
        assert resumed == events[cut + 1:], f"after seq {seqs[cut]}"
    bad = ClientCallContext(service_parameters={"last-event-id": "not-a-number"})
    invalid = await error_of(collect(client.subscribe(SubscribeToTaskRequest(id=task_id), context=bad)))
    assert type(invalid) is InvalidParamsError, repr(invalid)
    return run.normalise({"events": [MessageToDict(e) for e in events], "invalid": invalid})


# ---------------------------------------------------------------------------- 7. extended agent card


@scenario("extended-card")
async def extended_card(run: Run) -> Any:
    assert run.card.capabilities.extended_agent_card
    assert [i.protocol_binding for i in run.card.supported_interfaces] == list(BINDINGS)
    card = await run.client(streaming=False).get_extended_agent_card(GetExtendedAgentCardRequest())
    assert card.name == run.card.name
    assert any(s.id == "iac_code_runtime_details" for s in card.skills)
    assert list(card.supported_interfaces) == list(run.card.supported_interfaces)
    return run.normalise(card)


# ---------------------------------------------------------------------------- 8. push-config CRUD


@scenario("push-config", settings={"push-notifications": True})
async def push_config(run: Run) -> Any:
    assert run.card.capabilities.push_notifications
    client = run.client(streaming=False)
    [hello] = await collect(client.send_message(text_request("hello", "m-push")))
    task_id = hello.task.id
    created = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task_id, id="hook-1", url=PUBLIC_HOOK, token="t-1"))
    assert (created.task_id, created.id, created.url, created.token) == (task_id, "hook-1", PUBLIC_HOOK, "t-1")
    got = await client.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"))
    assert got == created
    listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task_id))
    assert list(listed.configs) == [created]
    refused = await error_of(client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task_id, id="loopback", url="http://127.0.0.1:9/x")))
    assert type(refused) is InvalidParamsError, repr(refused)
    await client.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1"))
    emptied = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task_id))
    assert list(emptied.configs) == []
    gone = await error_of(client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task_id, id="hook-1")))
    return run.normalise({"created": created, "listed": listed, "refused": refused, "emptied": emptied, "gone": gone})


# ---------------------------------------------------------------------------- 9. auth


@scenario("auth", settings={"token": TOKEN}, card_headers={"Authorization": f"Bearer {TOKEN}"})
async def auth(run: Run) -> Any:
    refused_card = await error_of(fetch_card(run.server, run.http))  # the public card too needs credentials
    assert type(refused_card) is AgentCardResolutionError and refused_card.status_code == 401

    # A client built from the card (fetched with credentials) that sends none, or the wrong ones.
    anonymous, anonymous_stream = run.client(streaming=False), run.client(streaming=True)
    wrong = run.client(streaming=False, interceptors=[bearer("wrong")])
    refused = {
        "send": await error_of(collect(anonymous.send_message(text_request("hello", "m-anon")))),
        "stream": await error_of(collect(anonymous_stream.send_message(text_request("hello", "m-anon-s")))),
        "subscribe": await error_of(collect(anonymous_stream.subscribe(SubscribeToTaskRequest(id="t-1")))),
        "list": await error_of(anonymous.list_tasks(ListTasksRequest())),
        "card": await error_of(anonymous.get_extended_agent_card(GetExtendedAgentCardRequest())),
        "wrong-token": await error_of(wrong.list_tasks(ListTasksRequest())),
    }
    for call, error in refused.items():
        assert type(error) is A2AClientError, (call, repr(error))  # a2a-sdk's own type for a refused call
        assert UNAUTHENTICATED[run.binding] in str(error), (call, str(error))

    # With a2a-sdk's AuthInterceptor: Authorization: Bearer s3cret for the card's bearer scheme.
    client = run.client(streaming=False, interceptors=[bearer(TOKEN)])
    context = f"ctx-{run.tag}"
    run.normalise.paths[context] = "<context>"
    [hello] = await collect(client.send_message(text_request("hello", "m-auth", context_id=context)))
    assert hello.task.status.state == INPUT_REQUIRED
    assert (await client.get_task(GetTaskRequest(id=hello.task.id))).id == hello.task.id
    listed = await client.list_tasks(ListTasksRequest(context_id=context))
    assert [t.id for t in listed.tasks] == [hello.task.id]
    assert (await client.get_extended_agent_card(GetExtendedAgentCardRequest())).name == run.card.name
    streamed = await collect(run.client(streaming=True, interceptors=[bearer(TOKEN)]).send_message(
        text_request("hello", "m-auth-s")))
    assert streamed[-1].status_update.status.state == INPUT_REQUIRED
    return {"refused": {call: type(error).__name__ for call, error in refused.items()},
            "task": run.normalise(hello.task)}


# ---------------------------------------------------------------------------- 10. malformed requests


@scenario("malformed")
async def malformed(run: Run) -> Any:
    client, streaming = run.client(streaming=False), run.client(streaming=True)
    unknown = {
        "get": await error_of(client.get_task(GetTaskRequest(id="no-such-task"))),
        "cancel": await error_of(client.cancel_task(CancelTaskRequest(id="no-such-task"))),
        "subscribe": await error_of(collect(streaming.subscribe(SubscribeToTaskRequest(id="no-such-task")))),
        "send": await error_of(collect(client.send_message(text_request("hello", "m-1", task_id="no-such-task")))),
    }
    for op, error in unknown.items():
        assert type(error) is TaskNotFoundError, (op, repr(error))
    invalid = {
        "get": await error_of(client.get_task(GetTaskRequest(id="has space"))),
        "cancel": await error_of(client.cancel_task(CancelTaskRequest(id="has space"))),
        "subscribe": await error_of(collect(streaming.subscribe(SubscribeToTaskRequest(id="has space")))),
        "send": await error_of(collect(client.send_message(text_request("hello", "m-2", task_id="has space")))),
    }
    for op, error in invalid.items():
        assert type(error) is InvalidParamsError, (op, repr(error))
    return run.normalise({"unknown": unknown, "invalid": invalid})


@scenario("invalid-push-config-task-id", settings={"push-notifications": True})
async def invalid_push_config_task_id(run: Run) -> Any:
    """The push-config methods check a task id like every other method: "has space" is invalid params."""
    client = run.client(streaming=False)
    invalid = {
        "create": await error_of(client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id="has space", id="hook-1", url=PUBLIC_HOOK))),
        "get": await error_of(client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id="has space", id="hook-1"))),
        "list": await error_of(client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id="has space"))),
        "delete": await error_of(client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id="has space", id="hook-1"))),
    }
    for op, error in invalid.items():
        assert type(error) is InvalidParamsError, (op, repr(error))
    return run.normalise(invalid)


@scenario("invalid-list-context-id")
async def invalid_list_context_id(run: Run) -> Any:
    """A ListTasks ``contextId`` filter that is no valid id is invalid params, as the id anywhere else."""
    error = await error_of(run.client(streaming=False).list_tasks(ListTasksRequest(context_id="has space")))
    assert type(error) is InvalidParamsError, repr(error)
    return run.normalise(error)


# ---------------------------------------------------------------------------- the tests


def _params(names: list[str], bindings: tuple[str, ...] | None) -> list[Any]:
    params = []
    for name in names:
        for binding in bindings or (None,):
            bugs = [reason for (n, b), reason in KNOWN_BUGS.items() if n == name and (binding is None or b == binding)]
            marks = [pytest.mark.xfail(strict=True, reason="; ".join(bugs))] if bugs else []
            values = (name,) if binding is None else (name, binding)
            params.append(pytest.param(*values, marks=marks, id="-".join(v for v in values)))
    return params


async def _run(name: str, binding: str, workspace: Path, monkeypatch: pytest.MonkeyPatch, server: Any) -> Any:
    spec = SCENARIOS[name]
    workspace.mkdir()
    monkeypatch.chdir(workspace)  # the server's default workspace: generated files land here
    return await run_scenario(spec.run, binding, server, workspace, spec.card_headers)


@pytest.mark.parametrize(("name", "binding"), _params(list(SCENARIOS), BINDINGS))
async def test_scenario(name: str, binding: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with start_server({**BASE_SETTINGS, **SCENARIOS[name].settings}) as server:
        await _run(name, binding, tmp_path / slug(binding), monkeypatch, server)


@pytest.mark.parametrize("name", _params(list(SCENARIOS), None))
async def test_same_results_over_every_binding(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with start_server({**BASE_SETTINGS, **SCENARIOS[name].settings}) as server:
        results = {b: await _run(name, b, tmp_path / slug(b), monkeypatch, server) for b in BINDINGS}
    for binding in BINDINGS[1:]:
        assert results[binding] == results[BINDINGS[0]], f"{binding} differs from {BINDINGS[0]}"
