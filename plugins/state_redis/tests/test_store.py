"""The shared Redis task store, event stream and push-configuration records against a real Redis.

Each test uses its own key prefix on ``iac_code.testing.redis_url()`` and deletes
its keys; two store instances on one prefix stand for two nodes.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from a2a.auth.user import User
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InternalError, InvalidParamsError
from google.protobuf.timestamp_pb2 import Timestamp
from iac_code_state_redis.events import RedisTaskEventStream
from iac_code_state_redis.keys import Keys
from iac_code_state_redis.push_configs import RedisPushConfigRecords
from iac_code_state_redis.store import NOT_REACHABLE, RedisTaskStore
from redis.backoff import NoBackoff
from redis.retry import Retry

from iac_code.api import NOT_STORED, PushConfigRecords, message_to_json
from iac_code.testing import local_task_store, redis_url

WAIT = 5.0


class NamedUser(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def ctx(user: str = "alice") -> ServerCallContext:
    return ServerCallContext(user=NamedUser(user))


def make_task(task_id: str, context_id: str = "ctx-1", state: int = TaskState.TASK_STATE_WORKING,
              seconds: int | None = 1_700_000_000, text: str = "") -> Task:
    status = TaskStatus(state=state)
    if seconds is not None:
        status.timestamp.CopyFrom(Timestamp(seconds=seconds, nanos=5))
    task = Task(id=task_id, context_id=context_id, status=status)
    if text:
        task.history.append(Message(message_id=f"m-{text}", role=Role.ROLE_USER, parts=[Part(text=text)]))
    return task


def status_event(task: Task) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)


class Env:
    """Clients and stores on one fresh key prefix; every key under it is deleted afterwards."""

    def __init__(self) -> None:
        self.keys = Keys(f"test-state-{uuid.uuid4().hex}:")
        self.clients: list[aioredis.Redis] = []

    def client(self) -> aioredis.Redis:
        client = aioredis.Redis.from_url(redis_url())
        self.clients.append(client)
        return client

    async def store(self, **options: float) -> RedisTaskStore:
        store = RedisTaskStore(self.client(), self.keys, **options)  # type: ignore[arg-type]
        await store.start()
        return store

    async def all_bytes(self) -> bytes:
        """Every key name and value under the prefix, concatenated (to look for secrets in clear)."""
        client = self.clients[0] if self.clients else self.client()
        found = b""
        async for key in client.scan_iter(match=f"{self.keys.prefix}*"):
            found += key
            kind = await client.type(key)
            if kind == b"hash":
                for name, value in (await client.hgetall(key)).items():
                    found += name + value
            elif kind == b"string":
                found += await client.get(key)
        return found

    async def cleanup(self) -> None:
        client = self.client()
        keys = [key async for key in client.scan_iter(match=f"{self.keys.prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        for made in self.clients:
            await made.aclose()


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    made = Env()
    try:
        yield made
    finally:
        await made.cleanup()


# ------------------------------------------------------------------ writes, reads, versions


async def test_write_read_and_version_conflicts_across_nodes(env: Env) -> None:
    a, b = await env.store(), await env.store()
    task = make_task("t1", text="hello")
    assert await a.save_event(task, status_event(task), ctx()) == TaskVersion(1)
    stored = await b.get_versioned("t1", ctx())
    assert stored is not None and stored.task == task and stored.version == TaskVersion(1)
    assert await b.get("t1", ctx()) == task
    assert await b.get_view("t1", ctx()) == message_to_json(task)

    task.status.state = TaskState.TASK_STATE_INPUT_REQUIRED
    assert await b.save_event(task, status_event(task), ctx(), prev_version=TaskVersion(1)) == TaskVersion(2)
    await b.settle(["t1"], ctx())
    # A turn's versioned write is queued; a stale one is refused by Redis, which its settle reports,
    # and the task is left as it was. A direct write says so at once.
    stale = make_task("t1", text="stale")
    assert await a.save_event(stale, status_event(stale), ctx(), prev_version=TaskVersion(1)) == TaskVersion(2)
    with pytest.raises(InternalError):
        await a.settle(["t1"], ctx())
    assert (await b.get("t1", ctx())) == task
    with pytest.raises(ConcurrentTaskModificationError):
        await a.write("alice", task, None, TaskVersion(1))
    with pytest.raises(ConcurrentTaskModificationError):
        await a.write("alice", make_task("new"), None, TaskVersion(3))  # absent is version 0
    assert await a.save_event(make_task("new"), None, ctx(), prev_version=TaskVersion.MISSING) == TaskVersion(1)
    await a.save(task, ctx())  # an unversioned write still takes the next version
    loaded = await a.load("alice", "t1")
    assert loaded is not None and loaded.version == TaskVersion(3)
    assert loaded.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert await a.get("missing", ctx()) is None and await a.get_versioned("missing", ctx()) is None
    assert (a.count(), a.cached(), a.restore()) == (0, 0, 0)
    await a.settle(["t1"], ctx())
    await a.sync()
    await a.close()


async def test_owner_scoping(env: Env) -> None:
    a, b = await env.store(), await env.store()
    task = make_task("shared-id")
    await a.save_event(task, status_event(task), ctx("alice"))
    assert await b.get("shared-id", ctx("bob")) is None
    assert await b.get_view("shared-id", ctx("bob")) is None
    assert await b.events_after("shared-id", 0, ctx("bob")) == []
    assert await b.load("bob", "shared-id") is None
    with pytest.raises(ConcurrentTaskModificationError):
        await b.save_event(task, None, ctx("bob"))  # an id belongs to one owner
    await b.delete("shared-id", ctx("bob"))
    assert await a.get("shared-id", ctx("alice")) == task
    listed = await b.list(ListTasksRequest(), ctx("bob"))
    assert list(listed.tasks) == [] and listed.total_size == 0
    assert (await a.list(ListTasksRequest(), ctx("alice"))).total_size == 1


# ------------------------------------------------------------------ ListTasks


def fixtures() -> list[Task]:
    """Tasks with ties, a missing timestamp, two contexts and several states."""
    working, done = TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED
    return [
        make_task("a", "c1", working, 100), make_task("b", "c1", done, 100), make_task("c", "c2", done, 300),
        make_task("d", "c2", working, 200), make_task("e", "c1", done, None), make_task("f", "c1", working, 50),
        make_task("g", "c2", done, 300), make_task("h", "c1", working, 250),
    ]


async def test_list_tasks_matches_the_local_store_and_tokens_work_on_every_node(env: Env) -> None:
    a, b = await env.store(), await env.store()
    local = local_task_store()
    for task in fixtures():
        await a.save(task, ctx())
        await local.save(task, ctx())
    await b.save(make_task("other-owner", "c1"), ctx("bob"))
    after = Timestamp(seconds=200)
    requests = [
        ListTasksRequest(), ListTasksRequest(context_id="c1"), ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED),
        ListTasksRequest(context_id="c2", status=TaskState.TASK_STATE_COMPLETED),
        ListTasksRequest(status_timestamp_after=after), ListTasksRequest(context_id="c1", status_timestamp_after=after),
        ListTasksRequest(context_id="none"),
    ]
    for request in requests:
        expected = await local.list(request, ctx())
        for size in (0, 1, 3):
            paged = ListTasksRequest()
            paged.CopyFrom(request)
            paged.page_size = size
            ids: list[str] = []
            nodes = [a, b]
            while True:
                page = await nodes[len(ids) % 2].list(paged, ctx())  # alternate nodes: tokens are shared
                assert page.total_size == expected.total_size and page.page_size == (size or 50)
                ids += [t.id for t in page.tasks]
                if not page.next_page_token:
                    break
                paged.page_token = page.next_page_token
            assert ids == [t.id for t in expected.tasks], (request, size)
    first = await a.list(ListTasksRequest(page_size=3), ctx())
    assert [t.id for t in first.tasks] == ["g", "c", "h"]
    view = await b.list_view(ListTasksRequest(page_size=3), ctx())
    assert view == {"tasks": [message_to_json(t) for t in first.tasks], "nextPageToken": first.next_page_token,
                    "pageSize": 3, "totalSize": 8}
    last = await b.list_view(ListTasksRequest(page_size=8), ctx())
    assert last["nextPageToken"] == "" and len(last["tasks"]) == 8
    with pytest.raises(InvalidParamsError):
        await a.list(ListTasksRequest(page_token=first.next_page_token[:-2] + "xx"), ctx())

    moved = make_task("f", "c2", TaskState.TASK_STATE_COMPLETED, 400)  # a write moves the task in every index
    await b.save(moved, ctx())
    assert [t.id for t in (await a.list(ListTasksRequest(context_id="c1"), ctx())).tasks] == ["h", "b", "a", "e"]
    done_c2 = await a.list(ListTasksRequest(context_id="c2", status=TaskState.TASK_STATE_COMPLETED), ctx())
    assert [t.id for t in done_c2.tasks] == ["f", "g", "c"]
    await local.close()


# ------------------------------------------------------------------ event log


async def test_events_after_is_contiguous_skips_placeholders_and_detects_trimming(env: Env) -> None:
    a, b = await env.store(retained_events=3), await env.store(retained_events=3)
    task = make_task("t")
    for n in range(1, 6):
        task.status.timestamp.seconds = 1_700_000_000 + n
        if n == 4:
            await a.save(task, ctx())  # a write without an event: a placeholder
        else:
            await a.save_event(task, status_event(task), ctx())
    assert await b.events_after("t", 0, ctx()) is None  # versions 1 and 2 are trimmed
    assert await b.events_after("t", 1, ctx()) is None
    replay = await b.events_after("t", 2, ctx())
    assert replay is not None and [e.version for e in replay] == [TaskVersion(3), TaskVersion(5)]
    assert isinstance(replay[0].event, TaskStatusUpdateEvent)
    assert replay[0].event.status.timestamp.seconds == 1_700_000_003
    assert await b.events_after("t", 5, ctx()) == []
    assert await b.events_after("t", 9, ctx()) == []


async def test_subscribe_receives_events_written_by_the_other_node(env: Env) -> None:
    writer = await env.store()
    stream = RedisTaskEventStream(env.client(), env.keys, block_ms=1000)
    task = make_task("live")
    await writer.save_event(task, status_event(task), ctx())
    await writer.save(task, ctx())  # placeholder at version 2
    backlog = stream.subscribe("live", after=TaskVersion.MISSING)
    first = await asyncio.wait_for(anext(backlog), WAIT)
    assert first.version == TaskVersion(1) and first.event == status_event(task)

    live = stream.subscribe("live", after=TaskVersion(2))
    pending = asyncio.ensure_future(anext(live))
    task.status.state = TaskState.TASK_STATE_COMPLETED
    await writer.save_event(task, status_event(task), ctx())
    got = await asyncio.wait_for(pending, WAIT)
    assert got.version == TaskVersion(3) and got.event.status.state == TaskState.TASK_STATE_COMPLETED
    assert await asyncio.wait_for(anext(backlog), WAIT) == got  # the placeholder was skipped
    await backlog.aclose()

    waiting = asyncio.ensure_future(anext(live))  # cancelled while blocked in XREAD
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await live.aclose()
    assert await stream.client.ping()  # the connection went back to the pool usable
    await stream.publish("live", got)
    await stream.destroy("live")


# ------------------------------------------------------------------ delete and TTL sweep


async def test_delete_removes_the_task_everywhere(env: Env) -> None:
    a, b = await env.store(finished_ttl=3600), await env.store(finished_ttl=3600)
    task = make_task("gone", state=TaskState.TASK_STATE_COMPLETED)
    await a.save_event(task, status_event(task), ctx())
    await env.clients[0].hset(env.keys.push_configs("gone"), "x:y", b"z")
    await b.delete("gone", ctx())
    assert await a.get("gone", ctx()) is None
    assert (await a.list(ListTasksRequest(), ctx())).total_size == 0
    left = [key async for key in env.clients[0].scan_iter(match=f"{env.keys.prefix}*")]
    assert left == [env.keys.page_token_key.encode()]
    await b.delete("gone", ctx())  # deleting again is harmless
    assert await a.save_event(task, None, ctx(), prev_version=TaskVersion.MISSING) == TaskVersion(1)  # a new life


async def test_sweep_deletes_tasks_finished_longer_than_the_ttl(env: Env) -> None:
    a = await env.store(finished_ttl=60)
    client = env.clients[0]
    for task_id, state in (("old", TaskState.TASK_STATE_COMPLETED), ("recent", TaskState.TASK_STATE_FAILED),
                           ("running", TaskState.TASK_STATE_WORKING), ("revived", TaskState.TASK_STATE_CANCELED)):
        await a.save(make_task(task_id, state=state), ctx("alice" if task_id != "recent" else "bob"))
    await a.save(make_task("revived", state=TaskState.TASK_STATE_WORKING), ctx())  # running again: not finished
    finished = {m.decode() for m in await client.zrange(env.keys.finished, 0, -1)}
    assert finished == {"old", "recent"}
    await client.zadd(env.keys.finished, {"old": 1, "ghost": 1})  # finished long ago; a ghost without a task
    assert await a.sweep() == 1
    assert await a.get("old", ctx()) is None and await client.exists(env.keys.events("old")) == 0
    assert await a.get("recent", ctx("bob")) is not None and await a.get("running", ctx()) is not None
    assert {m.decode() for m in await client.zrange(env.keys.finished, 0, -1)} == {"recent"}
    assert (await a.list(ListTasksRequest(), ctx())).total_size == 2
    no_ttl = await env.store()
    await no_ttl.save(make_task("kept", state=TaskState.TASK_STATE_COMPLETED), ctx())
    assert await client.zscore(env.keys.finished, "kept") is None and await no_ttl.sweep() == 0


# ------------------------------------------------------------------ push configurations


async def test_push_config_records_are_shared_by_the_nodes_and_go_with_the_task(env: Env) -> None:
    node_a = RedisPushConfigRecords(env.client(), env.keys)
    node_b = RedisPushConfigRecords(env.client(), env.keys)
    assert isinstance(node_a, PushConfigRecords)
    await node_a.put("t", "owner1:c1", b"one")
    await node_a.put("t", "owner1:c2", b"two")
    await node_a.put("t", "owner2:c1", b"three")
    await node_a.put("other", "owner1:c1", b"elsewhere")
    assert await node_b.read_all("t") == {"owner1:c1": b"one", "owner1:c2": b"two", "owner2:c1": b"three"}
    assert sorted(await node_b.names("t")) == ["owner1:c1", "owner1:c2", "owner2:c1"]
    assert await node_b.get("t", "owner1:c2") == b"two" and await node_b.get("t", "nobody:c1") is None
    await node_a.put("t", "owner1:c2", b"two again")  # replaced, not added
    assert await node_b.get("t", "owner1:c2") == b"two again"
    await node_b.delete("t", ["owner1:c1", "owner1:c2", "never:there"])
    await node_b.delete("t", [])
    assert await node_a.read_all("t") == {"owner2:c1": b"three"} and await node_a.names("none") == []
    assert await env.clients[0].hgetall(env.keys.push_configs("t")) == {b"owner2:c1": b"three"}  # one hash per task
    store = await env.store()
    task = make_task("t", state=TaskState.TASK_STATE_COMPLETED)
    await store.save_event(task, status_event(task), ctx())
    await store.delete("t", ctx())
    assert await node_a.read_all("t") == {} and await node_a.get("other", "owner1:c1") == b"elsewhere"


# ------------------------------------------------------------------ Redis unreachable


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_redis_fails_with_the_kernel_messages_only() -> None:
    port = closed_port()
    client = aioredis.Redis.from_url(f"redis://:hunter2@127.0.0.1:{port}/15", retry=Retry(NoBackoff(), 0),
                                     socket_connect_timeout=1)
    keys = Keys(f"test-state-{uuid.uuid4().hex}:")
    store = RedisTaskStore(client, keys)
    push = RedisPushConfigRecords(client, keys)
    task = make_task("t")
    try:
        failures: list[tuple[str, InternalError]] = []
        for expected, call in [
            (NOT_REACHABLE, store.start()), (NOT_STORED, store.save_event(task, status_event(task), ctx())),
            (NOT_STORED, store.save(task, ctx())), (NOT_STORED, store.delete("t", ctx())),
            (NOT_REACHABLE, store.get("t", ctx())), (NOT_REACHABLE, store.get_view("t", ctx())),
            (NOT_REACHABLE, store.events_after("t", 0, ctx())), (NOT_REACHABLE, store.list(ListTasksRequest(), ctx())),
            (NOT_REACHABLE, push.put("t", "o:c", b"x")), (NOT_REACHABLE, push.get("t", "o:c")),
            (NOT_REACHABLE, push.read_all("t")), (NOT_REACHABLE, push.names("t")),
            (NOT_REACHABLE, push.delete("t", ["o:c"])),
        ]:
            with pytest.raises(InternalError) as raised:
                await call
            failures.append((expected, raised.value))
        for expected, error in failures:
            assert error.message == expected and str(error) == expected
            assert str(port) not in str(error) and "hunter2" not in str(error) and error.__cause__ is None
        assert await store.sweep() == 0
    finally:
        await client.aclose()
