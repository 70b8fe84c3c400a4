"""Malformed JSON-RPC frames for every transport: a seeded generator and a raw client per transport.

:func:`frames` varies every field of a request frame (``jsonrpc``, ``id``, ``method``,
``params``, extra members, the ``headers`` member) and the frame itself (batch arrays,
other JSON values, invalid JSON, invalid UTF-8, frames over ``max-request-bytes``); it is
deterministic for a seed. Each :class:`Wire` sends one frame's bytes as they are, without
any client-side checks, and returns every answer it got for it (:class:`Outcome`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

A2A_1_0 = {"A2A-Version": "1.0"}
STREAM_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"})
METHODS_1_0 = ("SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
               "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
               "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard")
METHODS_0_3 = ("message/send", "message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe",
               "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
               "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
               "agent/getAuthenticatedExtendedCard")
MISSING = object()
NESTED_DEPTH = 400


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for index in range(depth):
        value = {"n": value} if index % 2 else [value]
    return value


# Wrong-typed or out-of-range members of the real methods' params (none of them may start a turn).
BAD_PARAMS: tuple[Any, ...] = (
    {"message": 5}, {"message": "hello"}, {"message": []}, {"message": {"parts": "x"}},
    {"message": {"messageId": 5, "role": "ROLE_USER", "parts": [{"text": "x"}]}},
    {"message": {"messageId": "m", "role": "ROLE_NOPE", "parts": [{"text": "x"}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "!!not base64!!"}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 7}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": _nested(NESTED_DEPTH)}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": "x"},
    {"id": 5}, {"id": []}, {"id": {}}, {"id": None}, {"id": True}, {"id": "x" * 5000},
    {"id": "no-such-task", "historyLength": "ten"}, {"id": "no-such-task", "historyLength": 2**40},
    {"id": "no-such-task", "historyLength": -1.5},
    {"pageSize": "x"}, {"pageSize": -1}, {"pageSize": 10**30}, {"status": 1.5}, {"pageToken": []},
    {"taskId": 5, "id": "hook"}, {"taskId": "t", "url": 7}, {"taskId": "t", "pushNotificationConfig": "x"},
    {"taskId": "t", "authentication": {"scheme": 1}}, {"tenant": {}}, {"metadata": _nested(NESTED_DEPTH)},
    {"": None}, {"\u0000": "\ud7ff"},
)
JSONRPC_VALUES: tuple[Any, ...] = (MISSING, 2.0, 2, "1.0", "", None, True, [], {}, "2.0 ", "2")
ID_VALUES: tuple[Any, ...] = (MISSING, None, "s", "", 0, -1, 2**53, 10**30, -(10**40), 1.5, -0.0, 1e300, True, False,
                              {}, {"a": 1}, [], [1], "i" * 2000, "\u00e9\u4e2d\U0001f600")
METHOD_VALUES: tuple[Any, ...] = (MISSING, None, True, False, 0, 7, 1.5, [], ["x"], ["SendMessage"], {}, {"a": 1}, "",
                                  " ", "NoSuchMethod", "sendmessage", "SendMessage ", "m" * 10000,
                                  "m\u00e9thode", "\u0000", "rpc.discover", *METHODS_0_3)
PARAMS_VALUES: tuple[Any, ...] = (MISSING, None, [], [1], ["x", {}], "x", 5, 1.5, True, {}, _nested(NESTED_DEPTH),
                                  *BAD_PARAMS)
HEADERS_VALUES: tuple[Any, ...] = ("x", 5, [], None, {"Authorization": 5}, {"A2A-Version": 1},
                                   {"A2A-Version": "9.9"}, {"A2A-Extensions": ["x"]}, {"A2A-Version": ""})
EXTRA_MEMBERS: tuple[tuple[str, Any], ...] = (("extra", 1), ("result", {}), ("error", {"code": 1}), ("ID", 1),
                                              ("Method", "GetTask"), ("final", True), ("", ""))
RAW_FRAMES: tuple[bytes, ...] = (
    b"{", b"}", b"[", b'{"jsonrpc":', b"nul", b"[1,", b"{'a':1}", b"NaN", b"Infinity", b'{"a":NaN}', b"{}x",
    b'{"jsonrpc":"2.0","id":1,"method":"GetTask",}', b'"\\ud800"', b'{"id":"\\udc00","method":"GetTask"}',
    b"\x00", b"\x1b[31m", b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}}',
    b"[" * 5000 + b"]" * 5000, b"{" * 3000, b"0x10", b"01", b"1e99999", b"-", b"tru", b"\t{}",
)
INVALID_UTF8: tuple[bytes, ...] = (
    b"\xff\xfe", b"\xc3\x28", b'{"jsonrpc":"2.0","id":1,"method":"\xffGetTask","params":{}}',
    b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"GetTask","params":{}}', b"\x80", b'{"a":"\xf8\x88\x80\x80\x80"}',
)
OTHER_JSON: tuple[Any, ...] = (1, -1, 1.5, "x", "", None, True, False, [], [1, 2], [{}],
                               [{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}], {})


@dataclass
class Frame:
    """One frame: ``obj`` (a JSON value, or None for ``raw`` bytes that are not JSON), credentials or not."""

    obj: Any
    raw: bytes | None = None
    authorized: bool = True
    oversize: bool = False

    @property
    def is_object(self) -> bool:
        return self.raw is None and isinstance(self.obj, dict)

    @property
    def has_id(self) -> bool:
        return self.is_object and "id" in self.obj

    @property
    def expected_id(self) -> Any:
        """The id every answer must carry: the frame's own when it is a string or integer, else null
        (a frame over the size limit may be answered with null: the server need not read it)."""
        if not self.is_object:
            return None
        value = self.obj.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        return None

    @property
    def valid_envelope(self) -> bool:
        """What JSON-RPC 2.0 calls a valid Request object (params aside)."""
        if not self.is_object or self.oversize:
            return False
        method, jsonrpc = self.obj.get("method"), self.obj.get("jsonrpc")
        return (jsonrpc == "2.0" and isinstance(method, str) and bool(method)
                and (self.obj.get("id") is None or self.expected_id is not None))

    @property
    def streaming(self) -> bool:
        return self.valid_envelope and self.obj["method"] in STREAM_METHODS

    def encode(self, credentials: dict[str, str] | None = None) -> bytes:
        """The frame's bytes; ``credentials`` go into a ``headers`` member (NDJSON, WebSocket) when it has none."""
        if self.raw is not None:
            return self.raw
        obj = self.obj
        if credentials and isinstance(obj, dict) and "headers" not in obj:
            obj = {**obj, "headers": credentials}
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def _request(rng: random.Random) -> dict[str, Any]:
    method = rng.choice(METHODS_1_0)
    return {"jsonrpc": "2.0", "id": f"f-{rng.randrange(10**9)}", "method": method, "params": rng.choice(BAD_PARAMS)}


