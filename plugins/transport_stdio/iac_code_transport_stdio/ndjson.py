"""The server side of the NDJSON framing: the session both transports of this distribution (``stdio``, ``unix``) run.

One JSON object per line in (UTF-8); every answer is compact JSON plus ``"\\n"``
(``dumps`` of :mod:`iac_code.api`). Unlike the anchor (transports.md §1.2, §3.2)
requests are served concurrently: each line becomes a task, answers are
correlated by their ``id`` and writes are serialised by a lock.

* unary: one line, the response;
* stream (``serve_frame`` returned an async iterator): one line per event, then
  ``final_marker``;
* an error before a stream's first event (``serve_frame`` returned a dict for
  SendStreamingMessage/SubscribeToTask) gets ``"final": true`` so stream clients stop;
* a frame without an ``A2A-Version`` header is a 1.0 call, as on every custom
  transport (``serve_frame``);
* a line longer than ``max-request-bytes``: ``-32600`` "Request payload too large",
  the session goes on; a malformed line: the dispatcher's own error (``-32700``, or
  ``-32600`` for anything that is not a JSON-RPC request object, e.g. a ``method``
  that is a list), answered with the line's id when it has a valid one.

At EOF the in-flight requests get ``shutdown-grace-seconds`` to finish, the rest
are cancelled. A client that goes away mid-stream only stops the writing: the
dispatcher's iterator is closed and the turn keeps running (CancelTask stops it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from iac_code.api import (
    TOO_LARGE,
    decode_frame,
    dumps,
    error_response,
    final_marker,
    inspect_frame,
    log_client_error,
    serve_frame,
)

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

INTERNAL_ERROR = {"code": -32603, "message": "Internal error"}
DEFAULT_GRACE_SECONDS = 10.0
# A request read before the kernel has built its dispatcher waits this long, then gets "Server is starting".
STARTUP_WAIT_SECONDS = 30.0


class LineWriter(Protocol):
    """Where a session writes its lines (``asyncio.StreamWriter`` is one)."""

    def write(self, data: bytes) -> None:
        """Queue ``data`` for writing."""
        ...

    async def drain(self) -> None:
        """Wait until the queued data is written; raise ``ConnectionError`` when the peer is gone."""
        ...

    def is_closing(self) -> bool:
        """Whether the channel is closed or closing."""
        ...

    def close(self) -> None:
        """Close the channel."""
        ...


def reader_limit(kernel: PluginContext) -> int:
    """The ``asyncio.StreamReader`` limit for a session: ``max-request-bytes`` + 1."""
    return int(kernel.config.max_request_bytes) + 1


def grace_seconds(kernel: PluginContext) -> float:
    """``shutdown-grace-seconds`` (10 when the kernel has no such key)."""
    try:
        return max(0.0, float(getattr(kernel.config, "shutdown_grace_seconds", DEFAULT_GRACE_SECONDS)))
    except (TypeError, ValueError):
        return DEFAULT_GRACE_SECONDS


class NdjsonSession:
    """One NDJSON conversation: lines from ``reader``, answers to ``writer`` (see the module docstring)."""

    def __init__(self, kernel: PluginContext, reader: asyncio.StreamReader, writer: LineWriter, transport_name: str, *,
                 channel_headers: Mapping[str, str] | None = None) -> None:
        self.kernel = kernel
        self.reader = reader
        self.writer = writer
        self.transport_name = transport_name
        self.channel_headers = dict(channel_headers or {})
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading: asyncio.Task[None] | None = None
        self._broken = False

    @property
    def broken(self) -> bool:
        """Whether the peer went away (writing stopped)."""
        return self._broken or self.writer.is_closing()

    async def run(self) -> None:
        """Serve lines until EOF (or :meth:`end_reading`), let in-flight requests finish, close the writer."""
        self._reading = asyncio.ensure_future(self._read_loop())
        try:
            await asyncio.wait({self._reading})
            await self._finish(grace_seconds(self.kernel))
        finally:
            self._reading.cancel()
            pending = list(self._tasks)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            with contextlib.suppress(Exception):
                self.writer.close()

    def end_reading(self) -> None:
        """Stop reading new lines, as at EOF (the in-flight requests get their grace period)."""
        if self._reading is not None:
            self._reading.cancel()

    async def _finish(self, grace: float) -> None:
        pending = {t for t in self._tasks if not t.done()}
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace)
        if late:
            logger.info("%s session: cancelling %d request(s) still running after %.3g s", self.transport_name,
                        len(late), grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        while not self.broken:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # EOF: a last line without newline still counts
                if exc.partial.strip():
                    self._spawn(exc.partial)
                return
            except asyncio.LimitOverrunError as exc:
                answer = error_response(None, TOO_LARGE)
                log_client_error(self.transport_name, answer)
                await self._write(answer)
                if not await self._skip_line(exc.consumed):
                    return
                continue
            except (ConnectionError, ValueError):
                return
            if line.strip():
                self._spawn(line.rstrip(b"\r\n"))

    async def _skip_line(self, consumed: int) -> bool:
        """Discard the rest of an oversized line; ``False`` at EOF."""
        while True:
            try:
                await self.reader.readexactly(consumed)
                await self.reader.readuntil(b"\n")
                return True
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed
            except (asyncio.IncompleteReadError, ConnectionError):
                return False

    def _spawn(self, line: bytes) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(line))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ serving

    async def _serve(self, line: bytes) -> None:
        frame: Any = None
        if len(line) <= self.kernel.config.max_request_bytes:
            frame, ok = decode_frame(line)
            if not (ok and isinstance(frame, dict)):
                frame = None
        await self._until_ready()
        info = inspect_frame(frame, self.kernel.dispatcher)  # its streaming methods: 1.0 and adapters'
        request_id = info.request_id
        try:
            answer = await serve_frame(self.kernel, frame if frame is not None else line,
                                               transport=self.transport_name, channel_headers=self.channel_headers)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s session: serving a frame failed", self.transport_name)
            answer = error_response(request_id, INTERNAL_ERROR)
        if isinstance(answer, dict):
            if info.streaming:
                answer = {**answer, "final": True}
            await self._write(answer)
            return
        await self._stream(answer, request_id)

    async def _until_ready(self) -> None:
        """Hold a request that arrives while the kernel is still starting (stdin is read from the start)."""
        deadline = asyncio.get_running_loop().time() + STARTUP_WAIT_SECONDS
        while self.kernel.dispatcher is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)

    async def _stream(self, frames: AsyncIterator[dict[str, Any]], request_id: Any) -> None:
        completed = False
        try:
            async for event in frames:
                if not await self._write(event):
                    return
            completed = True
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s session: a stream failed", self.transport_name)
            await self._write({**error_response(request_id, INTERNAL_ERROR), "final": True})
            return
        finally:
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        if completed:
            await self._write(final_marker(request_id))

    async def _write(self, frame: Mapping[str, Any]) -> bool:
        """Write one line; ``False`` once the peer is gone."""
        data = dumps(frame) + b"\n"
        async with self._lock:
            if self.broken:
                return False
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, OSError, RuntimeError):
                logger.debug("%s session: the peer went away", self.transport_name)
                self._broken = True
                return False
        return True
