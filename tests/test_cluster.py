"""Three server processes, one service: shared state on the real Redis (``task-store: redis``).

Each node is ``iac-code a2a`` as its own process with its own persistence
directory, configured as a new user would (default runtime, default permission
rules) plus the three shared-state keys. Traffic goes round robin; permission
answers, cancels, subscriptions and follow-ups cross nodes; one node is killed
with SIGKILL while its turns wait for answers (their waits are durable: a survivor
suspends them, and an answer sent to another node resumes the turn there).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as redis

from iac_code.testing import (
    A2A_HEADERS,
    permission_answer_body,
    permission_envelope,
    redis_url,
    send_message_body,
)

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
PROMPT = "Create a VPC with two vSwitches."
LEASE_SECONDS = 3.0  # short for the kill test, long enough that a node starved of CPU by a busy CI keeps its leases


@dataclass
class Node:
    proc: asyncio.subprocess.Process
    url: str


async def _start_node(tmp_path: Path, name: str, prefix: str, workspace: Path,
                      extra: dict[str, Any], env: dict[str, str]) -> Node:
    config = tmp_path / f"{name}.yml"
    config.write_text(json.dumps({
        "task-store": "redis", "task-store-redis-url": redis_url(), "task-store-key-prefix": prefix,
        "node-id": name, "node-lease-seconds": LEASE_SECONDS, "persistence-dir": str(tmp_path / name), **extra,
    }))
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--config", str(config), "--port", "0", cwd=workspace, env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    try:
        url = await asyncio.wait_for(_listening(proc, name), 60)
    except BaseException:
        proc.kill()  # never leave a node running behind a failed start
        await proc.wait()
        raise
    asyncio.get_running_loop().create_task(_drain(proc))
    return Node(proc, url)


async def _listening(proc: asyncio.subprocess.Process, name: str) -> str:
    """The node's JSON-RPC URL, from its start-up log line."""
    assert proc.stderr is not None
    while True:
        line = (await proc.stderr.readline()).decode()
        assert line, f"node {name} exited early"
        if "listening: " in line and "(JSONRPC)" in line:
            return line.split("listening: ", 1)[1].split()[0]


async def _drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    while await proc.stderr.readline():
        pass


@asynccontextmanager
async def cluster(tmp_path: Path, count: int = 3, extra: Callable[[str], dict[str, Any]] = lambda _: {},
                  env: dict[str, str] | None = None) -> AsyncIterator[list[Node]]:
    """``count`` nodes on one key prefix; ``extra(prefix)`` adds settings to every node's config."""
    prefix = f"test-cluster-{uuid.uuid4().hex}:"
    workspace = tmp_path / "work"
    workspace.mkdir()
    started = await asyncio.gather(*(_start_node(tmp_path, f"node-{i}", prefix, workspace, extra(prefix), env or {})
                                     for i in range(count)), return_exceptions=True)
    nodes = [node for node in started if isinstance(node, Node)]
    try:
        failed = [error for error in started if isinstance(error, BaseException)]
        if failed:
            raise failed[0]
        yield nodes
    finally:
        for node in nodes:
            if node.proc.returncode is None:
                node.proc.send_signal(signal.SIGTERM)
        stuck = []
        for node in nodes:
            try:
                await asyncio.wait_for(node.proc.wait(), 30)
            except TimeoutError:
                node.proc.kill()
                await node.proc.wait()
                stuck.append(node.url)
        client = redis.Redis.from_url(redis_url())
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 500):
            await client.delete(*keys[start:start + 500])
        await client.aclose()
        assert not stuck, f"nodes that did not stop within 30 s of SIGTERM: {stuck}"


