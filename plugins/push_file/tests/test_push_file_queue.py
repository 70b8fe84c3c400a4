"""The ``local-file`` push queue on a real directory: scheduling, leases, crash safety, concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from iac_code_push_file.plugin import iac_code_push_queues
from iac_code_push_file.queue import LocalFileQueue, pending_name

from iac_code.api import ClaimedJob, PushJob, PushQueue, QueueContext

pytestmark = pytest.mark.timeout(30)


class JsonCodec:
    """Plain JSON, for tests: the push plugin's encrypting codec is tested with it (tests/test_push_queue_encryption.py)."""

    def encode(self, job: PushJob) -> bytes:
        return json.dumps(job.to_record(), sort_keys=True, separators=(",", ":")).encode()

    def decode(self, data: bytes | str) -> PushJob:
        try:
            return PushJob.from_record(json.loads(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError("Unreadable push job.") from exc


def make_job(n: int = 0, **changes: object) -> PushJob:
    job = PushJob.new(task_id=f"task-{n}", config_id="cfg", owner="alice", url="https://example.com/hook",
                      payload={"n": n})
    return dataclasses.replace(job, **changes)  # type: ignore[arg-type]


def queue_dir(tmp_path: Path) -> Path:
    return tmp_path / "push_queue"


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[LocalFileQueue]:
    q = LocalFileQueue(queue_dir(tmp_path), JsonCodec(), lease_timeout_ms=60_000)
    await q.start()
    yield q
    await q.close()


async def test_plugin_registers_local_file_queue(tmp_path: Path) -> None:
    [spec] = iac_code_push_queues()
    assert spec.name == "local-file"
    q = spec.create(QueueContext(config=SimpleNamespace(push_lease_timeout_ms=1234), codec=JsonCodec(), state_dir=tmp_path))
    assert isinstance(q, LocalFileQueue) and isinstance(q, PushQueue)
    assert q.directory == tmp_path / "push_queue" and q.lease_timeout_ms == 1234
    default = spec.create(QueueContext(config=SimpleNamespace(), codec=JsonCodec(), state_dir=tmp_path))
    assert default.lease_timeout_ms == 300_000  # type: ignore[attr-defined]


async def test_round_trip(queue: LocalFileQueue) -> None:
    job = make_job(1)
    await queue.enqueue([job])
    assert await queue.depth() == {"pending": 1, "inflight": 0, "dead": 0}
    [claimed] = await queue.claim(10, 0)
    assert claimed.job == job
    assert await queue.depth() == {"pending": 0, "inflight": 1, "dead": 0}
    assert await queue.claim(10, 0) == []
    await queue.ack(claimed)
    assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 0}


async def test_file_names_schedule_without_decrypting(queue: LocalFileQueue) -> None:
    job = make_job(1, next_attempt_at=time.time() + 100)
    await queue.enqueue([job])
    [name] = os.listdir(queue.pending)
    due, seq, job_id = name.removesuffix(".job").split("-", 2)
    assert len(due) == 13 and int(due) == int(job.next_attempt_at * 1000)
    assert len(seq) == 20 and int(seq) == job.seq and job_id == job.job_id


async def test_due_later_job_is_claimed_by_an_idle_claim_when_due(queue: LocalFileQueue) -> None:
    job = make_job(1, next_attempt_at=time.time() + 0.3)
    await queue.enqueue([job])
    assert await queue.claim(10, 0) == []
    started = time.monotonic()
    [claimed] = await queue.claim(10, 3)
    elapsed = time.monotonic() - started
    assert claimed.job.job_id == job.job_id
    assert 0.2 <= elapsed < 1.5


async def test_claim_waits_at_most_wait(queue: LocalFileQueue) -> None:
    started = time.monotonic()
    assert await queue.claim(10, 0.25) == []
    assert 0.2 <= time.monotonic() - started < 1.0


async def test_enqueue_wakes_a_waiting_claim(queue: LocalFileQueue) -> None:
    waiting = asyncio.create_task(queue.claim(10, 5))
    await asyncio.sleep(0.05)
    job = make_job(1)
    started = time.monotonic()
    await queue.enqueue([job])
    [claimed] = await waiting
    assert claimed.job.job_id == job.job_id and time.monotonic() - started < 1.0


async def test_equal_due_jobs_come_in_seq_order(queue: LocalFileQueue) -> None:
    at = time.time() + 0.2
    jobs = [make_job(n, next_attempt_at=at) for n in range(8)]
    shuffled = jobs[:]
    random.Random(7).shuffle(shuffled)
    for job in shuffled:
        await queue.enqueue([job])
    claimed = await queue.claim(100, 3)
    assert [c.job.seq for c in claimed] == sorted(job.seq for job in jobs)
    # jobs due "now" in one batch: seq order too, and before a later batch
    first, second = [make_job(n) for n in range(5)], [make_job(n) for n in range(5, 8)]
    await queue.enqueue(list(reversed(first)))
    await asyncio.sleep(0.005)
    await queue.enqueue(second)
    claimed = await queue.claim(100, 0)
    assert [c.job.job_id for c in claimed] == [job.job_id for job in first + second]


async def test_expired_lease_is_reclaimed_by_another_instance(tmp_path: Path) -> None:
    first = LocalFileQueue(queue_dir(tmp_path), JsonCodec(), lease_timeout_ms=200)
    second = LocalFileQueue(queue_dir(tmp_path), JsonCodec(), lease_timeout_ms=60_000)
    await first.start()
    await second.start()
    try:
        job = make_job(1, attempt=2, last_error="HTTP 503")
        await first.enqueue([job])
        [held] = await first.claim(1, 0)
        assert await second.claim(1, 0) == []  # leased
        started = time.monotonic()
        [again] = await second.claim(1, 3)
        assert 0.1 <= time.monotonic() - started < 1.5
        assert again.job == job  # content untouched: attempt and lastError kept
        assert again.receipt != held.receipt
        await first.ack(held)  # too late: harmless
        assert await second.depth() == {"pending": 0, "inflight": 1, "dead": 0}
        await second.ack(again)
        assert await second.depth() == {"pending": 0, "inflight": 0, "dead": 0}
    finally:
        await first.close()
        await second.close()


async def test_retry_dead_letter_depth_dead_letters(queue: LocalFileQueue) -> None:
    jobs = [make_job(n) for n in range(3)]
    await queue.enqueue(jobs)
    claimed = await queue.claim(3, 0)
    assert [c.job.job_id for c in claimed] == [j.job_id for j in jobs]
    retried = claimed[0].job.rescheduled(at=time.time() + 0.2, attempt=1, last_error="timeout")
    await queue.retry(claimed[0], retried)
    await queue.dead_letter(claimed[1], claimed[1].job.rescheduled(at=0, attempt=5, last_error="HTTP 410"))
    assert await queue.depth() == {"pending": 1, "inflight": 1, "dead": 1}
    assert await queue.claim(3, 0) == []  # the retry is not due yet
    [again] = await queue.claim(3, 3)
    assert again.job == retried
    await queue.ack(again)
    await queue.dead_letter(claimed[2], claimed[2].job)
    assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 2}
    dead = await queue.dead_letters()
    assert [(j.job_id, j.attempt, j.last_error) for j in dead] == [(jobs[1].job_id, 5, "HTTP 410"), (jobs[2].job_id, 0, "")]
    assert [j.job_id for j in await queue.dead_letters(1)] == [jobs[1].job_id]


