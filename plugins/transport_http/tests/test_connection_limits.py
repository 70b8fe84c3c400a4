"""HTTP transport: header/keep-alive/body deadlines, the connection cap, and protocol errors kept out of the log.

Everything runs against a real server on an ephemeral 127.0.0.1 port through raw sockets; the pure-python
parser is checked through the real ``iac-code a2a`` command with ``AIOHTTP_NO_EXTENSIONS=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from iac_code.api import AgentRuntimeSpec, RuntimeEvent, StartupError, TextDelta, TurnRequest, hookimpl
from iac_code.testing import A2A_HEADERS, RunningServer, make_kernel, parse_sse, send_message_body, start_server
from iac_code_transport_http.limits import RateLimitedLog

HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
SECRET = b"SECRET123"

# Each is rejected by the parser; every one quotes SECRET123 in aiohttp's exception text.
BAD_REQUESTS = [
    b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer SECRET123\x00\r\n\r\n",
    b"GET /\x01SECRET123 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"G@T /SECRET123 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /SECRET123 HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Header SECRET123: v\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: SECRET123\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: SECRET123" + b"x" * 9000 + b"\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzzSECRET123\r\n\r\n",
]
# A chunked body that goes bad after its handler started: the JSON-RPC endpoint reads it,
# an unknown route answers 404 and aiohttp drains it.
LATE_BAD_BODY = (b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
                 b"zzSECRET123\r\n\r\n")
LATE_PATHS = [(b"/", 400), (b"/no/such/route", 404)]
BAD_LINE = re.compile(r"Bad HTTP request from 127\.0\.0\.1: \w+ \(400\)")


# ---------------------------------------------------------------------- helpers


async def _connect(server: RunningServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", urlsplit(server.url).port)


async def _read_to_eof(reader: asyncio.StreamReader, timeout: float = 3.0) -> bytes:
    """Everything until the server closes (a reset counts as closed); fails after ``timeout``."""
    chunks: list[bytes] = []

    async def run() -> None:
        while True:
            try:
                chunk = await reader.read(65536)
            except ConnectionResetError:
                return
            if not chunk:
                return
            chunks.append(chunk)

    await asyncio.wait_for(run(), timeout)
    return b"".join(chunks)


async def _read_response(reader: asyncio.StreamReader, timeout: float = 3.0) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), timeout)
    return int(lines[0].split()[1]), headers, body


async def _send_bad_requests(port: int | None) -> list[bytes]:
    """Send every malformed request on its own connection; the server's whole answer to each."""
    answers = []
    for request in BAD_REQUESTS:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        answers.append(await _read_to_eof(reader))
        writer.close()
    for path, _ in LATE_PATHS:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(LATE_BAD_BODY[0] % path)
        await writer.drain()
        await asyncio.sleep(0.1)  # trickle: the bad chunk arrives while the request is being handled
        writer.write(LATE_BAD_BODY[1])
        answers.append(await _read_to_eof(reader))
        writer.close()
    return answers


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


class _SlowRuntime:
    """Streams one delta, then waits for ``release``."""

    name = "slow"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        yield TextDelta("working")
        self.started.set()
        await self.release.wait()
        yield TextDelta(" done")


class _SlowPlugin:
    def __init__(self) -> None:
        self.runtime = _SlowRuntime()

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="slow", create_runtime=lambda kernel: self.runtime)]


# ---------------------------------------------------------------------- configuration


