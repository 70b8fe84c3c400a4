"""Prometheus metrics of one server (``metrics: true``, the default; scraped at ``GET /metrics``).

Every metric lives in the server's own :class:`~prometheus_client.CollectorRegistry`,
never the process-global one, so several servers in one process (tests) do not clash.
Labels are bounded: A2A method names (anything else is ``other``), binding (the
transport's name), JSON-RPC error code, delivery outcome; never a task, context or caller.

:class:`PrometheusMetrics` is the server's instrumentation (``iac_code.api.Instrumentation``):
the kernel calls it per A2A call, journal commit, snapshot batch and push attempt. The
gauges of what the server holds (turns, permission waits, contexts, connections, the push
queue) are read when ``/metrics`` is scraped, so they cost nothing per request and cannot drift.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from iac_code.api import Instrumentation, PluginContext, error_code

PREFIX = "iac_code_a2a_"
# The A2A 1.0 method names; anything else is "other".
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

# The metrics of each running server, for its /metrics route (filled by PrometheusMetrics.start).
_RUNNING: weakref.WeakKeyDictionary[Any, PrometheusMetrics] = weakref.WeakKeyDictionary()


def code_text(error: Any) -> str:
    """The JSON-RPC code of a call's error as a label value (the code its response carries)."""
    code = error_code(error)
    text = _CODE_TEXT.get(code)
    if text is None:
        text = str(code) if len(_CODE_TEXT) < _MAX_CODES else "other"
        _CODE_TEXT.setdefault(code, text)
    return text


def _binding(transport: str) -> str:
    return transport[:_MAX_BINDING] if transport else "unknown"


def metrics_of(context: Any) -> PrometheusMetrics | None:
    """The metrics of the running server ``context`` (a :class:`~iac_code.api.PluginContext`), if it has them."""
    return _RUNNING.get(context) if context is not None else None


class PrometheusMetrics(Instrumentation):
    """Every metric object of one server, in its own registry."""

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
        self.context: PluginContext | None = None
        self.port: Any = None  # the MetricsPort serving metrics-port, while it runs

    # ------------------------------------------------------------------ lifecycle

    async def start(self, context: Any) -> None:
        """Serve this server's metrics: its ``/metrics`` route, and ``metrics-port`` when set."""
        if context is None:  # a process without a server (push-worker): nothing to serve
            return
        self.context = context
        _RUNNING[context] = self
        port = getattr(context.config, "metrics_port", None)
        if port is not None:
            from iac_code_metrics.scrape import MetricsPort

            self.port = MetricsPort(self)
            await self.port.start(str(getattr(context.config, "metrics_host", "127.0.0.1")), port)

    async def stop(self) -> None:
        if self.port is not None:
            port, self.port = self.port, None
            await port.stop()
        if self.context is not None:
            _RUNNING.pop(self.context, None)

    # ------------------------------------------------------------------ observations

    async def observe_call(self, method: str, call: Any, params: Mapping[str, Any] | None,
                           fields: Mapping[str, str] | None, pending: Awaitable[Any]) -> Any:
        """Count the call by its result code and time it (a stream: until its first event, then counted open)."""
        transport = call.transport
        started = clock()
        try:
            result = await pending
        except Exception as exc:
            error = getattr(exc, "error", None)
            if error is not None:
                self.request_done(method, transport, code_text(error), clock() - started)
            raise
        self.request_done(method, transport, OK_CODE, clock() - started)
        if hasattr(result, "__anext__"):
            return self.track_stream(result, transport)
        return result

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

    def snapshot_written(self, seconds: float) -> None:
        self.snapshot_write_seconds.observe(seconds)

    def push_outcome(self, outcome: str) -> None:
        self._push_children[outcome].inc()

    def push_attempt(self, seconds: float) -> None:
        self.push_delivery_seconds.observe(seconds)

    # ------------------------------------------------------------------ scraping

    async def refresh(self) -> None:
        """Read what the server holds now (turns, waits, contexts, connections, push queue); before each scrape."""
        context = self.context
        if context is None:
            return
        activity = context.activity()
        self.turns_active.set(activity.turns_active)
        self.permission_waits.set(activity.permission_waits)
        self.contexts_loaded.set(activity.contexts_loaded)
        for transport, count in activity.connections.items():
            self.connections.labels(transport=transport[:_MAX_BINDING]).set(count)
        try:
            depth = await asyncio.wait_for(context.push_queue_depth(), QUEUE_DEPTH_TIMEOUT)
        except Exception:  # a queue that cannot answer now: keep the last values
            return
        for state in QUEUE_STATES:
            if depth is not None and isinstance(depth.get(state), int):
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
