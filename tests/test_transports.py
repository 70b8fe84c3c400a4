"""The same JSON-RPC scenarios over every transport, with the same expected results.

HTTP (JSON-RPC + SSE), the Unix socket, stdio (a real ``iac-code a2a --transport
stdio`` process), WebSocket, the gRPC JSON-RPC envelope and Redis Streams (the
machine's Redis) each get a server configured as a new user would have it, and a
client from the transport's plugin (for unix and stdio:
:mod:`iac_code_transport_stdio.ndjson_client`). Every scenario states its
expectation once; a transport passes when it meets all of them. (The official
bindings, JSON-RPC / HTTP+JSON / gRPC through a2a-sdk's client, have their own
module: ``test_bindings.py``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest
import yaml

from iac_code.testing import A2A_HEADERS, permission_answer_body, redis_url, start_server
from tests.client_support import default_signals

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
TRANSPORTS = ("http", "unix", "stdio", "websocket", "grpc-jsonrpc", "redis-streams")
VPC = "Create a VPC with two vSwitches."
VERSION = {"A2A-Version": "1.0"}
MAX_BYTES = 256 * 1024


def transport_settings(transport: str, tmp: Path, prefix: str) -> dict[str, Any]:
    """The settings that serve ``transport`` (a socket under ``tmp``, Redis keys under ``prefix``)."""
    extra: dict[str, Any] = {"transport": [transport]}
    if transport == "unix":
        extra["socket-path"] = str(tmp / "a2a.sock")
    elif transport == "grpc-jsonrpc":
        extra["grpc-jsonrpc-port"] = 0
    elif transport == "redis-streams":
        extra.update({"redis-url": redis_url(), "request-stream": f"{prefix}:req", "response-stream": f"{prefix}:resp",
                      "consumer-group": f"{prefix}:group"})
    return extra


class Client(Protocol):
    async def request(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> dict[str, Any]: ...

    def stream(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


class HttpClient:
    """JSON-RPC over HTTP: POST, SSE for streams (the yardstick the other transports are held to)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = aiohttp.ClientSession()

    async def request(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> dict[str, Any]:
        async with self.http.post(self.url, json=payload, headers={**A2A_HEADERS, **(headers or {})}) as r:
            return dict(await r.json(content_type=None))

    async def stream(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        hdrs = {**A2A_HEADERS, "Accept": "text/event-stream", **(headers or {})}
        async with self.http.post(self.url, json=payload, headers=hdrs) as r:
            if not r.headers.get("Content-Type", "").startswith("text/event-stream"):
                yield dict(await r.json(content_type=None))
                return
            async for line in r.content:
                if line.startswith(b"data:"):
                    yield json.loads(line[5:])

    async def aclose(self) -> None:
        await self.http.close()


def rpc(method: str, params: dict[str, Any], request_id: str | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id or uuid.uuid4().hex, "method": method, "params": params}


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **fields}}


