"""Opt-in OpenTelemetry distributed tracing (``tracing: true``).

:func:`configure` sets up the process's tracer provider (a ``BatchSpanProcessor``
with the exporter the standard ``OTEL_*`` variables choose: ``OTEL_TRACES_EXPORTER``
= ``otlp`` (default, over HTTP, ``OTEL_EXPORTER_OTLP_*``), ``console`` or ``none``;
``OTEL_SERVICE_NAME``, default ``iac-code-a2a``) and the log filter that adds
``trace_id`` to log records (printed as ``traceId`` by the JSON log format). A
provider already set (tests, a host application) is reused.

Spans, all W3C TraceContext propagated:

* ``a2a <Method>`` (SERVER) per A2A call, parented on the request's
  ``traceparent``/``tracestate`` (:func:`method_span`);
* ``a2a turn`` per turn, a child of the call that started it although it runs
  in its own task (:func:`turn_context` at creation, :func:`turn_span` in the task);
* ``a2a tool <name>`` per tool call of a runtime (:func:`tool_spans`, :func:`tool_span`);
* ``a2a push delivery`` (CLIENT) per delivery attempt, parented on the context the
  turn had when it queued the job (:func:`current_trace_carrier` at enqueue,
  :func:`push_span` + :func:`inject` at delivery: the POST carries ``traceparent``).

When tracing is off every helper is a constant-time no-op (no span, no context
work, no header).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "iac-code-a2a"
TRACER_NAME = "iac_code"
CARRIER_KEYS = ("traceparent", "tracestate")

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None
_owned_provider: Any = None  # the provider configure() created (flushed by shutdown())


# ------------------------------------------------------------------ set-up


def enabled() -> bool:
    """Whether spans are recorded (``configure`` saw ``tracing: true``)."""
    return _tracer is not None


def _exporters() -> list[Any]:
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    exporters: list[Any] = []
    for name in names or ["otlp"]:
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter())
        elif name in ("otlp", "otlp_proto_http"):
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                logger.warning("OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http; "
                               "spans are not exported")
                continue
            exporters.append(OTLPSpanExporter())
        else:
            logger.warning("OTEL_TRACES_EXPORTER: unknown exporter %r ignored (use otlp, console or none)", name[:50])
    return exporters


def _provider() -> Any:
    """The global SDK tracer provider: the one already set, else a new one (exporters from ``OTEL_*``)."""
    global _owned_provider
    from opentelemetry.sdk.trace import TracerProvider

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current  # set by a host or a test: reuse it, with its processors
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    for exporter in _exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _owned_provider = provider
    return provider


def configure(config: Any) -> bool:
    """Turn tracing on when ``config.tracing`` is true (idempotent), off otherwise; whether it is on.

    Call after logging is set up (the ``trace_id`` filter goes on the root logger's handlers).
    """
    global _tracer
    if not getattr(config, "tracing", False):
        _tracer = None
        return False
    if _tracer is None:
        _tracer = _provider().get_tracer(TRACER_NAME)
    install_log_filter()
    return True


def shutdown() -> None:
    """Flush and stop the provider :func:`configure` created (server stop); a reused one is left alone."""
    global _tracer, _owned_provider
    _tracer = None
    provider, _owned_provider = _owned_provider, None
    if provider is not None:
        try:
            provider.shutdown()
        except Exception as exc:  # exporting is best effort
            logger.warning("Tracing shutdown failed: %s", type(exc).__name__)


# ------------------------------------------------------------------ logs


def trace_id() -> str:
    """The current trace id (32 hex digits), ``""`` outside a span or with tracing off."""
    if _tracer is None:
        return ""
    span_context = trace.get_current_span().get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


class TraceIdFilter(logging.Filter):
    """Adds ``trace_id`` (the current trace, when there is one) to every record it sees."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "trace_id", None):
            current = trace_id()
            if current:
                record.trace_id = current
        return True


def install_log_filter(target: logging.Logger | None = None) -> None:
    """Put one :class:`TraceIdFilter` on each handler of ``target`` (the root logger)."""
    for handler in (target or logging.getLogger()).handlers:
        if not any(isinstance(f, TraceIdFilter) for f in handler.filters):
            handler.addFilter(TraceIdFilter())


# ------------------------------------------------------------------ no-op stand-ins


class _NullSpan:
    """What the span helpers return with tracing off: a context manager over the invalid span."""

    def __enter__(self) -> trace.Span:
        return trace.INVALID_SPAN

    def __exit__(self, *exc: object) -> bool:
        return False


_NULL = _NullSpan()


class _NullToolSpans:
    def observe(self, event: Any) -> None:
        pass

    def __enter__(self) -> _NullToolSpans:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


_NULL_TOOLS = _NullToolSpans()


def _failed(span: trace.Span, exc: BaseException) -> None:
    error = getattr(exc, "error", None)  # dispatcher.CallError: the code the binding reports
    if error is not None:
        from iac_code.metrics import error_code

        span.set_attribute("rpc.a2a.error_code", error_code(error))
    span.set_status(Status(StatusCode.ERROR, type(error if error is not None else exc).__name__))


@contextmanager
def _span(name: str, kind: SpanKind, parent: otel_context.Context | None,
          attributes: Mapping[str, Any]) -> Iterator[trace.Span]:
    assert _tracer is not None
    with _tracer.start_as_current_span(name, context=parent, kind=kind, attributes=attributes,
                                       record_exception=False, set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                _failed(span, exc)
            raise


# ------------------------------------------------------------------ A2A calls


def extract(headers: Mapping[str, str] | None) -> otel_context.Context | None:
    """The parent context a request's ``traceparent``/``tracestate`` name; ``None`` (the current
    context) when it names none."""
    if not headers or not headers.get("traceparent"):
        return None
    parent = _PROPAGATOR.extract(headers)
    return parent if trace.get_current_span(parent).get_span_context().is_valid else None


def _task_id(params: Mapping[str, Any] | None, fields: Mapping[str, str] | None) -> str:
    if fields and fields.get("task_id"):
        return str(fields["task_id"])
    if not params:
        return ""
    for key in ("taskId", "id"):
        value = params.get(key)
        if isinstance(value, str) and value:
            return value
    message = params.get("message")
    value = message.get("taskId") if isinstance(message, Mapping) else None
    return value if isinstance(value, str) else ""


def method_span(method: str, headers: Mapping[str, str] | Callable[[], Mapping[str, str]] | None, binding: str,
                params: Mapping[str, Any] | None = None, fields: Mapping[str, str] | None = None) -> Any:
    """``a2a <Method>`` (SERVER) around one A2A call, child of the request's ``traceparent``.

    ``headers`` answers lower-case look-ups (or is a callable returning them, read only when
    tracing is on); ``params`` / ``fields`` (REST path parameters) give ``a2a.task_id``.
    """
    if _tracer is None:
        return _NULL
    if callable(headers):
        headers = headers()
    attributes: dict[str, Any] = {"rpc.system": "a2a", "rpc.method": method, "a2a.binding": binding or "unknown"}
    task_id = _task_id(params, fields)
    if task_id:
        attributes["a2a.task_id"] = task_id[:200]
    return _span(f"a2a {method}", SpanKind.SERVER, extract(headers), attributes)


# ------------------------------------------------------------------ turns


def turn_context() -> otel_context.Context | None:
    """The context to carry into a turn's task (capture it where the turn is created)."""
    return otel_context.get_current() if _tracer is not None else None


@contextmanager
def attach(ctx: otel_context.Context | None) -> Iterator[None]:
    """Make ``ctx`` (from :func:`turn_context`) current for the block; nothing when ``None``."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def turn_span(ctx: otel_context.Context | None, task_id: str = "", context_id: str = "") -> Any:
    """``a2a turn``, child of ``ctx`` (the creating call's context, :func:`turn_context`)."""
    if _tracer is None:
        return _NULL
    attributes = {"a2a.task_id": task_id[:200], "a2a.context_id": context_id[:200]}
    return _span("a2a turn", SpanKind.INTERNAL, ctx, attributes)


# ------------------------------------------------------------------ tool calls


def tool_span(name: str, tool_use_id: str = "") -> Any:
    """``a2a tool <name>`` around a tool call run in one block."""
    if _tracer is None:
        return _NULL
    return _span(f"a2a tool {name}", SpanKind.INTERNAL, None, _tool_attributes(name, tool_use_id))


def _tool_attributes(name: str, tool_use_id: str) -> dict[str, Any]:
    attributes = {"a2a.tool.name": name[:200]}
    if tool_use_id:
        attributes["a2a.tool.use_id"] = tool_use_id[:200]
    return attributes


class ToolSpans:
    """Tool spans driven by a runtime's events: opened at ``ToolStarted``, ended at
    ``ToolCompleted`` / ``ToolFailed`` (those left open end with the block)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._open: dict[str, trace.Span] = {}

    def observe(self, event: Any) -> None:
        from iac_code.runtime import ToolCompleted, ToolFailed, ToolStarted

        tool_use_id = getattr(event, "tool_use_id", "")
        if isinstance(event, ToolStarted):
            name = getattr(event, "name", "") or "?"
            self._open[tool_use_id] = self._tracer.start_span(
                f"a2a tool {name}", kind=SpanKind.INTERNAL, attributes=_tool_attributes(name, tool_use_id))
        elif isinstance(event, ToolCompleted | ToolFailed):
            span = self._open.pop(tool_use_id, None)
            if span is None:
                return
            if isinstance(event, ToolFailed):
                span.set_status(Status(StatusCode.ERROR, "tool failed"))
            span.end()

    def __enter__(self) -> ToolSpans:
        return self

    def __exit__(self, *exc: object) -> bool:
        for span in self._open.values():
            span.set_status(Status(StatusCode.ERROR, "tool call did not complete"))
            span.end()
        self._open.clear()
        return False


def tool_spans() -> ToolSpans | _NullToolSpans:
    """A :class:`ToolSpans` for one turn's events (children of the current span), or a no-op."""
    return ToolSpans(_tracer) if _tracer is not None else _NULL_TOOLS


# ------------------------------------------------------------------ outgoing calls (push)


def current_trace_carrier() -> dict[str, str]:
    """The current context as W3C headers (``traceparent``, ``tracestate``), to store with queued work."""
    if _tracer is None:
        return {}
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def push_span(carrier: Mapping[str, str] | None, **attributes: Any) -> Any:
    """``a2a push delivery`` (CLIENT), child of the stored ``carrier`` (a root span without one)."""
    if _tracer is None:
        return _NULL
    parent = extract(carrier) or otel_context.Context()
    values = {"http.request.method": "POST"}
    values.update({k if "." in k else f"a2a.{k}": v for k, v in attributes.items() if v not in (None, "")})
    return _span("a2a push delivery", SpanKind.CLIENT, parent, values)


def inject(headers: dict[str, str], carrier: Mapping[str, str] | None = None) -> None:
    """Add ``traceparent``/``tracestate`` to outgoing ``headers``: the current span's (a
    :func:`push_span`), else ``carrier``'s; nothing with tracing off."""
    if _tracer is None:
        return
    if trace.get_current_span().get_span_context().is_valid:
        _PROPAGATOR.inject(headers)
    elif carrier:
        headers.update({k: v for k in CARRIER_KEYS if (v := carrier.get(k))})
