"""§8 session routes on a real server (the default offline runtime), and a pause that survives ``kill -9``: a real
``iac-code a2a`` process is killed while its execution is paused and restarted on the same persistence directory."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.testing import A2A_HEADERS, ServerProcess, send_message_body, start_server
from iac_code.testing import server_process as iac_code_process

RESTORE = "/iac-code/session/ensure-restored"
RECOVERY = "/iac-code/session/recovery"
STATE = "/iac-code/execution/state"


async def _post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, str) else json.dumps(body)
    async with session.post(url, data=data, headers=A2A_HEADERS) as response:
        return response.status, await response.json()


async def _get(session: aiohttp.ClientSession, url: str, params: dict[str, str]) -> tuple[int, Any]:
    async with session.get(url, params=params) as response:
        return response.status, await response.json()


def _message(text: str, cwd: Path, **fields: str) -> dict[str, Any]:
    return send_message_body(text, message_id=f"m-{uuid.uuid4().hex[:8]}", metadata={"iac_code": {"cwd": str(cwd)}},
                             **fields)


async def test_ensure_restored_and_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(workspace)
    settings = {"persistence-dir": str(tmp_path / "state")}
    async with start_server(settings) as server, aiohttp.ClientSession() as session:
        base = server.url.rstrip("/")
        _, reply = await _post(session, server.url, _message("Hello, what can you do?", workspace))
        task = reply["result"]["task"]
        context_id, task_id = task["contextId"], task["id"]
        _, other = await _post(session, server.url, _message("Hello again", workspace))
        other_task = other["result"]["task"]["id"]

        session_body = {"cwd": str(workspace), "sessionId": context_id}
        assert await _post(session, base + RESTORE, session_body) == (200, {"status": "current"})
        assert await _post(session, base + RESTORE, {**session_body, "taskId": task_id}) == (200, {"status": "current"})
        assert await _post(session, base + RESTORE, {**session_body, "sessionId": "no-such-session"}) == (
            404, {"status": "not_found"})
        assert await _post(session, base + RESTORE, {**session_body, "cwd": str(elsewhere)}) == (
            404, {"status": "not_found"})
        invalid = (400, {"error": "Invalid session restore request."})
        for body in ["not json", {}, {"sessionId": context_id}, {**session_body, "cwd": ""},
                     {**session_body, "cwd": 7}, {**session_body, "cwd": "relative/dir"},
                     {**session_body, "sessionId": "not an id"}, {**session_body, "sessionId": None},
                     {**session_body, "taskId": 5}, {**session_body, "taskId": other_task},
                     {**session_body, "taskId": "no-such-task"}]:
            assert await _post(session, base + RESTORE, body) == invalid, body

        status, snapshot = await _get(session, base + STATE, {"contextId": context_id})
        assert status == 200
        status, recovery = await _get(session, base + RECOVERY, {"contextId": context_id,
                                                                  "executionId": snapshot["executionId"]})
        assert status == 200
        assert set(recovery) == {"contextId", "taskId", "executionId", "revision", "executionStatus", "outputText",
                                 "task", "messages", "executionControl"}
        assert recovery["taskId"] == task_id and recovery["executionControl"] == snapshot
        assert recovery["executionStatus"] == "normal-turn-ended" and recovery["revision"] == snapshot["revision"]
        assert recovery["task"]["id"] == task_id and recovery["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert recovery["outputText"] and "".join(recovery["outputText"]).strip()
        assert [m["role"] for m in recovery["messages"]] == ["user", "assistant"]
        assert recovery["messages"][0]["text"] == "Hello, what can you do?"
        invalid_query = (400, {"error": "Invalid execution control request."})
        assert await _get(session, base + RECOVERY, {"contextId": context_id}) == invalid_query
        assert await _get(session, base + RECOVERY, {"executionId": snapshot["executionId"]}) == invalid_query
        assert await _get(session, base + RECOVERY, {"contextId": context_id, "executionId": "exec-0"}) == (
            409, {"error": "executionId does not identify the current execution"})
        assert await _get(session, base + RECOVERY, {"contextId": "nobody", "executionId": "exec-0"}) == (
            404, {"error": "Execution was not found"})

    # After a restart the context is only on disk: read back once, then current.
    async with start_server(settings) as server, aiohttp.ClientSession() as session:
        base = server.url.rstrip("/")
        assert await _post(session, base + RESTORE, {**session_body, "taskId": task_id}) == (200, {"status": "restored"})
        assert await _post(session, base + RESTORE, session_body) == (200, {"status": "current"})


# --------------------------------------------------------------------------- kill -9 while paused


def server_process(config: Path, workspace: Path) -> AbstractAsyncContextManager[ServerProcess]:
    """``iac-code a2a --config <config>`` as its own process, none of this environment's ``IAC_CODE_*`` settings."""
    return iac_code_process(config=config, cwd=workspace, env={"IAC_CODE_CONFIG_DIR": str(config.parent)},
                            drop_env=("IACCODE_A2A_", "IAC_CODE_"))


KILLS = 5  # kill -9 trials while paused (issue 37's durability loop)