async def test_corrupt_file_goes_to_dead_and_claim_continues(queue: LocalFileQueue,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    bad = make_job(0)
    bad_name = pending_name(bad, 0)
    (queue.pending / bad_name).write_bytes(b'{"iacCodeEncryptedPushJob": {"ciphertext": "garbage"')
    (queue.pending / "README").write_bytes(b"not a job")
    good = make_job(1)
    await queue.enqueue([good])
    with caplog.at_level(logging.WARNING):
        claimed = await queue.claim(10, 1)
    assert [c.job.job_id for c in claimed] == [good.job_id]
    assert await queue.depth() == {"pending": 0, "inflight": 1, "dead": 2}
    assert all(name.endswith(".corrupt") for name in os.listdir(queue.dead))
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(bad.job_id in m for m in messages) and any("README" in m for m in messages)
    assert not any(str(queue.directory) in m for m in messages)
    assert await queue.dead_letters() == []  # raw files are kept but not decoded
    await queue.ack(claimed[0])


async def test_permissions_and_temp_file_sweep(tmp_path: Path) -> None:
    directory = queue_dir(tmp_path)
    (directory / "pending").mkdir(parents=True)
    stale = directory / "pending" / f".x.job.{2**30}-0.tmp"  # a writer that died mid-write
    stale.write_bytes(b"half")
    q = LocalFileQueue(directory, JsonCodec())
    await q.start()
    try:
        assert not stale.exists()
        await q.enqueue([make_job(n) for n in range(3)])
        claimed = await q.claim(2, 0)
        await q.dead_letter(claimed[0], claimed[0].job)
        for path in [directory, q.pending, q.inflight, q.dead]:
            assert stat.S_IMODE(path.stat().st_mode) == 0o700, path.name
        files = [p for d in (q.pending, q.inflight, q.dead) for p in d.iterdir()]
        assert len(files) == 3
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    finally:
        await q.close()


CHILD = textwrap.dedent("""
    import asyncio, json, os, signal, sys
    from pathlib import Path
    from iac_code.api import PushJob
    from iac_code_push_file.queue import LocalFileQueue

    class JsonCodec:
        def encode(self, job):
            return json.dumps(job.to_record(), sort_keys=True).encode()
        def decode(self, data):
            return PushJob.from_record(json.loads(data))

    async def main():
        q = LocalFileQueue(Path(sys.argv[1]), JsonCodec())
        await q.start()
        jobs = [PushJob.new(task_id=f"t{n}", config_id="c", owner="o", url="https://example.com", payload={"n": n})
                for n in range(40)]
        await asyncio.gather(*(q.enqueue([job]) for job in jobs))
        claimed = await q.claim(5, 0)
        await asyncio.gather(*(q.retry(c, c.job.rescheduled(at=0, attempt=1)) for c in claimed))
        print(json.dumps([job.job_id for job in jobs]), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
""")


async def test_jobs_survive_sigkill_right_after_enqueue(tmp_path: Path) -> None:
    directory = queue_dir(tmp_path)
    child = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", CHILD, str(directory)],
                                    capture_output=True, timeout=20)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    expected = json.loads(child.stdout)
    q = LocalFileQueue(directory, JsonCodec())
    await q.start()
    try:
        claimed = await q.claim(100, 0)
        assert sorted(c.job.job_id for c in claimed) == sorted(expected)
        assert sum(c.job.attempt for c in claimed) == 5
    finally:
        await q.close()