def test_limit_defaults(tmp_path: Path) -> None:
    config = make_kernel({"persistence-dir": str(tmp_path)}).config
    assert (config.http_header_timeout, config.http_keepalive_timeout, config.http_body_timeout,  # type: ignore[attr-defined]
            config.http_max_connections) == (10.0, 75.0, 30.0, 1024)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("key", "value"), [
    ("http-header-timeout", 0), ("http-header-timeout", "soon"), ("http-keepalive-timeout", -1),
    ("http-body-timeout", float("inf")), ("http-body-timeout", True), ("http-max-connections", 0),
    ("http-max-connections", 1.5), ("http-max-connections", True),
])
def test_invalid_limits_are_startup_errors(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(StartupError, match=f"'{key}'"):
        make_kernel({"persistence-dir": str(tmp_path), key: value})


# ---------------------------------------------------------------------- deadlines


async def _trickle(writer: asyncio.StreamWriter) -> None:
    """Send a request's headers one short line every 0.1 s, never finishing them."""
    writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    with contextlib.suppress(ConnectionError):
        for n in range(100):
            await asyncio.sleep(0.1)
            writer.write(b"X-Slow-%d: y\r\n" % n)
            await writer.drain()


async def _cut_while_trickling(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[bytes, float]:
    """Trickle headers until the server closes; its answer and the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    trickler = asyncio.create_task(_trickle(writer))
    try:
        answer = await _read_to_eof(reader)
    finally:
        trickler.cancel()
    return answer, loop.time() - started


async def test_trickled_headers_are_cut_at_the_header_timeout() -> None:
    async with start_server({"http-header-timeout": 0.5}) as server:
        silent_reader, silent_writer = await _connect(server)
        reader, writer = await _connect(server)
        answer, elapsed = await _cut_while_trickling(reader, writer)
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b"\r\nConnection: close\r\n" in answer
        assert 0.4 <= elapsed < 2.0
        # A connection that never sends a byte is closed too, without an answer.
        assert await _read_to_eof(silent_reader) == b""
        # On a keep-alive connection the clock starts at the next request's first byte.
        keep_reader, keep_writer = await _connect(server)
        keep_writer.write(HEALTH)
        assert (await _read_response(keep_reader))[0] == 200
        answer, elapsed = await _cut_while_trickling(keep_reader, keep_writer)
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert 0.4 <= elapsed < 2.0
        for w in (writer, silent_writer, keep_writer):
            w.close()


async def test_idle_keepalive_connection_is_closed_after_the_keepalive_timeout() -> None:
    loop = asyncio.get_running_loop()
    async with start_server({"http-keepalive-timeout": 0.8, "http-header-timeout": 0.2}) as server:
        reader, writer = await _connect(server)
        writer.write(HEALTH)
        status, headers, _ = await _read_response(reader)
        assert status == 200 and headers.get("connection", "keep-alive").lower() != "close"
        # Idling between requests is bounded by the keep-alive timeout, not the header timeout.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.4)
        writer.write(HEALTH)
        assert (await _read_response(reader))[0] == 200
        idle_from = loop.time()
        assert await _read_to_eof(reader) == b""
        assert 0.7 <= loop.time() - idle_from < 2.5
        writer.close()


async def test_slow_body_gets_408_after_the_body_timeout() -> None:
    loop = asyncio.get_running_loop()
    async with start_server({"http-body-timeout": 0.5}) as server:
        reader, writer = await _connect(server)
        writer.write(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
                     b"Content-Length: 100\r\n\r\n{\"jsonrpc\": \"2.0\",")
        started = loop.time()
        status, headers, body = await _read_response(reader)
        elapsed = loop.time() - started
        assert status == 408
        assert headers["connection"].lower() == "close"
        assert json.loads(body) == {"jsonrpc": "2.0", "id": None,
                                    "error": {"code": -32600, "message": "Request body not received in time"}}
        assert await _read_to_eof(reader) == b""
        assert 0.4 <= elapsed < 2.0
        writer.close()


async def test_sse_stream_outlives_the_timeouts_and_holds_a_connection_slot() -> None:
    plugin = _SlowPlugin()
    settings = {"agent-runtime": "slow", "sse-ping-seconds": 0.2, "http-header-timeout": 0.3,
                "http-body-timeout": 0.3, "http-keepalive-timeout": 0.3, "http-max-connections": 1}
    loop = asyncio.get_running_loop()
    async with start_server(settings, extra_plugins={"slow": plugin}) as server, aiohttp.ClientSession() as s:
        body = send_message_body("hello", method="SendStreamingMessage")
        async with s.post(server.url, json=body, headers=A2A_HEADERS) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/event-stream")
            await asyncio.wait_for(plugin.runtime.started.wait(), 5)
            raw = b""
            until = loop.time() + 1.0  # more than three times every timeout
            while loop.time() < until:
                line = await asyncio.wait_for(r.content.readline(), 2)
                assert line, "the stream was cut"
                raw += line
            assert raw.count(b": ping") >= 3
            # The open stream is a connection: with a cap of one, the next is refused.
            reader, writer = await _connect(server)
            refused = await _read_to_eof(reader)
            assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
            assert b"\r\nRetry-After: 1\r\n" in refused
            writer.close()
            plugin.runtime.release.set()
            raw += await asyncio.wait_for(r.read(), 5)
    events, _ = parse_sse(raw.decode())
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "working done" in raw.decode()


# ---------------------------------------------------------------------- connection cap


async def test_connection_limit_refuses_extra_connections_until_one_closes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with start_server({"http-max-connections": 3}) as server:
        held = []
        for _ in range(3):
            reader, writer = await _connect(server)
            writer.write(HEALTH)
            assert (await _read_response(reader))[0] == 200
            held.append((reader, writer))
        for _ in range(2):
            reader, writer = await _connect(server)
            refused = await _read_to_eof(reader)
            assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
            assert b"\r\nRetry-After: 1\r\n" in refused
            writer.close()
        # Logged once per interval, not once per refusal.
        assert len([r for r in caplog.records if "Connection limit reached" in r.getMessage()]) == 1
        # The admitted connections still work; when one ends (the server closes it), a new one is admitted.
        reader, writer = held.pop()
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert (await _read_response(reader))[0] == 200
        assert await _read_to_eof(reader) == b""
        writer.close()
        reader, writer = await _connect(server)
        writer.write(HEALTH)
        assert (await _read_response(reader))[0] == 200
        held.append((reader, writer))
        for _, w in held:
            w.close()
    assert any(r.getMessage() == "Suppressed 1 more refused connections in the last 10 s" for r in caplog.records)


# ---------------------------------------------------------------------- protocol errors and the log


async def test_malformed_requests_leave_no_secret_or_traceback_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with start_server() as server:
        answers = await _send_bad_requests(urlsplit(server.url).port)
    for answer, expected in zip(answers, [400] * len(BAD_REQUESTS) + [s for _, s in LATE_PATHS], strict=True):
        assert _status(answer) == expected, answer[:200]
        assert SECRET not in answer
    for record in caplog.records:
        assert "SECRET123" not in record.getMessage(), record.getMessage()
        assert record.exc_info is None and not record.exc_text, record.getMessage()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Bad HTTP request")]
    assert len(lines) == len(answers)  # one line each
    assert all(BAD_LINE.fullmatch(line) for line in lines), lines
    assert "Bad HTTP request from 127.0.0.1: BadHttpMessage (400)" in lines


async def test_bad_request_lines_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with start_server() as server:
        for _ in range(15):
            reader, writer = await _connect(server)
            writer.write(BAD_REQUESTS[0])
            assert _status(await _read_to_eof(reader)) == 400
            writer.close()
        assert len([r for r in caplog.records if r.getMessage().startswith("Bad HTTP request")]) == 10
    # The rest are counted and reported once (at the end of the interval or, here, at shutdown).
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Suppressed")] == [
        "Suppressed 5 more bad HTTP requests in the last 10 s"]


def test_rate_limited_log_reports_what_it_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tests.rate-limit")
    now = [100.0]
    log = RateLimitedLog(logging.getLogger("tests.rate-limit"), logging.INFO, "things", burst=2, interval=10.0,
                         clock=lambda: now[0])
    assert [log.log("line %d", n) for n in range(5)] == [True, True, False, False, False]
    now[0] = 109.9
    assert not log.log("line 5")
    now[0] = 110.0
    assert log.log("line 6")
    log.flush()  # nothing left to report
    assert [r.getMessage() for r in caplog.records if r.name == "tests.rate-limit"] == [
        "line 0", "line 1", "Suppressed 4 more things in the last 10 s", "line 6"]


async def test_pure_python_parser_logs_no_secret_either(tmp_path: Path) -> None:
    """The real command with aiohttp's pure-python parser (the tests above run the C one)."""
    config = tmp_path / "a2a.yaml"
    config.write_text(f"persistence-dir: {tmp_path / 'state'}\n", encoding="utf-8")
    env = {**os.environ, "AIOHTTP_NO_EXTENSIONS": "1", "IAC_CODE_CONFIG_DIR": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "iac_code.server.cli", "a2a", "--config", str(config), "--port", "0",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env)
    assert proc.stderr is not None
    log = ""
    try:
        async def bound_port() -> int:
            nonlocal log
            while True:
                line = (await proc.stderr.readline()).decode()  # type: ignore[union-attr]
                assert line, log
                log += line
                if match := re.search(r"HTTP transport bound to 127\.0\.0\.1:(\d+)", line):
                    return int(match.group(1))

        port = await asyncio.wait_for(bound_port(), 30)
        answers = await _send_bad_requests(port)
    finally:
        proc.terminate()
        _, rest = await asyncio.wait_for(proc.communicate(), 15)
        log += rest.decode()
    assert [_status(a) for a in answers] == [400] * len(BAD_REQUESTS) + [s for _, s in LATE_PATHS]
    assert all(SECRET not in a for a in answers)
    assert "SECRET123" not in log
    assert "Traceback" not in log
    lines = re.findall(r"Bad HTTP request from [^\n]*", log)
    assert len(lines) == len(answers), log
    assert all(BAD_LINE.fullmatch(line) for line in lines), lines
    assert "InvalidHeader (400)" in log  # the pure-python parser's class for the bad Authorization value
