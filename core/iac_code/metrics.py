"""Prometheus metrics of one kernel (``metrics: true``, the default; scraped at ``GET /metrics``).

Every metric lives in the kernel's own :class:`~prometheus_client.CollectorRegistry`,
never the process-global one, so several kernels in one process (tests) do not
clash. Labels are bounded: A2A method names (anything else is ``other``), binding
(the transport's name), JSON-RPC error code, delivery outcome; never a task,
context or caller.

Instrumented components hold an optional ``metrics`` attribute (``None``: no work
at all); :meth:`Metrics.attach` wires a started kernel's components in one call.
The gauges of things held in memory (turns, permission waits, contexts) are
callbacks read at scrape time, so they cost nothing per request and cannot drift.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from iac_code.kernel import Kernel

PREFIX = "iac_code_a2a_"
# The A2A 1.0 method names (``METHOD_PARAMS`` in iac_code.dispatcher); anything else is "other".
KNOWN_METHODS = frozenset({
    "SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
    "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard",
})
OTHER_METHOD = "other"
OK_CODE = "ok"
PUSH_OUTCOMES = ("delivered", "retried", "dead_lettered", "deferred")
QUEUE_STATES = ("pending", "inflight", "dead")
QUEUE_DEPTH_TIMEOUT = 2.0
# A group commit is one write + fdatasync: mostly well under a millisecond to tens of milliseconds.
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, float("inf"))
# Bound the binding label even if a custom transport names itself oddly.
_MAX_BINDING = 40

# Error codes seen, as text (bounded: an executor's own codes could be anything).
_CODE_TEXT: dict[int, str] = {}
_MAX_CODES = 64

clock = time.perf_counter


def error_code(error: Any) -> str:
    """The JSON-RPC code of a call's error as text (the code its response carries)."""
    code = getattr(error, "code", None)
    if not isinstance(code, int):
        code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
    text = _CODE_TEXT.get(code)
    if text is None:
        text = str(code) if len(_CODE_TEXT) < _MAX_CODES else "other"
        _CODE_TEXT.setdefault(code, text)
    return text


def _binding(transport: str) -> str:
    return transport[:_MAX_BINDING] if transport else "unknown"


