"""The ``local-file`` push queue: one encrypted file per job, scheduled by its file name.

Layout under ``<persistence-dir>/push_queue/`` (directories ``0700``, files ``0600``)::

    pending/<due-ms:13>-<seq:20>-<jobId>.job         waiting, due at <due-ms>
    inflight/<lease-expiry-ms:13>-<seq:20>-<jobId>.job leased to a worker until <lease-expiry-ms>
    dead/<seq:20>-<jobId>.job                         dead letters (kept, never retried)
    dead/<seq:20>-<tag>-<ns>.corrupt                  files that could not be read, kept raw
    done/<order key>                                  ordering mark: the highest seq done for that key
    queued/<order key>                                ordering mark: the highest seq queued for that key

A file holds ``codec.encode(job)`` (encrypted JSON) and nothing else: everything
the queue needs to schedule (due time, FIFO sequence, lease expiry) is in the
name, so sorting the names of ``pending/`` gives due order then FIFO, and no
job is decrypted before it is claimed.

Crash safety: a job file is written to a temporary file, fsynced and renamed
into place; the directory fsync that makes the new name durable is shared by
every change committed together (group commit: one batching writer on a
thread, as the task journal does). A change that moves a job (retry, dead
letter) writes the new file and syncs its directory before the old file is
removed, so a ``kill -9`` or a power loss at any point may duplicate a job,
never lose it. Temporary files of crashed writers are swept at start.

Claims: ``os.rename`` of ``pending/<name>`` to ``inflight/<expiry>-…`` is the
atomic claim, so several processes on one directory (the server and ``iac-code
a2a push-worker``) never get the same job, except once its lease has expired
and it went back to ``pending/`` (lease recovery is a rename too; the file
keeps its content, hence its ``lastError``). Claims and lease recoveries are
not fsynced: one lost in a crash only makes a job deliverable again, which
at-least-once delivery allows.

Ordering marks (:meth:`LocalFileQueue.mark_done`): ``done/<order key>`` holds
the highest ``seq`` done for that key, so every process on the directory and a
restarted one see them (a worker waits for a job's predecessor, so marks only in
memory would stall each configuration's next notification after a restart). They
are renamed into place but not fsynced: they survive ``kill -9``; a power loss
may lose the newest, which only delays a successor by the worker's bounded order
wait. A mark is never lowered by this process; two processes raising one key at
the same instant may leave the lower value (again only a bounded delay). Marks
untouched for ``DONE_TTL`` seconds are pruned. A bounded in-memory LRU keeps this
process's own marks too, in case a mark file cannot be written. ``queued/<order key>``
(:meth:`LocalFileQueue.queued_through`) holds the highest ``seq`` queued for the key,
written with the job, so a sender that restarted (or another process) chains a
configuration's next job to the last one queued before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from iac_code.api import ClaimedJob, JobCodec, PushJob, atomic_write, next_seq, private_dir, spawn, sweep_temp_files

logger = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 300_000
DEFAULT_DONE_KEYS = 100_000
POLL_INTERVAL = 0.1  # seconds between rescans while a claim waits: other processes' jobs, due retries, expired leases
SCAN_AHEAD = 512  # due names one listing of pending/ keeps for the next claims
AHEAD_TTL = 1.0  # seconds those names are used before pending/ is listed again
DONE_TTL = 2 * 86_400  # seconds a done mark is kept after its last update (the protocol asks for a day)
PRUNE_INTERVAL = 3_600.0  # seconds between prunings of stale done marks
QUIET_MARGIN_NS = 50_000_000  # how old pending/'s mtime must be to prove, unchanged, that nothing arrived

JOB_SUFFIX = ".job"
CORRUPT_SUFFIX = ".corrupt"
LEGACY_SUFFIX = ".json"  # the spec's anchor layout: pending|inflight|dead/<jobId>.json

_MAX_MS = 10**13 - 1
_MAX_SEQ = 10**20 - 1
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_QUEUED_NAME = re.compile(r"(\d{13})-(\d{20})-([A-Za-z0-9_-]{1,64})\.job")  # pending/ and inflight/
_DEAD_NAME = re.compile(r"(\d{20})-([A-Za-z0-9_-]{1,64})\.job")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _ms(seconds: float) -> int:
    if not math.isfinite(seconds):
        return 0 if seconds < 0 else _MAX_MS
    return max(0, min(_MAX_MS, int(seconds * 1000)))


def _name_id(job: PushJob) -> str:
    """The job id as it appears in a file name (a hash when the id is not file-name safe)."""
    if _SAFE_ID.fullmatch(job.job_id):
        return job.job_id
    return hashlib.sha256(job.job_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _seq(job: PushJob) -> int:
    return max(0, min(_MAX_SEQ, job.seq))


def queued_name(ms: int, seq: int, job_id: str) -> str:
    """A ``pending/`` or ``inflight/`` file name: ``ms`` is the due time or the lease expiry."""
    return f"{max(0, min(_MAX_MS, ms)):013d}-{seq:020d}-{job_id}{JOB_SUFFIX}"


def pending_name(job: PushJob, now_ms: int) -> str:
    """The ``pending/`` name of ``job``: due at its ``next_attempt_at``, but never before ``now_ms``,
    so jobs due "now" (``0``) are ordered by enqueue time, then ``seq``, beside due retries."""
    return queued_name(max(_ms(job.next_attempt_at), now_ms), _seq(job), _name_id(job))


def dead_name(job: PushJob) -> str:
    return f"{_seq(job):020d}-{_name_id(job)}{JOB_SUFFIX}"


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _names(directory: Path) -> Iterator[str]:
    """The entries of ``directory`` other than hidden (temporary) files, in no order."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.startswith("."):
                yield entry.name


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(eq=False)
class _Change:
    """One caller's change, committed with whatever else is waiting: new files first, then removals."""

    writes: list[tuple[Path, bytes]]
    unlinks: list[Path]
    future: asyncio.Future[None]
    marks: dict[Path, int] = field(default_factory=dict)  # done marks: written without fsync, never lowered
    error: BaseException | None = field(default=None)


