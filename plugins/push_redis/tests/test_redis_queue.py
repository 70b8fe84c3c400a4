"""The ``redis-streams`` push queue against a real Redis (``iac_code.testing.redis_url``; never a fake).

Every test uses its own key prefix and deletes its keys; the outage and password
tests run private ``redis-server`` processes they kill and restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from iac_code_push_redis import plugin
from iac_code_push_redis.queue import RedisQueueError, RedisQueueUnavailable, RedisStreamsQueue

from iac_code.api import ClaimedJob, PushJob, PushQueue, QueueContext, StartupError
from iac_code.testing import make_kernel, redis_url, start_redis_server

LOGGER = "iac_code_push_redis"


class JsonCodec:
    """Plain JSON (the push plugin's codec encrypts; the queue only stores and returns the bytes)."""

    def encode(self, job: PushJob) -> bytes:
        return json.dumps(job.to_record(), sort_keys=True, separators=(",", ":")).encode()

    def decode(self, data: bytes | str) -> PushJob:
        try:
            return PushJob.from_record(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError("unreadable push job") from exc


class QueueSettings(plugin.RedisPushQueueConfig):
    """The plugin's keys plus the push plugin's lease key."""

    push_lease_timeout_ms: int = 300000


def make_job(n: int = 0, **changes: Any) -> PushJob:
    job = PushJob.new(task_id=f"task-{n}", config_id="cfg", owner="alice", url="https://example.com/hook",
                      payload={"n": n, "statusUpdate": {"taskId": f"task-{n}"}})
    return job.rescheduled(**changes) if changes else job


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Queues:
    """Builds started queues on one key prefix; closes them and deletes the prefix's keys afterwards."""

    def __init__(self) -> None:
        self.prefix = f"test:{uuid.uuid4().hex}"
        self.made: list[RedisStreamsQueue] = []
        self.urls: set[str] = set()

    def config(self, url: str | None = None, **settings: Any) -> QueueSettings:
        return QueueSettings(push_redis_url=url or redis_url(), push_stream=f"{self.prefix}:push",
                          push_retry_key=f"{self.prefix}:retry", push_dead_stream=f"{self.prefix}:dead", **settings)

    async def __call__(self, url: str | None = None, *, start: bool = True, **settings: Any) -> RedisStreamsQueue:
        config = self.config(url, **settings)
        queue = plugin.create_queue(QueueContext(config=config, codec=JsonCodec(), state_dir=Path(tempfile.gettempdir())))
        assert isinstance(queue, RedisStreamsQueue)
        self.made.append(queue)
        self.urls.add(config.push_redis_url)
        if start:
            await queue.start()
        return queue

    def redis(self, url: str | None = None) -> aioredis.Redis:
        return aioredis.Redis.from_url(url or redis_url())

    async def cleanup(self) -> None:
        for queue in self.made:
            try:
                await queue.close()
            except Exception:  # a private server may be gone already
                pass
        client = self.redis()
        try:
            keys = [key async for key in client.scan_iter(match=f"{self.prefix}:*", count=1000)]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()


@pytest.fixture
async def queues() -> AsyncIterator[Queues]:
    made = Queues()
    try:
        yield made
    finally:
        await made.cleanup()


@pytest.fixture
def private_dir() -> Any:
    with tempfile.TemporaryDirectory(prefix="iac-code-redis-test-") as directory:
        yield Path(directory)


async def claim_until(queue: PushQueue, count: int = 1, *, timeout: float = 5.0, limit: int = 10,
                      wait: float = 0.2) -> list[ClaimedJob]:
    """Claim until ``count`` jobs arrived (polling with a deadline)."""
    got: list[ClaimedJob] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} jobs claimed within {timeout} s"
        got += await queue.claim(limit, wait)
    return got


def ids(claimed: Sequence[ClaimedJob]) -> list[str]:
    return [c.job.job_id for c in claimed]


# ------------------------------------------------------------------ plugin


def test_plugin_is_registered_with_its_keys(tmp_path: Path) -> None:
    plugins = make_kernel({"persistence-dir": str(tmp_path)}).plugins
    assert "redis-streams" in plugins.push_queues()
    fields = plugin.RedisPushQueueConfig.model_fields
    assert {k: fields[k].default for k in fields} == {
        "push_redis_url": "", "push_stream": "iac-code:a2a:push", "push_retry_key": "iac-code:a2a:push:retry",
        "push_dead_stream": "iac-code:a2a:push:dead", "push_consumer_group": "iac-code-push", "push_consumer_name": ""}
    assert all(f.description for f in fields.values())
    with pytest.raises(ValueError):
        plugin.RedisPushQueueConfig(push_redis_urll="redis://x")  # type: ignore[call-arg]


def test_create_requires_the_url() -> None:
    ctx = QueueContext(config=QueueSettings(), codec=JsonCodec(), state_dir=Path("."))
    with pytest.raises(StartupError, match=r"^push-redis-url is required in --config for push-queue: redis-streams\.$"):
        plugin.create_queue(ctx)


async def test_default_consumer_name_and_lease_from_config(queues: Queues) -> None:
    queue = await queues(start=False, push_lease_timeout_ms=1234)
    host, pid, suffix = queue.consumer.rsplit("-", 2)
    assert host == socket.gethostname() and pid.isdigit() and len(suffix) == 12
    assert queue.lease_timeout_ms == 1234
    named = await queues(start=False, push_consumer_name="worker-a")
    assert named.consumer == "worker-a"


# ------------------------------------------------------------------ basic behaviour


async def test_round_trip(queues: Queues) -> None:
    queue = await queues()
    assert isinstance(queue, PushQueue)
    jobs = [make_job(1), make_job(2)]
    await queue.enqueue(jobs)
    assert await queue.depth() == {"pending": 2, "inflight": 0, "dead": 0}
    claimed = await claim_until(queue, 2)
    assert [c.job for c in claimed] == jobs
    assert await queue.depth() == {"pending": 0, "inflight": 2, "dead": 0}
    for c in claimed:
        await queue.ack(c)
    assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 0}
    client = queues.redis()
    try:
        assert await client.xlen(queue.stream) == 0  # settled entries are deleted: the stream stays bounded
        await queue.close()
        assert await client.xinfo_consumers(queue.stream, queue.group) == []  # left the group
    finally:
        await client.aclose()


