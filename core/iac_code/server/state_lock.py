"""One server per state directory: an exclusive ``flock`` on ``<persistence-dir>/server.lock``.

``iac-code a2a`` takes the lock after the configuration validated and before anything under
the directory is read or written (snapshots, journal, task index, keyrings, signing keys), and
holds it for the life of the process; the kernel releases it when the process ends, ``kill -9``
included. A second server on the same directory gets one line naming the directory and the
holder's PID and exits having changed nothing. The lock file holds the PID of the server that
owns the directory, written once its sockets are bound (a start that fails earlier leaves
the file as it was). Processes that share the directory by design (``push-worker``, ``keys``,
``push-key-rotate``) do not take it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from iac_code.base.errors import StartupError

LOCK_FILE = "server.lock"


class StateDirectoryLock:
    """The running server's exclusive hold on its state directory (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self._fd: int | None = None
        self._created: list[Path] = []  # what acquire() created, removed again by abandon()

    def acquire(self) -> None:
        """Take the lock, or raise :class:`~iac_code.base.errors.StartupError` naming the holder's PID."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no flock
            return
        missing = [p for p in (self.directory, *self.directory.parents) if not p.exists()]
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StartupError(f"Cannot create the state directory {self.directory}: "
                               f"{exc.strerror or type(exc).__name__}.") from None
        self._created = [*missing]
        existed = self.path.exists()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self._remove_created()
            raise StartupError(f"Cannot open the state directory lock {self.path}: "
                               f"{exc.strerror or type(exc).__name__}.") from None
        if not existed:
            self._created.insert(0, self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            self._created = []  # the directory is the holder's: nothing of it is removed
            who = f"PID {holder}" if holder else "a process that is still starting"
            raise StartupError(f"The state directory {self.directory} is in use by another iac-code server "
                               f"({who}): stop it, or give this server its own persistence-dir.") from None
        self._fd = fd

    def record_owner(self) -> None:
        """Write this process's PID into the lock file (once the server's sockets are bound)."""
        if self._fd is None:
            return
        data = f"{os.getpid()}\n".encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)
        self._created = []  # the server started: what it created stays

    def abandon(self) -> None:
        """A start that failed: release the lock and remove what :meth:`acquire` created."""
        self._remove_created()  # while the lock is still held: nobody else can be using it
        self.release()

    def release(self) -> None:
        """Release the lock (closing the file does it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _remove_created(self) -> None:
        for path in self._created:
            if path == self.path:
                with contextlib.suppress(OSError):
                    path.unlink()
            elif path == self.directory:
                # This process created the directory moments ago and holds (or held) its lock:
                # what a failed start put in it goes too.
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    path.rmdir()  # a parent it created: only when still empty
        self._created = []


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
