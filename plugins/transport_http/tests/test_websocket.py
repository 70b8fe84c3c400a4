"""WebSocket transport: framing, multiplexing, handshake auth, bad frames, vanished clients (real server)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.api import TOO_LARGE
from iac_code.testing import RunningServer, permission_envelope, send_message_body, start_server
from iac_code_transport_http.websocket import WebSocketTransport
from iac_code_transport_http.websocket_client import WebSocketClient

VPC_PROMPT = "Create a VPC with two vSwitches."
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
WS = {"transport": ["websocket"]}


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # generated files land here, not in the repository


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    async with start_server(WS) as running:
        yield running


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[WebSocketClient]:
    async with await WebSocketClient.connect(server.url) as ws:
        yield ws


def rpc(method: str, params: dict[str, Any], request_id: str | int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def transport_of(server: RunningServer) -> WebSocketTransport:
    [transport] = [s for s in server.kernel._servers if isinstance(s, WebSocketTransport)]
    return transport


async def raw_frames(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[dict[str, Any]]:
    return [json.loads(await asyncio.wait_for(ws.receive_str(), 10)) for _ in range(count)]


async def test_interface_and_unary_send(server: RunningServer, client: WebSocketClient) -> None:
    assert server.url.startswith("ws://127.0.0.1:") and server.url.endswith("/a2a") and ":0/" not in server.url
    reply = await client.request(send_message_body("hello", request_id="s-1"))
    assert reply["id"] == "s-1"
    task = reply["result"]["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    assert task["history"][0]["parts"][0]["text"] == "hello"


async def test_envelope_of_unary_and_stream(server: RunningServer) -> None:
    async with aiohttp.ClientSession() as s, s.ws_connect(server.url, headers={"A2A-Version": "1.0"}) as ws:
        await ws.send_str(json.dumps(rpc("GetTask", {"id": "no-such-task"}, 7)))
        [unary] = await raw_frames(ws, 1)
        assert unary["id"] == 7 and unary["final"] is True and unary["payload"]["error"]["code"] == -32001
        await ws.send_str(json.dumps(send_message_body("hello", request_id="st", method="SendStreamingMessage")))
        frames = [json.loads(await asyncio.wait_for(ws.receive_str(), 10))]
        while not frames[-1]["final"]:
            frames.append(json.loads(await asyncio.wait_for(ws.receive_str(), 10)))
    assert frames[-1] == {"id": "st", "payload": {"jsonrpc": "2.0", "id": "st"}, "final": True}
    events = frames[:-1]
    assert events and all(f["id"] == "st" and f["final"] is False and "result" in f["payload"] for f in events)
    assert "task" in events[0]["payload"]["result"]
    assert events[-1]["payload"]["result"]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED


async def test_stream_get_list_cancel(client: WebSocketClient) -> None:
    events = [e async for e in client.stream(send_message_body("hello", request_id="st-1", method="SendStreamingMessage",
                                                                 contextId="ctx-ws"))]
    task_id = events[0]["result"]["task"]["id"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED

    got = await client.request(rpc("GetTask", {"id": task_id}, "g-1"))
    assert got["result"]["id"] == task_id and got["result"]["status"]["state"] == INPUT_REQUIRED
    listed = await client.request(rpc("ListTasks", {"contextId": "ctx-ws"}, "l-1"))
    assert [t["id"] for t in listed["result"]["tasks"]] == [task_id]

    paused = (await client.request(send_message_body(VPC_PROMPT, request_id="v-1", message_id="m-vpc")))["result"]["task"]
    assert permission_envelope(paused) is not None
    canceled = await client.request(rpc("CancelTask", {"id": paused["id"]}, "c-1"))
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    refused = await client.request(rpc("CancelTask", {"id": task_id}, "c-2"))
    assert refused["error"]["code"] == -32002  # not cancelable


async def test_subscribe_to_paused_task_streams(client: WebSocketClient) -> None:
    paused = (await client.request(send_message_body(VPC_PROMPT, request_id="v-1", message_id="m-vpc")))["result"]["task"]
    envelope = permission_envelope(paused)
    assert envelope is not None
    events = [e async for e in client.stream(rpc("SubscribeToTask", {"id": paused["id"]}, "sub-1"))]
    assert [list(e["result"]) for e in events] == [["task"]]
    assert events[0]["result"]["task"]["id"] == paused["id"]
    assert permission_envelope(events[0]["result"]["task"]) == envelope

    # An error before the first event is surfaced as the final frame, not swallowed.
    [error] = [e async for e in client.stream(rpc("SubscribeToTask", {"id": "no-such-task"}, "sub-2"))]
    assert error["id"] == "sub-2" and error["error"]["code"] == -32001


async def test_twenty_concurrent_requests_on_one_socket(client: WebSocketClient) -> None:
    paused = (await client.request(send_message_body(VPC_PROMPT, request_id="v-1", message_id="m-vpc")))["result"]["task"]

    async def one(n: int) -> dict[str, Any]:
        if n % 4 == 0:
            return await client.request(send_message_body("hello", request_id=f"r-{n}", message_id=f"m-{n}"))
        if n % 4 == 1:
            return {"events": [e async for e in client.stream(
                rpc("SubscribeToTask", {"id": paused["id"]}, f"r-{n}"))], "id": f"r-{n}"}
        return await client.request(rpc("GetTask", {"id": paused["id"]}, f"r-{n}"))

    replies = await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(20))), 30)
    for n, reply in enumerate(replies):
        assert reply["id"] == f"r-{n}"
        if n % 4 == 0:
            assert reply["result"]["task"]["status"]["state"] == INPUT_REQUIRED
        elif n % 4 == 1:
            assert reply["events"][0]["result"]["task"]["id"] == paused["id"]
        else:
            assert reply["result"]["id"] == paused["id"]
    with pytest.raises(ValueError, match="in flight"):
        await asyncio.gather(client.request(rpc("GetTask", {"id": paused["id"]}, "dup")),
                             client.request(rpc("GetTask", {"id": paused["id"]}, "dup")))


async def test_malformed_and_binary_frames_keep_the_socket(server: RunningServer) -> None:
    async with aiohttp.ClientSession() as s, s.ws_connect(server.url, headers={"A2A-Version": "1.0"}) as ws:
        await ws.send_str("{not json")
        [parse] = await raw_frames(ws, 1)
        assert parse["id"] is None and parse["final"] is True and parse["payload"]["error"]["code"] == -32700
        await ws.send_str("[1, 2]")
        [batch] = await raw_frames(ws, 1)
        assert batch["final"] is True and batch["payload"]["error"]["code"] == -32600
        await ws.send_str('{"jsonrpc": "2.0", "id": "m", "method": "NoSuchMethod"}')
        [unknown] = await raw_frames(ws, 1)
        assert unknown["id"] == "m" and unknown["payload"]["error"]["code"] == -32601
        await ws.send_bytes(b'{"jsonrpc": "2.0", "id": "b", "method": "GetTask"}')
        [binary] = await raw_frames(ws, 1)
        assert binary["final"] is True and binary["payload"]["error"]["code"] == -32600
        assert "Binary frames" in binary["payload"]["error"]["message"]
        await ws.send_str(json.dumps(rpc("GetTask", {"id": "no-such-task"}, "after")))
        [after] = await raw_frames(ws, 1)
        assert after["id"] == "after" and after["payload"]["error"]["code"] == -32001
        assert not ws.closed


async def test_oversized_frames() -> None:
    async with start_server({**WS, "max-request-bytes": 100_000}) as server:
        async with await WebSocketClient.connect(server.url) as client:
            big = rpc("GetTask", {"id": "x" * 120_000}, "big")
            assert await client.request(big) == {"jsonrpc": "2.0", "id": "big", "error": TOO_LARGE}
            ok = await client.request(rpc("GetTask", {"id": "no-such-task"}, "ok"))
            assert ok["error"]["code"] == -32001  # the socket still serves
            with pytest.raises(ConnectionError):  # far past the limit: closed as "message too big"
                await client.request(rpc("GetTask", {"id": "x" * 400_000}, "huge"))
            assert client.close_code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG


async def test_handshake_authentication(tmp_path: Path) -> None:
    async with start_server({**WS, "token": "s3cret"}) as server:
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await s.ws_connect(server.url)
            assert refused.value.status == 401
            async with s.get(server.url.replace("ws://", "http://"), headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401 and await r.json() == {"error": "Unauthorized"}
        async with await WebSocketClient.connect(server.url, {"Authorization": "Bearer s3cret"}) as client:
            reply = await client.request(send_message_body("hello", request_id="a-1"))
            assert reply["result"]["task"]["status"]["state"] == INPUT_REQUIRED
            # A frame's own headers override the handshake's.
            denied = await client.request(rpc("GetTask", {"id": "x"}, "a-2"), headers={"Authorization": "Bearer no"})
            assert denied["error"] == {"code": -32000, "message": "Unauthorized"}
            # ... and may add what the handshake lacked (the version).
            versioned = await client.request(rpc("GetTask", {"id": "no-such-task"}, "a-3"), headers={"A2A-Version": "0.9"})
            assert versioned["error"]["code"] == -32009


async def test_client_gone_mid_stream_turn_still_completes(server: RunningServer) -> None:
    transport = transport_of(server)
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(server.url, headers={"A2A-Version": "1.0"})
        await ws.send_str(json.dumps(send_message_body(VPC_PROMPT, request_id="gone", method="SendStreamingMessage",
                                                       message_id="m-gone")))
        [first] = await raw_frames(ws, 1)
        task_id = first["payload"]["result"]["task"]["id"]
        await ws.send_str(json.dumps(send_message_body("hello", request_id="gone-2", message_id="m-gone-2")))
        await ws.close()
    async with await WebSocketClient.connect(server.url) as client:
        deadline = time.monotonic() + 15
        while True:
            task = (await client.request(rpc("GetTask", {"id": task_id}, f"g-{time.monotonic()}")))["result"]
            if task["status"]["state"] == INPUT_REQUIRED or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert task["status"]["state"] == INPUT_REQUIRED
        assert permission_envelope(task) is not None  # the turn went on to its pause
    deadline = time.monotonic() + 10
    while (transport.connections or transport.detached) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not transport.connections and not transport.detached  # nothing left referencing the socket


async def test_hundred_concurrent_clients(server: RunningServer) -> None:
    async def one(n: int) -> dict[str, Any]:
        async with await WebSocketClient.connect(server.url) as client:
            return await client.request(send_message_body("hello", request_id=n, message_id=f"m-{n}"))

    replies = await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(100))), 30)
    assert [r["id"] for r in replies] == list(range(100))
    assert all(r["result"]["task"]["status"]["state"] == INPUT_REQUIRED for r in replies)


async def test_connection_cap_and_plain_get() -> None:
    async with start_server({**WS, "http-max-connections": 1}) as server:
        async with await WebSocketClient.connect(server.url) as client, aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as busy:
                await s.ws_connect(server.url)
            assert busy.value.status == 503
            assert (await client.request(rpc("GetTask", {"id": "no-such-task"}, 1)))["error"]["code"] == -32001
        async with aiohttp.ClientSession() as s, s.get(server.url.replace("ws://", "http://")) as r:
            assert r.status == 426


async def test_silent_peer_is_dropped_by_the_heartbeat() -> None:
    async with start_server({**WS, "ws-heartbeat-seconds": 0.2}) as server:
        transport = transport_of(server)
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(server.url, headers={"A2A-Version": "1.0"}, autoping=False)
            deadline = time.monotonic() + 5
            while not transport.connections and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert transport.connections
            # Nobody reads on this side, so no pong answers the server's pings.
            while transport.connections and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not transport.connections
            await ws.close()


async def test_stop_closes_open_sockets() -> None:
    async with start_server(WS) as server:
        client = await WebSocketClient.connect(server.url)
        assert (await client.request(rpc("GetTask", {"id": "no-such-task"}, 1)))["error"]["code"] == -32001
        started = time.monotonic()
    assert time.monotonic() - started < 5
    with pytest.raises(ConnectionError):
        await client.request(rpc("GetTask", {"id": "no-such-task"}, 2))
    assert client.close_code == aiohttp.WSCloseCode.GOING_AWAY
    await client.aclose()
