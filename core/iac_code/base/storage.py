"""Durable JSON snapshots: atomic, owner-only files written off the event loop.

Every document is written to a temporary file in the same directory, fsynced,
renamed over the old one and the directory fsynced, so a ``kill -9`` at any
moment leaves either the old or the new document, never a torn one. Files are
``0600`` in ``0700`` directories. Writes are coalesced: if a document changes
several times within the writer's linger (50 ms) or while it is busy, only its
latest state is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import hashlib
import itertools
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from iac_code.base import jsonio
from iac_code.base.background import spawn

logger = logging.getLogger(__name__)

SUFFIX = ".json"

_counter = itertools.count()

# A pending write: a callable producing the document (run in the writer thread), or None to delete.
Producer = Callable[[], dict[str, Any]] | None


def file_key(*parts: str) -> str:
    """A fixed-length, filesystem-safe name for a document key."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:40]


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as an owner-only directory."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    return path


def atomic_write(path: Path, data: bytes, *, sync_dir: bool = True, sync_file: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync dir).

    ``sync_dir=False`` leaves the directory fsync to the caller (one per batch);
    ``sync_file=False`` leaves durability to someone else (the task journal, which
    syncs the file system before it forgets what such files hold).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{next(_counter)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync_file:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(path.parent)


_TEMP_NAME = re.compile(r"\..+\.(\d+)-\d+\.tmp")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def sweep_temp_files(root: Path) -> int:
    """Delete the temp files a crashed writer left under ``root`` (``atomic_write``'s names, dead pids only)."""
    removed = 0
    if not root.is_dir():
        return 0
    for directory, _, names in os.walk(root):
        for name in names:
            match = _TEMP_NAME.fullmatch(name)
            if match is None or _alive(int(match[1])):
                continue
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))
                removed += 1
    return removed


def sync_filesystem(path: Path) -> None:
    """Flush every write of the file system holding ``path`` to disk (``syncfs``; ``sync`` elsewhere)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created ``0600``) between processes: POSIX ``flock``, nothing elsewhere.

    For read-modify-write of a file several processes share (a key store, a keyring).
    """
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_private_file(path: Path) -> bytes | None:
    """The file's bytes, or ``None`` when absent; a group/other-readable file is made ``0600`` first (with a warning)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if os.name != "nt" and mode & 0o077:
        logger.warning("%s was readable by other users; restricting it to its owner (0600)", path.name)
        os.chmod(path, 0o600)
    return path.read_bytes()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def write_new_private_file(path: Path, data: bytes) -> bool:
    """Create ``path`` (``0600``, in a ``0700`` directory) holding ``data`` unless it exists; whether it was created.

    The file appears whole (temp file, fsync, hard link) and never replaces one
    another process created meanwhile: two servers starting on a fresh directory
    both end up with the first one's key, not each with its own.
    """
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system: exclusive create, then write
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return False
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)
    fsync_dir(path.parent)
    return True


class JsonDirectory:
    """A directory of JSON documents, one file per key.

    ``synced=False`` writes without fsync: for documents a journal already holds
    durably (the task snapshots), whose owner syncs the file system itself.
    """

    def __init__(self, path: Path, *, synced: bool = True) -> None:
        self.path = private_dir(path)
        self.synced = synced

    def file(self, key: str) -> Path:
        return self.path / f"{key}{SUFFIX}"

    def write(self, key: str, document: dict[str, Any], *, sync_dir: bool = True) -> None:
        atomic_write(self.file(key), jsonio.dumps(document), sync_dir=sync_dir and self.synced,
                     sync_file=self.synced)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.file(key))

    def read(self, key: str) -> dict[str, Any] | None:
        try:
            data = jsonio.loads(self.file(key).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("Skipping unreadable snapshot %s: %s", self.file(key).name, type(exc).__name__)
            return None
        return data if isinstance(data, dict) else None

    def load_all(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every readable document; corrupt or foreign files are skipped with a warning."""
        for entry in sorted(self.path.iterdir()):
            name = entry.name
            if name.startswith(".") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):  # left behind by a crash mid-write
                    entry.unlink()
                continue
            if not name.endswith(SUFFIX) or not entry.is_file():
                logger.warning("Skipping foreign file in %s: %s", self.path.name, name)
                continue
            try:
                data = jsonio.loads(entry.read_bytes())
            except (OSError, ValueError) as exc:
                logger.warning("Skipping corrupt snapshot %s/%s: %s", self.path.name, name, type(exc).__name__)
                continue
            if not isinstance(data, dict):
                logger.warning("Skipping foreign snapshot %s/%s", self.path.name, name)
                continue
            yield name[: -len(SUFFIX)], data