async def test_idle_claim_blocks_at_most_wait(queues: Queues) -> None:
    queue = await queues()
    started = time.monotonic()
    assert await queue.claim(5, 0.3) == []
    assert 0.25 <= time.monotonic() - started < 1.5
    started = time.monotonic()
    assert await queue.claim(5, 0) == []
    assert time.monotonic() - started < 0.5


async def test_future_job_is_claimed_when_due_without_new_traffic(queues: Queues) -> None:
    queue = await queues()
    due = time.time() + 1.0
    job = make_job(1, at=due)
    await queue.enqueue([job])
    assert await queue.claim(10, 0) == []
    assert await queue.depth() == {"pending": 1, "inflight": 0, "dead": 0}
    # An idle worker: nothing else is enqueued; each claim returns within its wait.
    deadline = time.monotonic() + 5
    while True:
        assert time.monotonic() < deadline, "the due job was never claimed"
        started = time.monotonic()
        claimed = await queue.claim(10, 0.5)
        assert time.monotonic() - started < 1.5
        if claimed:
            break
    assert time.time() >= due
    assert ids(claimed) == [job.job_id]
    await queue.ack(claimed[0])


async def test_two_consumers_share_jobs_without_duplicates(queues: Queues) -> None:
    first, second = await queues(), await queues()
    assert first.consumer != second.consumer
    jobs = [make_job(n) for n in range(12)]
    await first.enqueue(jobs)
    a, b = await first.claim(3, 0.1), await second.claim(3, 0.1)
    assert len(a) == 3 and len(b) == 3 and not set(ids(a)) & set(ids(b))

    seen: dict[str, list[str]] = {"first": ids(a), "second": ids(b)}
    for c in a + b:
        await first.ack(c)
    # Concurrent workers on the rest, plus scheduled retries promoted while both claim.
    later = [make_job(100 + n, at=time.time() + 0.3) for n in range(10)]
    await second.enqueue(later)

    async def work(name: str, queue: RedisStreamsQueue) -> None:
        deadline = time.monotonic() + 5
        while sum(len(v) for v in seen.values()) < len(jobs) + len(later) and time.monotonic() < deadline:
            for c in await queue.claim(2, 0.1):
                seen[name].append(c.job.job_id)
                await queue.ack(c)

    await asyncio.gather(work("first", first), work("second", second))
    everything = seen["first"] + seen["second"]
    assert sorted(everything) == sorted(j.job_id for j in jobs + later)  # all, once each
    assert await first.depth() == {"pending": 0, "inflight": 0, "dead": 0}


