"""Execution control on a real server (127.0.0.1, a2a-sdk's client and plain HTTP): a pause holds the running turn
at its next safe point and is durable, resume lets the turn finish, terminate cancels it like CancelTask, and every
refusal of §7 has its status and text."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.api import (
    AgentRuntimeSpec,
    ClientTarget,
    InterfaceInfo,
    Permission,
    TextDelta,
    ToolCall,
    ToolContext,
    ToolOutcome,
    TurnRequest,
    client_transports,
    hookimpl,
    run_tool,
)
from iac_code.testing import (
    A2A_HEADERS,
    GatedRuntimePlugin,
    RunningServer,
    connect_client,
    permission_answer_request,
    start_server,
)
from iac_code_execution_control import plugin

EXEC_ID = re.compile(r"exec-[0-9a-f]{32}")
PAUSE_ID = re.compile(r"pause-[0-9a-f]{32}")
WAIT = 20.0  # bound of every wait on an event of the server


class GateTool:
    """A tool that counts its runs and, when it has a gate, runs until the test opens it."""

    def __init__(self, name: str, *, gated: bool = False, permission: Permission | None = None) -> None:
        self.name = name
        self.runs = 0
        self.running = asyncio.Event()
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        self._permission = permission

    def permission(self, tool_input: Any, context: ToolContext) -> Permission | None:
        return self._permission

    async def run(self, tool_input: Any, context: ToolContext) -> ToolOutcome:
        self.runs += 1
        self.running.set()
        await self.gate.wait()
        return ToolOutcome(result={"ok": True, "tool": self.name})


class ToolsRuntime:
    """Each turn calls its tools one after the other (through ``run_tool``, as the first-party runtimes do)."""

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


def _message(text: str, **fields: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=f"m-{abs(hash((text, tuple(fields.items()))))}",
                                              role=Role.ROLE_USER, parts=[Part(text=text)], **fields))


class Stream:
    """A streamed SendMessage read in the background; ``until(predicate)`` waits for a matching event."""

    def __init__(self, events: AsyncIterator[Any]) -> None:
        self.seen: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self.done = asyncio.Event()
        self._task = asyncio.create_task(self._read(events))

    async def _read(self, events: AsyncIterator[Any]) -> None:
        try:
            async for event in events:
                self.seen.append(MessageToDict(event))
                self._changed.set()
        finally:
            self.done.set()
            self._changed.set()

    async def until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        async with asyncio.timeout(WAIT):
            checked = 0
            while True:
                for event in self.seen[checked:]:
                    if predicate(event):
                        return event
                checked = len(self.seen)
                if self.done.is_set():
                    raise AssertionError(f"the stream ended without it: {self.seen[-3:]}")
                self._changed.clear()
                await self._changed.wait()

    async def close(self) -> None:
        await asyncio.wait_for(self.done.wait(), WAIT)
        await self._task


def control(event: dict[str, Any]) -> dict[str, Any] | None:
    """``metadata.iac_code.executionControl`` of a streamed status update or task."""
    for key in ("statusUpdate", "task"):
        if key in event:
            found = event[key].get("metadata", {}).get("iac_code", {}).get("executionControl")
            if found is not None:
                return found
    return None


def phase_is(phase: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: (control(event) or {}).get("phase") == phase


def state_is(state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event.get("statusUpdate", {}).get("status", {}).get("state") == state


class Http:
    """Plain HTTP calls of the execution-control routes."""

    def __init__(self, session: aiohttp.ClientSession, server: RunningServer, headers: dict[str, str] | None = None):
        self.session = session
        self.base = server.url.rstrip("/")
        self.headers = headers or {}

    async def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        async with self.session.post(self.base + path, data=data, headers={**self.headers, **(headers or {}),
                                                                            "Content-Type": "application/json"}) as rsp:
            return rsp.status, await rsp.json()

    async def get(self, path: str, params: dict[str, str], headers: dict[str, str] | None = None) -> tuple[int, Any]:
        async with self.session.get(self.base + path, params=params, headers={**self.headers, **(headers or {})}) as rsp:
            return rsp.status, await rsp.json()

    async def phase(self, context_id: str, phase: str) -> dict[str, Any]:
        """The snapshot once it reaches ``phase`` (what a client does after a 202: read the state again), within
        :data:`WAIT`: a pause that completes when a turn ends is written after the turn's last event went out."""
        async with asyncio.timeout(WAIT):
            while (snapshot := await self.state(context_id))["phase"] != phase:
                await asyncio.sleep(0.02)
        return snapshot

    async def state(self, context_id: str, **params: str) -> dict[str, Any]:
        status, body = await self.get("/iac-code/execution/state", {"contextId": context_id, **params})
        assert status == 200, body
        return body  # type: ignore[no-any-return]

    async def pause(self, snapshot: dict[str, Any], request_id: str, epoch: int = 1, **fields: Any) -> tuple[int, Any]:
        return await self.post("/iac-code/execution/pause", {
            "contextId": snapshot["contextId"], "taskId": snapshot["taskId"],
            "expectedExecutionId": snapshot["executionId"], "requestId": request_id, "connectionEpoch": epoch,
            "reason": "client_disconnect", **fields})

    async def resume(self, snapshot: dict[str, Any], request_id: str, epoch: int = 1, **fields: Any) -> tuple[int, Any]:
        return await self.post("/iac-code/execution/resume", {
            "contextId": snapshot["contextId"], "executionId": snapshot["executionId"],
            "pauseId": snapshot["pauseId"], "requestId": request_id, "connectionEpoch": epoch, **fields})

    async def terminate(self, snapshot: dict[str, Any], request_id: str, epoch: int = 1,
                        **fields: Any) -> tuple[int, Any]:
        return await self.post("/iac-code/execution/terminate", {
            "contextId": snapshot["contextId"], "expectedExecutionId": snapshot["executionId"],
            "requestId": request_id, "connectionEpoch": epoch, **fields})


