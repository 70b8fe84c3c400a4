"""The push plugin's job cipher on both queue plugins: what a queue stores is encrypted (spec push.md §3.1, §5.3).

The queue plugins' own tests use a plain JSON codec; here the real one goes through a real
directory and a real Redis (127.0.0.1:6379, a key prefix per test).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis.asyncio as aioredis
from iac_code_push.crypto import JobCipher, PushKeyring
from iac_code_push_file.queue import LocalFileQueue
from iac_code_push_redis import plugin as redis_plugin

from iac_code.api import PushJob, PushQueue, QueueContext
from iac_code.testing import redis_url

pytestmark = pytest.mark.timeout(30)


def make_job(n: int, **changes: object) -> PushJob:
    job = PushJob.new(task_id=f"task-{n}", config_id="cfg", owner="alice", url="https://example.com/hook",
                      payload={"n": n, "statusUpdate": {"taskId": f"task-{n}"}, **changes})
    return job


async def test_local_file_jobs_are_encrypted_and_a_foreign_key_is_set_aside(tmp_path: Path) -> None:
    ours = JobCipher(PushKeyring.load(tmp_path / "ours", env={}))
    theirs = JobCipher(PushKeyring.load(tmp_path / "theirs", env={}))
    directory = tmp_path / "push_queue"
    job = make_job(1, secret="s3cr3t-payload")
    foreign = LocalFileQueue(directory, theirs)
    await foreign.start()
    await foreign.enqueue([job])
    await foreign.close()
    [name] = os.listdir(directory / "pending")
    data = (directory / "pending" / name).read_bytes()
    assert b"s3cr3t" not in data and b"iacCodeEncryptedPushJob" in data
    q = LocalFileQueue(directory, ours)
    await q.start()
    try:
        mine = make_job(2)
        await q.enqueue([mine])
        assert [c.job for c in await q.claim(10, 0)] == [mine]
        assert (await q.depth())["dead"] == 1
    finally:
        await q.close()


async def test_redis_streams_jobs_are_stored_encrypted(tmp_path: Path) -> None:
    prefix = f"test:{uuid.uuid4().hex}"
    config = SimpleNamespace(push_redis_url=redis_url(), push_stream=f"{prefix}:push", push_retry_key=f"{prefix}:retry",
                             push_dead_stream=f"{prefix}:dead", push_consumer_group="iac-code-push",
                             push_consumer_name="", push_lease_timeout_ms=300_000)
    cipher = JobCipher(PushKeyring.load(tmp_path, env={}))
    queue: PushQueue = redis_plugin.create_queue(QueueContext(config=config, codec=cipher, state_dir=tmp_path))
    client = aioredis.Redis.from_url(redis_url())
    await queue.start()
    try:
        job = make_job(7)
        await queue.enqueue([job, job.rescheduled(at=time.time() + 60)])
        ((_, fields),) = await client.xrange(config.push_stream)
        (member,) = await client.zrange(config.push_retry_key, 0, -1)
        for stored in (fields[b"job"], member):
            assert stored.startswith(b'{"iacCodeEncryptedPushJob":') and b"example.com" not in stored
        claimed = []
        deadline = time.monotonic() + 5
        while not claimed:
            assert time.monotonic() < deadline, "the job was not claimed"
            claimed = await queue.claim(10, 0.2)
        assert [c.job for c in claimed] == [job]
        await queue.ack(claimed[0])
    finally:
        await queue.close()
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
