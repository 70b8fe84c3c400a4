"""MCP tool servers on a real iac-code server (default configuration: the offline runtime), driven by a2a-sdk's
client: a demo server written with the ``mcp`` SDK over stdio and Streamable HTTP; user, project and server
scopes; permission questions answered; progress, failures, large results, a crash and its restart,
cancellation; and a secret put in env, headers and args that appears nowhere."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, permission_answer_request, start_server

SERVER = str(Path(__file__).with_name("demo_server.py"))
SECRET = "S3CRET-mcp-value-7f3a9"


def _request(text: str, context_id: str, task_id: str | None = None) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id)
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


def _meta(update: dict[str, Any]) -> dict[str, Any]:
    return update.get("metadata", {}).get("iac_code", {})


def _text(update: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in update.get("status", {}).get("message", {}).get("parts", []))


async def _turn(client: Any, text: str, context_id: str, decision: str = "allow_once",
                task_id: str | None = None) -> list[dict[str, Any]]:
    """Send ``text``; answer every permission question with ``decision``; every event of the turn."""
    events = [MessageToDict(e) async for e in client.send_message(_request(text, context_id, task_id))]
    for n in range(6):
        updates = [e["statusUpdate"] for e in events if "statusUpdate" in e]
        envelope = _meta(updates[-1]).get("input") if updates else None
        if not envelope or updates[-1]["status"]["state"] != "TASK_STATE_INPUT_REQUIRED":
            return events
        answer = permission_answer_request(envelope, decision, message_id=f"answer-{uuid.uuid4().hex}")
        events += [MessageToDict(e) async for e in client.send_message(answer)]
    raise AssertionError("too many questions")


def _updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e]


def _all(events: list[dict[str, Any]], key: str) -> list[Any]:
    return [_meta(u)[key] for u in _updates(events) if key in _meta(u)]


def _said(events: list[dict[str, Any]]) -> str:
    return "".join(_text(u) for u in _updates(events))


def _write_user_config(config_dir: Path, servers: dict[str, Any]) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def _stdio(marker: Path | None = None, pids: Path | None = None) -> dict[str, Any]:
    env = {"DEMO_SECRET": SECRET}
    if marker is not None:
        env["DEMO_MARKER"] = str(marker)
    if pids is not None:
        env["DEMO_PIDFILE"] = str(pids)
    return {"command": sys.executable, "args": [SERVER, "stdio", f"--token={SECRET}"], "env": env}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("IAC_CODE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("IAC_CODE_A2A_SAFE_MODE", raising=False)
    return work


def _no_secret(events: list[dict[str, Any]], *more: str) -> None:
    text = json.dumps(events) + "".join(more)
    assert SECRET not in text


def _state_files(state: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in state.rglob("*") if p.is_file())


async def test_stdio_user_server_tools_progress_permission_and_no_secret(
        workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    _write_user_config(tmp_path / "config", {"demo": _stdio()})
    state = tmp_path / "state"
    async with start_server({"persistence-dir": str(state)}) as server, connect_client(server) as client:
        first = await _turn(client, "use the demo MCP server to echo text=hello", "ctx-1")
        [status] = _all(first, "mcpStatus")
        [demo] = status["servers"]
        assert demo["name"] == "demo" and demo["scope"] == "user" and demo["transport"] == "stdio"
        assert demo["connectionState"] == "connected" and demo["approvalState"] == "not_required"
        assert demo["capabilities"]["tools"] == 6 and demo["authState"] == "configured"
        assert status["warnings"] == []
        tools = [t for t in _all(first, "tool") if t.get("name") == "mcp__demo__echo"]
        assert [t["status"] for t in tools] == ["started", "input_delta", "input_complete", "completed"]
        assert "input" not in _all(first, "input")  # read-only: no question
        assert "echo: hello" in _said(first)
        assert _updates(first)[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the turn rests

        second = await _turn(client, "use the demo MCP server to count up steps=3", "ctx-1")
        [asked] = _all(second, "input")
        assert asked["toolName"] == "mcp__demo__count_up" and asked["effect"] == "external_tool"
        assert asked["target"] == "demo:count_up" and asked["isReadOnly"] is False
        assert "3" not in json.dumps(asked["safeSummary"].split(":", 1)[1])  # the shape, never the value
        progress = _all(second, "mcpProgress")
        assert [p["progress"] for p in progress] == [1, 2, 3]
        assert progress[0] == {"status": "progress", "toolUseId": asked["toolUseId"],
                               "publicName": "mcp__demo__count_up", "originalServerName": "demo",
                               "originalToolName": "count_up", "progress": 1, "total": 3,
                               "message": "step 1 of 3"}
        assert "counted to 3" in _said(second)
        assert len(_all(second, "mcpStatus")) == 1  # a new task: its turn starts with the status, once
        denied = await _turn(client, "use the demo MCP server to count up steps=2", "ctx-1", decision="deny")
        assert _all(denied, "mcpProgress") == [] and "permission denied" in _said(denied)
        for events in (first, second, denied):
            _no_secret(events)
    _no_secret([], caplog.text, _state_files(state))


async def test_project_server_waits_for_approval_and_a_bad_file_warns_once(
        workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "mcp.json").write_text("{not json")
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": _stdio()}}))
    async with start_server() as server, connect_client(server) as client:
        denied = await _turn(client, "use the proj MCP server to echo text=hi", "ctx-p", decision="deny")
        [warning] = _all(denied, "mcpWarning")
        assert warning == {"serverName": "", "code": "parse_error", "severity": "fatal",
                           "message": "not valid JSON (line 1, column 2)", "source": "[CONFIG]/mcp.json",
                           "sourcePath": "[CONFIG]/mcp.json"}
        assert any(_text(u) == "MCP warning: not valid JSON (line 1, column 2)" for u in _updates(denied))
        [asked] = _all(denied, "input")
        assert asked["toolName"] == "mcp_project_server_approval"
        status = _all(denied, "mcpStatus")[-1]
        [proj] = status["servers"]
        assert proj["approvalState"] == "denied" and proj["connectionState"] == "disabled"
        assert status["warnings"][0]["code"] == "parse_error"
        assert "No tool of the MCP server 'proj'" in _said(denied)

        again = await _turn(client, "use the proj MCP server to echo text=hi", "ctx-p")
        assert _all(again, "input") == [] and _all(again, "mcpWarning") == []  # denied stays denied; warned once
        assert "No tool of the MCP server 'proj'" in _said(again)

        allowed = await _turn(client, "use the proj MCP server to echo text=hi", "ctx-other")
        assert [a["toolName"] for a in _all(allowed, "input")] == ["mcp_project_server_approval"]
        assert _all(allowed, "mcpStatus")[-1]["servers"][0]["approvalState"] == "approved"
        assert "echo: hi" in _said(allowed)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _served(kind: str) -> AsyncIterator[str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, SERVER, kind, str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "the demo HTTP server did not start"
            await asyncio.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/{'mcp' if kind == 'http' else 'sse'}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    async with _served("http") as url:
        yield url


async def test_streamable_http_server_failures_and_large_results(workspace: Path, http_server: str) -> None:
    settings = {"mcp-servers": {"web": {"url": http_server, "headers": {"Authorization": f"Bearer {SECRET}"}}}}
    async with start_server(settings) as server, connect_client(server) as client:
        big = await _turn(client, "use the web MCP server to big kilobytes=300", "ctx-h")
        [status] = _all(big, "mcpStatus")
        assert status["servers"][0]["transport"] == "http" and status["servers"][0]["scope"] == "server"
        [done] = [t for t in _all(big, "tool") if t["status"] == "completed"]
        assert done["result"]["truncated"] is True and done["result"]["length"] == 300 * 1024
        failed = await _turn(client, "use the web MCP server to fail reason=nope", "ctx-h")
        [bad] = [t for t in _all(failed, "tool") if t["status"] == "failed"]
        assert "it failed: nope" in bad["result"]["error"] if isinstance(bad.get("result"), dict) else True
        assert "failed" in _said(failed)
        _no_secret(big + failed)


async def test_a_crashed_server_is_reported_and_restarted(workspace: Path, tmp_path: Path) -> None:
    _write_user_config(tmp_path / "config", {"demo": _stdio()})
    async with start_server() as server, connect_client(server) as client:
        crashed = await _turn(client, "use the demo MCP server to crash", "ctx-c")
        states = [s["servers"][0]["connectionState"] for s in _all(crashed, "mcpStatus")]
        assert states == ["connected", "failed"]
        [warning] = [w for w in _all(crashed, "mcpWarning") if w["code"] == "server_failed"]
        assert warning["serverName"] == "demo" and warning["sourcePath"] == "[CONFIG]/mcp.json"
        assert warning["severity"] == "warning" and warning["source"] == "[CONFIG]/mcp.json"
        assert _updates(crashed)[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the turn ended cleanly
        again = await _turn(client, "use the demo MCP server to echo text=back", "ctx-c")
        assert _all(again, "mcpStatus")[-1]["servers"][0]["connectionState"] == "connected"
        assert "echo: back" in _said(again)




async def test_cancel_reaches_the_server(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    _write_user_config(tmp_path / "config", {"demo": _stdio(marker)})
    async with start_server() as server, connect_client(server) as client:
        events = [MessageToDict(e) async for e in client.send_message(
            _request("use the demo MCP server to slow seconds=60", "ctx-y"))]
        envelope = _meta(_updates(events)[-1])["input"]  # not read-only: it asks first
        answer = permission_answer_request(envelope, "allow_once", message_id="answer-slow")
        seen: list[dict[str, Any]] = []

        async def follow() -> None:
            async for event in client.send_message(answer):
                seen.append(MessageToDict(event))

        follower = asyncio.create_task(follow())
        deadline = time.monotonic() + 60
        while not (marker.exists() and "started" in marker.read_text()):
            assert time.monotonic() < deadline, "the slow tool never started"
            await asyncio.sleep(0.05)
        await client.cancel_task(CancelTaskRequest(id=envelope["requestTaskId"]))
        while "cancelled" not in marker.read_text():
            assert time.monotonic() < deadline, "the MCP server never heard the cancellation"
            await asyncio.sleep(0.05)
        await asyncio.wait_for(follower, 30)
        assert _updates(seen)[-1]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_safe_mode_loads_no_server(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_user_config(tmp_path / "config", {"demo": _stdio()})
    monkeypatch.setenv("IAC_CODE_A2A_SAFE_MODE", "yes")
    async with start_server() as server, connect_client(server) as client:
        events = await _turn(client, "use the demo MCP server to echo text=hello", "ctx-s")
        assert _all(events, "mcpStatus") == [] and "echo: hello" not in _said(events)


THIRD_PARTY = "alibaba-cloud-ops-mcp-server==0.9.27"


def _network_env() -> dict[str, str]:
    """What ``uv`` needs to reach the package index from the server's restricted environment (certificates,
    proxies, its cache): a stdio server gets only the SDK's safe variables and its configured ``env``."""
    import os

    keys = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "UV_CACHE_DIR", "UV_INDEX_URL",
            "UV_DEFAULT_INDEX", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
    return {k: os.environ[k] for k in keys if os.environ.get(k)}


