"""The stdio and Unix socket transports: NDJSON sessions over real processes and sockets."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iac_code.api import StartupError
from iac_code.testing import GatedRuntime, GatedRuntimePlugin, RunningServer, make_kernel, send_message_body, start_server
from iac_code_transport_stdio.ndjson_client import NdjsonClient

IAC_CODE = str(Path(sys.executable).parent / "iac-code")
MAX_BYTES = 64 * 1024
VPC_PROMPT = "Create a VPC with two vSwitches."  # the offline engine pauses it on a permission


def short_socket_path() -> str:
    """A socket path in a fresh directory short enough for ``sun_path`` (108 bytes)."""
    return os.path.join(tempfile.mkdtemp(prefix="iac-ux-", dir="/tmp"), "a2a.sock")


async def collect(client: NdjsonClient, payload: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    return [frame async for frame in client.stream(payload, **kwargs)]


def state_of(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


@pytest.fixture
async def unix_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningServer]:
    monkeypatch.chdir(tmp_path)
    async with start_server({"transport": ["unix"], "socket-path": short_socket_path(),
                             "max-request-bytes": MAX_BYTES}) as running:
        yield running


@pytest.fixture
async def unix_client(unix_server: RunningServer) -> AsyncIterator[NdjsonClient]:
    client = await NdjsonClient.connect_unix(unix_server.url.removeprefix("unix://"))
    try:
        yield client
    finally:
        await client.aclose()


# --------------------------------------------------------------------------- unix


async def test_unix_interface_and_owner_only_socket(unix_server: RunningServer) -> None:
    path = unix_server.url.removeprefix("unix://")
    assert unix_server.kernel.interfaces[0].protocol_binding == "unix"
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600


async def test_unix_send_stream_get_subscribe(unix_client: NdjsonClient) -> None:
    reply = await unix_client.request(send_message_body("hello", message_id="u-1", request_id="a"))
    task = reply["result"]["task"]
    assert reply["id"] == "a" and state_of(task) == "TASK_STATE_INPUT_REQUIRED"

    events = await collect(unix_client, send_message_body("hello", message_id="u-2", request_id="s",
                                                          method="SendStreamingMessage"))
    assert len(events) >= 2 and all(e["id"] == "s" and "result" in e for e in events)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

    got = await unix_client.request({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": task["id"]}})
    assert got["id"] == 7 and got["result"]["id"] == task["id"]

    paused = (await unix_client.request(send_message_body(VPC_PROMPT, message_id="u-vpc", request_id="p")))["result"]["task"]
    subscribed = await collect(unix_client, {"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask",
                                             "params": {"id": paused["id"]}})
    assert [e["id"] for e in subscribed] == ["sub"] and subscribed[0]["result"]["task"]["id"] == paused["id"]

    # an error before the first event is surfaced, with "final" so the stream ends (the anchor dropped it)
    ended = await collect(unix_client, {"jsonrpc": "2.0", "id": "gone", "method": "SubscribeToTask",
                                        "params": {"id": "no-such-task"}})
    assert len(ended) == 1 and ended[0]["final"] is True and ended[0]["error"]["code"] == -32001


@pytest.fixture
async def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[RunningServer, GatedRuntime]]:
    monkeypatch.chdir(tmp_path)
    plugin = GatedRuntimePlugin()
    async with start_server({"transport": ["unix"], "socket-path": short_socket_path(), "agent-runtime": "gated"},
                            extra_plugins={"gated": plugin}) as running:
        yield running, plugin.runtime


async def test_unix_requests_are_multiplexed(gated: tuple[RunningServer, GatedRuntime]) -> None:
    server, runtime = gated
    client = await NdjsonClient.connect_unix(server.url.removeprefix("unix://"))
    try:
        slow = asyncio.ensure_future(client.request(send_message_body("go", message_id="g-1", request_id="slow")))
        await asyncio.wait_for(runtime.started.wait(), 10)
        quick = [client.request({"jsonrpc": "2.0", "id": f"q{n}", "method": "ListTasks", "params": {}}) for n in range(3)]
        answers = await asyncio.wait_for(asyncio.gather(*quick), 10)
        assert [a["id"] for a in answers] == ["q0", "q1", "q2"] and not slow.done()  # answered out of order
        task_id = answers[0]["result"]["tasks"][0]["id"]
        subscription = client.stream({"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": {"id": task_id}})
        first = await asyncio.wait_for(anext(subscription), 10)  # an active task: the subscription streams
        assert first["result"]["task"]["id"] == task_id
        runtime.release.set()
        rest = [event async for event in subscription]
        assert rest and rest[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        reply = await asyncio.wait_for(slow, 10)
        assert reply["id"] == "slow" and state_of(reply["result"]["task"]) == "TASK_STATE_INPUT_REQUIRED"
    finally:
        await client.aclose()


async def test_unix_client_leaving_mid_stream_does_not_stop_the_turn(gated: tuple[RunningServer, GatedRuntime]) -> None:
    server, runtime = gated
    path = server.url.removeprefix("unix://")
    leaving = await NdjsonClient.connect_unix(path)
    stream = leaving.stream(send_message_body("go", message_id="g-leave", request_id="l", method="SendStreamingMessage"))
    first = await asyncio.wait_for(anext(stream), 10)
    task_id = first["result"]["task"]["id"]
    await asyncio.wait_for(runtime.started.wait(), 10)
    await stream.aclose()
    await leaving.aclose()
    await asyncio.sleep(0.2)
    runtime.release.set()
    client = await NdjsonClient.connect_unix(path)
    try:
        for _ in range(100):
            got = await client.request({"jsonrpc": "2.0", "id": "g", "method": "GetTask", "params": {"id": task_id}})
            if state_of(got["result"]) == "TASK_STATE_INPUT_REQUIRED":
                break
            await asyncio.sleep(0.05)
        assert state_of(got["result"]) == "TASK_STATE_INPUT_REQUIRED" and not runtime.cancelled.is_set()
    finally:
        await client.aclose()


async def test_unix_malformed_and_oversized_lines(unix_client: NdjsonClient) -> None:
    bad = await unix_client.request_raw(b"{not json")
    assert bad["id"] is None and bad["error"]["code"] == -32700
    huge = await unix_client.request_raw(b'{"jsonrpc":"2.0","id":"big","method":"GetTask","params":{"id":"'
                                         + b"x" * (MAX_BYTES * 3) + b'"}}')
    assert huge == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Request payload too large"}}
    edge = await unix_client.request_raw(b"x" * (MAX_BYTES + 1))
    assert edge["error"]["code"] == -32600
    reply = await unix_client.request(send_message_body("hello", message_id="u-after", request_id="after"))
    assert state_of(reply["result"]["task"]) == "TASK_STATE_INPUT_REQUIRED"


async def test_unix_eof_lets_in_flight_requests_finish_and_stop_closes_sessions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = short_socket_path()
    async with start_server({"transport": ["unix"], "socket-path": path}):
        client = await NdjsonClient.connect_unix(path)
        pending = asyncio.ensure_future(client.request(send_message_body("hello", message_id="u-eof", request_id="e")))
        await asyncio.sleep(0)
        await client.close_input()  # half-close: the answer still comes
        reply = await asyncio.wait_for(pending, 10)
        assert state_of(reply["result"]["task"]) == "TASK_STATE_INPUT_REQUIRED"
        await client.aclose()
        idle = await NdjsonClient.connect_unix(path)
    with pytest.raises(ConnectionError):  # the server's stop closed the idle session
        await asyncio.wait_for(idle.request({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}), 5)
    await idle.aclose()


async def test_unix_auth_through_frame_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server({"transport": ["unix"], "socket-path": short_socket_path(), "token": "s3cret"}) as server:
        client = await NdjsonClient.connect_unix(server.url.removeprefix("unix://"))
        try:
            body = send_message_body("hello", message_id="u-auth", request_id="x")
            refused = await client.request(body)
            assert refused == {"jsonrpc": "2.0", "id": "x", "error": {"code": -32000, "message": "Unauthorized"}}
            stream_refused = await collect(client, {**body, "method": "SendStreamingMessage", "id": "xs"})
            assert stream_refused[0]["error"]["code"] == -32000 and stream_refused[0]["final"] is True
            wrong = await client.request(body, headers={"Authorization": "Bearer nope"})
            assert wrong["error"]["code"] == -32000
            ok = await client.request(body, headers={"Authorization": "Bearer s3cret", "A2A-Version": "1.0"})
            assert state_of(ok["result"]["task"]) == "TASK_STATE_INPUT_REQUIRED"
        finally:
            await client.aclose()


async def test_unix_stale_socket_replaced_live_one_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = short_socket_path()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays, nobody listens
    async with start_server({"transport": ["unix"], "socket-path": path}) as server:
        client = await NdjsonClient.connect_unix(path)
        reply = await client.request({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}})
        assert reply["error"]["code"] == -32001
        await client.aclose()
        second = make_kernel({"transport": ["unix"], "socket-path": path})
        with pytest.raises(StartupError, match=f"Another server is listening on {path}."):
            await second.start()
        await second.stop()
        assert os.path.exists(path) and server.url == f"unix://{path}"
    assert not os.path.exists(path)  # removed on stop


@pytest.mark.parametrize(("settings", "message"), [
    ({}, "socket-path is required in --config for --transport unix."),
    ({"socket-path": "/nonexistent-dir-iac/a.sock"}, "Unix socket parent does not exist: /nonexistent-dir-iac"),
    ({"socket-path": "FILE"}, "Path exists and is not a Unix socket: "),
])
async def test_unix_start_up_errors(tmp_path: Path, settings: dict[str, str], message: str) -> None:
    if settings.get("socket-path") == "FILE":
        (tmp_path / "plain").write_text("x")
        settings = {"socket-path": str(tmp_path / "plain")}
        message += settings["socket-path"]
    kernel = make_kernel({"transport": ["unix"], **settings})
    with pytest.raises(StartupError) as caught:
        await kernel.start()
    await kernel.stop()
    assert str(caught.value) == message


# --------------------------------------------------------------------------- stdio


def stdio_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IACCODE_A2A_")}
    env["IAC_CODE_CONFIG_DIR"] = str(tmp_path / "config-dir")
    return env


def stdio_config(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "server.yml"
    path.write_text(f"transport: [stdio]\nmax-request-bytes: {MAX_BYTES}\npersistence-dir: {tmp_path / 'state'}\n"
                    + extra)
    return str(path)


async def test_stdio_session(tmp_path: Path) -> None:
    client = await NdjsonClient.spawn([IAC_CODE, "a2a", "--transport", "stdio", "--config", stdio_config(tmp_path)],
                                      env=stdio_env(tmp_path), cwd=tmp_path)
    try:
        reply = await asyncio.wait_for(client.request(send_message_body("hello", message_id="s-1", request_id="a")), 30)
        task = reply["result"]["task"]
        assert state_of(task) == "TASK_STATE_INPUT_REQUIRED"

        events = await collect(client, send_message_body("hello", message_id="s-2", request_id="s",
                                                         method="SendStreamingMessage"))
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        got = await client.request({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}})
        assert got["result"]["id"] == task["id"]

        paused = (await client.request(send_message_body(VPC_PROMPT, message_id="s-vpc", request_id="p")))["result"]["task"]
        subscribed = await collect(client, {"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask",
                                            "params": {"id": paused["id"]}})
        assert [e["id"] for e in subscribed] == ["sub"] and subscribed[0]["result"]["task"]["id"] == paused["id"]
        # concurrent requests on one stdin, each answer matched by id
        answers = await asyncio.wait_for(asyncio.gather(
            client.request(send_message_body("hello", message_id="s-3", request_id="turn")),
            *[client.request({"jsonrpc": "2.0", "id": n, "method": "GetTask", "params": {"id": task["id"]}})
              for n in range(10, 14)]), 10)
        assert [a["id"] for a in answers] == ["turn", 10, 11, 12, 13]

        assert (await client.request_raw(b"garbage"))["error"]["code"] == -32700
        assert (await client.request_raw(b"[" + b"1," * MAX_BYTES + b"1]"))["error"]["code"] == -32600
        again = await client.request({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}})
        assert again["id"] == 3 and "result" in again

        await client.close_input()
        assert await client.wait(10) == 0
        assert client.garbage == []  # stdout carried JSON-RPC lines only
        assert any("stdio://iac-code" in line for line in client.stderr_lines)
    finally:
        await client.aclose()


async def test_stdio_refuses_log_to_stdout(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--transport", "stdio", "--log-to-stdout", "--config", stdio_config(tmp_path),
        env=stdio_env(tmp_path), cwd=tmp_path, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert "--log-to-stdout cannot be used with --transport stdio because stdout carries A2A frames." in err.decode()
