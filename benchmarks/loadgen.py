"""A small, fast closed-loop HTTP/1.1 load generator for JSON-RPC over HTTP.

Design goals: cheap enough per request that one core can drive a Python
server on another core to saturation, and still validate every response.

* Raw ``asyncio.Protocol`` connections (uvloop when available) with
  ``httptools`` for response parsing (handles Content-Length, chunked and
  SSE bodies); no per-request coroutine, the next request is written from
  the completion callback.
* Fixed concurrency: ``N`` keep-alive connections, one request in flight each.
* Warm-up phase (not recorded), then a fixed measurement window.
* Every response is checked cheaply (HTTP 200, ``"result"`` present, no
  ``"error"``); the first and every ``validate_every``-th response is also
  JSON-parsed and checked by a scenario-specific validator.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

try:
    import httptools
except ImportError as exc:  # pragma: no cover - environment problem
    raise SystemExit(
        "benchmarks need 'httptools' for the load generator: pip install httptools uvloop"
    ) from exc

#: Bound on reconnect attempts after failures, so a dead server cannot cause a busy loop.
MAX_FAILED_RECONNECTS = 2_000

#: Validator: parsed JSON (unary body, or list of SSE event payloads) -> error text or None.
Validator = Callable[[Any], "str | None"]


@dataclass
class Scenario:
    """One benchmark scenario: how to build a request body and check a response."""

    name: str
    make_body: Callable[[], bytes]
    streaming: bool = False
    validate: Validator | None = None
    #: For streaming scenarios: exact number of SSE data events per stream (checked on every stream).
    expected_events: int | None = None
    #: HTTP method and path (JSON-RPC: ``POST /``; the REST binding uses others).
    method: str = "POST"
    path: str = "/"
    #: Whether a response is a JSON-RPC envelope (cheap check of every response); REST bodies are not.
    jsonrpc: bool = True


@dataclass
class ScenarioResult:
    """Raw measurements for one scenario against one server."""

    scenario: str
    duration_s: float
    concurrency: int
    ok: int = 0
    errors: int = 0
    events: int = 0  # SSE data events of successfully completed streams
    bytes_received: int = 0
    latencies_s: list[float] = field(default_factory=list)
    first_event_s: list[float] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)
    client_cpu_s: float = 0.0

    def note_error(self, msg: str) -> None:
        """Count an error and keep the first few messages for the report."""
        self.errors += 1
        if len(self.error_samples) < 5 and msg not in self.error_samples:
            self.error_samples.append(msg)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 if empty)."""
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[idx]


class _Run:
    """Shared state of one scenario run (phase flags and the result sink)."""

    def __init__(self, scenario: Scenario, host: str, port: int, result: ScenarioResult,
                 validate_every: int) -> None:
        self.scenario = scenario
        self.host = host
        self.port = port
        self.result = result
        self.validate_every = max(1, validate_every)
        self.running = True
        self.recording = False
        self.completed = 0
        self.idle: asyncio.Event = asyncio.Event()
        self.conns: set[_Conn] = set()
        self.failures = 0  # failed connects / connections lost mid-request
        accept = b"text/event-stream" if scenario.streaming else b"application/json"
        self.head = (
            f"{scenario.method} {scenario.path} HTTP/1.1\r\nHost: ".encode() + f"{host}:{port}".encode()
            + b"\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nAccept: "
            + accept + b"\r\nContent-Length: "
        )

    def should_validate(self) -> bool:
        """Whether the next completed response gets a full JSON validation."""
        self.completed += 1
        return self.completed <= 3 or self.completed % self.validate_every == 0

    def busy(self) -> int:
        """Number of connections with a request in flight."""
        return sum(1 for c in self.conns if c.in_flight)