@pytest.mark.timeout(600)
async def test_a_published_third_party_server_over_stdio(workspace: Path, tmp_path: Path) -> None:
    """``alibaba-cloud-ops-mcp-server`` from PyPI (run by ``uv tool run``), without credentials: in its
    ``--code-deploy`` mode it starts offline (its full mode fetches API metadata from the network at start)."""
    import shutil

    uv = shutil.which("uv")
    assert uv is not None, "uv runs the published server"
    (workspace / "main.tf").write_text("# a file to list\n")
    _write_user_config(tmp_path / "config", {"aliyun": {
        "command": uv, "args": ["tool", "run", "--from", THIRD_PARTY, "alibaba-cloud-ops-mcp-server",
                                "--transport", "stdio", "--code-deploy"],
        "env": {"ALIBABA_CLOUD_ACCESS_KEY_SECRET": SECRET, **_network_env()}}})
    async with start_server({"mcp-startup-timeout": 400}) as server, \
            connect_client(server, timeout=500) as client:
        events = await _turn(client, "use the aliyun MCP server to list the local directory path=.", "ctx-a")
        [status] = _all(events, "mcpStatus")
        [aliyun] = status["servers"]
        assert aliyun["connectionState"] == "connected", aliyun["warnings"]
        assert aliyun["capabilities"]["tools"] >= 6
        names = [t["name"] for t in _all(events, "tool") if t["status"] == "completed"]
        assert names == ["mcp__aliyun__LOCAL_ListDirectory"]
        assert "main.tf" in _said(events)
        _no_secret(events)



