"""The server side of ``stdio``: one NDJSON session on the process's stdin/stdout (transports.md §3).

stdout carries frames only: logs go to stderr, ``--log-to-stdout`` is refused, and while the
transport runs ``sys.stdout`` is pointed at stderr so a stray ``print()`` cannot corrupt the
frame stream (the frames are written to a duplicate of file descriptor 1). When stdin reaches
EOF the in-flight requests finish (``shutdown-grace-seconds``) and the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
import threading
from typing import IO, Any

from iac_code.api import InterfaceInfo, PluginContext, StartupError
from iac_code_transport_stdio.ndjson import NdjsonSession, grace_seconds, reader_limit

logger = logging.getLogger(__name__)

LOG_TO_STDOUT_ERROR = "--log-to-stdout cannot be used with --transport stdio because stdout carries A2A frames."
INTERFACE = InterfaceInfo(url="stdio://iac-code", protocol_binding="stdio")


class _ThreadFileWriter:
    """A line writer (``write``/``drain``/``is_closing``/``close``) for a stdout that is not a pipe: writes in a thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._closed = False

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        if data:
            await asyncio.to_thread(self._write_all, data)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True  # the descriptor belongs to the transport's file object


def _is_pipe_like(fd: int) -> bool:
    """Whether ``fd`` is a pipe, a socket or a character device (what asyncio's pipe transports accept)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _feed_from_thread(fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
    """Read ``fd`` on a daemon thread into ``reader`` (stdin that is a regular file)."""
    def pump() -> None:
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except OSError:
            pass
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="iac-code-stdin", daemon=True).start()


class StdioTransport:
    """Serves one NDJSON session on the process's stdin/stdout."""

    def __init__(self, context: PluginContext) -> None:
        if context.config.log_to_stdout:
            raise StartupError(LOG_TO_STDOUT_ERROR)
        self.context = context
        self._session: NdjsonSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._saved_stdout: IO[str] | None = None
        self._stopping = False
        self._files: list[IO[bytes]] = []

    async def start(self) -> list[InterfaceInfo]:
        """Connect stdin/stdout to an NDJSON session."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=reader_limit(self.context))
        stdin_file = os.fdopen(os.dup(sys.stdin.fileno()), "rb", 0)
        stdout_file = os.fdopen(os.dup(sys.stdout.fileno()), "wb", 0)
        self._files = [stdin_file, stdout_file]  # kept referenced: collecting them would close the descriptors
        # Pipe transports take pipes, sockets and character devices only (uvloop aborts the process on a
        # regular file instead of raising), so a redirected file is read and written on threads.
        if _is_pipe_like(stdin_file.fileno()):
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin_file)
        else:
            _feed_from_thread(stdin_file.fileno(), reader, loop)
        writer: Any
        if _is_pipe_like(stdout_file.fileno()):
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout_file)
            writer = asyncio.StreamWriter(transport, protocol, None, loop)
        else:
            writer = _ThreadFileWriter(stdout_file.fileno())
        sys.stdout.flush()
        self._saved_stdout, sys.stdout = sys.stdout, sys.stderr
        self._session = NdjsonSession(self.context, reader, writer, "stdio")
        self._task = loop.create_task(self._serve(self._session))
        return [INTERFACE]

    async def _serve(self, session: NdjsonSession) -> None:
        try:
            await session.run()
        finally:
            if not self._stopping:
                logger.info("stdin closed: stopping the server")
                self.context.request_stop()

    async def stop(self) -> None:
        """End the session (in-flight requests get their grace period) and give stdout back."""
        self._stopping = True
        if self._session is not None:
            self._session.end_reading()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), grace_seconds(self.context) + 1)
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None
        if self._saved_stdout is not None:
            sys.stdout, self._saved_stdout = self._saved_stdout, None
        files, self._files = self._files, []
        for file in files:
            with contextlib.suppress(OSError):
                file.close()
