"""The Redis Streams transport against a real Redis and in-process servers (no mocks)."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sys
import time
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part
from iac_code_transport_redis.client import RedisStreamsClient
from iac_code_transport_redis.plugin import MISSING_URL
from iac_code_transport_redis.server import interface_url

from iac_code.api import CallInfo, StartupError
from iac_code.testing import (
    RunningServer,
    free_port,
    permission_envelope,
    redis_url,
    send_message_body,
    start_redis_server,
    start_server,
)

V1 = {"A2A-Version": "1.0"}
VPC_PROMPT = "Create a VPC with two vSwitches."
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"


class SlowExecutor(AgentExecutor):
    """Starts work, waits a second and a half, then completes: a long stream."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await asyncio.sleep(1.5)
        await updater.complete(updater.new_agent_message([Part(text="done")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


# ``agent-executor`` imports by module name; this test module's name depends on the import mode.
_AGENTS = types.ModuleType("iac_code_transport_redis_test_agents")
_AGENTS.SlowExecutor = SlowExecutor  # type: ignore[attr-defined]
sys.modules[_AGENTS.__name__] = _AGENTS


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A unique key prefix; every key under it is deleted afterwards."""
    name = f"iac-test:redis-transport:{secrets.token_hex(5)}"
    yield name
    client = aioredis.Redis.from_url(redis_url())
    try:
        keys = [key async for key in client.scan_iter(match=f"{name}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def settings(prefix: str, url: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"transport": ["redis-streams"], "redis-url": url or redis_url(), "request-stream": f"{prefix}:req",
            "response-stream": f"{prefix}:resp", "consumer-group": f"{prefix}:g", **extra}


@asynccontextmanager
async def client_for(prefix: str, url: str | None = None, **kwargs: Any) -> AsyncIterator[RedisStreamsClient]:
    client = RedisStreamsClient(url or redis_url(), request_stream=f"{prefix}:req", response_stream=f"{prefix}:resp",
                                **kwargs)
    try:
        yield client
    finally:
        await client.aclose()


def rpc(method: str, params: dict[str, Any], request_id: str | int = "1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def collect(stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event async for event in stream]


async def raw_replies(url: str, stream: str, correlations: set[str], timeout: float = 10) -> dict[str, dict[str, Any]]:
    """Read ``stream`` (a test-only stream, from its start) until every correlation id has a final entry."""
    client = aioredis.Redis.from_url(url)
    found: dict[str, dict[str, Any]] = {}
    position = "0-0"
    deadline = time.monotonic() + timeout
    try:
        while set(found) != correlations and time.monotonic() < deadline:
            reply = await client.xread({stream: position}, block=200)
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    position = entry_id.decode()
                    if fields[b"final"] == b"true":
                        found[fields[b"correlation_id"].decode()] = json.loads(fields[b"payload"])
    finally:
        await client.aclose()
    return found


async def tasks_of(server: RunningServer) -> list[dict[str, Any]]:
    assert server.kernel.dispatcher is not None
    reply = await server.kernel.dispatcher.dispatch(rpc("ListTasks", {}), CallInfo(headers={"a2a-version": "1.0"}))
    assert isinstance(reply, dict)
    return list(reply["result"].get("tasks", []))


# --------------------------------------------------------------------------- the A2A methods


async def test_send_get_list_cancel_and_card(prefix: str) -> None:
    async with start_server(settings(prefix)) as server, client_for(prefix) as client:
        [interface] = server.kernel.interfaces
        assert interface.protocol_binding == "redis-streams"
        assert interface.url == interface_url(redis_url(), f"{prefix}:req") == server.url
        assert server.url.startswith("redis-streams://127.0.0.1:") and server.url.endswith(f"/15/{prefix}:req")

        reply = await client.request(send_message_body("hello"), headers=V1)
        task = reply["result"]["task"]
        assert reply["id"] == "1" and task["status"]["state"] == INPUT_REQUIRED

        got = await client.request(rpc("GetTask", {"id": task["id"]}, 2), headers=V1)
        assert got["id"] == 2 and got["result"]["id"] == task["id"]
        listed = await client.request(rpc("ListTasks", {}), headers=V1)
        assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
        missing = await client.request(rpc("GetTask", {"id": "no-such-task"}), headers=V1)
        assert missing["error"]["code"] == -32001

        paused = (await client.request(send_message_body(VPC_PROMPT, message_id="m-vpc", contextId="ctx-vpc"),
                                       headers=V1))["result"]["task"]
        assert permission_envelope(paused) is not None
        canceled = await client.request(rpc("CancelTask", {"id": paused["id"]}), headers=V1)
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_stream_subscribe_and_stream_errors(prefix: str) -> None:
    async with start_server(settings(prefix)) as server, client_for(prefix) as client:
        events = await collect(client.stream(send_message_body("hello", method="SendStreamingMessage"), headers=V1))
        assert "task" in events[0]["result"]
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED
        assert all(e["id"] == "1" and "result" in e for e in events)  # the terminator is not yielded

        paused = (await client.request(send_message_body(VPC_PROMPT, message_id="m-vpc", contextId="ctx-vpc"),
                                       headers=V1))["result"]["task"]
        events = await collect(client.stream(rpc("SubscribeToTask", {"id": paused["id"]}), headers=V1))
        assert [e["result"]["task"]["status"]["state"] for e in events] == [INPUT_REQUIRED]

        # An error before the first event is the one (final) entry, and it is yielded.
        events = await collect(client.stream(rpc("SubscribeToTask", {"id": "no-such-task"}, "s"), headers=V1))
        assert len(events) == 1 and events[0]["id"] == "s" and events[0]["error"]["code"] == -32001
        assert server.kernel.dispatcher is not None


async def test_concurrent_requests_from_one_client(prefix: str) -> None:
    async with start_server(settings(prefix)) as server, client_for(prefix) as client:
        task = (await client.request(send_message_body("hello"), headers=V1))["result"]["task"]
        calls = [client.request(rpc("GetTask", {"id": task["id"]}, n), headers=V1) for n in range(25)]
        calls += [client.request(send_message_body("hello", message_id=f"m-{n}", request_id=f"s-{n}"), headers=V1)
                  for n in range(25)]
        replies = await asyncio.gather(*calls)
        assert [r["id"] for r in replies] == list(range(25)) + [f"s-{n}" for n in range(25)]
        assert all(r["result"]["id"] == task["id"] for r in replies[:25])
        assert all(r["result"]["task"]["status"]["state"] == INPUT_REQUIRED for r in replies[25:])
        assert len(await tasks_of(server)) == 26


async def test_a_long_stream_does_not_block_other_requests(prefix: str) -> None:
    agent = settings(prefix, **{"agent-executor": f"{_AGENTS.__name__}:SlowExecutor"})
    async with start_server(agent), client_for(prefix) as client:
        stream = client.stream(send_message_body("slow", method="SendStreamingMessage"), headers=V1)
        first = await anext(stream)
        task_id = first["result"]["task"]["id"]
        started = time.monotonic()
        got = await client.request(rpc("GetTask", {"id": task_id}, "g"), headers=V1)
        assert got["result"]["status"]["state"] == "TASK_STATE_WORKING"
        assert time.monotonic() - started < 1.0  # served while the stream is still open
        rest = await collect(stream)
        assert rest[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_two_servers_share_one_request_stream(prefix: str) -> None:
    shared = settings(prefix, **{"redis-concurrency": 2})
    async with start_server(shared) as one, start_server(shared) as two, client_for(prefix) as client:
        replies = await asyncio.gather(*(
            client.request(send_message_body("hello", message_id=f"m-{n}", request_id=n), headers=V1)
            for n in range(30)))
        assert sorted(r["id"] for r in replies) == list(range(30))
        served = (len(await tasks_of(one)), len(await tasks_of(two)))
        assert sum(served) == 30 and min(served) > 0, served


# --------------------------------------------------------------------------- robustness


async def test_malformed_entries_get_errors_and_the_server_keeps_serving(prefix: str) -> None:
    url = redis_url()
    reply_stream = f"{prefix}:raw-replies"
    async with start_server(settings(prefix, **{"max-request-bytes": 2000})), client_for(prefix) as client:
        raw = aioredis.Redis.from_url(url)
        try:
            entries = {
                "bad-json": {"payload": "{not json"},
                "no-payload": {},
                "not-object": {"payload": "42"},
                "batch": {"payload": "[1, 2]"},
                "too-large": {"payload": json.dumps(send_message_body("x" * 5000))},
                "bad-headers": {"payload": json.dumps(rpc("GetTask", {"id": "t"}, 7)), "headers": "[1]"},
            }
            await raw.xadd(f"{prefix}:req", {"payload": "{}", "reply_stream": reply_stream})  # no correlation id
            await raw.xadd(f"{prefix}:req", {"correlation_id": "loop", "payload": "{}", "reply_stream": f"{prefix}:req"})
            for correlation, fields in entries.items():
                await raw.xadd(f"{prefix}:req", {"correlation_id": correlation, "reply_stream": reply_stream, **fields})
            found = await raw_replies(url, reply_stream, set(entries))
        finally:
            await raw.aclose()
        assert found["bad-json"]["error"]["code"] == -32700
        assert found["no-payload"]["error"] == {"code": -32600, "message": "Invalid request: the entry has no 'payload' field"}
        assert found["not-object"]["error"]["code"] == -32600
        assert found["batch"]["error"]["code"] == -32600
        assert found["too-large"]["error"] == {"code": -32600, "message": "Request payload too large"}
        assert found["bad-headers"]["id"] == 7 and found["bad-headers"]["error"]["code"] == -32600

        reply = await client.request(send_message_body("hello"), headers=V1)
        assert reply["result"]["task"]["status"]["state"] == INPUT_REQUIRED
        raw = aioredis.Redis.from_url(url)
        try:
            assert await raw.xlen(f"{prefix}:req") == 0  # every handled entry, the dropped one too, is deleted
        finally:
            await raw.aclose()


async def test_a_request_held_by_a_dead_consumer_is_served_after_the_lease(prefix: str) -> None:
    url = redis_url()
    raw = aioredis.Redis.from_url(url)
    reply_stream = f"{prefix}:raw-replies"
    try:
        await raw.xgroup_create(f"{prefix}:req", f"{prefix}:g", id="0-0", mkstream=True)
        await raw.xadd(f"{prefix}:req", {"correlation_id": "orphan", "reply_stream": reply_stream,
                                        "payload": json.dumps(send_message_body("hello")), "headers": json.dumps(V1)})
        taken = await raw.xreadgroup(f"{prefix}:g", "dead-consumer", {f"{prefix}:req": ">"}, count=10)
        assert len(taken[0][1]) == 1
        async with start_server(settings(prefix, **{"redis-lease-timeout-ms": 300})):
            found = await raw_replies(url, reply_stream, {"orphan"})
            assert found["orphan"]["result"]["task"]["status"]["state"] == INPUT_REQUIRED
            assert (await raw.xpending(f"{prefix}:req", f"{prefix}:g"))["pending"] == 0
            assert await raw.xlen(f"{prefix}:req") == 0
    finally:
        await raw.aclose()


async def test_a_request_being_served_is_not_taken_over(prefix: str) -> None:
    agent = settings(prefix, **{"agent-executor": f"{_AGENTS.__name__}:SlowExecutor", "redis-lease-timeout-ms": 200})
    async with start_server(agent) as one, start_server(agent) as two, client_for(prefix) as client:
        events = await collect(client.stream(send_message_body("slow", method="SendStreamingMessage"), headers=V1))
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await asyncio.sleep(0.5)
        assert len(await tasks_of(one)) + len(await tasks_of(two)) == 1  # leases renewed: served once


async def test_authentication(prefix: str) -> None:
    async with start_server(settings(prefix, token="s3cret-token")), client_for(prefix) as client:
        refused = await client.request(send_message_body("hello"))
        assert refused == {"jsonrpc": "2.0", "id": "1", "error": {"code": -32000, "message": "Unauthorized"}}
        wrong = await client.request(send_message_body("hello"), headers={**V1, "Authorization": "Bearer nope"})
        assert wrong["error"]["code"] == -32000
        events = await collect(client.stream(send_message_body("hello", method="SendStreamingMessage")))
        assert [e["error"]["code"] for e in events] == [-32000]
        ok = await client.request(send_message_body("hello"), headers={**V1, "Authorization": "Bearer s3cret-token"})
        assert ok["result"]["task"]["status"]["state"] == INPUT_REQUIRED


async def test_request_entries_are_deleted_and_response_streams_capped(prefix: str) -> None:
    url = redis_url()
    async with start_server(settings(prefix, **{"redis-stream-maxlen": 50})), \
            client_for(prefix, reply_stream=f"{prefix}:resp") as shared, client_for(prefix) as private:
        for batch in range(30):  # batches of 10: the reader never lags more than the cap behind
            replies = await asyncio.gather(*(shared.request(rpc("GetTask", {"id": "none"}, n), headers=V1, timeout=10)
                                             for n in range(batch * 10, batch * 10 + 10)))
            assert all(r["error"]["code"] == -32001 for r in replies)
        await private.request(rpc("GetTask", {"id": "none"}), headers=V1)
        raw = aioredis.Redis.from_url(url)
        try:
            assert await raw.xlen(f"{prefix}:req") == 0
            assert (await raw.xpending(f"{prefix}:req", f"{prefix}:g"))["pending"] == 0
            assert await raw.xlen(f"{prefix}:resp") <= 200  # MAXLEN ~ 50 trims whole nodes (100 entries each)
            assert private.reply_stream.startswith(f"{prefix}:resp:") and private.reply_stream != shared.reply_stream
            assert 0 < await raw.ttl(private.reply_stream) <= 600
            await private.aclose()
            assert not await raw.exists(private.reply_stream)
        finally:
            await raw.aclose()


async def test_no_password_in_card_logs_or_errors(prefix: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    password = "pw-" + secrets.token_hex(8)
    port = free_port()
    process = start_redis_server(port, tmp_path / "redis", appendonly=False, password=password)
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    try:
        async with start_server(settings(prefix, url)) as server, client_for(prefix, url) as client:
            assert server.url == f"redis-streams://127.0.0.1:{port}/0/{prefix}:req"
            card = json.dumps([i.url for i in server.kernel.cards.card.supported_interfaces])
            assert password not in card and f"127.0.0.1:{port}" in card
            reply = await client.request(send_message_body("hello"), headers=V1)
            assert reply["result"]["task"]["status"]["state"] == INPUT_REQUIRED

            # An outage is logged (without the password) and the server rides it out.
            process.kill()
            process.wait()
            await asyncio.sleep(0.5)
            process = start_redis_server(port, tmp_path / "redis", appendonly=False, password=password)
            reply = await client.request(send_message_body("hello", message_id="m-2"), headers=V1, timeout=20)
            assert reply["result"]["task"]["status"]["state"] == INPUT_REQUIRED
        assert any("is unavailable" in r.getMessage() for r in caplog.records)

        with pytest.raises(StartupError) as refused:
            async with start_server(settings(prefix, f"redis://:wrong-{password}@127.0.0.1:{port}/0")):
                pass
        assert password not in str(refused.value)
    finally:
        process.kill()
        process.wait()
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert logged and password not in logged


async def test_redis_url_is_required() -> None:
    with pytest.raises(StartupError, match="^" + MISSING_URL.replace(".", r"\.") + "$"):
        async with start_server({"transport": ["redis"]}):
            pass