async def test_two_instances_claiming_concurrently_never_share_a_job(tmp_path: Path) -> None:
    queues = [LocalFileQueue(queue_dir(tmp_path), JsonCodec()) for _ in range(2)]
    for q in queues:
        await q.start()
    try:
        jobs = [make_job(n) for n in range(300)]
        seen: list[list[ClaimedJob]] = [[], []]

        async def worker(index: int) -> None:
            q = queues[index]
            while sum(len(s) for s in seen) < len(jobs):
                batch = await q.claim(random.randint(1, 8), 0.05)
                seen[index].extend(batch)
                await asyncio.gather(*(q.ack(c) for c in batch))

        workers = [asyncio.create_task(worker(i)) for i in range(2) for _ in range(3)]
        for start in range(0, len(jobs), 50):
            await queues[start // 50 % 2].enqueue(jobs[start:start + 50])
        await asyncio.wait_for(asyncio.gather(*workers), 15)
        ids = [c.job.job_id for s in seen for c in s]
        assert len(ids) == len(set(ids)) == len(jobs)
        assert seen[0] and seen[1]
        assert await queues[0].depth() == {"pending": 0, "inflight": 0, "dead": 0}
    finally:
        for q in queues:
            await q.close()


async def test_legacy_layout_is_imported(tmp_path: Path) -> None:
    directory = queue_dir(tmp_path)
    for sub in ("pending", "inflight", "dead"):
        (directory / sub).mkdir(parents=True)
    codec = JsonCodec()
    waiting, leased, dead = make_job(1), make_job(2, next_attempt_at=time.time() + 300), make_job(3)
    (directory / "pending" / f"{waiting.job_id}.json").write_bytes(codec.encode(waiting))
    (directory / "inflight" / f"{leased.job_id}.json").write_bytes(codec.encode(leased))
    (directory / "dead" / f"{dead.job_id}.json").write_bytes(codec.encode(dead))
    q = LocalFileQueue(directory, codec)
    await q.start()
    try:
        assert await q.depth() == {"pending": 2, "inflight": 0, "dead": 1}
        claimed = await q.claim(10, 0)
        assert sorted(c.job.job_id for c in claimed) == sorted([waiting.job_id, leased.job_id])
        assert [j.job_id for j in await q.dead_letters()] == [dead.job_id]
    finally:
        await q.close()


async def test_done_marks_are_shared_kept_across_restarts_and_pruned(tmp_path: Path) -> None:
    first = LocalFileQueue(queue_dir(tmp_path), JsonCodec(), done_keys=2)
    second = LocalFileQueue(queue_dir(tmp_path), JsonCodec())
    await first.start()
    await second.start()
    try:
        assert await first.done_through("a") == 0
        await first.mark_done("a", 5)
        await first.mark_done("a", 3)  # never lowered
        await first.mark_done("b", 1)
        await first.mark_done("c", 1)  # evicts a from the memory of first: the file still knows
        assert await first.done_through("a") == 5
        assert await second.done_through("a") == 5  # another process on the directory
        await second.mark_done("a", 9)
        assert await first.done_through("a") == 9
        odd = "owner/task\0config"  # not a file-name-safe key: hashed
        await second.mark_done(odd, 4)
        assert await first.done_through(odd) == 4
        for path in (queue_dir(tmp_path) / "done").iterdir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "/" not in path.name
    finally:
        await first.close()
        await second.close()
    restarted = LocalFileQueue(queue_dir(tmp_path), JsonCodec())
    old = time.time() - 3 * 86_400
    os.utime(restarted.done / "b", (old, old))
    await restarted.start()
    try:
        assert await restarted.done_through("a") == 9
        assert await restarted.done_through("b") == 0  # stale mark pruned at start
    finally:
        await restarted.close()


async def test_unsafe_job_id_and_foreign_receipt(queue: LocalFileQueue) -> None:
    job = PushJob(job_id="../../etc/passwd", task_id="t", config_id="c", owner="o", url="https://example.com",
                  payload={}, seq=1)
    await queue.enqueue([job])
    assert all("/" not in n and ".." not in n for n in os.listdir(queue.pending))
    [claimed] = await queue.claim(1, 0)
    assert claimed.job.job_id == job.job_id
    with pytest.raises(ValueError):
        await queue.ack(ClaimedJob(job=job, receipt="../pending/x.job"))
    await queue.ack(claimed)
    assert await queue.depth() == {"pending": 0, "inflight": 0, "dead": 0}


async def test_waiting_claim_finds_another_instances_job(tmp_path: Path) -> None:
    writer, reader = (LocalFileQueue(queue_dir(tmp_path), JsonCodec()) for _ in range(2))
    await writer.start()
    await reader.start()
    try:
        later = make_job(0, next_attempt_at=time.time() + 60)
        await writer.enqueue([later])
        waiting = asyncio.create_task(reader.claim(10, 5))
        await asyncio.sleep(0.3)  # long enough for the reader to know pending/ as quiet
        job = make_job(1)
        started = time.monotonic()
        await writer.enqueue([job])  # no in-process wake-up for reader: its periodic rescan finds it
        [claimed] = await waiting
        assert claimed.job.job_id == job.job_id and time.monotonic() - started < 1.0
    finally:
        await writer.close()
        await reader.close()
