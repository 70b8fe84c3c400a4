"""Clients for the custom transports, for tests and scripts (real connections, no mocks).

Each transport's helper adds its own client class here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any


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
        frame = dict(payload)
        frame.setdefault("jsonrpc", "2.0")
        if frame.get("id") is None:
            frame["id"] = f"ndjson-{next(self._ids)}"
        if headers is not None:
            frame["headers"] = dict(headers)
        if frame["id"] in self._queues:
            raise ValueError(f"request id {frame['id']!r} is already in flight")
        return frame

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


class WebSocketClient:
    """A JSON-RPC client for the ``websocket`` transport (aiohttp), multiplexed by request id.

    Each request is one text frame; the server answers with
    ``{"id": ..., "payload": <JSON-RPC response>, "final": <bool>}`` frames. Ids
    must be unique among the requests in flight (a missing id gets one). A frame
    whose id is null (the server could not read the request's id) goes to the
    oldest request in flight that has had no frame yet.

    The handshake sends ``A2A-Version: 1.0`` unless ``headers`` set it.
    """

    def __init__(self, session: Any, ws: Any) -> None:
        self._session = session
        self._ws = ws
        self._queues: dict[Any, asyncio.Queue[dict[str, Any] | None]] = {}
        self._answered: set[Any] = set()
        self._ids = itertools.count(1)
        self._send_lock = asyncio.Lock()
        self._closed = False
        self.close_code: int | None = None
        self._pump = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, url: str, headers: Mapping[str, str] | None = None, *,
                      max_msg_size: int = 0, heartbeat: float | None = None) -> WebSocketClient:
        """Open a socket to ``url`` (``ws://host:port/a2a``); ``headers`` go on the handshake.

        A refused handshake raises ``aiohttp.WSServerHandshakeError`` (``.status`` 401 when unauthenticated).
        """
        import aiohttp

        handshake = {"A2A-Version": "1.0"}
        for name, value in (headers or {}).items():
            handshake = {k: v for k, v in handshake.items() if k.lower() != name.lower()}
            handshake[name] = value
        session = aiohttp.ClientSession()
        try:
            ws = await session.ws_connect(url, headers=handshake, max_msg_size=max_msg_size, heartbeat=heartbeat)
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    @property
    def closed(self) -> bool:
        """Whether the socket is closed (by either side)."""
        return self._closed or bool(self._ws.closed)

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        import aiohttp

        try:
            async for message in self._ws:
                if message.type is not aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    frame = json.loads(message.data)
                except ValueError:
                    continue
                if not isinstance(frame, dict):
                    continue
                request_id = frame.get("id")
                if request_id is None:
                    request_id = next((i for i in self._queues if i not in self._answered), None)
                queue = self._queues.get(request_id)
                if queue is not None:
                    self._answered.add(request_id)
                    queue.put_nowait(frame)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self.close_code = self._ws.close_code
            for queue in self._queues.values():
                queue.put_nowait(None)

    # ------------------------------------------------------------------ calls

    def _prepare(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any]:
        frame = dict(payload)
        frame.setdefault("jsonrpc", "2.0")
        if frame.get("id") is None:
            frame["id"] = f"ws-{next(self._ids)}"
        if headers is not None:
            frame["headers"] = dict(headers)
        if frame["id"] in self._queues:
            raise ValueError(f"request id {frame['id']!r} is already in flight")
        return frame

    async def _frames(self, payload: Mapping[str, Any],
                      headers: Mapping[str, str] | None) -> AsyncGenerator[dict[str, Any], None]:
        """Send one request; yield its frames (the envelopes) up to and including the final one."""
        frame = self._prepare(payload, headers)
        request_id = frame["id"]
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._queues[request_id] = queue
        try:
            if self.closed or self._pump.done():
                raise ConnectionError("the WebSocket is closed")
            async with self._send_lock:
                await self._ws.send_str(json.dumps(frame, separators=(",", ":")))
            while True:
                envelope = await queue.get()
                if envelope is None:
                    raise ConnectionError(f"the server closed the WebSocket (code {self.close_code})")
                yield envelope
                if envelope.get("final") is True:
                    return
        finally:
            self._queues.pop(request_id, None)
            self._answered.discard(request_id)

    async def request(self, payload: Mapping[str, Any], *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one request; return the ``payload`` of its final frame (a JSON-RPC response)."""
        frames = self._frames(payload, headers)
        try:
            async for envelope in frames:
                if envelope.get("final") is True:
                    return dict(envelope.get("payload") or {})
        finally:
            await frames.aclose()
        raise ConnectionError("the WebSocket closed before the answer")  # pragma: no cover - _frames raises first

    async def stream(self, payload: Mapping[str, Any], *,
                     headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send a streaming request; yield the payloads of its non-final frames.

        A final frame carrying an ``error`` (refused before the first event, or failed mid-stream)
        is yielded too, then the stream ends; the plain terminator is not yielded.
        """
        frames = self._frames(payload, headers)
        try:
            async for envelope in frames:
                body = envelope.get("payload")
                if envelope.get("final") is True:
                    if isinstance(body, dict) and ("error" in body or "result" in body):
                        yield body
                    return
                yield body if isinstance(body, dict) else {}
        finally:
            await frames.aclose()

    async def send_raw(self, data: str | bytes) -> None:
        """Send ``data`` as one text frame (``str``) or binary frame (``bytes``), as is (tests of bad frames)."""
        async with self._send_lock:
            if isinstance(data, bytes):
                await self._ws.send_bytes(data)
            else:
                await self._ws.send_str(data)

    async def aclose(self) -> None:
        """Close the socket and the session."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self._ws.close()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._pump
        await self._session.close()

    async def __aenter__(self) -> WebSocketClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
