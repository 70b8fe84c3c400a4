"""a2a-sdk's ``Client`` over every custom transport, through the transports' ``TransportSpec.connect``.

Each transport gets a real server (next to the HTTP transport that serves its Agent Card,
except stdio, whose client spawns the server and has a minimal card), and an SDK client
built by ``ClientFactory`` with the transport's channel registered for its binding. The
scenarios use the SDK's public API only: streaming ``send_message`` with a permission
round trip, ``get_task``, ``list_tasks``, ``subscribe``, ``cancel_task``, the typed error
of an unknown task, and authentication.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory, minimal_agent_card
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict, ParseDict
from iac_code_a2a_client.channel_transport import producer

from iac_code.server.plugins import Plugins
from iac_code.testing import permission_answer_request, redis_url, start_server

BINDINGS = ("unix", "websocket", "stdio", "grpc-jsonrpc", "redis-streams")
VPC = "Create a VPC with two vSwitches."
TOKEN = "t"
CREDENTIALS = {"Authorization": f"Bearer {TOKEN}"}
WAIT = 30.0


def _request(text: str, **fields: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


async def _events(stream: AsyncIterator[Any]) -> list[Any]:
    """Every event of a stream that must end by itself (bounded wait)."""

    async def collect() -> list[Any]:
        return [event async for event in stream]

    return await asyncio.wait_for(collect(), WAIT)


def _envelope(event: Any) -> dict[str, Any]:
    update = event.status_update
    assert update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    return dict(MessageToDict(update.metadata)["iac_code"]["input"])


def _drop_keys(prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(redis_url())
    keys = list(r.scan_iter(f"{prefix}*"))
    if keys:
        r.delete(*keys)
    r.close()


async def _card(http_url: str, headers: dict[str, str]) -> AgentCard:
    async with httpx.AsyncClient(timeout=10.0) as http:
        reply = await http.get(http_url.rstrip("/") + "/.well-known/agent-card.json", headers=headers)
    reply.raise_for_status()
    return ParseDict(reply.json(), AgentCard(), ignore_unknown_fields=True)


class Agent:
    """One server on ``binding`` and a way to open SDK clients to it (with or without credentials)."""

    def __init__(self, binding: str, card: AgentCard, options: dict[str, Any]) -> None:
        self.binding = binding
        self.card = card
        self.options = options
        self.spec = Plugins.load().transport(binding)
        self._clients: list[Client] = []

    def client(self, headers: dict[str, str] | None = None) -> Client:
        assert self.spec.connect is not None, f"{self.binding} has no client side"
        url = next(i.url for i in self.card.supported_interfaces if i.protocol_binding == self.binding)
        assert urlsplit(url).scheme in self.spec.url_schemes  # the advertised URL is one the transport claims
        factory = ClientFactory(ClientConfig(streaming=True, supported_protocol_bindings=[self.binding]))
        factory.register(self.binding, producer(self.spec.connect, {"A2A-Version": "1.0", **(headers or {})},
                                                10.0, self.options))
        client = factory.create(self.card)
        self._clients.append(client)
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 15)


@contextlib.asynccontextmanager
async def serving(binding: str, tmp: Path, monkeypatch: pytest.MonkeyPatch,
                  settings: dict[str, Any] | None = None) -> AsyncIterator[Agent]:
    """A server with the default configuration plus ``settings`` serving ``binding``."""
    settings = dict(settings or {})
    discovery = CREDENTIALS if "token" in settings else {}
    if binding == "stdio":
        home, workspace = tmp / "stdio-server", tmp / "stdio-work"
        home.mkdir()
        workspace.mkdir()
        config = home / "stdio.yml"
        config.write_text(yaml.safe_dump({**settings, "persistence-dir": str(home / "state")}))
        for name in list(os.environ):
            if name.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_")):
                monkeypatch.delenv(name)
        monkeypatch.setenv("IAC_CODE_CONFIG_DIR", str(home))
        monkeypatch.chdir(workspace)  # the spawned server inherits it: its workspace
        command = shlex.join([sys.executable, "-m", "iac_code.server.cli", "a2a", "--transport", "stdio",
                              "--config", str(config)])
        card = minimal_agent_card("stdio://iac-code", ["stdio"])
        card.capabilities.streaming = True  # a minimal card claims no streaming: the SDK would send unary calls
        agent = Agent(binding, card, {"stdio_command": command})
        try:
            yield agent
        finally:
            await agent.aclose()
        return
    monkeypatch.chdir(tmp)
    prefix = f"iac-code-test:{uuid.uuid4().hex}"
    extra: dict[str, Any] = {"transport": ["http", binding]}
    if binding == "unix":
        extra["socket-path"] = str(tmp / "a2a.sock")
    elif binding == "grpc-jsonrpc":
        extra["grpc-jsonrpc-port"] = 0
    elif binding == "redis-streams":
        extra.update({"redis-url": redis_url(), "request-stream": f"{prefix}:req", "response-stream": f"{prefix}:resp",
                      "consumer-group": f"{prefix}:group"})
    try:
        async with start_server({**settings, **extra}) as server:
            http_url = next(i.url for i in server.kernel.interfaces if i.protocol_binding == "JSONRPC")
            card = await _card(http_url, discovery)
            assert binding in {i.protocol_binding for i in card.supported_interfaces}
            agent = Agent(binding, card, {})
            try:
                yield agent
            finally:
                await agent.aclose()
    finally:
        if binding == "redis-streams":
            _drop_keys(prefix)


# --------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("binding", BINDINGS)
async def test_streaming_permission_round_trip_and_task_calls(binding: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(binding, tmp_path, monkeypatch) as agent:
        client = agent.client()
        events = await _events(client.send_message(_request(VPC)))
        assert events[0].WhichOneof("payload") == "task"
        task_id = events[0].task.id
        envelope = _envelope(events[-1])
        assert envelope["toolName"] == "write_file"

        rest = await _events(client.send_message(permission_answer_request(envelope, message_id=uuid.uuid4().hex)))
        kinds = [event.WhichOneof("payload") for event in rest]
        assert "artifact_update" in kinds, kinds
        artifact = next(event.artifact_update for event in rest if event.HasField("artifact_update"))
        assert artifact.task_id == task_id
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        task = await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), WAIT)
        assert task.id == task_id
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert len(task.artifacts) >= 1
        listed = await asyncio.wait_for(client.list_tasks(ListTasksRequest()), WAIT)
        assert task_id in {t.id for t in listed.tasks}
        with pytest.raises(TaskNotFoundError):
            await asyncio.wait_for(client.get_task(GetTaskRequest(id=f"no-such-task-{uuid.uuid4().hex}")), WAIT)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribe_to_a_paused_task_then_cancel_it(binding: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(binding, tmp_path, monkeypatch) as agent:
        client = agent.client()
        events = await _events(client.send_message(_request(VPC)))
        task_id = events[0].task.id
        _envelope(events[-1])  # paused for a permission answer: the task is still active

        followed = await _events(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        assert followed and followed[0].WhichOneof("payload") == "task"
        assert followed[0].task.id == task_id
        assert followed[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        canceled = await asyncio.wait_for(client.cancel_task(CancelTaskRequest(id=task_id)), WAIT)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        task = await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), WAIT)
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(A2AError):  # nothing left to follow
            await _events(client.subscribe(SubscribeToTaskRequest(id=task_id)))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_authentication_is_enforced(binding: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(binding, tmp_path, monkeypatch, {"token": TOKEN}) as agent:
        outcome: Any = None
        try:
            outcome = await asyncio.wait_for(agent.client().list_tasks(ListTasksRequest()), WAIT)
        except (A2AError, A2AClientError) as exc:
            outcome = exc
        assert isinstance(outcome, A2AError | A2AClientError), f"a call without the token succeeded: {outcome}"
        await agent.aclose()  # each stdio client spawns a server, and a state directory has one server at a time
        wrong = None
        try:
            wrong = await asyncio.wait_for(
                agent.client({"Authorization": "Bearer nope"}).list_tasks(ListTasksRequest()), WAIT)
        except (A2AError, A2AClientError) as exc:
            wrong = exc
        assert isinstance(wrong, A2AError | A2AClientError), f"a call with a wrong token succeeded: {wrong}"
        await agent.aclose()

        client = agent.client(CREDENTIALS)
        listed = await asyncio.wait_for(client.list_tasks(ListTasksRequest()), WAIT)
        assert list(listed.tasks) == []
        events = await _events(client.send_message(_request("hello")))
        assert events[-1].WhichOneof("payload") in {"task", "status_update"}
        listed = await asyncio.wait_for(client.list_tasks(ListTasksRequest()), WAIT)
        assert len(listed.tasks) == 1


# --------------------------------------------------------------------------- connect details


def test_redis_streams_urls_become_a_redis_url_and_a_request_stream() -> None:
    from iac_code_transport_redis.connect import parse_interface_url

    plain = parse_interface_url("redis-streams://127.0.0.1:6380/15/iac-code:a2a:requests")
    assert (plain.redis_url, plain.request_stream) == ("redis://127.0.0.1:6380/15", "iac-code:a2a:requests")
    quoted = parse_interface_url("redis-streams://[::1]:6379/2/a%2Fb%20c", password="p@ss:w/rd")
    assert (quoted.redis_url, quoted.request_stream) == ("redis://:p%40ss%3Aw%2Frd@[::1]:6379/2", "a/b c")
    given = parse_interface_url("redis-streams://alice:s%40cret@redis.example:7000/0/req", password="ignored")
    assert given.redis_url == "redis://alice:s%40cret@redis.example:7000/0"
    assert "s%40cret" not in repr(given) and "s@cret" not in repr(given)
    assert parse_interface_url("redis-streams://host").redis_url == "redis://host:6379/0"
    for bad in ("redis://127.0.0.1:6379/0/req", "redis-streams://127.0.0.1:6379/x/req", "redis-streams://h:99999/0"):
        with pytest.raises(ValueError, match="redis-streams://"):
            parse_interface_url(bad)


def test_the_stdio_client_spawns_this_python_unless_told_otherwise() -> None:
    from iac_code_transport_stdio.plugin import server_command

    assert server_command({}) == [sys.executable, "-m", "iac_code.server.cli", "a2a", "--transport", "stdio"]
    assert server_command({"stdio_command": "iac-code a2a --config 'my file.yml'"}) == [
        "iac-code", "a2a", "--config", "my file.yml"]
    assert server_command({"stdio_command": ["srv", 1]}) == ["srv", "1"]


async def test_redis_streams_credentials_from_the_url_or_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import secrets

    from iac_code.testing import free_port, start_redis_server

    caplog.set_level(logging.DEBUG)
    monkeypatch.chdir(tmp_path)
    password = "pw-" + secrets.token_hex(8)
    port = free_port()
    process = start_redis_server(port, tmp_path / "redis", appendonly=False, password=password)
    settings = {"transport": ["http", "redis-streams"], "redis-url": f"redis://:{password}@127.0.0.1:{port}/0",
                "request-stream": "cli:req", "response-stream": "cli:resp", "consumer-group": "cli:group"}
    spec = Plugins.load().transport("redis-streams")
    assert spec.connect is not None

    async def tasks(card: AgentCard, options: dict[str, Any]) -> Any:
        factory = ClientFactory(ClientConfig(streaming=True, supported_protocol_bindings=["redis-streams"]))
        factory.register("redis-streams", producer(spec.connect, {"A2A-Version": "1.0"}, 10.0, options))
        client = factory.create(card)
        try:
            return await asyncio.wait_for(client.list_tasks(ListTasksRequest()), WAIT)
        finally:
            await asyncio.wait_for(client.close(), 15)

    try:
        async with start_server(settings) as server:
            http_url = next(i.url for i in server.kernel.interfaces if i.protocol_binding == "JSONRPC")
            card = await _card(http_url, {})
            advertised = next(i.url for i in card.supported_interfaces if i.protocol_binding == "redis-streams")
            assert advertised == f"redis-streams://127.0.0.1:{port}/0/cli:req"

            with pytest.raises(A2AClientError) as refused:  # no credentials: Redis refuses the connection
                await tasks(card, {})
            assert password not in str(refused.value)

            assert list((await tasks(card, {"redis_password": password})).tasks) == []
            with_url = minimal_agent_card(f"redis-streams://:{password}@127.0.0.1:{port}/0/cli:req", ["redis-streams"])
            assert list((await tasks(with_url, {})).tasks) == []
    finally:
        process.kill()
        process.wait()
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert password not in logged