def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _until(condition: Any, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@pytest.mark.timeout(300)
async def test_servers_close_with_idle_contexts_and_within_max_servers(workspace: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    _write_user_config(tmp_path / "config", {"demo": _stdio(pids=pids)})
    async with start_server({"mcp-max-servers": 1}) as server, connect_client(server) as client:
        await _turn(client, "use the demo MCP server to echo text=a", "ctx-a")
        [first] = [int(p) for p in pids.read_text().split()]
        again = await _turn(client, "use the demo MCP server to echo text=a2", "ctx-a")
        assert "echo: a2" in _said(again) and pids.read_text().split() == [str(first)]  # reused across turns
        other = await _turn(client, "use the demo MCP server to echo text=b", "ctx-b")  # needs room: a's closes
        assert "echo: b" in _said(other)
        await _until(lambda: not _alive(first), "the least recently used context's server was not closed")
        second = int(pids.read_text().split()[-1])
        assert _alive(second)
    await _until(lambda: not _alive(second), "the server's stop did not close the MCP server")

    pids.unlink()
    async with start_server({"context-idle-timeout": 0.5}) as server, connect_client(server) as client:
        await _turn(client, "use the demo MCP server to echo text=c", "ctx-c")
        [idle] = [int(p) for p in pids.read_text().split()]
        await _until(lambda: not _alive(idle), "an idle context's server was not closed")


async def test_check_config_names_the_bad_server_and_no_secret(tmp_path: Path) -> None:
    from iac_code.testing import run_cli

    config = tmp_path / "config.yaml"
    config.write_text(f"mcp-servers:\n  good: {{command: python, args: ['--token={SECRET}'], env: {{K: {SECRET}}}}}\n"
                      f"  bad: {{command: 5, env: {{K: {SECRET}}}, headers: {{A: {SECRET}}}}}\n")
    result = await run_cli("a2a", "--check-config", "--config", str(config), cwd=tmp_path)
    assert result.code == 2
    assert "'mcp-servers': server 'bad': needs 'command' (stdio) or 'url' (HTTP)" in result.err
    assert SECRET not in result.out + result.err


async def test_an_sse_server_with_credentials_in_its_url(workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with _served("sse") as url:
        with_credentials = url.replace("http://", f"http://user:{SECRET}@") + f"?api_key={SECRET}"
        settings = {"mcp-servers": {"old": {"url": with_credentials, "transport": "sse",
                                            "headers": {"X-Api-Key": SECRET}}}}
        async with start_server(settings) as server, connect_client(server) as client:
            events = await _turn(client, "use the old MCP server to echo text=legacy", "ctx-sse")
            [status] = _all(events, "mcpStatus")
            assert status["servers"][0]["transport"] == "sse"
            assert status["servers"][0]["connectionState"] == "connected"
            assert "echo: legacy" in _said(events)
            _no_secret(events, caplog.text)


async def test_a_call_past_mcp_call_timeout_fails_and_is_cancelled(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    _write_user_config(tmp_path / "config", {"demo": _stdio(marker)})
    async with start_server({"mcp-call-timeout": 1}) as server, connect_client(server) as client:
        events = await _turn(client, "use the demo MCP server to slow seconds=60", "ctx-t")
        [failed] = [t for t in _all(events, "tool") if t["status"] == "failed"]
        assert failed["name"] == "mcp__demo__slow"
        assert "timed out after 1 s" in _said(events)
        await _until(lambda: "cancelled" in marker.read_text(), "the server did not hear the cancellation")
        assert _updates(events)[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