class LocalFileQueue:
    """A durable, at-least-once push queue in a local directory (``push-queue: local-file``).

    Implements :class:`iac_code.api.PushQueue`; see the module documentation for the
    layout and the crash-safety argument. ``lease_timeout_ms`` is how long a claimed job
    stays leased before another claim may take it again.
    """

    def __init__(self, directory: Path, codec: JobCodec, *, lease_timeout_ms: int = DEFAULT_LEASE_MS,
                 done_keys: int = DEFAULT_DONE_KEYS, poll_interval: float = POLL_INTERVAL) -> None:
        self.directory = Path(directory)
        self.pending = self.directory / "pending"
        self.inflight = self.directory / "inflight"
        self.dead = self.directory / "dead"
        self.done = self.directory / "done"
        self.queued = self.directory / "queued"
        self._codec = codec
        self._lease_ms = max(1, int(lease_timeout_ms))
        self._poll = poll_interval
        self._done: OrderedDict[str, int] = OrderedDict()
        self._done_keys = max(1, done_keys)
        self._changes: list[_Change] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()  # replaced after each set: a waiter keeps the one it saw
        self._ahead: list[str] = []  # due pending names from the last scan, the next one last
        self._ahead_until = 0.0
        self._ahead_lock = threading.Lock()
        self._next_prune = 0.0
        self._quiet: tuple[int, int | None] | None = None  # (mtime of pending/, next due) after a scan found nothing
        self._closed = False

    @property
    def lease_timeout_ms(self) -> int:
        return self._lease_ms

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Create the directories, sweep crashed writers' temporary files, import legacy-layout files."""
        await asyncio.to_thread(self._prepare)

    def _prepare(self) -> None:
        private_dir(self.directory)
        for directory in (self.pending, self.inflight, self.dead, self.done, self.queued):
            private_dir(directory)
        swept = sweep_temp_files(self.directory)
        if swept:
            logger.info("Push queue: removed %d temporary file(s) left by a crash", swept)
        self._import_legacy()
        self._prune_marks()

    async def close(self) -> None:
        """Wait until every change handed over is durable, then stop the writer."""
        self._closed = True
        if self._changes and self._writer is not None and not self._writer.done():
            await asyncio.gather(*(change.future for change in list(self._changes)), return_exceptions=True)
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None

    # ------------------------------------------------------------------ changes (group commit)

    async def enqueue(self, jobs: Sequence[PushJob]) -> None:
        """Store ``jobs`` (durable on return), due at their ``next_attempt_at``."""
        if not jobs:
            return
        now = _now_ms()
        writes = [(self.pending / pending_name(job, now), self._codec.encode(job)) for job in jobs]
        marks: dict[Path, int] = {}
        for job in jobs:
            path = self._mark_file(job.order_key, self.queued)
            marks[path] = max(job.seq, marks.get(path, 0))
        await self._commit(writes, [], marks)

    async def ack(self, claimed: ClaimedJob) -> None:
        """Remove the delivered job's lease file."""
        await self._commit([], [self._receipt(claimed)])

    async def retry(self, claimed: ClaimedJob, job: PushJob) -> None:
        """Write ``job`` back to ``pending/`` (due at its ``next_attempt_at``), then drop the lease file."""
        write = (self.pending / pending_name(job, _now_ms()), self._codec.encode(job))
        await self._commit([write], [self._receipt(claimed)])

    async def dead_letter(self, claimed: ClaimedJob, job: PushJob) -> None:
        """Write ``job`` to ``dead/``, then drop the lease file."""
        write = (self.dead / dead_name(job), self._codec.encode(job))
        await self._commit([write], [self._receipt(claimed)])

    def _receipt(self, claimed: ClaimedJob) -> Path:
        receipt = claimed.receipt
        if not isinstance(receipt, str) or not _QUEUED_NAME.fullmatch(receipt):
            raise ValueError("Not a local-file push queue receipt.")
        return self.inflight / receipt

    async def _commit(self, writes: list[tuple[Path, bytes]], unlinks: list[Path],
                      marks: dict[Path, int] | None = None) -> None:
        if self._closed:
            raise RuntimeError("The push queue is closed.")
        change = _Change(writes, unlinks, asyncio.get_running_loop().create_future(), marks or {})
        self._changes.append(change)
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = spawn(self._run(), name="push-file-writer")
        await change.future

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._changes = self._changes, []
            if not batch:
                continue
            try:
                await asyncio.to_thread(_commit_batch, batch)
            except BaseException as exc:  # cancelled mid-commit, or a bug: nobody may wait forever
                for change in batch:
                    if not change.future.done():
                        change.future.set_exception(
                            exc if isinstance(exc, Exception) else RuntimeError("The push queue was closed."))
                raise
            for change in batch:
                if change.future.done():
                    continue
                if change.error is None:
                    change.future.set_result(None)
                else:
                    change.future.set_exception(change.error)
            if any(change.error is None and change.writes and change.writes[0][0].parent == self.pending
                   for change in batch):
                self._notify()

    def _notify(self) -> None:
        arrived, self._arrived = self._arrived, asyncio.Event()
        arrived.set()

    # ------------------------------------------------------------------ claims

    async def claim(self, limit: int, wait: float) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs, waiting at most ``wait`` seconds for one.

        Each pass recovers expired leases, then renames the first due ``pending/`` files (name
        order: due time, then FIFO) into ``inflight/``. While nothing is due it sleeps until the
        next due time or lease expiry it saw, a job enqueued by this process, or ``poll_interval``
        (to notice other processes' jobs), whichever comes first.
        """
        if limit <= 0:
            return []
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            arrived = self._arrived
            claimed, next_ms, again = await asyncio.to_thread(self._claim_pass, limit)
            if claimed:
                return claimed
            if again:
                continue  # due files were there but others took them or they were unreadable: look again at once
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            delay = min(remaining, self._poll)
            if next_ms is not None:
                delay = min(delay, max(0.0, (next_ms - _now_ms()) / 1000))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), delay)

    def _claim_pass(self, limit: int) -> tuple[list[ClaimedJob], int | None, bool]:
        """One pass (worker thread): the claimed jobs, the next due/expiry time seen, and whether to look
        again at once (nothing claimed although due files were there: taken by others, or unreadable).

        Due names left over by a scan are kept (at most ``SCAN_AHEAD``, for ``AHEAD_TTL`` seconds) and
        served to the next passes first, so a large backlog is not listed for every claim. They still
        come first: anything written after that scan is due no earlier than the scan's time.
        """
        if time.monotonic() >= self._next_prune:
            self._prune_marks()
        now = _now_ms()
        next_ms = self._recover_leases(now)
        expiry = min(_MAX_MS, now + self._lease_ms)
        claimed: list[ClaimedJob] = []
        skipped = False

        def claim(name: str) -> None:
            nonlocal skipped
            job = self._claim_file(name, expiry)
            if job is None:
                skipped = True
            else:
                claimed.append(job)

        for name in self._take_ahead(limit):
            claim(name)
        if len(claimed) < limit:
            listed_at = time.time_ns()
            mtime = os.stat(self.pending).st_mtime_ns
            quiet = self._quiet
            if not claimed and not skipped and quiet is not None and quiet[0] == mtime and (quiet[1] is None or now < quiet[1]):
                # nothing entered or left pending/ since a scan that found nothing due: no need to list it again
                return [], _earliest(next_ms, quiet[1]), False
            self._quiet = None
            due: list[str] = []
            next_due: int | None = None
            for name in heapq.nsmallest(max(2 * limit, SCAN_AHEAD), _names(self.pending)):
                match = _QUEUED_NAME.fullmatch(name)
                if match is None:
                    self._quarantine(self.pending / name, None, None)
                    skipped = True
                elif int(match[1]) > now:
                    next_due = int(match[1])
                    break
                else:
                    due.append(name)
            taken = 0
            while len(claimed) < limit and taken < len(due):
                claim(due[taken])
                taken += 1
            self._keep_ahead(due[taken:])
            next_ms = _earliest(next_ms, next_due)
            if not due and not skipped and mtime < listed_at - QUIET_MARGIN_NS:
                # directory times are coarse (a clock tick): trust an unchanged one only if it was already old
                self._quiet = (mtime, next_due)
        return claimed, next_ms, skipped and not claimed

    def _claim_file(self, name: str, expiry: int) -> ClaimedJob | None:
        """Rename ``pending/<name>`` into ``inflight/`` (the atomic claim) and read it; None when it was
        gone (another worker claimed it) or unreadable (set aside in ``dead/``)."""
        match = _QUEUED_NAME.fullmatch(name)
        if match is None:
            return None
        receipt = queued_name(expiry, int(match[2]), match[3])
        leased = self.inflight / receipt
        try:
            os.rename(self.pending / name, leased)
        except FileNotFoundError:
            return None
        job = self._read(leased, match[2], match[3])
        return None if job is None else ClaimedJob(job=job, receipt=receipt)

    def _take_ahead(self, limit: int) -> list[str]:
        with self._ahead_lock:
            if time.monotonic() > self._ahead_until:
                self._ahead.clear()
            count = min(limit, len(self._ahead))
            return [self._ahead.pop() for _ in range(count)]

    def _keep_ahead(self, names: list[str]) -> None:
        with self._ahead_lock:
            self._ahead = names[::-1]  # pop() serves the first
            self._ahead_until = time.monotonic() + AHEAD_TTL

    def _recover_leases(self, now: int) -> int | None:
        """Move every expired lease back to ``pending/``, due now; the earliest live expiry."""
        earliest: int | None = None
        recovered = 0
        for name in _names(self.inflight):
            match = _QUEUED_NAME.fullmatch(name)
            if match is None:
                self._quarantine(self.inflight / name, None, None)
                continue
            expiry = int(match[1])
            if expiry > now:
                earliest = _earliest(earliest, expiry)
                continue
            try:
                os.rename(self.inflight / name, self.pending / queued_name(now, int(match[2]), match[3]))
            except FileNotFoundError:  # settled or recovered by another worker meanwhile
                continue
            recovered += 1
        if recovered:
            logger.info("Push queue: %d expired lease(s) made claimable again", recovered)
        return earliest

    def _read(self, path: Path, seq: str, job_id: str) -> PushJob | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._quarantine(path, seq, job_id, exc)
            return None
        try:
            return self._codec.decode(data)
        except Exception as exc:  # corrupt, truncated by hand, or encrypted under a key no longer in the keyring
            self._quarantine(path, seq, job_id, exc)
            return None

    def _quarantine(self, path: Path, seq: str | None, tag: str | None, error: BaseException | None = None) -> None:
        """Move an unreadable or foreign file to ``dead/`` as it is, so the queue keeps going."""
        if seq is None:
            seq = f"{next_seq():020d}"
            tag = _UNSAFE_CHARS.sub("_", path.stem)[:48] or "foreign"
        target = self.dead / f"{seq}-{tag}-{time.time_ns()}{CORRUPT_SUFFIX}"
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.warning("Push queue: could not set aside unreadable job file %s: %s", path.name, type(exc).__name__)
            return
        reason = type(error).__name__ if error is not None else "unexpected file name"
        logger.warning("Push queue: moved unreadable job file %s to the dead letters as %s (%s)",
                       path.name, target.name, reason)

    # ------------------------------------------------------------------ inspection, ordering marks

    async def depth(self) -> dict[str, int]:
        """File counts of ``pending/``, ``inflight/`` and ``dead/`` (unreadable files set aside included)."""
        def count() -> dict[str, int]:
            return {"pending": _count(self.pending), "inflight": _count(self.inflight), "dead": _count(self.dead)}
        return await asyncio.to_thread(count)

    async def dead_letters(self, limit: int = 100) -> list[PushJob]:
        """Up to ``limit`` dead-lettered jobs, oldest (lowest ``seq``) first; unreadable ones are skipped."""
        if limit <= 0:
            return []

        def load() -> list[PushJob]:
            jobs = []
            names = (name for name in _names(self.dead) if _DEAD_NAME.fullmatch(name))
            for name in heapq.nsmallest(limit, names):
                try:
                    jobs.append(self._codec.decode((self.dead / name).read_bytes()))
                except FileNotFoundError:
                    continue
                except Exception as exc:
                    logger.warning("Push queue: skipping unreadable dead letter %s (%s)", name, type(exc).__name__)
            return jobs
        return await asyncio.to_thread(load)

    async def mark_done(self, key: str, seq: int) -> None:
        """Raise ``key``'s done mark to ``seq`` (``done/<key>``, shared by every process on the directory).

        A mark that cannot be written is logged and kept in this process's memory only.
        """
        seq = int(seq)
        self._remember(key, seq)
        await self._commit([], [], {self._mark_file(key): seq})

    async def done_through(self, key: str) -> int:
        """The highest ``seq`` marked done for ``key`` (by any process on the directory), 0 when unknown."""
        on_disk = await asyncio.to_thread(_read_mark, self._mark_file(key))
        known = self._done.get(key, 0)
        if key in self._done:
            self._done.move_to_end(key)
        return max(known, on_disk)

    async def queued_through(self, key: str) -> int:
        """The highest ``seq`` queued for ``key`` (by any process on the directory), 0 when unknown."""
        return await asyncio.to_thread(_read_mark, self._mark_file(key, self.queued))

    def _remember(self, key: str, seq: int) -> None:
        self._done[key] = max(seq, self._done.get(key, 0))
        self._done.move_to_end(key)
        while len(self._done) > self._done_keys:
            self._done.popitem(last=False)

    def _mark_file(self, key: str, directory: Path | None = None) -> Path:
        name = key if _SAFE_ID.fullmatch(key) else hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return (directory or self.done) / name

    def _prune_marks(self) -> None:
        """Delete done and queued marks not updated for ``DONE_TTL`` seconds (worker thread)."""
        self._next_prune = time.monotonic() + PRUNE_INTERVAL
        horizon = time.time() - DONE_TTL
        for directory in (self.done, self.queued):
            with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        if not entry.name.startswith(".") and entry.stat().st_mtime < horizon:
                            os.unlink(entry.path)

    # ------------------------------------------------------------------ legacy layout

    def _import_legacy(self) -> None:
        """Rewrite files of the spec's anchor layout (``<dir>/<jobId>.json``) in this layout."""
        now = _now_ms()
        for directory in (self.pending, self.inflight, self.dead):
            legacy = [name for name in _names(directory) if name.endswith(LEGACY_SUFFIX)]
            for name in legacy:
                path = directory / name
                try:
                    job = self._codec.decode(path.read_bytes())
                except FileNotFoundError:
                    continue
                except Exception as exc:
                    if directory is not self.dead:
                        self._quarantine(path, None, None, exc)
                    continue
                if directory is self.dead:
                    target = self.dead / dead_name(job)
                elif directory is self.inflight:  # a lease of the old layout: due again now
                    target = self.pending / queued_name(now, _seq(job), _name_id(job))
                else:
                    target = self.pending / pending_name(job, now)
                atomic_write(target, self._codec.encode(job))
                path.unlink(missing_ok=True)
            if legacy:
                _sync_dir(directory)
                logger.info("Push queue: imported %d job file(s) of the previous layout from %s/",
                            len(legacy), directory.name)


def _count(directory: Path) -> int:
    return sum(1 for _ in _names(directory))


def _read_mark(path: Path) -> int:
    try:
        return max(0, int(path.read_bytes().strip() or b"0"))
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as exc:
        logger.warning("Push queue: ignoring unreadable done mark %s (%s)", path.name, type(exc).__name__)
        return 0


def _write_marks(batch: list[_Change]) -> None:
    marks: dict[Path, int] = {}
    for change in batch:
        for path, seq in change.marks.items():
            marks[path] = max(seq, marks.get(path, 0))
    for path, seq in marks.items():
        try:
            if _read_mark(path) < seq:
                atomic_write(path, str(seq).encode(), sync_dir=False, sync_file=False)
        except OSError as exc:  # advisory: the successor waits at most the worker's order wait
            logger.warning("Push queue: could not write ordering mark %s (%s)", path.name, type(exc).__name__)


def _commit_batch(batch: Iterable[_Change]) -> None:
    """Write one commit group (writer thread): done marks, every new file and one fsync per directory,
    then the removals."""
    batch = list(batch)
    _write_marks(batch)
    written: dict[Path, list[_Change]] = {}
    for change in batch:
        try:
            for path, data in change.writes:
                atomic_write(path, data, sync_dir=False)
                written.setdefault(path.parent, []).append(change)
        except OSError as exc:
            change.error = exc
    for directory, changes in written.items():
        try:
            _sync_dir(directory)
        except OSError as exc:
            for change in changes:
                change.error = change.error or exc
    removed: dict[Path, list[_Change]] = {}
    for change in batch:
        if change.error is not None:
            continue  # the new file may not be durable: keep the old one
        try:
            for path in change.unlinks:
                with contextlib.suppress(FileNotFoundError):  # the lease expired and another worker moved it
                    os.unlink(path)
                removed.setdefault(path.parent, []).append(change)
        except OSError as exc:
            change.error = exc
    for directory, changes in removed.items():
        try:
            _sync_dir(directory)
        except OSError as exc:
            for change in changes:
                change.error = change.error or exc
