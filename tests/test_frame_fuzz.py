"""Malformed frames on every transport: each one answered once, with a JSON-RPC error, and nothing logged as a bug.

Several hundred seeded frames (:mod:`tests.frame_fuzz`) vary every field of a request
and the frame itself; a quarter of them carry no credentials (the server requires a
token), so they are refused before the envelope is read. Each transport must answer
every frame exactly once (a transport-level refusal, HTTP 401 or gRPC UNAUTHENTICATED,
counts as the answer), never with an SDK-internal text, and the server must log no
ERROR record and no traceback, and only a few (rate-limited) lines. Each run prints
its counts (``frame fuzz <transport>: ...``), the figures issue 35 asks for.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from iac_code.testing import redis_url, start_server
from tests.frame_fuzz import (
    Frame,
    GrpcJsonRpcWire,
    HttpWire,
    LogCounter,
    NdjsonWire,
    Outcome,
    RedisWire,
    Tally,
    WebSocketWire,
    Wire,
    count_stderr,
    frames,
)
from tests.test_transports import IAC_CODE, drop_keys, transport_settings

TRANSPORTS = ("http", "unix", "stdio", "websocket", "grpc-jsonrpc", "redis-streams")
SEED = 35
FRAMES = 500
MAX_BYTES = 16 * 1024
TOKEN = "fuzz-s3cret"
CREDENTIALS = {"Authorization": f"Bearer {TOKEN}"}
# Codes a frame that is not a valid request may get: parse error, invalid request, unauthorized.
ENVELOPE_CODES = {-32700, -32600, -32000}
# Texts that would mean an exception's own words reached the client.
LEAKS = ("Traceback", "<class", "unhashable", "Unexpected", "TypeError", "KeyError", "AttributeError", "/tmp/", "/work/")
# Log lines a whole run may write (start-up and shutdown included): client errors are rate-limited.
MAX_LOG_LINES = 60


@contextlib.asynccontextmanager
async def fuzz_server(transport: str, tmp: Path) -> AsyncIterator[tuple[Wire, list[str] | None]]:
    """A server on ``transport`` that requires a token, and a raw wire to it (plus a stdio server's stderr lines)."""
    settings: dict[str, Any] = {"max-request-bytes": MAX_BYTES, "token": TOKEN}
    prefix = f"iac-code-test:{uuid.uuid4().hex}"
    if transport == "stdio":
        home = tmp / "stdio-server"
        home.mkdir()
        config = home / "stdio.yml"
        config.write_text(yaml.safe_dump({**settings, "persistence-dir": str(home / "state")}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_"))}
        env["IAC_CODE_CONFIG_DIR"] = str(home)
        process = await asyncio.create_subprocess_exec(
            IAC_CODE, "a2a", "--transport", "stdio", "--config", str(config), env=env, cwd=str(tmp),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=16 * 1024 * 1024)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        stderr: list[str] = []
        listening = asyncio.Event()

        async def drain(stream: asyncio.StreamReader) -> None:
            while line := await stream.readline():
                stderr.append(line.decode(errors="replace"))
                if "server listening" in stderr[-1]:
                    listening.set()
            listening.set()  # exited: the first exchange reports it

        drainer = asyncio.create_task(drain(process.stderr))
        try:
            # Start-up (imports, state directory) can outlast one answer's timeout on a loaded machine.
            await asyncio.wait_for(listening.wait(), 60)
            yield NdjsonWire(process.stdout, process.stdin, CREDENTIALS), stderr
        finally:
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()
            await asyncio.wait_for(drainer, 5)
        return
    extra = transport_settings(transport, tmp, prefix)
    try:
        async with start_server({**settings, **extra}) as server:
            wire: Wire
            if transport == "http":
                wire = HttpWire(server.url, CREDENTIALS)
            elif transport == "unix":
                reader, writer = await asyncio.open_unix_connection(server.url.removeprefix("unix://"),
                                                                    limit=16 * 1024 * 1024)
                wire = NdjsonWire(reader, writer, CREDENTIALS)
            elif transport == "websocket":
                wire = await WebSocketWire.connect(server.url, CREDENTIALS)
            elif transport == "grpc-jsonrpc":
                wire = GrpcJsonRpcWire(server.url, CREDENTIALS)
            else:
                wire = RedisWire(redis_url(), f"{prefix}:req", CREDENTIALS)
            try:
                yield wire, None
            finally:
                await wire.aclose()
    finally:
        if transport == "redis-streams":
            drop_keys(prefix)


def judge(frame: Frame, outcome: Outcome) -> str:
    """What is wrong with ``outcome`` as the answer to ``frame`` ("" when nothing)."""
    if outcome.failure:
        return outcome.failure
    if outcome.refused:
        return "" if "Unauthorized" in outcome.refused else f"refused with {outcome.refused}"
    first = outcome.answers[0]
    if not isinstance(first, dict) or first.get("jsonrpc") != "2.0" or ("result" in first) == ("error" in first):
        return f"not a JSON-RPC response: {str(first)[:200]}"
    if first.get("id") != frame.expected_id and not (frame.oversize and first.get("id") is None):
        return f"answered with id {first.get('id')!r}, expected {frame.expected_id!r}"
    if "error" in first:
        error = first["error"]
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not isinstance(error.get("code"), int):
            return f"malformed error object: {error!r}"
        if any(leak in message for leak in LEAKS):
            return f"the error text leaks internals: {message[:200]}"
        if not frame.valid_envelope and error["code"] not in ENVELOPE_CODES:
            return f"invalid envelope answered {error['code']} {message[:100]}"
    elif not frame.valid_envelope:
        return "an invalid envelope got a result"
    if len(outcome.answers) > 1 and not (frame.streaming and "result" in first):
        return f"{len(outcome.answers)} answers"
    return ""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_malformed_frames_are_answered_once_and_never_logged_as_bugs(
        transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    batch = frames(SEED, FRAMES, MAX_BYTES)
    tally = Tally(transport, frames=len(batch), without_id=sum(1 for f in batch if f.is_object and not f.has_id),
                  unauthenticated=sum(1 for f in batch if not f.authorized))
    root = logging.getLogger()
    counter = LogCounter()
    saved_level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(counter)
    started = time.monotonic()
    try:
        async with fuzz_server(transport, tmp_path) as (wire, stderr):
            await wire.leftovers()  # nothing is left over from before the first frame
            for index, frame in enumerate(batch):
                outcome = await wire.exchange(frame)
                problem = judge(frame, outcome)
                if outcome.answered:
                    tally.answered += 1
                else:
                    tally.unanswered += 1
                if problem:
                    raw = frame.raw if frame.raw is not None else json.dumps(frame.obj)[:150]
                    tally.problems.append(f"#{index} {str(raw)[:150]} -> {problem}")
            tally.extra = await wire.leftovers()
        gc.collect()  # an unretrieved task exception is logged when the task is collected
    finally:
        root.removeHandler(counter)
        root.setLevel(saved_level)
    if stderr is not None:
        tally.log_lines, tally.errors_logged, tally.tracebacks = count_stderr(stderr)
        samples = [line for line in stderr if " ERROR " in line][:3]
    else:
        tally.log_lines, tally.errors_logged, tally.tracebacks = counter.lines, counter.errors, counter.tracebacks
        samples = counter.samples
    with capsys.disabled():
        print(f"\n{tally.line(time.monotonic() - started)}")
    assert not tally.problems, "\n".join(tally.problems[:20])
    assert tally.unanswered == 0 and tally.extra == 0
    assert tally.errors_logged == 0 and tally.tracebacks == 0, samples
    assert tally.log_lines <= MAX_LOG_LINES


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_method_that_is_a_list_is_an_invalid_request_before_and_after_authentication(
        transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35.3: the frame that got no answer (or gRPC UNKNOWN) on unix, stdio and grpc-jsonrpc."""
    monkeypatch.chdir(tmp_path)
    frame = {"jsonrpc": "2.0", "id": 5, "method": ["x"], "params": {}}
    async with fuzz_server(transport, tmp_path) as (wire, _):
        await wire.leftovers()
        after = await wire.exchange(Frame(frame, authorized=True))
        assert after.answers == [{"jsonrpc": "2.0", "id": 5, "error": {
            "code": -32600, "message": "Invalid request: 'method' must be a non-empty string"}}], after
        before = await wire.exchange(Frame(frame, authorized=False))
        if transport == "websocket":  # the handshake authenticated the socket; the frame's own header is wrong
            assert before.answers == [{"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": "Unauthorized"}}]
        elif transport == "http":
            assert before.refused == 'HTTP 401 {"error":"Unauthorized"}'
        elif transport == "grpc-jsonrpc":
            assert before.refused.startswith("UNAUTHENTICATED")
        else:
            assert before.answers == [{"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": "Unauthorized"}}]
