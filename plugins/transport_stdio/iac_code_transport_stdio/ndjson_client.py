"""The client side of the NDJSON framing (:mod:`iac_code_transport_stdio.ndjson`) of the ``stdio`` and ``unix`` transports.

Their ``connect`` (:mod:`iac_code_transport_stdio.plugin`) returns it, and tests and scripts use it
on its own (real connections, no mocks).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from iac_code.api import request_frame


class NdjsonClient:
    """An NDJSON JSON-RPC client for the ``unix`` and ``stdio`` transports.

    Concurrent calls are multiplexed by request id; responses without an id
    (a line too large, a line that does not parse) are handed to
    :meth:`request_raw` callers in order. ``garbage`` collects server lines that
    are not JSON objects (stdout must carry frames only); for a spawned server
    ``stderr_lines`` collects its log lines; ``orphans`` the responses to calls
    nobody waits for any more (a stream the caller stopped reading).
    """

    LIMIT = 256 * 1024 * 1024

    def __init__(self, reader: asyncio.StreamReader, writer: Any, *,
                 process: asyncio.subprocess.Process | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self.process = process
        self.garbage: list[bytes] = []
        self.orphans: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self._queues: dict[Any, asyncio.Queue[dict[str, Any] | None]] = {}
        self._unmatched: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._answered: set[Any] = set()  # calls that had at least one response line
        self._raw_waiting = 0
        self._ids = itertools.count(1)
        self._closed = False
        self._eof = False
        self._pump = asyncio.get_running_loop().create_task(self._read_loop())
        self._stderr_pump: asyncio.Task[None] | None = None
        if process is not None and process.stderr is not None:
            self._stderr_pump = asyncio.get_running_loop().create_task(self._drain_stderr(process.stderr))

    @classmethod
    async def connect_unix(cls, path: str) -> NdjsonClient:
        """Connect to a ``unix`` transport listening on ``path``."""
        reader, writer = await asyncio.open_unix_connection(path, limit=cls.LIMIT)
        return cls(reader, writer)

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                    cwd: str | os.PathLike[str] | None = None) -> NdjsonClient:
        """Start a ``stdio`` server (``argv``) and talk to it over its stdin/stdout (stderr is drained)."""
        process = await asyncio.create_subprocess_exec(
            *argv, env=dict(env) if env is not None else None, cwd=cwd, limit=cls.LIMIT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stdout is not None and process.stdin is not None
        return cls(process.stdout, process.stdin, process=process)

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    frame = json.loads(line)
                except ValueError:
                    frame = None
                if not isinstance(frame, dict) or not line.endswith(b"\n"):
                    self.garbage.append(line)
                    continue
                if frame.get("id") is None:
                    # No id (a line too large or unparsable): a raw caller's answer, else the oldest call's.
                    waiting = [key for key in self._queues if key not in self._answered]
                    if self._raw_waiting or not waiting:
                        self._unmatched.put_nowait(frame)
                    else:
                        self._answered.add(waiting[0])
                        self._queues[waiting[0]].put_nowait(frame)
                elif (queue := self._queues.get(frame["id"])) is not None:
                    self._answered.add(frame["id"])
                    queue.put_nowait(frame)
                else:  # a call the caller gave up on (a stream it stopped reading)
                    self.orphans.append(frame)
        except (ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            self._eof = True
            for queue in [*self._queues.values(), self._unmatched]:
                queue.put_nowait(None)

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError, ValueError):
            while line := await stream.readline():
                self.stderr_lines.append(line.decode(errors="replace"))

    # ------------------------------------------------------------------ calls

    def _prepare(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any]:
        return request_frame(payload, headers, f"ndjson-{next(self._ids)}", self._queues)

    async def _send(self, data: bytes) -> None:
        if self._closed:
            raise ConnectionError("the client is closed")
        if self._eof:
            raise ConnectionError("the server closed the connection")
        self._writer.write(data)
        await self._writer.drain()

    async def request(self, payload: Mapping[str, Any], *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one request; return its response (matched by id)."""
        frame = self._prepare(payload, headers)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._queues[frame["id"]] = queue
        try:
            await self._send(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
            answer = await queue.get()
        finally:
            self._queues.pop(frame["id"], None)
            self._answered.discard(frame["id"])
        if answer is None:
            raise ConnectionError("the server closed the connection")
        return answer

    async def stream(self, payload: Mapping[str, Any], *,
                     headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send a streaming request; yield its responses until the final marker (not yielded).

        An error response carrying ``"final": true`` is yielded and ends the stream.
        """
        frame = self._prepare(payload, headers)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._queues[frame["id"]] = queue
        try:
            await self._send(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
            while True:
                answer = await queue.get()
                if answer is None:
                    raise ConnectionError("the server closed the connection during a stream")
                if answer.get("final") is True and "result" not in answer and "error" not in answer:
                    return
                yield answer
                if answer.get("final") is True or answer.get("id") is None:
                    return
        finally:
            self._queues.pop(frame["id"], None)
            self._answered.discard(frame["id"])

    async def request_raw(self, line: bytes) -> dict[str, Any]:
        """Send ``line`` as is (a newline is added when missing); return the next response without an id."""
        self._raw_waiting += 1
        try:
            await self._send(line if line.endswith(b"\n") else line + b"\n")
            answer = await self._unmatched.get()
        finally:
            self._raw_waiting -= 1
        if answer is None:
            raise ConnectionError("the server closed the connection")
        return answer

    async def close_input(self) -> None:
        """Signal EOF to the server (close stdin, or shut the socket's write side down)."""
        if self._writer.can_write_eof():
            self._writer.write_eof()
        else:
            self._writer.close()

    async def wait(self, timeout: float = 10.0) -> int:
        """The spawned server's exit code (within ``timeout`` seconds)."""
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._stderr_pump is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_pump), 5)
        return code

    async def aclose(self) -> None:
        """Close the connection; a spawned server gets EOF, then SIGTERM, then SIGKILL."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._writer.close()
        if self.process is not None and self.process.returncode is None:
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.terminate()
                try:
                    await asyncio.wait_for(self.process.wait(), 5)
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        self.process.kill()
                    await self.process.wait()
        for task in (self._pump, self._stderr_pump):
            if task is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, 2)
                task.cancel()
