"""Safe mode (``IAC_CODE_A2A_SAFE_MODE``): absolute paths under a public root become ``[PATH]`` on every wire
(JSON-RPC, HTTP+JSON, SSE, gRPC through a2a-sdk's client), paths under no root and secrets pass unchanged,
and without the variable nothing is projected.

The workspace lies outside the system temporary directory of these servers (``tempfile.tempdir`` points
elsewhere), so it is the task's own workspace root, found from the task, that proves its paths.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from a2a.types.a2a_pb2 import GetTaskRequest, SendMessageRequest
from google.protobuf.json_format import MessageToDict, ParseDict

from iac_code.api import HttpRouteSpec, hookimpl, safe_mode
from iac_code.security.safe_mode import PathProjection
from iac_code.testing import (
    A2A_HEADERS,
    RunningServer,
    ScriptedRuntime,
    connect_client,
    parse_sse,
    send_and_answer,
    send_message_body,
    start_server,
)

OUTSIDE = "/srv/iac-outside/plan.txt"  # under no root of the server
SECRET = "sk-live-0123456789abcdef"
SETTINGS = {"transport": ["http", "grpc"], "grpc-port": 0}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    elsewhere = tmp_path / "system-tmp"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))  # the server's temp-dir root: not the workspace
    monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", str(workspace))
    monkeypatch.setenv("IAC_CODE_CONFIG_DIR", str(tmp_path / "config"))
    yield workspace


def _prompt(workspace: Path) -> str:
    return (f"Create a VPC with two vSwitches in cn-hangzhou. Notes in {workspace}/notes.md "
            f"(also file://{workspace}/notes.md), plan in {OUTSIDE}, key {SECRET}.")


async def _post(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        assert r.status == 200
        return await r.json()  # type: ignore[no-any-return]


async def _wires(server: RunningServer, workspace: Path) -> dict[str, str]:
    """One turn, then the task as each binding shows it (JSON text per binding)."""
    seen: dict[str, str] = {}
    async with aiohttp.ClientSession() as http:
        body = send_message_body(_prompt(workspace), metadata={"iac_code": {"cwd": str(workspace)}})
        task = await send_and_answer(lambda b: _post(http, server, b), body)
        seen["jsonrpc"] = json.dumps(task)
        got = await _post(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}})
        seen["jsonrpc-get"] = json.dumps(got)
        async with http.get(server.url + "tasks/" + task["id"], headers=A2A_HEADERS) as r:
            assert r.status == 200
            seen["rest"] = await r.text()
        # SSE: a follow-up turn streamed (JSON-RPC), and the REST stream of another one
        follow = send_message_body(f"review {workspace}/template.ros.yaml", message_id="m-2",
                                   method="SendStreamingMessage", contextId=task["contextId"],
                                   metadata={"iac_code": {"cwd": str(workspace)}})
        async with http.post(server.url, json=follow, headers=A2A_HEADERS) as r:
            assert r.content_type == "text/event-stream"
            events, _ = parse_sse(await r.text())
        assert events and all("result" in e for e in events), events[-1:]
        seen["sse"] = json.dumps(events)
        rest_body = {"message": {"messageId": "m-3", "role": "ROLE_USER", "contextId": task["contextId"],
                                 "parts": [{"text": f"review {workspace}/template.ros.yaml"}],
                                 "metadata": {"iac_code": {"cwd": str(workspace)}}}}
        async with http.post(server.url + "message:stream", json=rest_body, headers=A2A_HEADERS) as r:
            assert r.content_type == "text/event-stream"
            events, _ = parse_sse(await r.text())
        seen["rest-sse"] = json.dumps(events)
    async with connect_client(server, binding="GRPC") as client:
        seen["grpc"] = json.dumps(MessageToDict(await client.get_task(GetTaskRequest(id=task["id"]))))
        params = send_message_body(f"review {workspace}/template.ros.yaml", message_id="m-4",
                                   contextId=task["contextId"], metadata={"iac_code": {"cwd": str(workspace)}})["params"]
        events = [MessageToDict(e) async for e in client.send_message(ParseDict(params, SendMessageRequest()))]
        assert events
        seen["grpc-stream"] = json.dumps(events)
    return seen


async def test_paths_under_the_workspace_become_placeholders_on_every_binding(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IAC_CODE_A2A_SAFE_MODE", "yes")
    assert safe_mode()
    async with start_server(SETTINGS) as server:
        seen = await _wires(server, workspace)
    # The runtime offers only read-only tools: write_file is not among them, nothing asked, nothing saved.
    assert not (workspace / "template.ros.yaml").exists()
    assert "template.ros.yaml was not written to the workspace." in seen["jsonrpc"]
    for binding, text in seen.items():
        assert str(workspace) not in text, binding
        assert "[PATH]" in text, binding
    for binding in ("jsonrpc", "jsonrpc-get", "rest", "grpc"):  # the task's history holds the prompt
        text = seen[binding]
        assert "Notes in [PATH] (also [PATH])" in text, binding
        assert OUTSIDE in text and SECRET in text, binding  # no root proves it; secrets are not its business
    assert "review [PATH]" in seen["sse"] and "review [PATH]" in seen["rest-sse"]
    assert "review [PATH]" in seen["grpc-stream"]


async def test_without_safe_mode_paths_pass_unchanged(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IAC_CODE_A2A_SAFE_MODE", "0")
    assert not safe_mode()
    async with start_server(SETTINGS) as server:
        seen = await _wires(server, workspace)
    assert (workspace / "template.ros.yaml").exists() and "Saved template.ros.yaml" in seen["jsonrpc"]
    for binding, text in seen.items():
        assert str(workspace) in text and "[PATH]" not in text, binding
    assert f"Notes in {workspace}/notes.md" in seen["grpc"]


def test_the_projection_itself() -> None:
    projection = PathProjection(["/work/ws", "C:\\Users\\me\\proj", "\\\\host\\share\\team"])
    assert projection.value({
        "text": "Wrote /work/ws/a.yaml. See (/work/ws/b/c.tf), /work/wsx/d, http://h/work/ws/e, 10.0.0.0/8",
        "uri": "file:///work/ws/a%20b.txt", "win": "C:\\Users\\me\\proj\\main.tf and c:/users/ME/proj/x",
        "unc": "\\\\host\\share\\team\\x.txt", "/work/ws/k1": 1, "[PATH]": 2, "/work/ws": 3, "/etc/passwd": 4,
        "list": ["/work/ws", "/work/ws/../other/f"],
    }) == {
        "text": "Wrote [PATH]. See ([PATH]), /work/wsx/d, http://h/work/ws/e, 10.0.0.0/8",
        "uri": "[PATH]", "win": "[PATH] and [PATH]",
        "unc": "[PATH]", "[PATH#2]": 1, "[PATH]": 2, "[PATH#3]": 3, "/etc/passwd": 4,
        "list": ["[PATH]", "/work/ws/../other/f"],
    }
    assert safe_mode({"IAC_CODE_A2A_SAFE_MODE": "On"}) and not safe_mode({"IAC_CODE_A2A_SAFE_MODE": "2"})


@pytest.mark.parametrize("mode", ["on", "off"])
async def test_push_payloads_are_projected_with_the_mode_at_send_time(
        mode: str, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_push_delivery import FAST, receiver, send_with_push

    monkeypatch.setenv("IAC_CODE_A2A_SAFE_MODE", mode)
    runtime = ScriptedRuntime([f"Saved {workspace}/main.tf; the plan stays in {OUTSIDE}."])
    async with receiver() as hook, start_server({**FAST, **runtime.settings}, extra_plugins={"scripted": runtime}) \
            as server, aiohttp.ClientSession() as http:
        monkeypatch.setattr("tests.test_push_delivery.send_message_body", _with_cwd(workspace))
        task = await send_with_push(http, server.url, hook.url, text="write main.tf")
        (got,) = await hook.wait_for(1)
    assert got.body["statusUpdate"]["taskId"] == task["id"]
    pushed = json.dumps(got.body)
    assert OUTSIDE in pushed
    if mode == "on":
        assert "Saved [PATH];" in pushed and str(workspace) not in pushed
    else:
        assert f"Saved {workspace}/main.tf;" in pushed and "[PATH]" not in pushed


def _with_cwd(workspace: Path) -> Any:
    def body(text: str, **fields: Any) -> dict[str, Any]:
        return send_message_body(text, metadata={"iac_code": {"cwd": str(workspace)}}, **fields)
    return body


class _RoutePlugin:
    """A plugin HTTP route answering JSON that names a file in the server's state directory."""

    def __init__(self) -> None:
        self.state_dir = ""

    @hookimpl
    def iac_code_http_routes(self, kernel: Any) -> list[HttpRouteSpec]:
        self.state_dir = str(kernel.state_dir)

        async def where(request: web.Request) -> web.Response:
            return web.json_response({"file": f"{self.state_dir}/x.json", f"{self.state_dir}/y": OUTSIDE})
        return [HttpRouteSpec("GET", "/test/where", where)]


@pytest.mark.parametrize("mode", ["true", ""])
async def test_plugin_routes_json_is_projected(mode: str, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IAC_CODE_A2A_SAFE_MODE", mode)
    plugin = _RoutePlugin()
    async with start_server(extra_plugins={"where": plugin}) as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + "test/where") as r:
            body = await r.json()
        async with http.get(server.url + "health") as r:
            assert await r.json() == {"status": "healthy"}
    if mode:
        assert body == {"file": "[PATH]", "[PATH]": OUTSIDE}
    else:
        assert body == {"file": f"{plugin.state_dir}/x.json", f"{plugin.state_dir}/y": OUTSIDE}