class Metrics:
    """Every metric object of one kernel, in its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            f"{PREFIX}requests", "A2A calls by method, binding and result code ('ok' or the JSON-RPC error code).",
            ["method", "binding", "code"], registry=r)
        self.request_seconds = Histogram(
            f"{PREFIX}request_duration_seconds",
            "Time to answer an A2A call (streaming calls: until the first event).",
            ["method", "binding"], registry=r)
        self.open_streams = Gauge(
            f"{PREFIX}open_streams", "Streaming responses currently open.", ["binding"], registry=r)
        self.turns_active = Gauge(f"{PREFIX}turns_active", "Agent turns currently running.", registry=r)
        self.permission_waits = Gauge(
            f"{PREFIX}permission_waits", "Turns paused waiting for a permission answer.", registry=r)
        self.contexts_loaded = Gauge(f"{PREFIX}contexts_loaded", "Conversation contexts held in memory.", registry=r)
        self.journal_commit_seconds = Histogram(
            f"{PREFIX}journal_commit_seconds", "Time to write and sync one group commit of the task journal.",
            buckets=COMMIT_BUCKETS, registry=r)
        self.push_deliveries = Counter(
            f"{PREFIX}push_deliveries", "Push notification delivery attempts by outcome.", ["outcome"], registry=r)
        self.push_delivery_seconds = Histogram(
            f"{PREFIX}push_delivery_seconds", "Time of one push notification HTTP attempt.", registry=r)
        self.connections = Gauge(f"{PREFIX}connections", "Client connections open, by transport.", ["transport"],
                                 registry=r)
        self.snapshot_write_seconds = Histogram(
            f"{PREFIX}snapshot_write_seconds", "Seconds to write one batch of task and context snapshots.",
            buckets=COMMIT_BUCKETS, registry=r)
        self.push_queue_jobs = Gauge(
            f"{PREFIX}push_queue_jobs", "Jobs in the push queue by state (read when /metrics is scraped).",
            ["state"], registry=r)
        # Label children cached by label values: one dict look-up per observation.
        self._request_children: dict[tuple[str, str, str], Any] = {}
        self._duration_children: dict[tuple[str, str], Any] = {}
        self._stream_children: dict[str, Any] = {}
        self._push_children = {outcome: self.push_deliveries.labels(outcome) for outcome in PUSH_OUTCOMES}
        for gauge in (self.turns_active, self.permission_waits, self.contexts_loaded):
            gauge.set_function(lambda: 0.0)

    @classmethod
    def create(cls, config: Any) -> Metrics | None:
        """The kernel's metrics, or ``None`` with ``metrics: false`` (or the metrics plugin disabled)."""
        return cls() if getattr(config, "metrics", False) else None

    # ------------------------------------------------------------------ wiring

    def attach(self, kernel: Kernel) -> None:
        """Wire a started kernel's components (after ``Kernel.start`` built the dispatcher and push)."""
        dispatcher = getattr(kernel, "dispatcher", None)
        if dispatcher is not None:
            dispatcher.metrics = self
        journal = getattr(getattr(kernel, "task_store", None), "_journal", None)
        if journal is not None:
            journal.metrics = self
        push = getattr(kernel, "push", None)
        worker = getattr(push, "worker", None) if push is not None else None
        if worker is not None:
            worker.metrics = self
        writer = getattr(kernel, "writer", None)
        if writer is not None:
            writer.metrics = self
        for spec, server in zip(getattr(kernel, "transport_specs", ()), getattr(kernel, "_servers", ()), strict=False):
            count = getattr(server, "open_connections", None)
            if callable(count):
                self.connections.labels(transport=spec.name[:_MAX_BINDING]).set_function(count)
        self.watch_kernel(kernel)

    def watch_kernel(self, kernel: Kernel) -> None:
        """Point the in-memory gauges at ``kernel`` (read at scrape time)."""

        def turns() -> float:
            handler = getattr(kernel, "request_handler", None)
            engine = getattr(handler, "engine", None) if handler is not None else None
            return float(engine.active()) if engine is not None else 0.0

        def waits() -> float:
            broker = getattr(kernel, "permissions", None)
            return float(broker.waiting()) if broker is not None else 0.0

        def contexts() -> float:
            registry = getattr(kernel, "contexts", None)
            return float(len(registry)) if registry is not None else 0.0

        self.turns_active.set_function(turns)
        self.permission_waits.set_function(waits)
        self.contexts_loaded.set_function(contexts)

    # ------------------------------------------------------------------ observations

    def request_done(self, method: str, transport: str, code: str, seconds: float) -> None:
        """Count one A2A call and its duration."""
        if method not in KNOWN_METHODS:
            method = OTHER_METHOD
        key = (method, transport, code)
        counter = self._request_children.get(key)
        if counter is None:
            counter = self._request_children[key] = self.requests.labels(method, _binding(transport), code)
        counter.inc()
        duration = self._duration_children.get(key[:2])
        if duration is None:
            duration = self._duration_children[key[:2]] = self.request_seconds.labels(method, _binding(transport))
        duration.observe(seconds)

    def track_stream(self, stream: AsyncIterator[Any], transport: str) -> AsyncIterator[Any]:
        """``stream``, counted in ``open_streams`` until it finishes, fails or is closed."""
        gauge = self._stream_children.get(transport)
        if gauge is None:
            gauge = self._stream_children[transport] = self.open_streams.labels(_binding(transport))
        return CountedStream(stream, gauge.inc, gauge.dec)

    def journal_committed(self, seconds: float) -> None:
        self.journal_commit_seconds.observe(seconds)

    def push_outcome(self, outcome: str) -> None:
        self._push_children[outcome].inc()

    def push_attempt(self, seconds: float) -> None:
        self.push_delivery_seconds.observe(seconds)

    async def refresh(self, kernel: Kernel) -> None:
        """Read what only an await can tell (the push queue's depth); called before each scrape."""
        push = getattr(kernel, "push", None)
        queue = getattr(push, "queue", None) if push is not None else None
        if queue is None:
            return
        try:
            depth = await asyncio.wait_for(queue.depth(), QUEUE_DEPTH_TIMEOUT)
        except Exception:  # a queue that cannot answer now: keep the last values
            return
        for state in QUEUE_STATES:
            if isinstance(depth.get(state), int):
                self.push_queue_jobs.labels(state).set(depth[state])

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class CountedStream:
    """An async iterator that calls ``opened`` now and ``closed`` exactly once when it ends.

    It ends when the wrapped iterator is exhausted or raises, when :meth:`aclose` is
    called, or (a binding that dropped it unread) when it is garbage-collected.
    """

    __slots__ = ("_stream", "_closed")

    def __init__(self, stream: AsyncIterator[Any], opened: Callable[[], None], closed: Callable[[], None]) -> None:
        self._stream = stream
        self._closed: Callable[[], None] | None = closed
        opened()

    def _finish(self) -> None:
        closed, self._closed = self._closed, None
        if closed is not None:
            closed()

    def __aiter__(self) -> CountedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except BaseException:
            self._finish()
            raise

    async def aclose(self) -> None:
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            self._finish()

    def __del__(self) -> None:
        self._finish()


def scrape_handler(kernel: Kernel, metrics: Metrics) -> Callable[[Any], Any]:
    """The aiohttp handler answering a scrape: queue depth refreshed, then the text exposition."""
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST

    async def scrape(request: web.Request) -> web.Response:
        await metrics.refresh(kernel)
        return web.Response(body=metrics.exposition(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"})

    return scrape


class MetricsPort:
    """``/metrics`` alone on ``metrics-host:metrics-port`` (no authentication: a private scrape port)."""

    def __init__(self, kernel: Kernel, metrics: Metrics) -> None:
        self._kernel = kernel
        self._metrics = metrics
        self._runner: Any = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Bind and serve; the bound port."""
        from aiohttp import web

        from iac_code.errors import StartupError

        app = web.Application()
        app.router.add_get("/metrics", scrape_handler(self._kernel, self._metrics), allow_head=False)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise StartupError(f"Cannot bind metrics-port to {host}:{port}: {exc.strerror or type(exc).__name__}.") \
                from None
        self._runner = runner
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
