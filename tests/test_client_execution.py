"""``iac-code a2a-client execution pause|resume|terminate|state`` against real servers (HTTP routes, and the
JSON-RPC methods over a Unix socket), and the execution-control and durable-permission lines of the streaming
view (issue 37 §7, §4, client side)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.api import AgentRuntimeSpec, TextDelta, ToolCall, ToolContext, ToolOutcome, TurnRequest, hookimpl, run_tool
from iac_code.testing import RunningServer, start_server
from tests.client_support import CLI_SECONDS, RunningClient, run_client, run_process, start_client

VPC = "Create a VPC with two vSwitches."
WAIT = 20.0  # bound of every wait on the server
EXEC_ID = re.compile(r"exec-[0-9a-f]{32}")
PAUSE_ID = re.compile(r"pause-[0-9a-f]{32}")
SNAPSHOT_KEYS = {"contextId", "taskId", "executionId", "serverInstanceId", "pauseId", "pauseReason", "connectionEpoch",
                 "revision", "persistedRevision", "phase", "pauseComplete", "executionStatus", "streamAvailable",
                 "blockers", "expiresAt", "terminationReason", "commitError", "backup", "externalOperations",
                 "releaseReady"}


class GateTool:
    """A tool that, while its gate is closed, runs until the test opens it."""

    def __init__(self, name: str, *, gated: bool = False) -> None:
        self.name = name
        self.runs = 0
        self.running = asyncio.Event()
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()

    def permission(self, tool_input: Any, context: ToolContext) -> None:
        return None

    async def run(self, tool_input: Any, context: ToolContext) -> ToolOutcome:
        self.runs += 1
        self.running.set()
        await self.gate.wait()
        return ToolOutcome(result={"ok": True, "tool": self.name})


class ToolsRuntime:
    """Each turn says ``starting``, calls its tools one after the other (safe points in between), says ``done``."""

    name = "tools"

    def __init__(self, *tools: GateTool) -> None:
        self.tools = tools

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[Any]:
        yield TextDelta("starting")
        for n, tool in enumerate(self.tools, 1):
            call = ToolCall(f"tu-{n}-{turn.task_id[:8]}", tool.name, {"step": n})
            async for event in run_tool(tool, call, ToolContext(cwd=turn.cwd)):
                yield event
        yield TextDelta(" done")

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="tools", create_runtime=lambda context: self)]


class Output:
    """The text a streaming client prints, read as it comes; ``until`` waits (bounded) for a pattern."""

    def __init__(self, client: RunningClient) -> None:
        self.client = client
        self.text = ""

    async def until(self, pattern: str) -> str:
        stdout = self.client.process.stdout
        assert stdout is not None
        async with asyncio.timeout(CLI_SECONDS):
            while not re.search(pattern, self.text):
                chunk = await stdout.read(4096)
                assert chunk, f"the client ended without printing {pattern!r}: {self.text!r}"
                self.text += chunk.decode()
        return self.text

    async def finish(self) -> tuple[int, str, str]:
        result = await self.client.finish()
        self.text += result.out
        return result.code, self.text, result.err


async def _phase(server: RunningServer, context_id: str, phase: str) -> None:
    """Until the agent's state has ``phase`` (polled over plain HTTP, bounded)."""
    async with aiohttp.ClientSession() as session, asyncio.timeout(WAIT):
        while True:
            async with session.get(server.url.rstrip("/") + "/iac-code/execution/state",
                                   params={"contextId": context_id}) as rsp:
                if rsp.status == 200 and (await rsp.json())["phase"] == phase:
                    return
            await asyncio.sleep(0.02)


async def _only_task(server: RunningServer, ws: Path) -> dict[str, Any]:
    listed = (await run_client("task-list", "--url", server.url, "-o", "json", cwd=ws)).json()
    assert len(listed["tasks"]) >= 1
    return listed["tasks"][0]  # type: ignore[no-any-return]


def _refused(result: Any, text: str, code: int) -> None:
    assert result.code == code, (result.out, result.err)
    assert text in result.err, result.err
    assert "Traceback" not in result.err + result.out


