"""``idle-shutdown-seconds``: a real ``iac-code a2a`` process stops by itself (exit 0, as after SIGTERM)
once no HTTP request is in flight and no work is active for the timeout, and stays up while an SSE
stream is open or a turn waits for a permission answer. Invalid values are refused at start-up."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from iac_code.testing import (
    A2A_HEADERS,
    next_sse_data,
    permission_answer_body,
    permission_envelope,
    run_cli,
    run_cli_each,
    send_and_answer,
    send_message_body,
)
from iac_code_transport_http.idle import HTTP_ONLY_TEXT, INVALID_TEXT, wake_interval

IAC_CODE = str(Path(sys.executable).parent / "iac-code")
VPC = "Create a VPC with two vSwitches in cn-hangzhou."
TIMEOUT = 1.0  # idle-shutdown-seconds of the servers below


@dataclass
class Server:
    url: str
    proc: asyncio.subprocess.Process
    log: list[str] = field(default_factory=list)

    def running(self) -> bool:
        return self.proc.returncode is None

    async def exited(self, within: float) -> int:
        """The exit code, once the process ended by itself (bounded wait)."""
        return await asyncio.wait_for(self.proc.wait(), within)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_"))}
    env["IAC_CODE_CONFIG_DIR"] = tempfile.mkdtemp(prefix="iac-code-idle-test-")
    return env


def _config(tmp_path: Path, settings: dict[str, Any], name: str = "server.yml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(settings))
    return str(path)


@asynccontextmanager
async def serving(tmp_path: Path, timeout: float = TIMEOUT) -> AsyncIterator[Server]:
    """``iac-code a2a --config`` (HTTP, default settings plus ``idle-shutdown-seconds``) until it listens."""
    config = _config(tmp_path, {"port": 0, "idle-shutdown-seconds": timeout, "log-format": "text"})
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--config", config, env=_env(),
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    log: list[str] = []
    drain: asyncio.Task[None] | None = None
    try:
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            if not line:
                raise AssertionError("server exited early:\n" + "".join(log))
            log.append(line)
            if "(JSONRPC)" in line and "listening: " in line:
                url = line.split("listening: ", 1)[1].split()[0]
                break

        async def keep_reading() -> None:
            assert proc.stderr is not None
            async for raw in proc.stderr:
                log.append(raw.decode())

        drain = asyncio.get_running_loop().create_task(keep_reading())
        yield Server(url, proc, log)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
        if drain is not None:
            await asyncio.wait_for(drain, 10)


async def _rpc(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()  # type: ignore[no-any-return]


async def _stays_up(server: Server, seconds: float) -> None:
    """The process is still running ``seconds`` after now (it would have stopped after ``TIMEOUT``)."""
    try:
        await asyncio.wait_for(asyncio.shield(server.proc.wait()), seconds)
    except TimeoutError:
        return
    raise AssertionError("the server stopped although it was not idle:\n" + "".join(server.log))


def test_wake_interval() -> None:
    assert wake_interval(0.1) == 0.05 and wake_interval(2) == 0.2 and wake_interval(3600) == 1.0


async def test_an_idle_server_stops_by_itself(tmp_path: Path) -> None:
    async with serving(tmp_path) as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + "health") as r:
            assert r.status == 200
        loop = asyncio.get_running_loop()
        last_request = loop.time()
        assert await server.exited(within=20) == 0
        assert loop.time() - last_request >= TIMEOUT
        log = "".join(server.log)
        assert "idle-shutdown-seconds" in log and "Traceback" not in log


async def test_an_open_sse_stream_keeps_the_server_up(tmp_path: Path) -> None:
    """A finished turn (its task rests in INPUT_REQUIRED, no work active) and a SubscribeToTask stream on
    it: the open stream is a request in flight; closed, the server is idle and stops."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with serving(tmp_path) as server, aiohttp.ClientSession() as http:
        task = await send_and_answer(lambda b: _rpc(http, server.url, b),
                                     send_message_body(VPC, metadata={"iac_code": {"cwd": str(workspace)}}))
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and permission_envelope(task) is None
        subscribe = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": task["id"]}}
        async with http.post(server.url, json=subscribe, headers=A2A_HEADERS) as stream:
            assert stream.status == 200 and stream.content_type == "text/event-stream"
            first = await next_sse_data(stream.content)
            assert first["result"]["task"]["id"] == task["id"]
            await _stays_up(server, 4 * TIMEOUT)
        assert await server.exited(within=20) == 0  # the server notices the closed stream within a second


async def test_a_turn_waiting_for_a_permission_answer_keeps_the_server_up(tmp_path: Path) -> None:
    """No request in flight, but a live permission wait: active work; answered, the server goes idle."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with serving(tmp_path) as server, aiohttp.ClientSession() as http:
        reply = await _rpc(http, server.url, send_message_body(VPC, metadata={"iac_code": {"cwd": str(workspace)}}))
        task = reply["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        envelope = permission_envelope(task)
        assert envelope is not None, task
        await _stays_up(server, 4 * TIMEOUT)
        done = await _rpc(http, server.url, permission_answer_body(envelope, "allow_once"))
        assert permission_envelope(done["result"]["task"]) is None
        assert (workspace / "template.ros.yaml").exists()
        assert await server.exited(within=20) == 0


async def test_invalid_values_are_refused(tmp_path: Path) -> None:
    invalid: list[Any] = [True, "30", float("nan"), float("inf"), -1, [1]]
    http_only = ["grpc", "websocket", "stdio"]
    valid: list[Any] = [0, 0.5, 30]
    cases = ([{"idle-shutdown-seconds": value} for value in invalid]
             + [{"idle-shutdown-seconds": 5, "transport": transport} for transport in http_only]
             + [{"idle-shutdown-seconds": value} for value in valid]
             + [{"idle-shutdown-seconds": 0, "transport": "grpc"}])
    configs = [_config(tmp_path, settings, name=f"server-{n}.yml") for n, settings in enumerate(cases)]
    # refused by the start itself too (nothing binds): a real start, alongside the --check-config runs (one process)
    start = asyncio.ensure_future(run_cli("a2a", "--config", _config(tmp_path, {"idle-shutdown-seconds": -0.5}),
                                          env=_env()))
    results = await run_cli_each(*(("a2a", "--check-config", "--config", config) for config in configs), env=_env())
    refused, wrong_transport, accepted, grpc_zero = (results[:6], results[6:9], results[9:12], results[12])
    for value, result in zip(invalid, refused, strict=True):
        assert result.code == 2, (value, result.err)
        assert result.err.strip() == f"Error: {INVALID_TEXT}", (value, result.err)
    for transport, result in zip(http_only, wrong_transport, strict=True):
        assert result.code == 2, (transport, result.err)
        assert result.err.strip() == f"Error: {HTTP_ONLY_TEXT}", (transport, result.err)
    result = await start
    assert result.code == 2 and result.err.strip() == f"Error: {INVALID_TEXT}", result.err
    for value, result in zip(valid, accepted, strict=True):
        assert result.code == 0, (value, result.err)
    assert grpc_zero.code == 0, grpc_zero.err