@asynccontextmanager
async def serving(runtime: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  **settings: Any) -> AsyncIterator[tuple[RunningServer, Http, Any]]:
    monkeypatch.chdir(tmp_path)
    headers = settings.pop("_headers", None)
    name = "gated" if isinstance(runtime, GatedRuntimePlugin) else "tools"
    async with start_server({"agent-runtime": name, **settings}, extra_plugins={"runtime": runtime}) as server, \
            aiohttp.ClientSession() as session, connect_client(server, headers=headers) as client:
        yield server, Http(session, server), client


def error_of(reply: tuple[int, Any]) -> tuple[int, str]:
    status, body = reply
    return status, body.get("error")


# --------------------------------------------------------------------------- the card


async def test_the_card_advertises_execution_control_on_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(ToolsRuntime(), tmp_path, monkeypatch) as (server, http, _):
        async with http.session.get(http.base + "/.well-known/agent-card.json") as rsp:
            card = await rsp.json()
    extension = next(e for e in card["capabilities"]["extensions"] if e["uri"] == plugin.EXTENSION_URI)
    assert extension.get("required", False) is False
    assert extension["params"] == {
        "schemaVersion": "1.0", "pauseEndpoint": "/iac-code/execution/pause",
        "stateEndpoint": "/iac-code/execution/state", "resumeEndpoint": "/iac-code/execution/resume",
        "terminateEndpoint": "/iac-code/execution/terminate", "sessionRecoveryEndpoint": "/iac-code/session/recovery",
        "phases": ["running", "pausing", "pause_committing", "paused", "resuming", "terminating", "terminated"],
        "toolBatchDrainOnPause": True, "transportScope": "http"}
    # Without an HTTP JSON-RPC or HTTP+JSON interface there is nothing to advertise.
    assert plugin.iac_code_card_extensions(None, [InterfaceInfo("unix:///tmp/a.sock", "unix"),
                                                  InterfaceInfo("stdio://iac-code", "stdio")]) == []