async def test_unsettled_lease_is_reclaimed_by_another_consumer(queues: Queues) -> None:
    crashed = await queues(push_lease_timeout_ms=300)
    survivor = await queues(push_lease_timeout_ms=300)
    job = make_job(1)
    await crashed.enqueue([job])
    (taken,) = await claim_until(crashed)
    assert await survivor.claim(10, 0) == []  # still leased
    started = time.monotonic()
    (again,) = await claim_until(survivor, timeout=5, wait=0.1)
    assert time.monotonic() - started >= 0.2
    assert again.job == job and again.receipt == taken.receipt
    assert await survivor.depth() == {"pending": 0, "inflight": 1, "dead": 0}
    await survivor.ack(again)
    await crashed.ack(taken)  # a late settle of the lost lease is harmless
    assert await survivor.depth() == {"pending": 0, "inflight": 0, "dead": 0}


async def test_retry_is_claimed_again_with_its_new_attempt(queues: Queues) -> None:
    queue = await queues()
    await queue.enqueue([make_job(1)])
    (claimed,) = await claim_until(queue)
    retried = claimed.job.rescheduled(at=time.time() + 0.3, attempt=1, last_error="OSError: refused")
    await queue.retry(claimed, retried)
    assert await queue.depth() == {"pending": 1, "inflight": 0, "dead": 0}
    assert await queue.claim(10, 0) == []
    (again,) = await claim_until(queue)
    assert again.job == retried and again.job.attempt == 1 and again.job.last_error == "OSError: refused"
    assert again.receipt != claimed.receipt
    # A retry due now is claimable at once.
    await queue.retry(again, again.job.rescheduled(at=0, attempt=2))
    (third,) = await claim_until(queue)
    assert third.job.attempt == 2
    await queue.ack(third)
    assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 0}


async def test_dead_letter(queues: Queues) -> None:
    queue = await queues()
    await queue.enqueue([make_job(1), make_job(2)])
    first, second = await claim_until(queue, 2)
    dead = first.job.rescheduled(at=0, attempt=5, last_error="RuntimeError: HTTP 404")
    await queue.dead_letter(first, dead)
    assert await queue.dead_letters() == [dead]
    assert await queue.depth() == {"pending": 0, "inflight": 1, "dead": 1}
    await queue.dead_letter(second, second.job)
    assert await queue.dead_letters(limit=1) == [dead]
    assert await queue.dead_letters(limit=0) == []
    assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 2}
    assert await queue.claim(10, 0) == []  # never retried


async def test_done_marks_only_increase(queues: Queues) -> None:
    queue = await queues()
    key = make_job().order_key
    assert await queue.done_through(key) == 0
    await queue.mark_done(key, 5)
    await queue.mark_done(key, 3)
    assert await queue.done_through(key) == 5
    # Nanosecond sequence numbers differ below a double's precision: compared exactly.
    base = time.time_ns()
    await queue.mark_done(key, base + 1)
    await queue.mark_done(key, base)
    assert await queue.done_through(key) == base + 1
    await queue.mark_done(key, base + 2)
    assert await queue.done_through(key) == base + 2
    assert await queue.done_through("other") == 0
    client = queues.redis()
    try:
        assert 86000 < await client.ttl(queue.done_key(key)) <= 86400
    finally:
        await client.aclose()


async def test_corrupt_entries_go_to_the_dead_stream(queues: Queues, caplog: pytest.LogCaptureFixture) -> None:
    queue = await queues()
    client = queues.redis()
    try:
        await client.xadd(queue.stream, {"job": b"\x00not a job"})
        await client.xadd(queue.stream, {"other": b"field"})
        await client.zadd(queue.retry_key, {b"junk retry": 0})
        good = make_job(1)
        await queue.enqueue([good])
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            claimed = await claim_until(queue)
        assert ids(claimed) == [good.job_id]
        assert sum("cannot be read" in r.getMessage() for r in caplog.records) == 3
        dead = await client.xrange(queue.dead_stream)
        assert sorted(fields[b"job"] for _, fields in dead or [] if fields) == [b"", b"\x00not a job", b"junk retry"]
        assert await queue.dead_letters() == []  # raw dead letters cannot be decoded, so are not listed
        assert await queue.depth() == {"pending": 0, "inflight": 1, "dead": 3}
        await queue.ack(claimed[0])
        await queue.enqueue([make_job(2)])
        (after,) = await claim_until(queue)  # the queue keeps working
        await queue.ack(after)
        assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 3}
    finally:
        await client.aclose()