def _set(frame: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    frame = dict(frame)
    if value is MISSING:
        frame.pop(key, None)
    else:
        frame[key] = value
    return frame


def frames(seed: int, count: int, max_bytes: int) -> list[Frame]:
    """``count`` frames (at least one of each listed variant), the same for the same seed."""
    rng = random.Random(seed)
    made: list[Frame] = []
    for key, values in (("jsonrpc", JSONRPC_VALUES), ("id", ID_VALUES), ("method", METHOD_VALUES),
                        ("params", PARAMS_VALUES), ("headers", HEADERS_VALUES)):
        made.extend(Frame(_set(_request(rng), key, value)) for value in values)
    made.extend(Frame(_set(_request(rng), key, value)) for key, value in EXTRA_MEMBERS)
    for method in METHODS_1_0 + METHODS_0_3:  # every real method with wrong params, with and without an id
        made.append(Frame(_set(_request(rng), "method", method)))
        made.append(Frame(_set(_set(_request(rng), "method", method), "id", MISSING)))
    made.extend(Frame(value) for value in OTHER_JSON)
    made.extend(Frame(None, raw=value) for value in RAW_FRAMES + INVALID_UTF8)
    for size in (max_bytes + 1, max_bytes + 500):
        made.append(Frame(_set(_request(rng), "params", {"id": "x" * size}), oversize=True))
    made.append(Frame(None, raw=b"{" + b" " * (max_bytes + 10) + b"}", oversize=True))
    mutations = (("jsonrpc", JSONRPC_VALUES), ("id", ID_VALUES), ("method", METHOD_VALUES),
                 ("params", PARAMS_VALUES), ("headers", HEADERS_VALUES))
    while len(made) < count:  # random combinations of two or three mutated fields
        frame = _request(rng)
        for key, values in rng.sample(mutations, rng.randint(2, 3)):
            frame = _set(frame, key, rng.choice(values))
        made.append(Frame(frame))
    for index, frame in enumerate(made):  # a quarter of them come without credentials ("before authentication")
        frame.authorized = index % 4 != 3
    return made


# --------------------------------------------------------------------------- what came back


@dataclass
class Outcome:
    """What one frame got: JSON-RPC answers, a transport-level refusal (401, UNAUTHENTICATED), or nothing."""

    answers: list[Any] = field(default_factory=list)
    refused: str = ""
    failure: str = ""

    @property
    def answered(self) -> bool:
        return bool(self.answers or self.refused) and not self.failure


@dataclass
class Tally:
    """The counts one transport's fuzz run reports."""

    transport: str
    frames: int = 0
    without_id: int = 0
    unauthenticated: int = 0
    answered: int = 0
    unanswered: int = 0
    extra: int = 0
    tracebacks: int = 0
    errors_logged: int = 0
    log_lines: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self, seconds: float) -> str:
        return (f"frame fuzz {self.transport}: {self.frames} frames ({self.without_id} without id, "
                f"{self.unauthenticated} without credentials), {self.answered} answered, {self.unanswered} unanswered, "
                f"{self.extra} extra answers, {self.tracebacks} tracebacks logged, {self.errors_logged} ERROR records, "
                f"{self.log_lines} log lines, {seconds:.1f} s")


