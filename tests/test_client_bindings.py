"""``iac-code a2a-client`` over the other bindings (HTTP+JSON, gRPC, WebSocket) and against a2a-sdk's own server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from iac_code.testing import start_server
from tests.byo_agent import ShoutExecutor
from tests.client_support import reference_server, run_client

VPC = "Create a VPC with two vSwitches."
SETTINGS = {"transport": ["http", "grpc", "websocket"], "grpc-port": 0, "push-notifications": True,
            "push-allowed-hosts": ["127.0.0.1"]}




async def _scenario(url: str, binding: str, ws: Path) -> None:
    """call → permission → answer → task-get → task-list → push CRUD → cancel, all over ``binding``."""
    b = ["--url", url, "--binding", binding]
    paused = await run_client("call", *b, "-p", VPC, "--stream", "-o", "json", cwd=ws)
    assert paused.code == 11, (binding, paused.err)
    envelope = paused.lines()[-1]["permissionRequest"]
    task_id = envelope["requestTaskId"]
    answered = await run_client("call", *b, "--answer", "allow_once", "--task-id", task_id, "--stream", cwd=ws)
    assert answered.code == 0, (binding, answered.err)
    assert "artifact template.ros.yaml" in answered.out and "● input-required" in answered.out
    task = (await run_client("task-get", *b, "--task-id", task_id, "-o", "json", cwd=ws)).json()
    assert task["id"] == task_id and task["artifacts"], binding
    listed = (await run_client("task-list", *b, "--context-id", envelope["contextId"], "-o", "json", cwd=ws)).json()
    assert [t["id"] for t in listed["tasks"]] == [task_id], binding
    hook = "hook-" + binding.lower().replace("+", "-")
    push = ["--task-id", task_id, "--config-id", hook]
    created = await run_client("push-config-create", *b, *push, "--callback-url", "http://127.0.0.1:9/h", "-o",
                               "json", cwd=ws)
    assert created.code == 0 and created.json()["id"] == hook, (binding, created.err)
    assert (await run_client("push-config-get", *b, *push, cwd=ws)).code == 0
    configs = (await run_client("push-config-list", *b, "--task-id", task_id, "-o", "json", cwd=ws)).json()
    assert [c["id"] for c in configs["configs"]] == [hook], binding
    assert (await run_client("push-config-delete", *b, *push, cwd=ws)).code == 0
    missing = await run_client("push-config-get", *b, *push, cwd=ws)
    assert missing.code == 8, binding
    other = (await run_client("call", *b, "-p", VPC, "-o", "json", cwd=ws)).lines()[-1]["permissionRequest"]
    followed = await run_client("task-subscribe", *b, "--task-id", other["requestTaskId"], "-o", "json", cwd=ws)
    assert [e["task"]["status"]["state"] for e in followed.lines()] == ["TASK_STATE_INPUT_REQUIRED"], binding
    card = (await run_client("extended-card", *b, "-o", "json", cwd=ws)).json()
    assert any(s["id"] == "iac_code_runtime_details" for s in card["skills"]), binding
    canceled = await run_client("task-cancel", *b, "--task-id", other["requestTaskId"], "-o", "json", cwd=ws)
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED", binding
    unknown = await run_client("task-get", *b, "--task-id", "nope", cwd=ws)
    assert unknown.code == 8 and "TaskNotFound" in unknown.err, binding


async def test_every_binding_of_our_server(ws: Path) -> None:
    async with start_server(SETTINGS) as server:
        card = (await run_client("discover", "--url", server.url, "-o", "json", cwd=ws)).json()
        bindings = [i["protocolBinding"] for i in card["supportedInterfaces"]]
        assert {"JSONRPC", "HTTP+JSON", "GRPC", "websocket"} <= set(bindings)
        await asyncio.gather(*(_scenario(server.url, b, ws / b.replace("+", "-")) for b in
                               ("HTTP+JSON", "GRPC", "websocket")
                               if (ws / b.replace("+", "-")).mkdir() is None))
        text = await run_client("discover", "--url", server.url, cwd=ws)
        assert "GRPC" in text.out and "websocket" in text.out
        nope = await run_client("task-list", "--url", server.url, "--binding", "carrier-pigeon", cwd=ws)
        assert nope.code == 9 and "Unknown or non-executable binding 'carrier-pigeon'" in nope.err


async def test_auth_on_grpc_and_websocket(ws: Path) -> None:
    async with start_server({**SETTINGS, "token": "s3cret"}) as server:
        for binding in ("GRPC", "websocket"):
            ok = await run_client("task-list", "--url", server.url, "--binding", binding, "--token", "s3cret", cwd=ws)
            assert ok.code == 0, (binding, ok.err)
        # Without the token even the card is refused; with a card from a good token, a wrong call is refused too.
        refused = await run_client("task-list", "--url", server.url, "--binding", "GRPC", cwd=ws)
        assert refused.code == 5


async def test_a_websocket_url_is_called_directly(ws: Path) -> None:
    async with start_server(SETTINGS) as server:
        card = (await run_client("discover", "--url", server.url, "-o", "json", cwd=ws)).json()
        ws_url = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "websocket")
        paused = await run_client("call", "--url", ws_url, "-p", VPC, "--stream", "-o", "json", cwd=ws)
        assert paused.code == 11, paused.err
        assert paused.lines()[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"  # streamed, not one reply
        required = await run_client("call", "--url", ws_url, "-p", "hi", "--require-card-signature", cwd=ws)
        assert required.code == 7 and "no card to verify" in required.err


async def test_unix_and_stdio_urls(ws: Path, tmp_path: Path) -> None:
    socket_path = tmp_path / "iac.sock"
    async with start_server({"transport": ["http", "unix"], "socket-path": str(socket_path)}) as server:
        paused = await run_client("call", "--url", f"unix://{socket_path}", "-p", VPC, "--stream", "-o", "json",
                                  cwd=ws)
        assert paused.code == 11, paused.err
        envelope = paused.lines()[-1]["permissionRequest"]
        answered = await run_client("call", "--url", f"unix://{socket_path}", "--answer", "allow_once",
                                    "--task-id", envelope["requestTaskId"], cwd=ws)
        assert answered.code == 0 and (ws / "template.ros.yaml").exists(), answered.err
        over_http = await run_client("task-get", "--url", server.url, "--task-id", envelope["requestTaskId"], cwd=ws)
        assert over_http.code == 0  # one server, two transports
    server_config = tmp_path / "server.yml"
    server_config.write_text(f"persistence-dir: {tmp_path / 'stdio-state'}\n")
    client_config = tmp_path / "a2a-client.yml"
    client_config.write_text(f"stdio-command: {sys.executable} -m iac_code.server.cli a2a --transport stdio "
                             f"--config {server_config}\n")
    spawned = await run_client("--config", str(client_config), "call", "--url", "stdio://iac-code", "-p", "hello",
                               cwd=ws)
    assert spawned.code == 0, spawned.err
    assert "offline engine" in spawned.out


async def test_against_a2a_sdk_reference_server(ws: Path) -> None:
    async with reference_server(ShoutExecutor()) as url:
        found = await run_client("discover", "--url", url, cwd=ws)
        assert found.code == 0 and "reference-agent" in found.out and "shout" in found.out
        done = await run_client("call", "--url", url, "-p", "hello", cwd=ws)
        assert done.code == 0, done.err
        assert "HELLO" in done.out and "● completed" in done.out
        asked = await run_client("call", "--url", url, "-p", "more?", "--stream", "-o", "json", cwd=ws)
        assert asked.code == 0, asked.err
        events = asked.lines()
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id = events[-1]["statusUpdate"]["taskId"]
        rest = await run_client("call", "--url", url, "--binding", "HTTP+JSON", "-p", "ok", "--task-id", task_id,
                                "--context-id", events[-1]["statusUpdate"]["contextId"], cwd=ws)
        assert rest.code == 0 and "OK" in rest.out, rest.err
        got = (await run_client("task-get", "--url", url, "--task-id", task_id, "-o", "json", cwd=ws)).json()
        assert got["status"]["state"] == "TASK_STATE_COMPLETED"
        listed = await run_client("task-list", "--url", url, cwd=ws)
        assert listed.code == 0 and "completed" in listed.out, listed.err
        cancel = await run_client("task-cancel", "--url", url, "--task-id", task_id, cwd=ws)
        assert cancel.code == 8 and "TaskNotCancelable" in cancel.err
        push = await run_client("push-config-list", "--url", url, "--task-id", task_id, cwd=ws)
        assert push.code == 8  # the reference server has no push notifications: a clear A2A error