async def test_pause_state_resume_and_terminate_a_streaming_turn(ws: Path) -> None:
    first, second = GateTool("first", gated=True), GateTool("second")
    async with start_server({"agent-runtime": "tools"}, extra_plugins={"runtime": ToolsRuntime(first, second)}) \
            as server:
        stream = Output(await start_client("call", "--url", server.url, "-p", "two tools please", "--stream",
                                           cwd=ws))
        await asyncio.wait_for(first.running.wait(), WAIT)
        task = await _only_task(server, ws)
        context = task["contextId"]

        state = await run_client("execution", "state", server.url, "--context-id", context, "-o", "json", cwd=ws)
        assert state.code == 0, state.err
        running = state.json()
        assert set(running) == SNAPSHOT_KEYS and EXEC_ID.fullmatch(running["executionId"])
        assert running["phase"] == "running" and running["taskId"] == task["id"]
        assert running["blockers"] == [{"kind": "tool_call", "count": 1}]
        shown = await run_client("execution", "state", "--url", server.url, "--context-id", context, cwd=ws)
        assert shown.code == 0 and f"● running · execution {running['executionId']} · context {context}" in shown.out
        assert f"task: {task['id']}" in shown.out and "waiting for: tool_call ×1" in shown.out

        # The pause waits (--wait) while the tool runs: the agent answers 202 pausing, the client reads the
        # state again until the tool finished and the turn is parked at its next safe point.
        pausing = asyncio.create_task(run_process("execution", "pause", server.url, "--context-id", context,
                                                  "--reason", "laptop_sleeps", "--wait", "-o", "json", cwd=ws))
        await _phase(server, context, "pausing")
        first.gate.set()
        paused_run = await pausing
        assert paused_run.code == 0, paused_run.err
        paused = paused_run.json()
        assert set(paused) == SNAPSHOT_KEYS and paused["phase"] == "paused" and paused["pauseComplete"] is True
        assert PAUSE_ID.fullmatch(paused["pauseId"]) and paused["pauseReason"] == "laptop_sleeps"
        assert paused["executionId"] == running["executionId"]
        await stream.until(r"⏸ execution paused · reason laptop_sleeps · resume before \S+Z")
        assert second.runs == 0

        shown = await run_client("execution", "state", server.url, "--context-id", context, cwd=ws)
        assert "● paused" in shown.out and f"pause: {paused['pauseId']}" in shown.out
        # The agent's refusals, verbatim, with their status; exit code 8, no traceback.
        _refused(await run_client("execution", "pause", server.url, "--context-id", context, cwd=ws),
                 "Error: A different pause request is already active (HTTP 409)", 8)
        _refused(await run_client("execution", "state", server.url, "--context-id", context,
                                  "--execution-id", "exec-0", cwd=ws),
                 "executionId does not identify the current execution (HTTP 409)", 8)
        _refused(await run_client("execution", "state", server.url, "--context-id", "no-such-context", cwd=ws),
                 "Execution was not found (HTTP 404)", 8)
        refused = await run_client("execution", "state", server.url, "--context-id", "bad id!", "-o", "json", cwd=ws)
        _refused(refused, "Invalid execution control request. (HTTP 400)", 8)
        assert refused.json() == {"error": {"message": "Invalid execution control request. (HTTP 400)",
                                            "exitCode": 8}}

        resumed = await run_client("execution", "resume", server.url, "--context-id", context, "-o", "json", cwd=ws)
        assert resumed.code == 0, resumed.err
        assert resumed.json()["phase"] == "running" and resumed.json()["pauseId"] is None
        await stream.until("▶ execution resumed")
        code, out, err = await stream.finish()
        assert code == 0, err
        assert "done" in out and "● input-required" in out and second.runs == 1
        _refused(await run_client("execution", "resume", server.url, "--context-id", context, cwd=ws),
                 "Execution is not paused", 8)

        # Terminate a running turn of the same context: its task is canceled, the call ends with exit 12.
        first.gate.clear()
        first.running.clear()
        stream = Output(await start_client("call", "--url", server.url, "-p", "once more", "--stream",
                                           "--context-id", context, cwd=ws))
        await asyncio.wait_for(first.running.wait(), WAIT)
        ended = await run_client("execution", "terminate", server.url, "--context-id", context, "--wait",
                                 "-o", "json", cwd=ws)
        assert ended.code == 0, ended.err
        terminated = ended.json()
        assert terminated["phase"] == "terminated" and terminated["terminationReason"] == "explicit_terminate"
        assert terminated["releaseReady"] is True
        code, out, err = await stream.finish()
        assert code == 12 and "● canceled" in out, (out, err)
        assert "■ execution terminat" in out, out
        shown = await run_client("execution", "state", server.url, "--context-id", context, cwd=ws)
        assert "● terminated" in shown.out and "termination: explicit_terminate" in shown.out


