"""The OpenTelemetry tracer behind ``iac_code.api.tracing`` (``tracing: true``).

:func:`enable` sets up the process's tracer provider (a ``BatchSpanProcessor`` with the
exporter the standard ``OTEL_*`` variables choose: ``OTEL_TRACES_EXPORTER`` = ``otlp``
(default, over HTTP, ``OTEL_EXPORTER_OTLP_*``), ``console`` or ``none``;
``OTEL_SERVICE_NAME``, default ``iac-code-a2a``), installs an :class:`OtelTracer` as the
process's tracer and puts the log filter that adds ``trace_id`` to log records on the root
logger's handlers (printed as ``traceId`` by the JSON log format). A provider already set
(tests, a host application) is reused. Spans are W3C TraceContext propagated; their names
and attributes are listed in ``iac_code.api.tracing``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from iac_code.api import ToolCompleted, ToolFailed, ToolStarted, error_code, tracing

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "iac-code-a2a"
TRACER_NAME = "iac_code"
CARRIER_KEYS = ("traceparent", "tracestate")

_PROPAGATOR = TraceContextTextMapPropagator()
_active: OtelTracer | None = None
_owned_provider: Any = None  # the provider enable() created (flushed by disable())


# ------------------------------------------------------------------ set-up


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


def enable() -> OtelTracer:
    """Install the OpenTelemetry tracer as the process's tracer (idempotent); call after logging is set up."""
    global _active
    if _active is None:
        _active = OtelTracer(_provider().get_tracer(TRACER_NAME))
    tracing.install(_active)
    install_log_filter()
    return _active


def disable() -> None:
    """Uninstall the tracer and flush the provider :func:`enable` created (a reused one is left alone)."""
    global _active, _owned_provider
    if _active is not None:
        tracing.uninstall(_active)
        _active = None
    provider, _owned_provider = _owned_provider, None
    if provider is not None:
        try:
            provider.shutdown()
        except Exception as exc:  # exporting is best effort
            logger.warning("Tracing shutdown failed: %s", type(exc).__name__)


def configure(config: Any) -> bool:
    """:func:`enable` when ``config.tracing`` is true, :func:`disable` otherwise; whether tracing is on."""
    if getattr(config, "tracing", False):
        enable()
        return True
    disable()
    return False


# ------------------------------------------------------------------ logs


def trace_id() -> str:
    """The current trace id (32 hex digits), ``""`` outside a span or with tracing off."""
    if _active is None:
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


# ------------------------------------------------------------------ spans


def _failed(span: trace.Span, exc: BaseException) -> None:
    error = getattr(exc, "error", None)  # a refused or failed call: the error the binding reports
    if error is not None:
        span.set_attribute("rpc.a2a.error_code", str(error_code(error)))
    span.set_status(Status(StatusCode.ERROR, type(error if error is not None else exc).__name__))


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


def _tool_attributes(name: str, tool_use_id: str) -> dict[str, Any]:
    attributes = {"a2a.tool.name": name[:200]}
    if tool_use_id:
        attributes["a2a.tool.use_id"] = tool_use_id[:200]
    return attributes


class OtelTracer:
    """The OpenTelemetry implementation of ``iac_code.api.tracing.Tracer``."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def _span(self, name: str, kind: SpanKind, parent: otel_context.Context | None,
              attributes: Mapping[str, Any]) -> Iterator[trace.Span]:
        with self._tracer.start_as_current_span(name, context=parent, kind=kind, attributes=attributes,
                                                record_exception=False, set_status_on_exception=False) as span:
            try:
                yield span
            except BaseException as exc:
                if not isinstance(exc, GeneratorExit):
                    _failed(span, exc)
                raise

    def method_span(self, method: str, headers: Any, binding: str, params: Mapping[str, Any] | None,
                    fields: Mapping[str, str] | None) -> Any:
        """``a2a <Method>`` (SERVER) around one A2A call, child of the request's ``traceparent``."""
        if callable(headers):
            headers = headers()
        attributes: dict[str, Any] = {"rpc.system": "a2a", "rpc.method": method, "a2a.binding": binding or "unknown"}
        task_id = _task_id(params, fields)
        if task_id:
            attributes["a2a.task_id"] = task_id[:200]
        return self._span(f"a2a {method}", SpanKind.SERVER, extract(headers), attributes)

    def turn_context(self) -> otel_context.Context:
        return otel_context.get_current()

    def turn_span(self, context: otel_context.Context | None, task_id: str, context_id: str) -> Any:
        """``a2a turn``, child of ``context`` (the creating call's context)."""
        attributes = {"a2a.task_id": task_id[:200], "a2a.context_id": context_id[:200]}
        return self._span("a2a turn", SpanKind.INTERNAL, context, attributes)

    def tool_spans(self) -> ToolSpans:
        return ToolSpans(self._tracer)

    def current_trace_carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return carrier

    def push_span(self, carrier: Mapping[str, str] | None, attributes: dict[str, Any]) -> Any:
        """``a2a push delivery`` (CLIENT), child of the stored ``carrier`` (a root span without one)."""
        parent = extract(carrier) or otel_context.Context()
        values = {"http.request.method": "POST"}
        values.update({k if "." in k else f"a2a.{k}": v for k, v in attributes.items() if v not in (None, "")})
        return self._span("a2a push delivery", SpanKind.CLIENT, parent, values)

    def inject(self, headers: dict[str, str], carrier: Mapping[str, str] | None) -> None:
        """The current span's ``traceparent`` (a push span), else ``carrier``'s."""
        if trace.get_current_span().get_span_context().is_valid:
            _PROPAGATOR.inject(headers)
        elif carrier:
            headers.update({k: v for k in CARRIER_KEYS if (v := carrier.get(k))})


class ToolSpans:
    """Tool spans driven by a runtime's events: opened at ``ToolStarted``, ended at
    ``ToolCompleted`` / ``ToolFailed`` (those left open end with the block)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._open: dict[str, trace.Span] = {}

    def observe(self, event: Any) -> None:
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