# --------------------------------------------------------------------------- pause, resume


async def test_pause_holds_the_turn_at_its_next_safe_point_and_resume_finishes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = GateTool("first", gated=True), GateTool("second")
    async with serving(ToolsRuntime(first, second), tmp_path, monkeypatch) as (server, http, client):
        stream = Stream(client.send_message(_message("two tools please")))
        await asyncio.wait_for(first.running.wait(), WAIT)  # the first tool is running: no safe point now
        task = (await stream.until(lambda e: "task" in e))["task"]
        running = await http.state(task["contextId"])
        assert EXEC_ID.fullmatch(running["executionId"]) and running["taskId"] == task["id"]
        assert running["phase"] == "running" and running["executionStatus"] == "working"
        assert running["streamAvailable"] is True and running["blockers"] == [{"kind": "tool_call", "count": 1}]
        assert running["pauseId"] is None and running["backup"] == {"status": "not_requested"}
        assert set(running) == {"contextId", "taskId", "executionId", "serverInstanceId", "pauseId", "pauseReason",
                                "connectionEpoch", "revision", "persistedRevision", "phase", "pauseComplete",
                                "executionStatus", "streamAvailable", "blockers", "expiresAt", "terminationReason",
                                "commitError", "backup", "externalOperations", "releaseReady"}

        status, pausing = await http.pause(running, "req-pause-1")
        assert status == 202 and pausing["phase"] == "pausing" and PAUSE_ID.fullmatch(pausing["pauseId"])
        assert pausing["pauseReason"] == "client_disconnect" and pausing["connectionEpoch"] == 1
        assert pausing["expiresAt"].endswith("Z") and pausing["pauseComplete"] is False
        # No new task on the context while its execution pauses.
        with pytest.raises(InvalidParamsError, match="Current execution must finish recovery before a new task starts"):
            async for _ in client.send_message(_message("another one", context_id=task["contextId"])):
                pass
        rest = {"message": {"messageId": "rest-1", "role": "ROLE_USER", "contextId": task["contextId"],
                            "parts": [{"text": "over HTTP+JSON"}]}}
        async with http.session.post(http.base + "/message:send", json=rest, headers=A2A_HEADERS) as rsp:
            assert rsp.status == 400
            assert "Current execution must finish recovery before a new task starts" in await rsp.text()

        first.gate.set()  # the tool finishes: the turn reaches the next safe point and stays there
        await stream.until(phase_is("paused"))
        paused = await http.state(task["contextId"])
        assert paused["phase"] == "paused" and paused["pauseComplete"] is True and paused["blockers"] == []
        assert paused["persistedRevision"] == paused["revision"] and paused["pauseId"] == pausing["pauseId"]
        assert (first.runs, second.runs) == (1, 0)  # the second tool never started
        assert not any(e.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {}).get("tool", {}).get("name")
                       == "second" for e in stream.seen)
        saved = server.kernel.state_dir / "execution-control" / f"{task['contextId']}.json"
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        assert json.loads(saved.read_text())["snapshot"]["phase"] == "paused"

        # The same request again is answered with the current snapshot; other content under its id is a conflict.
        assert await http.pause(running, "req-pause-1") == (200, paused)
        assert error_of(await http.pause(running, "req-pause-1", reason="other")) == (
            409, "requestId was already used with different content")
        assert error_of(await http.pause(running, "req-pause-2")) == (409, "A different pause request is already active")
        assert error_of(await http.resume({**paused, "pauseId": "pause-0"}, "req-resume-1")) == (
            409, "pauseId does not identify the active pause")
        assert error_of(await http.resume({**paused, "executionId": "exec-0"}, "req-resume-1")) == (
            409, "executionId does not identify the current execution")

        status, resumed = await http.resume(paused, "req-resume-1", epoch=2)
        assert status == 200 and resumed["phase"] == "running" and resumed["pauseId"] is None
        assert resumed["connectionEpoch"] == 2
        final = await stream.until(state_is("TASK_STATE_INPUT_REQUIRED"))
        await stream.close()
        assert (first.runs, second.runs) == (1, 1)  # the turn went on where it stopped
        assert control(final)["phase"] == "running"
        assert await http.resume(paused, "req-resume-1", epoch=2) == (200, await http.state(task["contextId"]))
        assert error_of(await http.resume(paused, "req-resume-2", epoch=2)) == (409, "Execution is not paused")
        stored = await client.get_task(GetTaskRequest(id=task["id"]))
        assert MessageToDict(stored)["metadata"]["iac_code"]["executionControl"]["executionId"] == running["executionId"]
        # Running again: new tasks start on the context.
        follow_up = [e async for e in client.send_message(_message("again", context_id=task["contextId"]))]
        assert follow_up[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_a_pause_waits_for_the_end_of_a_turn_without_safe_points(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    gated = GatedRuntimePlugin()
    async with serving(gated, tmp_path, monkeypatch) as (server, http, client):
        stream = Stream(client.send_message(_message("take your time")))
        await asyncio.wait_for(gated.runtime.started.wait(), WAIT)
        task = (await stream.until(lambda e: "task" in e))["task"]
        running = await http.state(task["contextId"])
        assert running["blockers"] == [{"kind": "turn", "count": 1}]
        status, pausing = await http.pause(running, "p-1")
        assert status == 202 and pausing["phase"] == "pausing"
        gated.runtime.release.set()
        await stream.until(state_is("TASK_STATE_INPUT_REQUIRED"))
        await stream.close()
        await http.phase(task["contextId"], "paused")
        paused = await http.state(task["contextId"], pauseId=pausing["pauseId"])
        assert paused["phase"] == "paused" and paused["executionStatus"] == "normal-turn-ended"
        assert paused["streamAvailable"] is False
        # No turn runs, but a paused execution is active work: an idle shutdown waits (through the kernel's seam).
        activity = server.kernel.activity()
        assert activity.turns_active == 0 and activity.held is True and not activity.idle
        with pytest.raises(InvalidParamsError, match="Current execution must finish recovery before a new task starts"):
            async for _ in client.send_message(_message("next", task_id=task["id"], context_id=task["contextId"])):
                pass
        assert (await http.resume(paused, "r-1"))[0] == 200
        assert server.kernel.activity().held is False


async def test_a_pause_while_a_permission_waits_holds_the_answered_tool(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    deploy = GateTool("deploy", permission=Permission(is_read_only=False, operation={
        "product": "ROS", "action": "CreateStack", "region": "cn-hangzhou", "stackId": "stack-1"}))
    async with serving(ToolsRuntime(deploy), tmp_path, monkeypatch) as (server, http, client):
        events = [MessageToDict(e) async for e in client.send_message(_message("deploy it"))]
        asked = events[-1]["statusUpdate"]
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        envelope = asked["metadata"]["iac_code"]["input"]
        waiting = await http.state(asked["contextId"])
        assert waiting["executionStatus"] == "input-required" and waiting["blockers"] == []
        status, paused = await http.pause(waiting, "p-1")
        assert status == 200 and paused["phase"] == "paused"  # parked at the question: paused at once

        answer = Stream(client.send_message(permission_answer_request(envelope)))
        await answer.until(lambda e: "inputReceived" in e.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {}))
        held = await answer.until(phase_is("paused"))  # acknowledged, then held before the tool runs
        assert deploy.runs == 0 and control(held)["executionStatus"] == "working"
        assert (await http.resume(paused, "r-1"))[0] == 200
        await answer.until(state_is("TASK_STATE_INPUT_REQUIRED"))
        await answer.close()
        assert deploy.runs == 1
        done = await http.state(asked["contextId"])
        assert done["externalOperations"] == [{"product": "ROS", "action": "CreateStack", "outcome": "accepted",
                                               "regionId": "cn-hangzhou", "resourceType": "ALIYUN::ROS::Stack",
                                               "resourceId": "stack-1", "toolUseId": envelope["toolUseId"]}]


# --------------------------------------------------------------------------- terminate


async def test_terminate_cancels_the_paused_task_like_cancel_task(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = GateTool("first", gated=True), GateTool("second")
    async with serving(ToolsRuntime(first, second), tmp_path, monkeypatch) as (server, http, client):
        stream = Stream(client.send_message(_message("two tools please")))
        await asyncio.wait_for(first.running.wait(), WAIT)
        task = (await stream.until(lambda e: "task" in e))["task"]
        running = await http.state(task["contextId"])
        _, pausing = await http.pause(running, "p-1")
        first.gate.set()
        await stream.until(phase_is("paused"))
        assert error_of(await http.terminate(running, "t-1", reason="disconnect_timeout")) == (
            409, "disconnect_timeout no longer identifies the active pause")
        assert error_of(await http.terminate(running, "t-1", pauseId="pause-0")) == (
            409, "pauseId does not identify the current pause")
        status, terminated = await http.terminate(running, "t-1", pauseId=pausing["pauseId"])
        assert status == 200 and terminated["phase"] == "terminated", terminated
        assert terminated["terminationReason"] == "explicit_terminate" and terminated["releaseReady"] is True
        assert terminated["executionStatus"] == "canceled" and terminated["backup"] == {"status": "disabled"}
        await stream.until(state_is("TASK_STATE_CANCELED"))
        await stream.close()
        stored = await client.get_task(GetTaskRequest(id=task["id"]))
        assert stored.status.state == TaskState.TASK_STATE_CANCELED and second.runs == 0
        assert await http.terminate(running, "t-1", pauseId=pausing["pauseId"]) == (200, terminated)
        assert error_of(await http.terminate(running, "t-2")) == (409, "Execution is terminating or terminated")
        assert error_of(await http.resume(pausing, "r-1")) == (409, "Execution is terminating or terminated")
        assert error_of(await http.pause(running, "p-2")) == (409, "Execution is terminating or terminated")
        # A terminated execution lets the context start over, as a new execution.
        first.gate.set()
        again = [e async for e in client.send_message(_message("again", context_id=task["contextId"]))]
        assert again[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        fresh = await http.state(task["contextId"])
        assert fresh["executionId"] != running["executionId"] and fresh["phase"] == "running"
        assert fresh["revision"] > terminated["revision"]


async def test_terminate_a_running_turn_without_a_pause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = GateTool("first", gated=True)
    async with serving(ToolsRuntime(first), tmp_path, monkeypatch) as (server, http, client):
        stream = Stream(client.send_message(_message("one slow tool")))
        await asyncio.wait_for(first.running.wait(), WAIT)
        running = await http.state((await stream.until(lambda e: "task" in e))["task"]["contextId"])
        status, body = await http.terminate(running, "t-1", reason="user_stop")
        assert status == 200 and body["phase"] == "terminated" and body["terminationReason"] == "user_stop"
        await stream.until(state_is("TASK_STATE_CANCELED"))
        await stream.close()


async def test_the_reconnect_deadline_terminates_a_paused_execution(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    first = GateTool("first", gated=True)
    async with serving(ToolsRuntime(first), tmp_path, monkeypatch) as (server, http, client):
        stream = Stream(client.send_message(_message("slow")))
        await asyncio.wait_for(first.running.wait(), WAIT)
        running = await http.state((await stream.until(lambda e: "task" in e))["task"]["contextId"])
        status, pausing = await http.pause(running, "p-1", reconnectTimeoutSeconds=1)
        assert status == 202
        first.gate.set()
        await stream.until(phase_is("paused"))
        await stream.until(state_is("TASK_STATE_CANCELED"))  # nobody resumed within a second
        await stream.close()
        ended = await http.phase(running["contextId"], "terminated")  # written after the cancellation
        assert ended["terminationReason"] == "disconnect_timeout" and ended["expiresAt"] is None
        assert error_of(await http.resume(pausing, "r-1")) == (409, "Reconnect deadline has expired; termination was claimed")


# --------------------------------------------------------------------------- refusals


async def test_bad_requests_are_400_and_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(ToolsRuntime(), tmp_path, monkeypatch) as (server, http, client):
        [e async for e in client.send_message(_message("hi"))]
        context_id = (await client.list_tasks(ListTasksRequest())).tasks[0].context_id
        snapshot = await http.state(context_id)
        good = {"contextId": context_id, "taskId": snapshot["taskId"], "expectedExecutionId": snapshot["executionId"],
                "requestId": "p-1", "connectionEpoch": 1, "reason": "bye"}
        invalid = (400, "Invalid execution control request.")
        for body in ["not json", "[1]", "null", {**good, "contextId": "bad id"}, {**good, "contextId": "x" * 129},
                     {k: v for k, v in good.items() if k != "requestId"}, {**good, "connectionEpoch": True},
                     {**good, "connectionEpoch": "1"}, {**good, "connectionEpoch": 1.5}, {**good, "reason": ""},
                     {**good, "reason": 7}, {**good, "reconnectTimeoutSeconds": "300"},
                     {**good, "reconnectTimeoutSeconds": False}, {**good, "taskId": None}]:
            assert error_of(await http.post("/iac-code/execution/pause", body)) == invalid, body
        for raw in ("Infinity", "NaN", "-Infinity"):
            body = json.dumps(good)[:-1] + f', "reconnectTimeoutSeconds": {raw}}}'
            assert error_of(await http.post("/iac-code/execution/pause", body)) == invalid, raw
        for seconds in (0, 0.5, 3601):
            assert error_of(await http.post("/iac-code/execution/pause", {**good, "reconnectTimeoutSeconds": seconds})) \
                == (409, "reconnectTimeoutSeconds must be between 1 and 3600")
        for path, body in [("/iac-code/execution/resume", {"contextId": context_id, "executionId": "e",
                                                           "pauseId": "p", "requestId": "r"}),
                           ("/iac-code/execution/terminate", {"contextId": context_id, "requestId": "r",
                                                              "connectionEpoch": 0}),
                           ("/iac-code/execution/terminate", {"contextId": context_id, "expectedExecutionId": "e",
                                                              "requestId": "r", "connectionEpoch": 0, "reason": ""})]:
            assert error_of(await http.post(path, body)) == invalid, body
        assert error_of(await http.get("/iac-code/execution/state", {})) == invalid
        assert error_of(await http.get("/iac-code/execution/state", {"contextId": "a b"})) == invalid
        assert error_of(await http.get("/iac-code/execution/state", {"contextId": "nobody"})) == (
            404, "Execution was not found")
        assert error_of(await http.get("/iac-code/execution/state", {"contextId": context_id, "executionId": "exec-x"})) \
            == (409, "executionId does not identify the current execution")
        assert error_of(await http.get("/iac-code/execution/state", {"contextId": context_id, "pauseId": "pause-x"})) \
            == (409, "pauseId does not identify the current pause")
        assert error_of(await http.post("/iac-code/execution/pause", {**good, "expectedExecutionId": "exec-x"})) == (
            409, "Execution identity does not match the current execution")
        assert error_of(await http.post("/iac-code/execution/pause", {**good, "taskId": "another-task"})) == (
            409, "Execution identity does not match the current execution")
        assert error_of(await http.post("/iac-code/execution/terminate", {
            "contextId": context_id, "expectedExecutionId": "exec-x", "requestId": "t", "connectionEpoch": 0})) == (
            409, "Execution identity does not match the current execution")
        assert await http.state(context_id) == snapshot  # nothing changed
        assert not (server.kernel.state_dir / "execution-control").exists()

        # connectionEpoch: below the last one seen is stale.
        status, paused = await http.post("/iac-code/execution/pause", {**good, "connectionEpoch": 5})
        assert status == 200 and paused["phase"] == "paused"
        assert error_of(await http.resume(paused, "r-1", epoch=4)) == (409, "connectionEpoch is stale")
        assert error_of(await http.terminate(paused, "t-1", epoch=4)) == (409, "connectionEpoch is stale")
        assert (await http.resume(paused, "r-1", epoch=5))[0] == 200


async def test_a_failed_commit_is_reported_and_retried_by_the_same_request(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(ToolsRuntime(), tmp_path, monkeypatch) as (server, http, client):
        [e async for e in client.send_message(_message("hi"))]
        context_id = MessageToDict((await client.list_tasks(
            ListTasksRequest())).tasks[0])["contextId"]
        _, paused = await http.pause(await http.state(context_id), "p-1")
        directory = server.kernel.state_dir / "execution-control"
        held = directory.with_name("held")
        directory.rename(held)
        directory.write_text("not a directory")  # nothing can be written there now
        status, resuming = await http.resume(paused, "r-1")
        assert status == 202 and resuming["phase"] == "resuming" and resuming["commitError"] == "state_commit_failed"
        assert error_of(await http.pause(paused, "p-2")) == (409, "Execution is resuming; retry pause after it reaches running")
        assert error_of(await http.resume(paused, "r-2")) == (409, "A different resume request is already active")
        directory.unlink()
        held.rename(directory)
        status, resumed = await http.resume(paused, "r-1")  # the same request again: the commit is retried
        assert status == 200 and resumed["phase"] == "running" and resumed["commitError"] is None
        assert json.loads((directory / f"{context_id}.json").read_text())["snapshot"]["phase"] == "running"


async def test_another_owner_reads_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"token": "t-123", "basic-username": "alice", "basic-password": "pw"}
    bearer = {"Authorization": "Bearer t-123"}
    alice = {"Authorization": "Basic " + __import__("base64").b64encode(b"alice:pw").decode()}
    async with serving(ToolsRuntime(), tmp_path, monkeypatch, **settings, _headers=bearer) as (server, http, client):
        [e async for e in client.send_message(_message("hi"))]
        http.headers = bearer
        context_id = MessageToDict((await client.list_tasks(
            ListTasksRequest())).tasks[0])["contextId"]
        mine = await http.state(context_id)
        assert (await http.get("/iac-code/execution/state", {"contextId": context_id}, headers={"Authorization": ""}))[0] \
            == 401
        http.headers = alice
        assert error_of(await http.get("/iac-code/execution/state", {"contextId": context_id})) == (
            404, "Execution was not found")
        assert error_of(await http.pause(mine, "p-1")) == (404, "Execution was not found")
        assert error_of(await http.resume({**mine, "pauseId": "pause-1"}, "r-1")) == (404, "Execution was not found")
        assert error_of(await http.terminate(mine, "t-1")) == (404, "Execution was not found")
        http.headers = bearer
        assert (await http.state(context_id))["phase"] == "running"


# --------------------------------------------------------------------------- JSON-RPC methods


async def test_the_operations_are_json_rpc_methods_on_other_transports(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    socket = tmp_path / "a2a.sock"
    async with serving(ToolsRuntime(), tmp_path, monkeypatch, transport=["http", "unix"],
                       **{"socket-path": str(socket)}) as (server, http, client):
        channel = await client_transports()["unix"].connect(ClientTarget(url=f"unix://{socket}"))
        try:
            async def call(method: str, params: Any, n: int = 1) -> dict[str, Any]:
                return await channel.request({"jsonrpc": "2.0", "id": n, "method": method, "params": params},
                                             headers=A2A_HEADERS)

            sent = await call("SendMessage", {"message": {"messageId": "u-1", "role": "ROLE_USER",
                                                          "parts": [{"text": "over the socket"}]}})
            context_id = sent["result"]["task"]["contextId"]
            state = (await call("iac-code/execution/state", {"contextId": context_id}))["result"]
            assert state == await http.state(context_id)
            paused = await call("iac-code/execution/pause", {
                "contextId": context_id, "taskId": state["taskId"], "expectedExecutionId": state["executionId"],
                "requestId": "rpc-p", "connectionEpoch": 0, "reason": "socket closing"})
            assert paused["result"]["phase"] == "paused"
            refused = await call("SendMessage", {"message": {"messageId": "u-2", "role": "ROLE_USER",
                                                             "contextId": context_id, "parts": [{"text": "more"}]}})
            assert refused["error"]["code"] == -32602
            assert refused["error"]["message"] == "Current execution must finish recovery before a new task starts"
            assert (await call("iac-code/execution/pause", {"contextId": context_id}))["error"] == {
                "code": -32602, "message": "Invalid execution control request.", "data": {"httpStatus": 400}}
            assert (await call("iac-code/execution/state", {"contextId": "nobody"}))["error"] == {
                "code": -32001, "message": "Execution was not found", "data": {"httpStatus": 404}}
            stale = await call("iac-code/execution/resume", {
                "contextId": context_id, "executionId": state["executionId"], "pauseId": "pause-0",
                "requestId": "rpc-r", "connectionEpoch": 0})
            assert stale["error"] == {"code": -32602, "message": "pauseId does not identify the active pause",
                                      "data": {"httpStatus": 409}}
            resumed = await call("iac-code/execution/resume", {
                "contextId": context_id, "executionId": state["executionId"], "pauseId": paused["result"]["pauseId"],
                "requestId": "rpc-r", "connectionEpoch": 0})
            assert resumed["result"]["phase"] == "running"
            terminated = await call("iac-code/execution/terminate", {
                "contextId": context_id, "expectedExecutionId": state["executionId"], "requestId": "rpc-t",
                "connectionEpoch": 0})
            assert terminated["result"]["phase"] == "terminated"
            recovered = await call("iac-code/session/recovery", {"contextId": context_id,
                                                                 "executionId": state["executionId"]})
            assert recovered["result"]["executionControl"]["phase"] == "terminated"
            restored = await call("iac-code/session/ensure-restored", {"cwd": str(tmp_path), "sessionId": context_id})
            assert restored["result"] == {"status": "current"}
            missing = await call("iac-code/session/ensure-restored", {"cwd": str(tmp_path), "sessionId": "nobody"})
            assert missing["result"] == {"status": "not_found"}
        finally:
            await channel.aclose()


async def test_idle_executions_leave_memory_and_come_back_from_their_files(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(ToolsRuntime(), tmp_path, monkeypatch) as (server, http, client):
        written = [e async for e in client.send_message(_message("one"))][-1].status_update.context_id
        unwritten = [e async for e in client.send_message(_message("two"))][-1].status_update.context_id
        _, paused = await http.pause(await http.state(written), "p-1")
        _, resumed = await http.resume(paused, "r-1")
        before = await http.state(unwritten)
        controller = plugin.controller_for(server.kernel)
        assert controller is not None and controller.sweep(now=10.0**12) == 2
        assert await http.state(written) == {**resumed, "revision": resumed["revision"]}  # read back from its file
        assert error_of(await http.get("/iac-code/execution/state", {"contextId": unwritten})) == (
            404, "Execution was not found")  # never acknowledged anything: nothing to keep
        [e async for e in client.send_message(_message("three", context_id=written))]
        assert (await http.state(written))["executionId"] == resumed["executionId"]
        [e async for e in client.send_message(_message("four", context_id=unwritten))]
        assert (await http.state(unwritten))["executionId"] != before["executionId"]