class SnapshotWriter:
    """Writes snapshots in the background, coalescing repeated updates of a document.

    ``barrier()`` waits until everything scheduled before it is on disk (the
    journal retires a segment only then); ``on_batch`` callbacks run on the event
    loop after each written batch with the slots it wrote (the task store and the
    context registry may then unload those documents).

    A document waiting to be written is also held in memory by its owner (a task
    or context cannot leave its cache before its file is current), so the queue
    is bounded: with ``backlog`` set, :meth:`room` (awaited before a new task or
    context is written) waits while that many documents are queued and not yet
    being written. New work then goes at the disk's pace instead of piling up.
    """

    def __init__(self, linger: float = 0.05, backlog: int = 0) -> None:
        self._linger = linger
        self.backlog = backlog  # queued documents at which room() waits (0: no limit)
        self._room: list[asyncio.Future[None]] = []
        self.instrumentation: Any = None  # observes each batch's write latency (a metrics plugin)
        self._pending: dict[tuple[JsonDirectory, str], Producer] = {}
        self._inflight: dict[tuple[JsonDirectory, str], Producer] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._scheduled = 0  # generation of the latest put/remove
        self._written = 0  # every generation up to this one is on disk
        self._barriers: list[tuple[int, asyncio.Future[None]]] = []
        self.on_batch: list[Callable[[list[tuple[JsonDirectory, str]]], None]] = []

    def put(self, directory: JsonDirectory, key: str, produce: Callable[[], dict[str, Any]]) -> None:
        """Schedule ``produce()`` to be written as ``key`` (the latest call wins)."""
        self._schedule((directory, key), produce)

    def remove(self, directory: JsonDirectory, key: str) -> None:
        self._schedule((directory, key), None)

    def is_pending(self, directory: JsonDirectory, key: str) -> bool:
        """Whether a write of ``key`` is scheduled or under way (its file may be stale)."""
        slot = (directory, key)
        return slot in self._pending or slot in self._inflight

    @property
    def queued(self) -> int:
        """Documents scheduled and not yet written (queued plus the batch being written)."""
        return len(self._pending) + len(self._inflight)

    @property
    def waiting(self) -> int:
        """Callers of :meth:`room` waiting for the queue to shrink."""
        return sum(not future.done() for future in self._room)

    async def room(self) -> None:
        """Wait while ``backlog`` documents are queued and not yet being written (backpressure)."""
        while self.backlog and len(self._pending) >= self.backlog:
            if self._task is None or self._task.done():  # a batch that failed ended the writer: start it again
                self._wake.set()
                self._task = spawn(self._run(), name="snapshot-writer")
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._room.append(future)
            await future

    def _schedule(self, slot: tuple[JsonDirectory, str], produce: Producer) -> None:
        self._pending[slot] = produce
        self._scheduled += 1
        self._idle.clear()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = spawn(self._run(), name="snapshot-writer")

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if self._linger:
                await asyncio.sleep(self._linger)  # let a turn's burst of updates coalesce
            self._wake.clear()
            generation = self._scheduled
            self._inflight, self._pending = self._pending, {}
            written = list(self._inflight)
            self._make_room()
            try:
                if self._inflight:
                    started = time.perf_counter()
                    await asyncio.to_thread(_write_batch, self._inflight)
                    if self.instrumentation is not None:
                        self.instrumentation.snapshot_written(time.perf_counter() - started)
            finally:
                self._inflight = {}
                self._written = generation
                self._release_barriers()
            for callback in self.on_batch:
                callback(written)
            if not self._pending:
                self._idle.set()

    def _make_room(self) -> None:
        waiting, self._room = self._room, []
        for future in waiting:
            if not future.done():
                future.set_result(None)

    def _release_barriers(self) -> None:
        waiting = []
        for generation, future in self._barriers:
            if generation <= self._written:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((generation, future))
        self._barriers = waiting

    async def barrier(self) -> None:
        """Wait until everything scheduled before this call is on disk."""
        if self._scheduled <= self._written:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._barriers.append((self._scheduled, future))
        await future

    async def flush(self) -> None:
        """Wait until everything scheduled so far is on disk."""
        await self._idle.wait()

    async def close(self) -> None:
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _write_batch(batch: dict[tuple[JsonDirectory, str], Producer]) -> None:
    touched: set[Path] = set()
    synced = {directory.path for directory, _ in batch if directory.synced}
    for (directory, key), produce in batch.items():
        try:
            if produce is None:
                directory.delete(key)
            else:
                directory.write(key, produce(), sync_dir=False)
            touched.add(directory.path)
        except Exception:  # one bad document must not stop the others
            logger.exception("Could not write snapshot %s/%s", directory.path.name, key)
    for path in touched:
        if path in synced:
            fsync_dir(path)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_file_name(name: str, fallback: str = "artifact.txt") -> str:
    """A bare, portable file name: path parts dropped, odd characters replaced."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("-", base).strip(".-")[:120]
    return cleaned or fallback