async def test_a_pause_survives_kill_9(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    state = tmp_path / "state"
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"persistence-dir": str(state)}))
    async with server_process(config, workspace) as (proc, url), aiohttp.ClientSession() as session:
        base = url.rstrip("/")
        _, reply = await _post(session, url, _message("Create a VPC with two vSwitches in cn-hangzhou.", workspace))
        task = reply["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and task["metadata"]["iac_code"]["input"]
        context_id = task["contextId"]
        _, waiting = await _get(session, base + STATE, {"contextId": context_id})
        assert waiting["executionStatus"] == "input-required"
        status, paused = await _post(session, base + "/iac-code/execution/pause", {
            "contextId": context_id, "taskId": task["id"], "expectedExecutionId": waiting["executionId"],
            "requestId": "p-1", "connectionEpoch": 3, "reason": "client_disconnect"})
        assert status == 200 and paused["phase"] == "paused"
        proc.kill()  # SIGKILL: no shutdown, nothing flushed
        await proc.wait()

    for trial in range(1, KILLS):  # killed again and again while paused: still paused, nothing else changed
        async with server_process(config, workspace) as (proc, url), aiohttp.ClientSession() as session:
            status, after = await _get(session, url.rstrip("/") + STATE, {"contextId": context_id})
            assert status == 200 and after["phase"] == "paused", trial
            assert (after["executionId"], after["pauseId"], after["revision"]) == (
                paused["executionId"], paused["pauseId"], paused["revision"]), trial
            proc.kill()
            await proc.wait()

    async with server_process(config, workspace) as (proc, url), aiohttp.ClientSession() as session:
        base = url.rstrip("/")
        status, after = await _get(session, base + STATE, {"contextId": context_id})
        assert status == 200
        assert after["phase"] == "paused" and after["pauseComplete"] is True
        assert (after["executionId"], after["pauseId"], after["expiresAt"], after["connectionEpoch"]) == (
            paused["executionId"], paused["pauseId"], paused["expiresAt"], 3)
        assert after["serverInstanceId"] != paused["serverInstanceId"] and after["streamAvailable"] is False
        _, refused = await _post(session, url, _message("one more thing", workspace, contextId=context_id))
        assert refused["error"]["code"] == -32602
        # The task still waits for its permission answer (a durable wait, since-0.13 §4), which the kernel
        # explains first; with no such wait the paused execution refuses the new task itself.
        assert refused["error"]["message"] in (
            "Current execution must finish recovery before a new task starts",
            f"Task {task['id']} is waiting for a permission answer. Answer it with a message whose taskId is "
            f"{task['id']}: either the text `allow` or `deny`, or the structured answer (one application/json data "
            "part with \"kind\": \"permission\", as described in the task's metadata.iac_code.input).")
        # The same pause request is still remembered; an older connection is still stale.
        assert (await _post(session, base + "/iac-code/execution/pause", {
            "contextId": context_id, "taskId": task["id"], "expectedExecutionId": paused["executionId"],
            "requestId": "p-1", "connectionEpoch": 3, "reason": "client_disconnect"}))[0] == 200
        resume = {"contextId": context_id, "executionId": paused["executionId"], "pauseId": paused["pauseId"],
                  "requestId": "r-1", "connectionEpoch": 2}
        assert await _post(session, base + "/iac-code/execution/resume", resume) == (
            409, {"error": "connectionEpoch is stale"})
        status, resumed = await _post(session, base + "/iac-code/execution/resume", {**resume, "connectionEpoch": 4})
        assert status == 200 and resumed["phase"] == "running"
        # Running again: the permission question the turn stopped on survived the kills and takes its answer.
        _, reply = await _post(session, url, _message("allow", workspace, contextId=context_id, taskId=task["id"]))
        answered = reply["result"]["task"]
        assert answered["id"] == task["id"] and answered["artifacts"], reply  # the allowed tool ran
        assert answered["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"), reply


# --------------------------------------------------------------------------- reconnect deadlines on uvloop

DEADLINES = 12  # paused executions, each with a one-second reconnect deadline


async def test_every_passed_reconnect_deadline_is_enforced(tmp_path: Path) -> None:
    """On the server's own event loop (uvloop, whose timers may fire a millisecond before the wall clock reaches
    the deadline) every paused execution is terminated once its reconnect deadline has passed; none stays paused.
    (Before the fix about one deadline in six was missed for good, so twelve of them all but always caught it.)"""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"persistence-dir": str(tmp_path / "state")}))
    async with server_process(config, workspace) as (_, url), aiohttp.ClientSession() as session:
        base = url.rstrip("/")
        paused: list[dict[str, Any]] = []
        for number in range(DEADLINES):
            _, reply = await _post(session, url, _message("Create a VPC with two vSwitches.", workspace))
            task = reply["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
            _, waiting = await _get(session, base + STATE, {"contextId": task["contextId"]})
            status, body = await _post(session, base + "/iac-code/execution/pause", {
                "contextId": task["contextId"], "taskId": task["id"], "expectedExecutionId": waiting["executionId"],
                "requestId": f"p-{number}", "connectionEpoch": 1, "reason": "client_disconnect",
                "reconnectTimeoutSeconds": 1})
            assert status == 200 and body["phase"] == "paused", body
            paused.append(body)

        async def states() -> list[dict[str, Any]]:
            return [(await _get(session, base + STATE, {"contextId": p["contextId"]}))[1] for p in paused]

        limit = asyncio.get_running_loop().time() + 30
        now = await states()
        while any(s["phase"] != "terminated" for s in now):
            assert asyncio.get_running_loop().time() < limit, [(s["phase"], s["expiresAt"]) for s in now]
            await asyncio.sleep(0.1)
            now = await states()
        assert [(s["terminationReason"], s["executionId"]) for s in now] == [
            ("disconnect_timeout", p["executionId"]) for p in paused]
