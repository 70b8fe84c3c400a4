"""Acknowledged means durable: kill -9 under concurrent load, restart, every acknowledged task is there.

The server runs as its own process with the default configuration (the
built-in iac-code runtime, persistence on). Clients send blocking and streaming
messages in new contexts: ``hello`` ends its turn in INPUT_REQUIRED, the VPC
request pauses for a permission answer. Once enough responses have arrived the
server is killed with SIGKILL mid-load and started again on the same state: every paused
task is still waiting for its answer (its permission wait suspended, since-0.13 §4).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp

from iac_code.base import storage
from iac_code.testing import A2A_HEADERS, send_message_body, start_server
from tests.test_crash_and_limits import rpc, server_process

STOPS = {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
         "TASK_STATE_REJECTED"}
PROMPTS = ("hello", "Create a VPC with two vSwitches.")


def _paused(task_or_event: dict[str, Any]) -> bool:
    return "input" in task_or_event.get("metadata", {}).get("iac_code", {})


class Load:
    """What the clients were told: task id -> (state, paused for a permission)."""

    def __init__(self, enough: int) -> None:
        self.acknowledged: dict[str, tuple[str, bool]] = {}
        self.enough = asyncio.Event()
        self._goal = enough

    def tell(self, task_id: str, state: str, paused: bool) -> None:
        self.acknowledged[task_id] = (state, paused)
        if len(self.acknowledged) >= self._goal:
            self.enough.set()


async def _blocking(http: aiohttp.ClientSession, url: str, load: Load, n: int) -> None:
    while True:
        body = send_message_body(PROMPTS[n % 2], message_id=uuid.uuid4().hex, contextId=uuid.uuid4().hex)
        async with http.post(url, json=body, headers=A2A_HEADERS) as r:
            task = (await r.json())["result"]["task"]
        load.tell(task["id"], task["status"]["state"], _paused(task))
        n += 1


async def _streaming(http: aiohttp.ClientSession, url: str, load: Load, n: int) -> None:
    while True:
        body = send_message_body(PROMPTS[n % 2], message_id=uuid.uuid4().hex, contextId=uuid.uuid4().hex,
                                 method="SendStreamingMessage")
        async with http.post(url, json=body, headers={**A2A_HEADERS, "Accept": "text/event-stream"}) as r:
            async for raw in r.content:
                if not raw.startswith(b"data:"):
                    continue
                result = json.loads(raw[5:])["result"]
                if "task" in result:
                    task = result["task"]
                    load.tell(task["id"], task["status"]["state"], _paused(task))
                elif "statusUpdate" in result and result["statusUpdate"]["status"]["state"] in STOPS:
                    event = result["statusUpdate"]
                    load.tell(event["taskId"], event["status"]["state"], _paused(event))
        n += 1


async def _crash_under_load(state: Path, workspace: Path, http: aiohttp.ClientSession, enough: int) -> Load:
    load = Load(enough)
    async with server_process(state, workspace) as (proc, url):
        clients = [asyncio.create_task(_blocking(http, url, load, n)) for n in range(4)]
        clients += [asyncio.create_task(_streaming(http, url, load, n)) for n in range(4)]
        try:
            await asyncio.wait_for(load.enough.wait(), 60)
            proc.kill()  # kill -9 with requests in flight
            await proc.wait()
        finally:
            for client in clients:
                client.cancel()
            await asyncio.gather(*clients, return_exceptions=True)
    return load


async def test_every_acknowledged_task_survives_kill_9(tmp_path: Path) -> None:
    state, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    async with aiohttp.ClientSession() as http:
        for trial in range(2):
            load = await _crash_under_load(state, workspace, http, enough=60 + 40 * trial)
            async with server_process(state, workspace) as (_, url):
                for task_id, (told, paused) in load.acknowledged.items():
                    reply = await rpc(http, url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                  "params": {"id": task_id}})
                    assert "result" in reply, f"acknowledged task {task_id} lost"
                    now = reply["result"]["status"]["state"]
                    assert now not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), f"task {task_id} stuck"
                    if told in STOPS and not paused:
                        assert now == told, f"task {task_id}: told {told}, restarted as {now}"
                    elif paused:  # a durable permission wait: still asking, its wait suspended
                        assert now == "TASK_STATE_INPUT_REQUIRED", f"task {task_id}: paused, restarted as {now}"
                        iac_code = reply["result"]["metadata"]["iac_code"]
                        assert iac_code["permissionWait"] == {"status": "suspended", "resumable": True}
                        assert iac_code["input"]["requestTaskId"] == task_id
                    # told SUBMITTED/WORKING: any later state, or FAILED "Task interrupted"
    assert not [p for p in state.rglob("*.tmp")]


async def test_a_stored_push_config_survives_kill_9(tmp_path: Path) -> None:
    state, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "server.yml"
    config.write_text("push-notifications: true\n")
    hook = {"id": "hook-1", "url": "https://8.8.8.8/a2a-hook", "token": "t-1"}
    async with aiohttp.ClientSession() as http:
        async with server_process(state, workspace, "--config", str(config)) as (proc, url):
            task = (await rpc(http, url, send_message_body("hello")))["result"]["task"]
            created = await rpc(http, url, {"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig",
                                            "params": {"taskId": task["id"], **hook}})
            assert created["result"]["id"] == "hook-1"
            proc.kill()  # the moment the config is acknowledged
            await proc.wait()
        async with server_process(state, workspace, "--config", str(config)) as (_, url):
            got = await rpc(http, url, {"jsonrpc": "2.0", "id": 3, "method": "GetTaskPushNotificationConfig",
                                        "params": {"taskId": task["id"], "id": "hook-1"}})
            assert got["result"]["url"] == hook["url"] and got["result"]["token"] == "t-1"
            deleted = await rpc(http, url, {"jsonrpc": "2.0", "id": 4, "method": "DeleteTaskPushNotificationConfig",
                                            "params": {"taskId": task["id"], "id": "hook-1"}})
            assert "error" not in deleted
    files = list((state / "a2a" / "push_configs").rglob("*.json"))
    assert files == []  # deleting the config removes its file


async def test_finished_tasks_leave_memory_and_are_served_from_disk() -> None:
    async with start_server({"task-cache-size": 5}) as server, aiohttp.ClientSession() as http:
        told = []
        for n in range(30):
            body = send_message_body("hello", message_id=f"m-{n}", contextId=f"ctx-{n}")
            told.append((await rpc(http, server.url, body))["result"]["task"])
        await server.kernel.writer.flush()
        # public: every task reads back whole, from its snapshot when it left the cache
        for task in told:
            got = (await rpc(http, server.url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                "params": {"id": task["id"]}}))["result"]
            assert got == task
        listed, token = [], ""
        while True:
            params: dict[str, Any] = {"pageSize": 7, **({"pageToken": token} if token else {})}
            page = (await rpc(http, server.url, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks",
                                                 "params": params}))["result"]
            listed += [t["id"] for t in page["tasks"]]
            assert page["totalSize"] == 30
            token = page["nextPageToken"]
            if not token:
                break
        assert sorted(listed) == sorted(t["id"] for t in told) and len(listed) == 30
        in_context = (await rpc(http, server.url, {"jsonrpc": "2.0", "id": 3, "method": "ListTasks",
                                                   "params": {"contextId": "ctx-3"}}))["result"]
        assert [t["id"] for t in in_context["tasks"]] == [told[3]["id"]]
        # a follow-up continues a task that had left memory
        follow = send_message_body("and a vSwitch?", message_id="m-follow", taskId=told[0]["id"])
        continued = (await rpc(http, server.url, follow))["result"]["task"]
        assert continued["id"] == told[0]["id"] and len(continued["history"]) > len(told[0]["history"])
        await server.kernel.writer.flush()
        assert server.kernel.task_store.cached() <= 5  # the bound: configuration, not history


class _HeldSnapshotWrites(ThreadPoolExecutor):
    """The event loop's default executor, holding the snapshot writer's batches until released.

    Models a disk that falls behind the requests: the task journal (and every
    other thread job) runs, only the lazy snapshot writes wait.
    """

    def __init__(self) -> None:
        super().__init__(max_workers=8)
        self.released = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        # asyncio.to_thread(f, ...) submits functools.partial(context.run, f, ...)
        if isinstance(fn, functools.partial) and fn.args and fn.args[0] is storage._write_batch:
            call, released = fn, self.released
            return super().submit(lambda: released.wait(60) and call())
        return super().submit(fn, *args, **kwargs)


async def test_unwritten_snapshots_are_bounded_when_the_disk_falls_behind() -> None:
    """Tasks and contexts whose snapshot is not yet written stay in memory: their number is bounded."""
    limit, senders, total = 8, 16, 200
    held = _HeldSnapshotWrites()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(held)
    settings = {"task-cache-size": limit, "context-cache-size": limit}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        kernel, states = server.kernel, []
        gate = asyncio.Semaphore(senders)

        async def one(n: int) -> None:
            async with gate:
                body = send_message_body("hello", message_id=f"m-{n}", contextId=f"ctx-{n}")
                states.append((await rpc(http, server.url, body))["result"]["task"]["status"]["state"])

        load = asyncio.gather(*(one(n) for n in range(total)))
        try:
            # Bounded wait: until every sender waits for the snapshot queue to shrink, or all were answered.
            deadline = loop.time() + 60
            while len(states) < total and getattr(kernel.writer, "waiting", 0) < senders:
                assert loop.time() < deadline, f"{len(states)} of {total} answered, no sender waiting"
                await asyncio.sleep(0.01)
            # Unwritten snapshots: at most task-cache-size queued plus the batch being written (at most
            # that when it started), each plus the documents of the turns let in at once.
            unwritten = 2 * (limit + 2 * senders)
            assert kernel.task_store.cached() <= limit + unwritten
            assert len(kernel.contexts) <= limit + unwritten
            assert kernel.writer.queued <= unwritten
            assert len(states) < total  # new turns wait for the disk instead of piling up in memory
        finally:
            held.released.set()
        await asyncio.wait_for(load, 120)
        assert len(states) == total and set(states) <= STOPS  # nothing lost, every turn ran
        await kernel.writer.flush()
        assert kernel.task_store.cached() <= limit and len(kernel.contexts) <= limit
