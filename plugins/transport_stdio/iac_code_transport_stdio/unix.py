"""The ``unix`` transport: NDJSON JSON-RPC sessions on a Unix domain socket (transports.md §4).

Each accepted connection runs an :class:`~iac_code_transport_stdio.ndjson.NdjsonSession`
(concurrent requests, correlated by id). Unlike the anchor the socket is
created owner-only (mode 0600), a live socket at the path is refused instead of
being stolen, and callers authenticate with the frame's ``headers`` member.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from iac_code.api import InterfaceInfo, StartupError
from iac_code_transport_stdio.ndjson import NdjsonSession, grace_seconds, reader_limit

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

LIVENESS_TIMEOUT = 1.0
BACKLOG = 128
ACCEPT_RETRY_SECONDS = 0.1


def _is_live(path: str) -> bool:
    """Whether something accepts connections on the socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(LIVENESS_TIMEOUT)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _prepare_path(path: str) -> None:
    """Validate ``socket-path`` and remove a stale socket left there (a live one is a start-up error)."""
    parent = Path(path).parent
    if not parent.is_dir():
        raise StartupError(f"Unix socket parent does not exist: {parent}")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise StartupError(f"Path exists and is not a Unix socket: {path}")
    if _is_live(path):
        raise StartupError(f"Another server is listening on {path}.")
    logger.info("Removing the stale Unix socket %s", path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _bind_owner_only(path: str) -> socket.socket:
    """A socket bound at ``path`` with mode 0600 (bound under umask 077, not yet listening)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old_umask = os.umask(0o077)
        try:
            sock.bind(path)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
    except BaseException:
        sock.close()
        raise
    return sock


class UnixTransport:
    """Listens on ``socket-path``; one NDJSON session per connection.

    Connections are accepted by an own loop (``loop.sock_accept``), not ``asyncio.Server``, so every accepted
    socket belongs to a session and is closed on :meth:`stop` (Python 3.11's ``Server.close`` can lose a
    connection accepted just before it).
    """

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel
        self.path: str = str(getattr(kernel.config, "socket_path", "") or "")
        if not self.path:
            raise StartupError("socket-path is required in --config for --transport unix.")
        self._sock: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._inode: tuple[int, int] | None = None
        self._sessions: dict[asyncio.Task[None], NdjsonSession | None] = {}
        self._closing = False

    async def start(self) -> list[InterfaceInfo]:
        """Bind the socket (owner-only) and accept connections."""
        _prepare_path(self.path)
        try:
            sock = _bind_owner_only(self.path)
        except OSError as exc:
            raise StartupError(f"Cannot bind the Unix socket {self.path}: {exc.strerror or exc}") from None
        info = os.stat(self.path)
        self._inode = (info.st_dev, info.st_ino)
        sock.setblocking(False)
        sock.listen(BACKLOG)
        self._sock = sock
        self._acceptor = asyncio.get_running_loop().create_task(self._accept_loop(sock), name="unix-accept")
        return [InterfaceInfo(url=f"unix://{self.path}", protocol_binding="unix")]

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                if self._closing:
                    return
                logger.warning("Accepting a Unix socket connection failed: %s", exc)
                await asyncio.sleep(ACCEPT_RETRY_SECONDS)  # e.g. out of file descriptors
                continue
            if self._closing:
                conn.close()
                return
            task = loop.create_task(self._handle(conn), name="unix-session")
            self._sessions[task] = None
            task.add_done_callback(lambda done: self._sessions.pop(done, None))

    async def _handle(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn, limit=reader_limit(self.kernel))
        except OSError:
            conn.close()
            return
        session = NdjsonSession(self.kernel, reader, writer, "unix")
        task = asyncio.current_task()
        if task is not None:
            self._sessions[task] = session
        try:
            if not self._closing:
                await session.run()
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("Unix socket session failed")
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _unlink(self) -> None:
        """Remove the socket file if it is still ours."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return
        if (info.st_dev, info.st_ino) == self._inode:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def open_connections(self) -> int:
        """Client connections open right now (the ``iac_code_a2a_connections`` gauge)."""
        return len(self._sessions)

    async def stop(self) -> None:
        """Stop accepting, let each session's in-flight requests finish (grace period), remove the socket."""
        self._closing = True
        if self._acceptor is not None:
            self._acceptor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._acceptor
            self._acceptor = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        sessions = dict(self._sessions)
        for session in sessions.values():
            if session is not None:
                session.end_reading()
        if sessions:
            _, late = await asyncio.wait(sessions, timeout=grace_seconds(self.kernel) + 1)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        self._unlink()
