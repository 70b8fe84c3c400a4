"""Group-commit journal: a task state is on disk before any client hears of it.

Task snapshots (:class:`iac_code.base.storage.SnapshotWriter`) are written lazily
and coalesced, so under load they trail the responses. Every task change is
therefore also appended to ``<persistence-dir>/journal/<first seq>.jsonl``,
one JSON document per line (the snapshot document plus its ``seq``), and
whoever acknowledges a state first awaits :meth:`Journal.reach` for the
change's sequence number. All changes waiting at a moment share one write and
one ``fdatasync`` (group commit, as databases do), so durability costs each
request a share of one fsync, not an fsync of its own.

At start-up the journal is replayed over the snapshots (the higher ``seq``
wins), the snapshots it changes are rewritten and the journal is emptied. A
full segment is retired once the snapshot writer has written every change made
before it was closed and the file system is synced: task snapshots are written
without an fsync of their own, the journal being what makes them durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iac_code.base import jsonio
from iac_code.base.background import spawn
from iac_code.base.storage import fsync_dir, private_dir, sync_filesystem

if TYPE_CHECKING:
    from iac_code.base.instrumentation import Instrumentation

logger = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".jsonl"
DEFAULT_SEGMENT_BYTES = 32 * 1024 * 1024

Record = Callable[[], dict[str, Any]]


class JournalError(OSError):
    """The journal could not make a change durable (disk full, I/O error)."""


class Journal:
    """Append-only JSON-lines log whose writes are committed in groups."""

    def __init__(self, directory: Path, *, checkpoint: Callable[[], Awaitable[None]],
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 instrumentation: Instrumentation | None = None) -> None:
        self.path = private_dir(directory)
        self._checkpoint = checkpoint
        self._segment_bytes = segment_bytes
        self._pending: dict[Hashable, Record] = {}
        self._seq = 0  # the last sequence number handed out
        self._durable = 0  # every change up to this one is on disk
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._tiebreak = 0
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._retiring: set[asyncio.Task[None]] = set()
        self._fd: int | None = None
        self._segment: Path | None = None
        self._size = 0
        self._full: list[Path] = []
        # Observes each group commit's latency (a metrics plugin); None: no work at all.
        self.instrumentation = instrumentation

    # ------------------------------------------------------------------ writing

    @property
    def durable(self) -> int:
        return self._durable

    @property
    def last_seq(self) -> int:
        return self._seq

    def next_seq(self) -> int:
        """A new sequence number; numbers grow across restarts (see :meth:`start_after`)."""
        self._seq += 1
        return self._seq

    def record(self, key: Hashable, produce: Record) -> None:
        """Append ``produce()`` (run in the writer thread) for ``key``; a later record of the same
        key not yet written replaces it, so one commit writes each key's latest state once."""
        self._pending[key] = produce
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = spawn(self._run(), name="journal-writer")

    async def reach(self, seq: int) -> None:
        """Return once every change up to ``seq`` is on disk; raises :class:`JournalError`."""
        if seq <= self._durable:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tiebreak += 1
        heapq.heappush(self._waiters, (seq, self._tiebreak, future))
        await future

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, {}
            upto = self._seq
            if not batch:
                continue
            instrumentation = self.instrumentation
            started = time.perf_counter() if instrumentation is not None else 0.0
            try:
                rotated = await asyncio.to_thread(self._write, list(batch.values()))
            except Exception as exc:
                logger.error("Task journal write failed: %s", type(exc).__name__)
                self._release(upto, JournalError("The task could not be stored durably."))
                continue
            if instrumentation is not None:
                instrumentation.journal_committed(time.perf_counter() - started)
            self._durable = upto
            self._release(upto, None)
            if rotated:
                retire = spawn(self._retire(), name="journal-retire")
                self._retiring.add(retire)
                retire.add_done_callback(self._retiring.discard)

    def _release(self, upto: int, error: BaseException | None) -> None:
        while self._waiters and self._waiters[0][0] <= upto:
            _, _, future = heapq.heappop(self._waiters)
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

    def _write(self, records: list[Record]) -> bool:
        """Write one commit group (writer thread); returns whether a segment filled up."""
        documents = [produce() for produce in records]
        data = b"".join(jsonio.dumps(document) + b"\n" for document in documents)
        rotated = False
        if self._fd is not None and self._size >= self._segment_bytes:
            os.close(self._fd)
            assert self._segment is not None
            self._full.append(self._segment)
            self._fd = None
            rotated = True
        if self._fd is None:
            first = min(int(d.get("seq", 0)) for d in documents)
            self._segment = self.path / f"{first:020d}{SEGMENT_SUFFIX}"
            self._fd = os.open(self._segment, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._size = os.fstat(self._fd).st_size
            fsync_dir(self.path)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        os.fdatasync(self._fd)
        self._size += len(data)
        return rotated

    async def _retire(self) -> None:
        """Delete full segments once the snapshots cover them."""
        full, self._full = self._full, []
        await self._checkpoint()
        await asyncio.to_thread(sync_filesystem, self.path)  # snapshots are written without fsync
        await asyncio.to_thread(_unlink_all, full, self.path)

    async def close(self) -> None:
        """Write what is pending, then stop (the segments stay for the next start-up)."""
        if self._seq > self._durable and self._writer is not None and not self._writer.done():
            with contextlib.suppress(JournalError):
                await self.reach(self._seq)
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        for retire in list(self._retiring):
            with contextlib.suppress(Exception):
                await retire
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # ------------------------------------------------------------------ start-up

    def segments(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir() if p.name.endswith(SEGMENT_SUFFIX) and p.is_file())

    def replay(self) -> Iterator[dict[str, Any]]:
        """Every readable record in order; a line torn by a crash is skipped."""
        for segment in self.segments():
            try:
                data = segment.read_bytes()
            except OSError as exc:
                logger.warning("Skipping unreadable journal segment %s: %s", segment.name, type(exc).__name__)
                continue
            for number, line in enumerate(data.split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    document = jsonio.loads(line)
                except ValueError:
                    logger.warning("Skipping torn journal record %s:%d", segment.name, number)
                    continue
                if isinstance(document, dict) and isinstance(document.get("seq"), int):
                    yield document

    def start_after(self, seq: int) -> None:
        """Continue numbering after ``seq`` (the highest number found at start-up)."""
        self._seq = max(self._seq, seq)
        self._durable = max(self._durable, seq)

    def clear(self) -> None:
        """Delete every segment (start-up, once the snapshots hold what they held)."""
        _unlink_all(self.segments(), self.path)


def _unlink_all(paths: list[Path], directory: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    if paths:
        fsync_dir(directory)