class LogCounter(logging.Handler):
    """Counts the log records of an in-process server: all of them, ERROR and above, and tracebacks."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines = 0
        self.errors = 0
        self.tracebacks = 0
        self.samples: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1
        if record.levelno >= logging.ERROR:
            self.errors += 1
        if record.exc_info or "Traceback" in record.getMessage():
            self.tracebacks += 1
        if record.levelno >= logging.ERROR and len(self.samples) < 3:
            self.samples.append(f"{record.name}: {record.getMessage()[:200]}")


def count_stderr(lines: list[str]) -> tuple[int, int, int]:
    """(log lines, ERROR lines, tracebacks) of a server process's stderr."""
    errors = sum(1 for line in lines if " ERROR " in line or " CRITICAL " in line)
    tracebacks = sum(1 for line in lines if line.startswith("Traceback"))
    logged = sum(1 for line in lines if line[:4].isdigit())  # "2026-... LEVEL name: message"
    return logged, errors, tracebacks


# --------------------------------------------------------------------------- one raw client per transport


class Wire(Protocol):
    async def exchange(self, frame: Frame) -> Outcome: ...

    async def leftovers(self) -> int: ...

    async def aclose(self) -> None: ...


ANSWER_SECONDS = 5.0


class NdjsonWire:
    """Lines over a Unix socket or a process's stdin/stdout; frames one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any, credentials: dict[str, str]) -> None:
        self.reader = reader
        self.writer = writer
        self.credentials = credentials

    async def _line(self, timeout: float) -> Any:
        line = await asyncio.wait_for(self.reader.readline(), timeout)
        if not line:
            raise ConnectionError("the server closed the connection")
        return json.loads(line)

    async def exchange(self, frame: Frame) -> Outcome:
        self.writer.write(frame.encode(self.credentials if frame.authorized else None) + b"\n")
        await self.writer.drain()
        outcome = Outcome()
        try:
            answer = await self._line(ANSWER_SECONDS)
            outcome.answers.append(answer)
            while frame.streaming and "result" in answer and answer.get("final") is not True:
                answer = await self._line(ANSWER_SECONDS)
                outcome.answers.append(answer)
        except TimeoutError:
            outcome.failure = "no answer"
        return outcome

    async def leftovers(self, timeout: float = ANSWER_SECONDS) -> int:
        probe = {"jsonrpc": "2.0", "id": f"probe-{uuid.uuid4().hex}", "method": "ListTasks", "params": {},
                 "headers": self.credentials}
        self.writer.write(json.dumps(probe).encode() + b"\n")
        await self.writer.drain()
        extra = 0
        while (await self._line(timeout)).get("id") != probe["id"]:
            extra += 1
        return extra

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class HttpWire:
    """``POST /`` with the frame as the body."""

    def __init__(self, url: str, credentials: dict[str, str]) -> None:
        self.url = url
        self.credentials = credentials
        self.http = aiohttp.ClientSession()

    async def exchange(self, frame: Frame) -> Outcome:
        headers = {"Content-Type": "application/json", **A2A_1_0, **(self.credentials if frame.authorized else {})}
        outcome = Outcome()
        async with self.http.post(self.url, data=frame.encode(), headers=headers) as response:
            body = await response.read()
            if response.status == 401:
                outcome.refused = f"HTTP 401 {body.decode(errors='replace')}"
            elif response.headers.get("Content-Type", "").startswith("text/event-stream"):
                outcome.answers.extend(json.loads(line[5:]) for line in body.splitlines() if line.startswith(b"data:"))
            else:
                try:
                    outcome.answers.append(json.loads(body))
                except ValueError:
                    outcome.failure = f"HTTP {response.status} non-JSON body"
        return outcome

    async def leftovers(self) -> int:
        return 0

    async def aclose(self) -> None:
        await self.http.close()


class WebSocketWire:
    """Text frames (invalid UTF-8 goes as a binary frame) on one authenticated socket."""

    def __init__(self, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.http = http
        self.ws = ws

    @classmethod
    async def connect(cls, url: str, credentials: dict[str, str]) -> WebSocketWire:
        http = aiohttp.ClientSession()
        return cls(http, await http.ws_connect(url, headers=credentials, max_msg_size=0))

    async def _frame(self, timeout: float) -> dict[str, Any]:
        message = await self.ws.receive(timeout)
        if message.type is not aiohttp.WSMsgType.TEXT:
            raise ConnectionError(f"the server sent {message.type!r}")
        return dict(json.loads(message.data))

    async def exchange(self, frame: Frame) -> Outcome:
        wrong = None if frame.authorized else {"Authorization": "Bearer wrong"}
        data = frame.encode(wrong)
        try:
            await self.ws.send_str(data.decode("utf-8"))
        except UnicodeDecodeError:
            await self.ws.send_bytes(data)
        outcome = Outcome()
        try:
            while True:
                envelope = await self._frame(ANSWER_SECONDS)
                outcome.answers.append(envelope["payload"])
                if envelope["final"] is True:
                    break
        except TimeoutError:
            outcome.failure = "no answer"
        return outcome

    async def leftovers(self) -> int:
        probe_id = f"probe-{uuid.uuid4().hex}"
        await self.ws.send_str(json.dumps({"jsonrpc": "2.0", "id": probe_id, "method": "ListTasks", "params": {}}))
        extra = 0
        while (await self._frame(ANSWER_SECONDS))["id"] != probe_id:
            extra += 1
        return extra

    async def aclose(self) -> None:
        await self.ws.close()
        await self.http.close()


class GrpcJsonRpcWire:
    """``Send`` for unary frames, ``Stream`` for streaming ones and every fifth frame."""

    def __init__(self, target: str, credentials: dict[str, str]) -> None:
        from grpc import aio
        from iac_code_transport_grpc.a2a_jsonrpc_bindings import SEND_PATH, STREAM_PATH, JsonRpcEnvelope

        self.envelope = JsonRpcEnvelope
        self.channel = aio.insecure_channel(target.removeprefix("grpc-jsonrpc://"))
        codec = {"request_serializer": JsonRpcEnvelope.SerializeToString,
                 "response_deserializer": JsonRpcEnvelope.FromString}
        self.send = self.channel.unary_unary(SEND_PATH, **codec)
        self.stream = self.channel.unary_stream(STREAM_PATH, **codec)
        self.metadata = tuple((k.lower(), v) for k, v in credentials.items())
        self.count = 0

    async def exchange(self, frame: Frame) -> Outcome:
        import grpc

        self.count += 1
        metadata = self.metadata if frame.authorized else ()
        request = self.envelope(payload=frame.encode())
        outcome = Outcome()
        try:
            if frame.streaming or self.count % 5 == 0:
                async for reply in self.stream(request, metadata=metadata, timeout=ANSWER_SECONDS):
                    outcome.answers.append(json.loads(reply.payload))
            else:
                reply = await self.send(request, metadata=metadata, timeout=ANSWER_SECONDS)
                outcome.answers.append(json.loads(reply.payload))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                outcome.refused = f"UNAUTHENTICATED {exc.details()}"
            else:
                outcome.failure = f"{exc.code().name} {exc.details()}"
        return outcome

    async def leftovers(self) -> int:
        return 0

    async def aclose(self) -> None:
        await self.channel.close()


class RedisWire:
    """``XADD`` request entries (credentials in the ``headers`` field); answers read from an own reply stream."""

    def __init__(self, url: str, request_stream: str, credentials: dict[str, str]) -> None:
        import redis.asyncio as aioredis

        self.redis = aioredis.Redis.from_url(url)
        self.request_stream = request_stream
        self.reply_stream = f"{request_stream}:fuzz-replies"
        self.credentials = json.dumps(credentials)
        self.position = "0-0"
        self.pending: list[tuple[bytes, dict[bytes, bytes]]] = []

    async def _entries(self, timeout: float) -> Iterator[tuple[bytes, dict[bytes, bytes]]]:
        reply = await self.redis.xread({self.reply_stream: self.position}, count=100,
                                       block=max(1, int(timeout * 1000)))
        entries = reply[0][1] if reply else []
        if entries:
            self.position = entries[-1][0].decode()
        return iter(entries)

    async def exchange(self, frame: Frame) -> Outcome:
        correlation = uuid.uuid4().hex.encode()
        entry = {"correlation_id": correlation, "payload": frame.encode(), "reply_stream": self.reply_stream}
        if frame.authorized:
            entry["headers"] = self.credentials
        await self.redis.xadd(self.request_stream, entry)
        outcome = Outcome()
        deadline = asyncio.get_running_loop().time() + ANSWER_SECONDS
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            for _, fields in await self._entries(left):
                if fields[b"correlation_id"] != correlation:
                    self.pending.append((b"", fields))
                    continue
                outcome.answers.append(json.loads(fields[b"payload"]))
                if fields[b"final"] == b"true":
                    return outcome
        outcome.failure = "no answer"
        return outcome

    async def leftovers(self) -> int:
        return len(self.pending) + sum(1 for _ in await self._entries(0.2))

    async def aclose(self) -> None:
        await self.redis.delete(self.reply_stream)
        await self.redis.aclose()
