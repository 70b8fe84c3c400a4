"""Persistence: restart, kill -9 mid-write, interrupted turns, corrupt files, permissions."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.tasks.task_store import INTERRUPTED_TEXT
from iac_code.testing import A2A_HEADERS, next_sse_data, send_message_body, start_server
from tests.runtimes import ProbePlugin

IAC_CODE = str(Path(sys.executable).parent / "iac-code")

SLEEPY = '''
import asyncio
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import AgentRuntimeSpec
from iac_code.agents.runtime import TextDelta


class Sleepy:
    name = "sleepy"

    async def run_turn(self, turn):
        yield TextDelta("on it")
        if "sleep" in turn.prompt:
            await asyncio.sleep(3600)
        yield TextDelta(" done " + turn.prompt)


@hookimpl
def iac_code_agent_runtimes():
    return [AgentRuntimeSpec(name="sleepy", create_runtime=lambda kernel: Sleepy())]
'''


async def _rpc(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


def _message(text: str, message_id: str, **fields: Any) -> dict[str, Any]:
    return send_message_body(text, message_id=message_id, **fields)


async def test_restart_keeps_tasks_and_contexts(tmp_path: Path) -> None:
    settings = {"agent-runtime": "probe", "persistence-dir": str(tmp_path / "state")}
    async with start_server(settings, extra_plugins={"probe": ProbePlugin()}) as server, \
            aiohttp.ClientSession() as http:
        first = (await _rpc(http, server.url, _message("before restart", "m1", contextId="ctx-r",
                                                        metadata={"iac_code": {"channel": "night-shift"}})))
        task = first["result"]["task"]
    async with start_server(settings, extra_plugins={"probe": ProbePlugin()}) as server, \
            aiohttp.ClientSession() as http:
        got = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"]}})
        assert got["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert got["result"]["history"] == task["history"]
        listed = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
        assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
        follow = await _rpc(http, server.url, _message("after restart", "m2", contextId="ctx-r"))
        text = follow["result"]["task"]["history"][-1]["parts"][0]["text"]
        seen = json.loads(text)
        assert [h["text"] for h in seen["history"] if h["role"] == "user"] == ["before restart"]
        assert seen["channel"] == "night-shift"
    state = tmp_path / "state"
    for path in state.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


async def test_corrupt_and_foreign_files_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = {"persistence-dir": str(tmp_path / "state")}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        task = (await _rpc(http, server.url, _message("hello", "m1")))["result"]["task"]
    tasks_dir = tmp_path / "state" / "tasks"
    (tasks_dir / "0000bad.json").write_text("{ not json")
    (tasks_dir / "list.json").write_text("[1, 2, 3]")
    (tasks_dir / "foreign.json").write_text(json.dumps({"hello": "world"}))
    (tasks_dir / "weird.json").write_text(json.dumps({"format": "iac-code.task.v1", "owner": "", "task": "!!notb64"}))
    (tasks_dir / "README.txt").write_text("not a snapshot")
    (tasks_dir / ".half-written.json.1-2.tmp").write_text('{"owner": "", "ta')
    (tmp_path / "state" / "contexts" / "broken.json").write_bytes(b"\xff\xfe")
    caplog.set_level(logging.WARNING)
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        listed = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
        assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
        assert (await _rpc(http, server.url, _message("still fine", "m2")))["result"]["task"]
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "0000bad.json" in warnings and "README.txt" in warnings
    assert not (tasks_dir / ".half-written.json.1-2.tmp").exists()


def _install_sleepy(site: Path) -> None:
    info = site / "sleepy_runtime-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sleepy-runtime\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[iac_code]\nsleepy = sleepy_runtime\n")
    (site / "sleepy_runtime.py").write_text(SLEEPY)


async def test_kill_9_during_writes_then_restart(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install_sleepy(site)
    state = tmp_path / "state"
    config = tmp_path / "server.yml"
    config.write_text(f"agent-runtime: sleepy\npersistence-dir: {state}\n")
    env = {**os.environ, "PYTHONPATH": str(site), "IAC_CODE_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--port", "0", "--config", str(config), env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    url = ""
    while not url:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "server exited early"
        if "listening: " in line:
            url = line.split("listening: ", 1)[1].split()[0]
    stop_storm = asyncio.Event()
    sent = 0

    async def storm(http: aiohttp.ClientSession, worker: int) -> None:
        nonlocal sent
        while not stop_storm.is_set():
            try:
                await _rpc(http, url, _message("quick", f"w{worker}-{sent}", contextId=f"storm-{worker}"))
                sent += 1
            except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
                return

    try:
        async with aiohttp.ClientSession() as http:
            body = _message("please sleep", "m-sleep", contextId="ctx-sleep")
            body["method"] = "SendStreamingMessage"
            stream = await http.post(url, json=body, headers=A2A_HEADERS)
            first = await next_sse_data(stream.content)
            sleeping_id = first["result"]["task"]["id"]
            workers = [asyncio.ensure_future(storm(http, i)) for i in range(16)]
            for _ in range(500):  # until the WORKING snapshot is on disk and writes are flowing
                snapshots = [p.read_text() for p in (state / "tasks").glob("*.json")] if (state / "tasks").exists() else []
                if len(snapshots) > 20 and any(sleeping_id in s and "TASK_STATE_WORKING" in s for s in snapshots):
                    break
                await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), 10)
            stop_storm.set()
            await asyncio.gather(*workers, return_exceptions=True)
            stream.close()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    files = list((state / "tasks").glob("*.json")) + list((state / "contexts").glob("*.json"))
    assert len(files) > 20
    for path in files:
        json.loads(path.read_text())  # every file is complete and readable
    async with start_server({"persistence-dir": str(state)}) as server, aiohttp.ClientSession() as http:
        got = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                            "params": {"id": sleeping_id}})
        status = got["result"]["status"]
        assert status["state"] == "TASK_STATE_FAILED"
        assert status["message"]["parts"][0]["text"] == INTERRUPTED_TEXT
        listed = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks",
                                               "params": {"status": "TASK_STATE_WORKING"}})
        assert listed["result"]["tasks"] == []
        again = await _rpc(http, server.url, _message("hello again", "m-again", contextId="ctx-sleep"))
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
