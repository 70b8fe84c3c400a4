"""A restart during a permission wait a runtime cannot resume, crash leftovers, the permission timeout and the
per-caller turn limit."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from iac_code.testing import (
    A2A_HEADERS,
    LISTENING_LINE,
    RunningServer,
    ServerProcess,
    permission_answer_body,
    send_message_body,
    start_server,
)
from iac_code.testing import server_process as iac_code_process
from tests.tool_runtime import ToolPlugin

LISTENING = LISTENING_LINE  # imported from here by other test modules


async def rpc(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


async def until(condition: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    """Wait (bounded) until an observable condition holds."""
    deadline = time.monotonic() + seconds
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


def server_process(state: Path, workspace: Path, *options: str) -> AbstractAsyncContextManager[ServerProcess]:
    """``iac-code a2a`` as its own process (default configuration, state in ``state``, CLI ``options``)."""
    return iac_code_process(*options, cwd=workspace, env={"IAC_CODE_CONFIG_DIR": str(state)}, drop_env=("IACCODE_A2A_",))


async def test_a_wait_of_a_runtime_that_cannot_resume_comes_back_interrupted(tmp_path: Path) -> None:
    """A runtime without ``resume_turn`` keeps the old behaviour: its wait lives only with its process, and
    after a restart the task is FAILED "Task interrupted" (the default runtimes' waits are durable:
    tests/test_permission_waits.py)."""
    state = tmp_path / "state"
    settings = {"agent-runtime": "tools", "persistence-dir": str(state)}
    plugin = ToolPlugin()
    async with aiohttp.ClientSession() as http:
        async with start_server(settings, extra_plugins={"tools": plugin}) as server:
            paused = (await rpc(http, server.url, send_message_body("deploy")))["result"]["task"]
            envelope = paused["metadata"]["iac_code"]["input"]
            assert "permissionWait" not in paused["metadata"]["iac_code"]
        assert not list((state / "permission-waits").glob("*.json"))  # nothing checkpointed
        async with start_server(settings, extra_plugins={"tools": plugin}) as server:
            url = server.url
            task = (await rpc(http, url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                          "params": {"id": paused["id"]}}))["result"]
            assert task["status"]["state"] == "TASK_STATE_FAILED"
            assert task["status"]["message"]["parts"][0]["text"].startswith("Task interrupted")
            assert task["metadata"]["iac_code"]["interrupted"] is True
            late = await rpc(http, url, permission_answer_body(envelope))
            assert late["error"]["message"] == "permission_resume_invalid: pending permission is not active."
            cancel = await rpc(http, url, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask",
                                           "params": {"id": paused["id"]}})
            assert cancel["error"]["code"] == -32002
            again = (await rpc(http, url, send_message_body("hello", message_id="m-2")))["result"]["task"]
            assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the server works on
    assert plugin.runtime.decisions == []


async def test_crash_leftovers_are_swept_from_every_store(tmp_path: Path) -> None:
    state = tmp_path / "state"
    dead = 2**22 + 12345  # beyond the default pid range: no such process
    leftovers = [state / "tasks" / f".abc.json.{dead}-1.tmp", state / "contexts" / f".ctx.json.{dead}-7.tmp",
                 state / "artifacts" / "task-1" / f".template.yaml.{dead}-3.tmp"]
    live = state / "contexts" / f".other.json.{os.getpid()}-1.tmp"  # a live writer's file is left alone
    for path in [*leftovers, live]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("partial")
    async with start_server({"persistence-dir": str(state)}):
        pass
    assert [p for p in leftovers if p.exists()] == []
    assert live.exists()


@asynccontextmanager
async def tools_server(**settings: Any) -> AsyncIterator[tuple[RunningServer, aiohttp.ClientSession, ToolPlugin]]:
    plugin = ToolPlugin()
    async with start_server({"agent-runtime": "tools", **settings}, extra_plugins={"tools": plugin}) as server, \
            aiohttp.ClientSession() as http:
        yield server, http, plugin


async def test_an_unanswered_permission_is_denied_after_the_timeout(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with tools_server(**{"permission-timeout": 0.2, "permission-audit-log": str(audit)}) as (server, http, plugin):
        paused = (await rpc(http, server.url, send_message_body("deploy")))["result"]["task"]
        assert paused["metadata"]["iac_code"]["permission"]["pending"] is True

        async def finished() -> bool:
            task = (await rpc(http, server.url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                 "params": {"id": paused["id"]}}))["result"]
            return "assistantFinal" in task["metadata"].get("iac_code", {})

        await until(finished)
        assert plugin.runtime.decisions == [("aliyun_api", False)]
        late = await rpc(http, server.url, permission_answer_body(paused["metadata"]["iac_code"]["input"]))
        assert late["error"]["message"] == "permission_resume_invalid: pending permission is not active."
        # the context is free again
        follow = send_message_body("read it", message_id="m-2", contextId=paused["contextId"])
        assert "result" in await rpc(http, server.url, follow)
    [record] = [json.loads(line) for line in audit.read_text().splitlines()][:1]
    assert (record["decision"], record["source"]) == ("deny", "timeout")


async def test_turns_per_caller_are_limited() -> None:
    async with tools_server(**{"max-active-turns-per-caller": 2}) as (server, http, _):
        first = (await rpc(http, server.url, send_message_body("deploy", message_id="a", contextId="c1")))["result"]
        await rpc(http, server.url, send_message_body("deploy", message_id="b", contextId="c2"))
        refused = await rpc(http, server.url, send_message_body("deploy", message_id="c", contextId="c3"))
        assert refused["error"]["code"] == -32004
        assert refused["error"]["message"].startswith("Too many active tasks for this caller (limit 2)")
        listed = (await rpc(http, server.url, {"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                                               "params": {}}))["result"]["tasks"]
        assert len(listed) == 2  # the refused message created nothing
        await rpc(http, server.url, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask",
                                     "params": {"id": first["task"]["id"]}})
        again = await rpc(http, server.url, send_message_body("deploy", message_id="d", contextId="c3"))
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