async def test_an_agent_without_the_extension_is_named_as_such(ws: Path) -> None:
    async with start_server({"disabled-plugins": ["execution-control"]}) as server:
        for operation in ("state", "pause", "resume", "terminate"):
            result = await run_client("execution", operation, server.url, "--context-id", "ctx-1", cwd=ws)
            _refused(result, "The agent's card does not advertise execution control (extension "
                             "urn:iac-code:a2a:execution-control:v1)", 9)
        as_json = await run_client("execution", "state", server.url, "--context-id", "ctx-1", "-o", "json", cwd=ws)
        assert as_json.code == 9 and as_json.json()["error"]["exitCode"] == 9
        missing = await run_client("execution", "state", server.url, cwd=ws)
        _refused(missing, "context-id is required", 1)
    async with start_server() as server:  # the card is verified as for every command
        unsigned = await run_client("execution", "state", server.url, "--context-id", "ctx-1",
                                    "--require-card-signature", cwd=ws)
        _refused(unsigned, "A2A Agent Card verification failed", 7)


async def test_over_a_unix_socket_the_json_rpc_methods_are_used(ws: Path, tmp_path: Path) -> None:
    socket_path = tmp_path / "a2a.sock"
    async with start_server({"transport": ["http", "unix"], "socket-path": str(socket_path)}) as server:
        asked = await run_client("call", "--url", server.url, "-p", VPC, "-o", "json", cwd=ws)
        assert asked.code == 11, asked.err  # waiting for its permission answer: parked at a safe point
        task = await _only_task(server, ws)
        context = task["contextId"]
        unix_url = f"unix://{socket_path}"

        direct = await run_client("execution", "state", unix_url, "--context-id", context, "-o", "json", cwd=ws)
        assert direct.code == 0, direct.err
        assert direct.json()["phase"] == "running" and direct.json()["executionStatus"] == "input-required"
        paused = await run_client("execution", "pause", server.url, "--binding", "unix", "--context-id", context,
                                  "-o", "json", cwd=ws)
        assert paused.code == 0, paused.err
        assert paused.json()["phase"] == "paused"  # nothing to wait for: the turn waits for its answer
        over_http = await run_client("execution", "state", server.url, "--context-id", context, "-o", "json", cwd=ws)
        assert over_http.json()["pauseId"] == paused.json()["pauseId"]
        _refused(await run_client("execution", "state", unix_url, "--context-id", context, "--pause-id", "pause-0",
                                  cwd=ws),
                 "pauseId does not identify the current pause (JSON-RPC -32602)", 8)
        _refused(await run_client("execution", "state", unix_url, "--context-id", "unknown", cwd=ws),
                 "Execution was not found (JSON-RPC -32001)", 8)
        resumed = await run_client("execution", "resume", unix_url, "--context-id", context, "--wait", cwd=ws)
        assert resumed.code == 0 and "● running" in resumed.out, resumed.err


def _wait_status(task: dict[str, Any]) -> str:
    return str(task.get("metadata", {}).get("iac_code", {}).get("permissionWait", {}).get("status", ""))


async def _task_when(server: RunningServer, ws: Path, task_id: str,
                     predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async with asyncio.timeout(WAIT):
        while True:
            task = (await run_client("task-get", "--url", server.url, "--task-id", task_id, "-o", "json",
                                     cwd=ws)).json()
            if predicate(task):
                return task  # type: ignore[no-any-return]
            await asyncio.sleep(0.05)


async def test_a_suspended_permission_question_is_shown_and_answered_later(ws: Path) -> None:
    settings = {"permission-wait": {"resident-timeout-seconds": 0.5, "timeout-grace-seconds": 0}}
    async with start_server(settings) as server:
        asked = await run_client("call", "--url", server.url, "-p", VPC, "--stream", cwd=ws)
        assert asked.code == 11 and "Permission needed" in asked.out, asked.err
        task = await _only_task(server, ws)
        await _task_when(server, ws, task["id"], lambda t: _wait_status(t) == "suspended")

        # Following the task shows it as it is: suspended, and how to answer it later.
        followed = await run_process("task-subscribe", "--url", server.url, "--task-id", task["id"], cwd=ws)
        assert "⏾ The permission question is waiting durably (suspended)." in followed.out, followed
        assert (f"You can answer it later with: iac-code a2a-client call --url {server.url} --answer "
                f"allow_once|deny --task-id {task['id']} --context-id {task['contextId']}") in followed.out

        answered = await run_client("call", "--url", server.url, "--answer", "allow_once", "--task-id", task["id"],
                                    "--stream", cwd=ws)
        assert answered.code == 0, (answered.out, answered.err)
        assert "The question was waiting durably (suspended); this answer resumes the turn." in answered.out
        assert "↻ the suspended permission question was recovered; the turn goes on" in answered.out
        assert "answer recorded: allow_once" in answered.out and "● input-required" in answered.out
        assert (ws / "template.ros.yaml").exists()