async def test_vanished_consumer_group_is_recreated(queues: Queues) -> None:
    queue = await queues()
    await queue.enqueue([make_job(1)])
    client = queues.redis()
    try:
        await client.xgroup_destroy(queue.stream, queue.group)
        assert (await queue.depth())["inflight"] == 0
        (claimed,) = await claim_until(queue)
        await queue.ack(claimed)
        await client.delete(queue.stream)  # stream and group gone (a restart without persistence)
        await queue.enqueue([make_job(2)])
        (claimed,) = await claim_until(queue)
        await queue.ack(claimed)
    finally:
        await client.aclose()


# ------------------------------------------------------------------ outages and credentials


async def test_redis_restart_between_enqueue_and_claim(queues: Queues, private_dir: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis_server(port, private_dir, appendonly=True)
    try:
        queue = await queues(url)
        job = make_job(1)
        await queue.enqueue([job])
        server.send_signal(signal.SIGKILL)
        server.wait()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            for _ in range(3):
                started = time.monotonic()
                assert await queue.claim(10, 0.2) == []  # no exception while Redis is down
                assert time.monotonic() - started < 2.5
            # enqueue rides out the outage: it succeeds once the server is back.
            pending = asyncio.ensure_future(queue.enqueue([make_job(2)]))
            await asyncio.sleep(0.3)
            assert not pending.done()
            server = start_redis_server(port, private_dir, appendonly=True)
            await asyncio.wait_for(pending, 10)
            claimed = await claim_until(queue, 2, timeout=10)
        assert job.job_id in ids(claimed) and len(set(ids(claimed))) == 2
        outages = [r for r in caplog.records if "is unavailable" in r.getMessage()]
        assert len(outages) == 1, [r.getMessage() for r in outages]  # once per outage
        assert any("available again" in r.getMessage() for r in caplog.records)
        for c in claimed:
            await queue.ack(c)
        assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 0}
    finally:
        server.kill()
        server.wait()


async def test_restart_without_persistence_recreates_the_group(queues: Queues, private_dir: Path) -> None:
    port = free_port()
    server = start_redis_server(port, private_dir, appendonly=False)
    try:
        queue = await queues(f"redis://127.0.0.1:{port}/0")
        server.kill()
        server.wait()
        server = start_redis_server(port, private_dir, appendonly=False)
        await queue.enqueue([make_job(1)])
        (claimed,) = await claim_until(queue, timeout=5)
        await queue.ack(claimed)
    finally:
        server.kill()
        server.wait()


async def test_password_never_logged(queues: Queues, private_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    port = free_port()
    server = start_redis_server(port, private_dir, appendonly=False, password=password)
    errors: list[str] = []
    try:
        with caplog.at_level(logging.DEBUG):
            queue = await queues(f"redis://:{password}@127.0.0.1:{port}/0")
            assert queue.location == f"127.0.0.1:{port}"
            await queue.enqueue([make_job(1)])
            (claimed,) = await claim_until(queue)
            await queue.ack(claimed)

            wrong = await queues(f"redis://default:wrong-{password}@127.0.0.1:{port}/0", start=False)
            started = time.monotonic()
            with pytest.raises(RedisQueueError) as refused:
                await wrong.start()
            assert time.monotonic() - started < 2  # bad credentials are not retried
            errors.append(str(refused.value))

            server.kill()
            server.wait()
            assert await queue.claim(1, 0.1) == []
            queue.retry_budget = 0.3
            with pytest.raises(RedisQueueUnavailable) as unavailable:
                await queue.enqueue([make_job(2)])
            errors.append(str(unavailable.value))
            assert f"127.0.0.1:{port}" in errors[-1]
        assert any("is unavailable" in r.getMessage() for r in caplog.records)
        logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records) + caplog.text
        assert password not in logged
        assert all(password not in text for text in errors)
    finally:
        server.kill()
        server.wait()