@contextlib.asynccontextmanager
async def serving(transport: str, tmp: Path, settings: dict[str, Any] | None = None, *,
                  connect_headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """A server on ``transport`` (the default configuration plus ``settings``) and a client for it."""
    settings = {"max-request-bytes": MAX_BYTES, **(settings or {})}
    prefix = f"iac-code-test:{uuid.uuid4().hex}"
    if transport == "stdio":
        from iac_code_transport_stdio.ndjson_client import NdjsonClient

        home = tmp / "stdio-server"  # the server's own files, outside the workspace (its cwd)
        workspace = tmp / "stdio-work"
        home.mkdir()
        workspace.mkdir()
        config = home / "stdio.yml"
        config.write_text(yaml.safe_dump({**settings, "persistence-dir": str(home / "state")}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_"))}
        env["IAC_CODE_CONFIG_DIR"] = str(home)
        client = await NdjsonClient.spawn([IAC_CODE, "a2a", "--transport", "stdio", "--config", str(config)], env=env,
                                          cwd=str(workspace))
        try:
            yield client
        finally:
            await client.aclose()
        return
    extra = transport_settings(transport, tmp, prefix)
    async with start_server({**settings, **extra}) as server:
        client = await _connect(transport, server.url, prefix, connect_headers)
        _FACTORIES[id(client)] = lambda: _connect(transport, server.url, prefix, connect_headers)
        _URLS[id(client)] = server.url
        try:
            yield client
        finally:
            _FACTORIES.pop(id(client), None)
            _URLS.pop(id(client), None)
            await client.aclose()
    if transport == "redis-streams":
        drop_keys(prefix)


def drop_keys(prefix: str) -> None:
    """Delete the test's Redis keys."""
    import redis

    r = redis.Redis.from_url(redis_url())
    keys = list(r.scan_iter(f"{prefix}*"))
    if keys:
        r.delete(*keys)
    r.close()


_FACTORIES: dict[int, Any] = {}
_URLS: dict[int, str] = {}


async def connect_another(client: Client) -> Client:
    """A further client of the server ``client`` talks to (its own connection)."""
    return await _FACTORIES[id(client)]()


async def _connect(transport: str, url: str, prefix: str, headers: dict[str, str] | None) -> Client:
    if transport == "http":
        return HttpClient(url)
    if transport == "unix":
        from iac_code_transport_stdio.ndjson_client import NdjsonClient

        return await NdjsonClient.connect_unix(url.removeprefix("unix://"))
    if transport == "websocket":
        from iac_code_transport_http.websocket_client import WebSocketClient

        return await WebSocketClient.connect(url, headers=headers)
    if transport == "grpc-jsonrpc":
        from iac_code_transport_grpc.jsonrpc_client import GrpcJsonRpcClient

        return GrpcJsonRpcClient(url.removeprefix("grpc-jsonrpc://"))
    from iac_code_transport_redis.client import RedisStreamsClient

    return RedisStreamsClient(redis_url(), request_stream=f"{prefix}:req")


async def collect(stream: AsyncIterator[dict[str, Any]], limit: int = 200) -> list[dict[str, Any]]:
    events = []
    async for event in stream:
        events.append(event)
        if len(events) >= limit:
            break
    return events


def state_of(result: dict[str, Any]) -> str:
    body = result.get("task") or result.get("statusUpdate") or result
    return str(body.get("status", {}).get("state", ""))


async def send(client: Client, text: str, **fields: Any) -> dict[str, Any]:
    reply = await client.request(rpc("SendMessage", message(text, **fields)), headers=VERSION)
    assert "result" in reply, reply
    return dict(reply["result"]["task"])


# --------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_send_stream_get_list(transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with serving(transport, tmp_path) as client:
        task = await send(client, "hello")
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        events = await collect(client.stream(rpc("SendStreamingMessage", message("hello")), headers=VERSION))
        results = [e["result"] for e in events]
        assert "task" in results[0] and state_of(results[-1]) == "TASK_STATE_INPUT_REQUIRED"
        got = await client.request(rpc("GetTask", {"id": task["id"]}), headers=VERSION)
        assert got["result"]["id"] == task["id"]
        listed = await client.request(rpc("ListTasks", {}), headers=VERSION)
        assert task["id"] in {t["id"] for t in listed["result"]["tasks"]}
        missing = await client.request(rpc("GetTask", {"id": "no-such-task"}), headers=VERSION)
        assert missing["error"]["code"] == -32001


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_permission_round_trip_subscribe_and_cancel(transport: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with serving(transport, tmp_path) as client:
        paused = await send(client, VPC)
        envelope = paused["metadata"]["iac_code"]["input"]
        answered = await client.request(permission_answer_body(envelope, message_id=uuid.uuid4().hex), headers=VERSION)
        assert "result" in answered, answered
        second = await send(client, VPC, contextId=uuid.uuid4().hex)
        # A turn paused for a permission answer: the subscription gets the task, then this turn's stream ends.
        events = await asyncio.wait_for(collect(client.stream(rpc("SubscribeToTask", {"id": second["id"]}),
                                                              headers=VERSION)), 10)
        assert [e["result"]["task"]["id"] for e in events] == [second["id"]]
        assert state_of(events[0]["result"]) == "TASK_STATE_INPUT_REQUIRED"
        canceled = await client.request(rpc("CancelTask", {"id": second["id"]}), headers=VERSION)
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        finished = await collect(client.stream(rpc("SubscribeToTask", {"id": second["id"]}), headers=VERSION))
        assert [e["error"]["code"] for e in finished] == [-32004]  # terminal: nothing left to follow


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_push_config_crud(transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with serving(transport, tmp_path, {"push-notifications": True}) as client:
        task = await send(client, "hello")
        config = {"taskId": task["id"], "id": "hook-1", "url": "https://8.8.8.8/hook", "token": "t-1"}
        created = await client.request(rpc("CreateTaskPushNotificationConfig", config), headers=VERSION)
        assert created["result"]["id"] == "hook-1"
        got = await client.request(rpc("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook-1"}),
                                   headers=VERSION)
        assert got["result"]["token"] == "t-1"
        listed = await client.request(rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}), headers=VERSION)
        assert [c["id"] for c in listed["result"]["configs"]] == ["hook-1"]
        refused = await client.request(rpc("CreateTaskPushNotificationConfig", {**config, "url": "http://10.0.0.1/"}),
                                       headers=VERSION)
        assert refused["error"]["code"] == -32602
        deleted = await client.request(rpc("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook-1"}),
                                       headers=VERSION)
        assert "error" not in deleted


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_requests_get_errors_and_the_transport_keeps_serving(transport: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with serving(transport, tmp_path) as client:
        malformed = await client.request({"jsonrpc": "2.0", "id": "bad-1", "method": 7}, headers=VERSION)
        assert malformed["error"]["code"] == -32600
        unknown = await client.request(rpc("NoSuchMethod", {}), headers=VERSION)
        assert unknown["error"]["code"] == -32601
        oversized = await client.request(rpc("SendMessage", message("x" * (MAX_BYTES + 1))), headers=VERSION)
        assert oversized["error"]["code"] == -32600
        early = await collect(client.stream(rpc("SendStreamingMessage", {"message": {"role": "ROLE_USER"}}),
                                            headers=VERSION))
        assert early and early[0]["error"]["code"] == -32602  # an error before the first event reaches the client
        task = await send(client, "hello")  # still serving
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


class BareWebSocket:
    """Raw frames over a WebSocket whose handshake names no ``A2A-Version`` (the client helper sends 1.0);
    one request at a time, its answer unwrapped from the transport's ``{"id", "payload", "final"}`` frame."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.session = session
        self.ws = ws

    @classmethod
    async def connect(cls, url: str) -> BareWebSocket:
        session = aiohttp.ClientSession()
        return cls(session, await session.ws_connect(url))

    async def request(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> dict[str, Any]:
        await self.ws.send_str(json.dumps({**payload, "headers": headers} if headers else payload))
        frame = json.loads((await asyncio.wait_for(self.ws.receive(), 10)).data)
        return dict(frame["payload"])

    async def aclose(self) -> None:
        await self.ws.close()
        await self.session.close()


@pytest.mark.parametrize("transport", [t for t in TRANSPORTS if t != "http"])
async def test_a_frame_without_a2a_version_is_a_1_0_call(transport: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """transports.md §1.1: every custom transport dispatches as 1.0; only a 0.3 method name makes a 0.3 call."""
    monkeypatch.chdir(tmp_path)
    async with serving(transport, tmp_path) as client:
        bare: Any = await BareWebSocket.connect(_URLS[id(client)]) if transport == "websocket" else client
        try:
            listed = await bare.request({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
            assert listed["result"]["tasks"] == [], listed
            sent = await bare.request(rpc("SendMessage", message("hello")))
            task = sent["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            legacy = await bare.request({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}})
            assert legacy["result"]["kind"] == "task" and legacy["result"]["status"]["state"] == "input-required"
            named = await bare.request(rpc("ListTasks", {}), headers={"A2A-Version": "0.3"})
            assert named["error"]["code"] == -32009  # a version the frame names is still checked
        finally:
            if bare is not client:
                await bare.aclose()


async def refused(call: Any) -> bool:
    """Whether a call was turned away: an error answer, or an exception (a refused gRPC call)."""
    try:
        reply = await call
    except Exception:
        return True
    return "result" not in reply


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_authentication_is_enforced(transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = {"token": "s3cret"}
    credentials = {"Authorization": "Bearer s3cret"}
    if transport == "websocket":  # the handshake carries the credentials for the whole socket
        with pytest.raises(aiohttp.WSServerHandshakeError):
            async with serving(transport, tmp_path, settings):
                pass
        async with serving(transport, tmp_path, settings, connect_headers=credentials) as client:
            assert "result" in await client.request(rpc("ListTasks", {}), headers=VERSION)
        return
    async with serving(transport, tmp_path, settings) as client:
        assert await refused(client.request(rpc("ListTasks", {}), headers=VERSION))
        assert await refused(client.request(rpc("ListTasks", {}), headers={**VERSION, "Authorization": "Bearer nope"}))
        allowed = await client.request(rpc("ListTasks", {}), headers={**VERSION, **credentials})
        assert "result" in allowed


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_many_concurrent_requests(transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with serving(transport, tmp_path) as client:
        tasks = await asyncio.gather(*(send(client, "hello", contextId=uuid.uuid4().hex) for _ in range(30)))
        assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_INPUT_REQUIRED"}
        assert len({t["id"] for t in tasks}) == 30
        if transport == "stdio":  # one parent, one pipe: many clients means many connections elsewhere
            return
        extra = await asyncio.gather(*(connect_another(client) for _ in range(100)))
        try:
            tasks = await asyncio.gather(*(send(c, "hello", contextId=uuid.uuid4().hex) for c in extra))
        finally:
            await asyncio.gather(*(c.aclose() for c in extra))
        assert len({t["id"] for t in tasks}) == 100  # 100 concurrent clients, each answered


@pytest.mark.parametrize("transport", [t for t in TRANSPORTS if t != "stdio"])  # stdio ends at EOF: plugins/transport_stdio/tests
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_the_server_stops_cleanly_on_a_signal(transport: str, sig: int, tmp_path: Path) -> None:
    prefix = f"iac-code-test:{uuid.uuid4().hex}"
    settings: dict[str, Any] = {"persistence-dir": str(tmp_path / "state"), "port": 0}
    if transport == "unix":
        settings["socket-path"] = str(tmp_path / "a2a.sock")
    elif transport == "grpc-jsonrpc":
        settings["grpc-jsonrpc-port"] = 0
    elif transport == "redis-streams":
        settings.update({"redis-url": redis_url(), "request-stream": f"{prefix}:req", "response-stream": f"{prefix}:resp",
                         "consumer-group": f"{prefix}:group"})
    config = tmp_path / "server.yml"
    config.write_text(yaml.safe_dump(settings))
    workspace = tmp_path / "work"
    workspace.mkdir()
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--transport", transport, "--config", str(config),
                                                cwd=workspace, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE, preexec_fn=default_signals)
    assert proc.stderr is not None
    try:
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "server exited early"
            if "listening:" in line:
                break
        proc.send_signal(sig)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        if transport == "unix":
            assert not (tmp_path / "a2a.sock").exists()  # removed on exit
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if transport == "redis-streams":
            drop_keys(prefix)