class _Conn(asyncio.Protocol):
    """One keep-alive connection issuing requests back to back."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.in_flight = False
        self.t0 = 0.0
        self.t_first = 0.0
        self.body: list[bytes] = []
        self.sse_buf = b""
        self.sse_events = 0
        self.sse_payloads: list[bytes] = []
        self.nbytes = 0
        self.bad: str | None = None

    # --- asyncio.Protocol ---------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.run.conns.add(self)
        if self.run.running:
            self.send()

    def data_received(self, data: bytes) -> None:  # noqa: D102
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"HTTP parse error: {exc}")
            if self.transport is not None:
                self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        run = self.run
        run.conns.discard(self)
        failed = self.in_flight or exc is not None
        if self.in_flight:
            self.in_flight = False
            if run.recording:
                run.result.note_error(f"connection lost mid-request: {exc or 'closed by server'}")
        if run.running:
            loop = asyncio.get_running_loop()
            if not failed:  # orderly close between requests (Connection: close)
                loop.call_soon(_spawn, run)
            elif run.failures < MAX_FAILED_RECONNECTS:
                run.failures += 1
                loop.call_later(0.05, _spawn, run)
        elif run.busy() == 0:
            run.idle.set()

    # --- httptools callbacks -------------------------------------------
    def on_body(self, chunk: bytes) -> None:
        """Collect the body; for SSE, count ``data:`` events as they arrive."""
        self.nbytes += len(chunk)
        if not self.run.scenario.streaming:
            self.body.append(chunk)
            return
        buf = self.sse_buf + chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        parts = buf.split(b"\n\n")
        self.sse_buf = parts.pop()
        for block in parts:
            self._sse_event(block)

    def on_message_complete(self) -> None:
        """Finish the request: validate, record, and immediately send the next."""
        now = time.perf_counter()
        run = self.run
        res = run.result
        status = self.parser.get_status_code()
        if run.scenario.streaming and self.sse_buf.strip():
            self._sse_event(self.sse_buf)
            self.sse_buf = b""
        err = self.bad
        if err is None and status != 200:
            err = f"HTTP {status}: {b''.join(self.body)[:200]!r}"
        if err is None:
            err = self._check(run.should_validate())
        self.in_flight = False
        if run.recording:
            if err is None:
                res.ok += 1
                res.latencies_s.append(now - self.t0)
                res.bytes_received += self.nbytes
                if run.scenario.streaming:
                    res.events += self.sse_events
                    res.first_event_s.append(self.t_first - self.t0)
            else:
                res.note_error(err)
        if not self.parser.should_keep_alive():
            # Server asked to close: connection_lost() opens a replacement.
            if self.transport is not None:
                self.transport.close()
        elif run.running:
            self.send()
        elif run.busy() == 0:
            run.idle.set()

    # --- helpers ---------------------------------------------------------
    def send(self) -> None:
        """Write the next request on this connection."""
        if self.transport is None or self.transport.is_closing():
            return
        body = self.run.scenario.make_body()
        self.body = []
        self.sse_buf = b""
        self.sse_events = 0
        self.sse_payloads = []
        self.nbytes = 0
        self.bad = None
        self.in_flight = True
        self.t0 = time.perf_counter()
        self.transport.write(self.run.head + str(len(body)).encode() + b"\r\n\r\n" + body)

    def _sse_event(self, block: bytes) -> None:
        """Handle one SSE event block (ignore comments / keep-alives)."""
        data = [ln[5:].lstrip(b" ") for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if not data:
            return
        payload = b"\n".join(data)
        if self.sse_events == 0:
            self.t_first = time.perf_counter()
        self.sse_events += 1
        if b'"error"' in payload and self.bad is None:
            self.bad = f"error event in stream: {payload[:200]!r}"
        self.sse_payloads.append(payload)

    def _check(self, full: bool) -> str | None:
        """Cheap check of every response; full JSON validation when ``full``."""
        sc = self.run.scenario
        if sc.streaming:
            if self.sse_events == 0:
                return "stream ended without any data event"
            if sc.expected_events is not None and self.sse_events != sc.expected_events:
                return f"stream had {self.sse_events} events, expected {sc.expected_events}"
            if not full or sc.validate is None:
                return None
            try:
                events = [json.loads(p) for p in self.sse_payloads]
            except ValueError as exc:
                return f"invalid JSON in SSE event: {exc}"
            return sc.validate(events)
        body = b"".join(self.body)
        if sc.jsonrpc and (b'"error"' in body or b'"result"' not in body):
            return f"JSON-RPC error/invalid response: {body[:200]!r}"
        if not full or sc.validate is None:
            return None
        try:
            obj = json.loads(body)
        except ValueError as exc:
            return f"invalid JSON body: {exc}"
        return sc.validate(obj)

    def _fail(self, msg: str) -> None:
        """Record a transport-level failure of the in-flight request."""
        if self.in_flight and self.run.recording:
            self.run.result.note_error(msg)
        self.in_flight = False


def _spawn(run: _Run) -> None:
    """Open one more connection for ``run`` (used for (re)connects)."""
    if not run.running:
        if run.busy() == 0:
            run.idle.set()
        return
    loop = asyncio.get_running_loop()

    def _done(fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is None:
            return
        if run.recording:
            run.result.note_error(f"connect failed: {fut.exception()}")
        if run.running and run.failures < MAX_FAILED_RECONNECTS:
            run.failures += 1
            loop.call_later(0.05, _spawn, run)

    task = loop.create_task(loop.create_connection(lambda: _Conn(run), run.host, run.port))
    task.add_done_callback(_done)


async def run_scenario(
    scenario: Scenario,
    host: str,
    port: int,
    *,
    concurrency: int,
    warmup_s: float,
    duration_s: float,
    validate_every: int = 50,
    drain_timeout_s: float = 5.0,
    on_window: Callable[[str], None] | None = None,
) -> ScenarioResult:
    """Run one closed-loop scenario and return its measurements.

    ``on_window("start"|"stop")`` is called at the edges of the measurement
    window (used to sample server CPU time).
    """
    result = ScenarioResult(scenario=scenario.name, duration_s=duration_s, concurrency=concurrency)
    run = _Run(scenario, host, port, result, validate_every)
    loop = asyncio.get_running_loop()
    for _ in range(concurrency):
        await loop.create_connection(lambda: _Conn(run), host, port)
    try:
        await asyncio.sleep(warmup_s)
        if on_window:
            on_window("start")
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        run.recording = True
        await asyncio.sleep(duration_s)
        run.recording = False
        t1 = time.perf_counter()
        result.client_cpu_s = time.process_time() - cpu0
        if on_window:
            on_window("stop")
        result.duration_s = t1 - t0
        run.running = False
        if run.busy():
            run.idle.clear()
            try:
                await asyncio.wait_for(run.idle.wait(), drain_timeout_s)
            except TimeoutError:
                pass
    finally:
        run.running = False
        for conn in list(run.conns):
            if conn.transport is not None:
                conn.transport.close()
        await asyncio.sleep(0.05)
    return result