async def rpc(http: aiohttp.ClientSession, node: Node, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(node.url, json=body, headers=A2A_HEADERS) as response:
        reply = await response.json()
    assert isinstance(reply, dict)
    return reply


async def sse(http: aiohttp.ClientSession, node: Node, body: dict[str, Any],
              headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A stream's results, each with its SSE id under ``"_id"``."""
    async with http.post(node.url, json=body, headers={**A2A_HEADERS, **(headers or {})}) as response:
        text = await response.text()
    results: list[dict[str, Any]] = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        event_id = None
        for line in frame.split("\n"):
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert "result" in data, data
                results.append({**data["result"], "_id": event_id})
    return results


def method(name: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": name, "method": name, "params": params}


def payload(result: dict[str, Any]) -> dict[str, Any]:
    return next(v for k, v in result.items() if k != "_id")


async def until(condition: Callable[[], Awaitable[bool]], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def finish_turn(http: aiohttp.ClientSession, nodes: list[Node], task: dict[str, Any], start: int) -> dict[str, Any]:
    """Answer allow to every permission question of the turn, each through the next node round robin."""
    turn = start
    while (envelope := permission_envelope(task)) is not None:
        turn += 1
        reply = await rpc(http, nodes[turn % len(nodes)], permission_answer_body(envelope, message_id=f"a-{uuid.uuid4()}"))
        assert "result" in reply, reply
        task = reply["result"]["task"]
    return task


async def _at_least(items: list[Any], count: int) -> bool:
    return len(items) >= count


async def all_pages(http: aiohttp.ClientSession, node: Node, size: int) -> list[dict[str, Any]]:
    pages, token = [], ""
    while True:
        reply = await rpc(http, node, method("ListTasks", pageSize=size, pageToken=token))
        pages.append(reply["result"])
        token = reply["result"]["nextPageToken"]
        if not token:
            return pages


async def test_three_nodes_serve_one_service(tmp_path: Path) -> None:
    async with cluster(tmp_path) as nodes, aiohttp.ClientSession() as http:
        # Round robin: nine turns at once, each pausing for its permission answer.
        sent = await asyncio.gather(*(rpc(http, nodes[i % 3], send_message_body(
            PROMPT, message_id=f"m-{i}", contextId=f"ctx-{i}")) for i in range(9)))
        paused = [reply["result"]["task"] for reply in sent]
        assert all(permission_envelope(task) is not None for task in paused)
        # Every answer reaches another node than the one running the turn.
        done = await asyncio.gather(*(finish_turn(http, nodes, task, i) for i, task in enumerate(paused)))
        assert all(t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and permission_envelope(t) is None
                   for t in done)
        for task in done:
            views = [(await rpc(http, node, method("GetTask", id=task["id"])))["result"] for node in nodes]
            assert views[0] == views[1] == views[2]
            assert views[0]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # ListTasks: the same pages from every node, and one node's page token works on another.
        listings = [await all_pages(http, node, 4) for node in nodes]
        assert listings[0] == listings[1] == listings[2]
        assert len(listings[0]) == 3 and listings[0][0]["totalSize"] == 9
        second = await rpc(http, nodes[2], method("ListTasks", pageSize=4, pageToken=listings[0][0]["nextPageToken"]))
        assert second["result"] == listings[1][1]
        # A follow-up in a context whose last turn ran on node 0, sent to node 2.
        first = done[0]
        follow = await rpc(http, nodes[2], send_message_body("Add a security group that allows SSH.",
                                                             message_id="m-follow", taskId=first["id"],
                                                             contextId=first["contextId"]))
        assert "result" in follow, follow
        followed = await finish_turn(http, nodes, follow["result"]["task"], 2)
        texts = [p.get("text") for m in followed["history"] if m["role"] == "ROLE_USER" for p in m["parts"]]
        assert PROMPT in texts and "Add a security group that allows SSH." in texts

        # The context's workspace binding is shared: another cwd for it is refused on another node.
        first_dir, other_dir = tmp_path / "ws-a", tmp_path / "ws-b"
        first_dir.mkdir()
        other_dir.mkdir()
        bound = send_message_body("hello", message_id="m-ws-1", contextId="ctx-ws")
        bound["params"]["message"]["metadata"] = {"iac_code": {"cwd": str(first_dir)}}
        assert "result" in await rpc(http, nodes[0], bound)
        moved = send_message_body("hello", message_id="m-ws-2", contextId="ctx-ws")
        moved["params"]["message"]["metadata"] = {"iac_code": {"cwd": str(other_dir)}}
        refused = await rpc(http, nodes[1], moved)
        assert (refused["error"]["code"], refused["error"]["message"]) == (
            -32602, "A2A context belongs to a different workspace.")

        # A streamed turn on node 0; node 1 resumes it after each event: exactly the rest, no gap or duplicate.
        events = await sse(http, nodes[0], send_message_body(PROMPT, message_id="m-stream", contextId="ctx-stream",
                                                              method="SendStreamingMessage"))
        ids = [int(e["_id"]) for e in events]
        assert ids == sorted(set(ids))
        task_id = payload(events[0])["id"]
        for cut in (0, len(events) // 2, len(events) - 2):
            resumed = await sse(http, nodes[1], method("SubscribeToTask", id=task_id),
                                {"Last-Event-ID": str(ids[cut])})
            assert resumed == events[cut + 1:], f"resumed after {ids[cut]}"
        # The answer streamed through node 2 while the turn runs on node 0; node 1 replays it afterwards.
        envelope = permission_envelope(payload(events[-1]))
        assert envelope is not None
        continuation = await sse(http, nodes[2], permission_answer_body(envelope, method="SendStreamingMessage"))
        assert payload(continuation[0])["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        new = [e for e in continuation[1:]]
        assert new and int(new[0]["_id"]) > ids[-1]
        replayed = await sse(http, nodes[1], method("SubscribeToTask", id=task_id), {"Last-Event-ID": str(ids[-1])})
        assert [e for e in replayed] == new[:len(replayed)] and len(replayed) >= 1

        # returnImmediately through node 1 for a turn paused on node 0: the acknowledgement at once.
        target = (await rpc(http, nodes[0], send_message_body(PROMPT, message_id="m-ack",
                                                               contextId="ctx-ack")))["result"]["task"]
        envelope = permission_envelope(target)
        assert envelope is not None
        body = permission_answer_body(envelope, message_id="a-ack")
        body["params"]["configuration"] = {"returnImmediately": True}
        ack = (await rpc(http, nodes[1], body))["result"]["message"]
        assert ack["taskId"] == target["id"] and ack["parts"][0]["data"]["kind"] == "permission_ack"

        async def answered() -> bool:
            seen = (await rpc(http, nodes[2], method("GetTask", id=target["id"])))["result"]
            return permission_envelope(seen) is None and seen["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        await until(answered)

        # Cancel on node 1 a turn paused on node 0.
        target = (await rpc(http, nodes[0], send_message_body(PROMPT, message_id="m-cancel",
                                                               contextId="ctx-cancel")))["result"]["task"]
        canceled = await rpc(http, nodes[1], method("CancelTask", id=target["id"]))
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
        seen = (await rpc(http, nodes[2], method("GetTask", id=target["id"])))["result"]
        assert seen["status"]["state"] == "TASK_STATE_CANCELED"
        again = await rpc(http, nodes[2], method("CancelTask", id=target["id"]))
        assert again["error"]["code"] == -32002

        # Subscribing on node 2 to the turn paused on node 0: the paused task, then the stream ends.
        target = (await rpc(http, nodes[0], send_message_body(PROMPT, message_id="m-sub",
                                                               contextId="ctx-sub")))["result"]["task"]
        snapshot = await sse(http, nodes[2], method("SubscribeToTask", id=target["id"]))
        assert len(snapshot) == 1 and payload(snapshot[0])["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # A second message to the task paused for permission, through another node, is refused like on one
        # node: -32602 saying how to answer.
        busy = await rpc(http, nodes[1], send_message_body("more", message_id="m-busy", taskId=target["id"],
                                                            contextId="ctx-sub"))
        here = await rpc(http, nodes[0], send_message_body("more", message_id="m-busy-0", taskId=target["id"],
                                                            contextId="ctx-sub"))
        for reply in (busy, here):
            assert reply["error"]["code"] == -32602
            assert reply["error"]["message"].startswith(f"Task {target['id']} is waiting for a permission answer.")


async def test_a_node_killed_mid_turn(tmp_path: Path) -> None:
    async with cluster(tmp_path) as nodes, aiohttp.ClientSession() as http:
        victim, survivor, other = nodes
        on_victim = [(await rpc(http, victim, send_message_body(PROMPT, message_id=f"v-{i}", contextId=f"dead-{i}"))
                      )["result"]["task"] for i in range(3)]
        elsewhere = (await rpc(http, survivor, send_message_body(PROMPT, message_id="s-0", contextId="alive")
                               ))["result"]["task"]
        # Another node replays the victim's turn from its start, up to the pause.
        before = await sse(http, other, method("SubscribeToTask", id=on_victim[0]["id"]), {"Last-Event-ID": "0"})
        assert payload(before[0])["id"] == on_victim[0]["id"]
        assert permission_envelope(payload(before[-1])) is not None
        # Traffic round robin over all three while the victim dies: what was acknowledged must survive.
        acknowledged: list[dict[str, Any]] = []
        stop = asyncio.Event()

        async def traffic(worker: int) -> None:
            sent = 0
            while not stop.is_set():
                node = nodes[(worker + sent) % 3]
                sent += 1
                try:
                    reply = await rpc(http, node, send_message_body(
                        PROMPT if sent % 2 else "hello", message_id=f"t-{worker}-{sent}",
                        contextId=f"traffic-{worker}-{sent}"))
                except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
                    continue  # the victim's connections die with it: never acknowledged
                if "result" in reply:
                    acknowledged.append(reply["result"]["task"])

        workers = [asyncio.create_task(traffic(w)) for w in range(6)]
        await until(lambda: _at_least(acknowledged, 12))
        victim.proc.send_signal(signal.SIGKILL)
        await victim.proc.wait()
        count = len(acknowledged)
        await until(lambda: _at_least(acknowledged, count + 12))  # the survivors keep serving
        stop.set()
        await asyncio.gather(*workers)

        async def suspended() -> bool:
            for task in on_victim:
                seen = (await rpc(http, survivor, method("GetTask", id=task["id"])))["result"]
                if seen["metadata"]["iac_code"].get("permissionWait", {}).get("status") != "suspended":
                    return False
            return True

        await until(suspended, LEASE_SECONDS * 6)
        for task in on_victim:
            for node in (survivor, other):
                seen = (await rpc(http, node, method("GetTask", id=task["id"])))["result"]
                assert seen["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                assert seen["metadata"]["iac_code"]["permissionWait"] == {"status": "suspended", "resumable": True}
                assert permission_envelope(seen) == permission_envelope(task)
        # Resuming the stream after the pause: exactly one more event, the suspension a survivor wrote.
        after = await sse(http, other, method("SubscribeToTask", id=on_victim[0]["id"]),
                          {"Last-Event-ID": before[-1]["_id"]})
        assert len(after) == 1 and int(after[0]["_id"]) > int(before[-1]["_id"])
        assert payload(after[0])["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # A late answer, sent to another node, resumes the dead node's turn there (since-0.13 §4.3).
        envelope = permission_envelope(on_victim[1])
        assert envelope is not None
        late = await rpc(http, other, permission_answer_body(envelope, message_id="late"))
        resumed = late["result"]["task"]
        assert resumed["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", late
        assert resumed["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        acks = [p["data"] for m in resumed["history"] for p in m["parts"]
                if p.get("data", {}).get("kind") == "permission_ack"]
        assert [(a["inputId"], a["decision"]) for a in acks] == [(envelope["inputId"], "allow_once")]
        repeated = await rpc(http, survivor, permission_answer_body(envelope, message_id="late-again"))
        assert repeated["result"]["message"]["parts"][0]["data"]["duplicate"] is True
        again = await rpc(http, other, send_message_body(PROMPT, message_id="v-again", contextId="dead-1"))
        assert "result" in again, again
        # The survivor's own turn is untouched and is answered through the third node.
        finished = await finish_turn(http, [survivor, other], elsewhere, 0)
        assert finished["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # Nothing acknowledged is lost and nothing stays WORKING; both survivors list the same tasks.
        async def none_running() -> bool:
            pages = await all_pages(http, other, 50)
            return not [t for page in pages for t in page["tasks"]
                        if t["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED")]

        await until(none_running, LEASE_SECONDS * 6)
        listings = [await all_pages(http, node, 50) for node in (survivor, other)]
        assert listings[0] == listings[1]
        listed = {t["id"]: t for page in listings[0] for t in page["tasks"]}
        assert {t["id"] for t in [*on_victim, elsewhere, *acknowledged]} <= set(listed)
        for task in acknowledged:  # each in the state it was acknowledged in, or interrupted after it
            state = listed[task["id"]]["status"]["state"]
            assert state == task["status"]["state"] or (
                state == "TASK_STATE_FAILED" and listed[task["id"]]["metadata"]["iac_code"]["interrupted"])
        assert not [t for t in listed.values()
                    if t["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED")]
        # A node stopped cleanly suspends its own paused turn before it leaves: no lease wait.
        last = (await rpc(http, survivor, send_message_body(PROMPT, message_id="s-1", contextId="stopping")
                          ))["result"]["task"]
        survivor.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(survivor.proc.wait(), 30)
        seen = (await rpc(http, other, method("GetTask", id=last["id"])))["result"]
        assert seen["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert seen["metadata"]["iac_code"]["permissionWait"] == {"status": "suspended", "resumable": True}


async def test_redis_down_is_a_clear_error_and_acknowledged_state_survives_it(tmp_path: Path, caplog: Any) -> None:
    """Redis killed with SIGKILL (AOF, appendfsync always) under a running node, then restarted."""
    from iac_code.testing import free_port, start_redis_server, start_server

    port, password = free_port(), "s3cret-pass"
    redis_dir = tmp_path / "redis"
    server = start_redis_server(port, redis_dir, password=password)
    settings = {"task-store": "redis", "task-store-redis-url": f"redis://:{password}@127.0.0.1:{port}/0",
                "node-lease-seconds": LEASE_SECONDS}
    try:
        async with start_server(settings) as node, aiohttp.ClientSession() as http:
            here = Node(None, node.url)  # type: ignore[arg-type]
            done = (await rpc(http, here, send_message_body("hello", message_id="m-1")))["result"]["task"]
            server.kill()
            server.wait()
            replies = [await rpc(http, here, method("GetTask", id=done["id"])),
                       await rpc(http, here, method("ListTasks")),
                       await rpc(http, here, send_message_body("hello", message_id="m-2"))]
            for reply in replies:
                assert reply["error"]["code"] == -32603, reply
                assert reply["error"]["message"] in ("The task store is not reachable. Retry shortly.",
                                                     "The task could not be stored durably; its state is not "
                                                     "guaranteed to survive a restart."), reply
            server = start_redis_server(port, redis_dir, password=password)

            async def back() -> bool:
                return "result" in await rpc(http, here, method("GetTask", id=done["id"]))

            await until(back)
            task = (await rpc(http, here, method("GetTask", id=done["id"])))["result"]
            assert task == done
        leaked = [r.getMessage() for r in caplog.records if password in r.getMessage() or str(port) in r.getMessage()]
        assert leaked == []
        assert password not in json.dumps(replies) and str(port) not in json.dumps(replies)
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("delivery", ["server", "external"])
async def test_push_notifications_are_shared_and_sent_once(tmp_path: Path, delivery: str) -> None:
    """Configs stored through one node, turns on others, one Redis Streams queue: each event pushed once.

    ``external``: the nodes only enqueue; one ``iac-code a2a push-worker`` delivers.
    """
    from cryptography.fernet import Fernet

    from tests.test_push_delivery import receiver

    keyring = json.dumps({"keys": [{"id": "k1", "fernetKey": Fernet.generate_key().decode()}], "activeKeyId": "k1"})

    def push(prefix: str) -> dict[str, Any]:
        return {"push-notifications": True, "push-allowed-hosts": ["127.0.0.1"], "push-queue": "redis-streams",
                "push-redis-url": redis_url(), "push-stream": f"{prefix}push", "push-retry-key": f"{prefix}retry",
                "push-dead-stream": f"{prefix}dead", "push-consumer-group": f"{prefix}group",
                "push-retry-base-delay": 0.05, "push-retry-max-delay": 0.2, "push-delivery": delivery}

    token = "push-token-" + uuid.uuid4().hex
    async with receiver() as hook, cluster(tmp_path, extra=push, env={"IAC_CODE_A2A_PUSH_KEYRING": keyring}) as nodes, \
            aiohttp.ClientSession() as http:
        worker = await _push_worker(tmp_path / "node-0.yml", keyring) if delivery == "external" else None
        body = send_message_body(PROMPT, message_id="m-push", contextId="ctx-push")
        body["params"]["configuration"] = {"taskPushNotificationConfig": {"url": hook.url, "token": token, "id": "c1"}}
        task = (await rpc(http, nodes[0], body))["result"]["task"]
        # The config, stored through node 0, is read and listed on node 1 (shared and decrypted there).
        listed = await rpc(http, nodes[1], method("ListTaskPushNotificationConfigs", taskId=task["id"]))
        assert [c["id"] for c in listed["result"]["configs"]] == ["c1"]
        assert (await rpc(http, nodes[2], method("GetTaskPushNotificationConfig", taskId=task["id"], id="c1"))
                )["result"]["url"] == hook.url
        first = await hook.wait_for(1)  # the pause (input-required), pushed by node 0
        done = await finish_turn(http, nodes, task, 0)  # answered on node 1: the turn goes on on node 0
        assert done["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        got = await hook.wait_for(len(first) + 1)
        keys = [r.headers["Idempotency-Key"] for r in got]
        assert len(set(keys)) == len(keys), "an event was pushed twice"
        assert all(r.headers.get("X-A2A-Notification-Token") == token for r in got)
        assert {r.body["statusUpdate"]["taskId"] for r in got} == {task["id"]}
        # No clear-text token anywhere under the prefix in Redis.
        client = redis.Redis.from_url(redis_url())
        try:
            found = [key async for key in client.scan_iter(match="test-cluster-*", count=1000)
                     if token.encode() in (await client.dump(key) or b"")]
            assert found == []
        finally:
            await client.aclose()
            if worker is not None:
                worker.send_signal(signal.SIGTERM)
                await asyncio.wait_for(worker.wait(), 30)


async def _push_worker(config: Path, keyring: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "push-worker", "--config", str(config), env={**os.environ, "IAC_CODE_A2A_PUSH_KEYRING": keyring},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "push worker exited early"
        if "push worker delivering" in line:
            asyncio.get_running_loop().create_task(_drain(proc))
            return proc


async def _all(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


async def test_a2a_sdk_clients_on_different_nodes(tmp_path: Path) -> None:
    """a2a-sdk's own client, unchanged: a streamed turn on one node, answered, read and listed on others."""
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import (
        GetTaskRequest,
        ListTasksRequest,
        Message,
        Part,
        Role,
        SendMessageRequest,
        SubscribeToTaskRequest,
        TaskState,
    )
    from google.protobuf.json_format import MessageToDict

    from iac_code.testing import permission_answer_request

    async with cluster(tmp_path) as nodes, httpx.AsyncClient() as http:
        factory = ClientFactory(ClientConfig(streaming=True, httpx_client=http))
        clients = [await factory.create_from_url(node.url) for node in nodes]
        try:
            request = SendMessageRequest(message=Message(message_id="m-sdk", role=Role.ROLE_USER,
                                                         parts=[Part(text=PROMPT)]))
            events = [e async for e in clients[0].send_message(request)]
            task_id = events[0].task.id
            paused = events[-1].status_update
            assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            # Subscribing on node 1 to the turn paused on node 0: the paused task.
            [snapshot] = [e async for e in clients[1].subscribe(SubscribeToTaskRequest(id=task_id))]
            assert snapshot.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            # The answer through node 2 streams the turn's continuation from node 0.
            envelope = MessageToDict(paused.metadata)["iac_code"]["input"]
            rest = [e async for e in clients[2].send_message(permission_answer_request(envelope))]
            states = [e.status_update.status.state for e in rest if e.HasField("status_update")]
            assert states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED and TaskState.TASK_STATE_WORKING in states
            task = await clients[1].get_task(GetTaskRequest(id=task_id))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            listed = [await c.list_tasks(ListTasksRequest()) for c in clients]
            assert [t.id for t in listed[0].tasks] == [task_id]
            assert listed[0] == listed[1] == listed[2]
            # The turn is over: a subscription on node 1 gets the task, then the next turn, run on node 2, to its end.
            stream = clients[1].subscribe(SubscribeToTaskRequest(id=task_id))
            first = await asyncio.wait_for(anext(stream), 15)
            assert first.task.id == task_id and first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            followed = asyncio.ensure_future(asyncio.wait_for(_all(stream), 30))
            follow_up = SendMessageRequest(message=Message(message_id="m-sdk-2", role=Role.ROLE_USER, task_id=task_id,
                                                           parts=[Part(text="hello")]))
            [e async for e in clients[2].send_message(follow_up)]
            states = [e.status_update.status.state for e in await followed if e.HasField("status_update")]
            assert states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED and TaskState.TASK_STATE_WORKING in states
        finally:
            for client in clients:
                await client.close()


async def test_text_answers_and_refusals_cross_nodes(tmp_path: Path) -> None:
    """A turn paused on node 0: other text and a message without taskId on its context are -32602 on every
    node, naming the task; a text ``allow`` through node 1 resumes it on node 0."""
    async with cluster(tmp_path, count=2) as nodes, aiohttp.ClientSession() as http:
        paused = (await rpc(http, nodes[0], send_message_body(PROMPT, message_id="m-0", contextId="ctx-text")))
        task = paused["result"]["task"]
        assert permission_envelope(task) is not None
        assert task["status"]["message"]["parts"][0]["text"].endswith("or `deny`.")
        for node in nodes:
            other = await rpc(http, node, send_message_body("how much?", message_id=f"o-{uuid.uuid4()}",
                                                           taskId=task["id"]))
            busy = await rpc(http, node, send_message_body("hello", message_id=f"c-{uuid.uuid4()}",
                                                          contextId="ctx-text"))
            for reply in (other, busy):
                assert reply["error"]["code"] == -32602 and task["id"] in reply["error"]["message"], reply
        done = await rpc(http, nodes[1], send_message_body("allow", message_id="m-allow", taskId=task["id"]))
        final = done["result"]["task"]
        assert final["id"] == task["id"] and permission_envelope(final) is None
        assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert "template.ros.yaml" in final["status"]["message"]["parts"][0]["text"]


async def test_an_sdk_executor_on_several_nodes(tmp_path: Path) -> None:
    """An a2a-sdk ``AgentExecutor`` (no iac-code contexts): its turns are found, followed and reaped across nodes."""
    from iac_code.testing import next_sse_data

    def sdk_agent(_: str) -> dict[str, Any]:
        return {"agent-executor": "tests.byo_agent:WaitingExecutor"}

    root = str(Path(__file__).resolve().parents[1])
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH", "")]))}
    async with cluster(tmp_path, extra=sdk_agent, env=env) as nodes, aiohttp.ClientSession() as http:
        def waiting(message_id: str) -> dict[str, Any]:
            body = send_message_body("wait", message_id=message_id)
            body["params"]["configuration"] = {"returnImmediately": True}
            return body

        # A turn working on node 0, followed live on node 1 and canceled through node 2.
        working = (await rpc(http, nodes[0], waiting("m-wait")))["result"]["task"]
        async with http.post(nodes[1].url, json=method("SubscribeToTask", id=working["id"]),
                             headers=A2A_HEADERS) as stream:
            opened = (await next_sse_data(stream.content))["result"]["task"]
            assert opened["id"] == working["id"]
            assert opened["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
            canceled = await rpc(http, nodes[2], method("CancelTask", id=working["id"]))
            assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
            states = []
            while "TASK_STATE_CANCELED" not in states:
                update = (await next_sse_data(stream.content))["result"]
                states.append(payload(update)["status"]["state"])
            with pytest.raises(EOFError):  # a terminal state ends the stream
                await next_sse_data(stream.content)
        seen = (await rpc(http, nodes[1], method("GetTask", id=working["id"])))["result"]
        assert seen["status"]["state"] == "TASK_STATE_CANCELED"

        # A task waiting for input (its turn over) is followed on node 2 into its next turn, run on node 0.
        paused = (await rpc(http, nodes[0], send_message_body("more?", message_id="m-more")))["result"]["task"]
        assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        async with http.post(nodes[2].url, json=method("SubscribeToTask", id=paused["id"]),
                             headers=A2A_HEADERS) as stream:
            assert (await next_sse_data(stream.content))["result"]["task"]["status"]["state"] == \
                "TASK_STATE_INPUT_REQUIRED"
            done = await rpc(http, nodes[0], send_message_body("done", message_id="m-done", taskId=paused["id"]))
            assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
            followed = []
            while not followed or payload(followed[-1]).get("status", {}).get("state") != "TASK_STATE_COMPLETED":
                followed.append((await next_sse_data(stream.content))["result"])
            assert any("artifactUpdate" in event for event in followed)

        # A node killed mid-turn: a survivor marks its SDK turn interrupted; nothing stays WORKING.
        victim = nodes[1]
        cut = (await rpc(http, victim, waiting("m-cut")))["result"]["task"]
        victim.proc.send_signal(signal.SIGKILL)
        await victim.proc.wait()

        async def interrupted() -> bool:
            seen = (await rpc(http, nodes[2], method("GetTask", id=cut["id"])))["result"]
            return seen["status"]["state"] == "TASK_STATE_FAILED"

        await until(interrupted, LEASE_SECONDS * 6)
        seen = (await rpc(http, nodes[0], method("GetTask", id=cut["id"])))["result"]
        assert seen["metadata"]["iac_code"]["interrupted"] is True
        listed = await all_pages(http, nodes[0], 50)
        assert not [t for page in listed for t in page["tasks"]
                    if t["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED")]
