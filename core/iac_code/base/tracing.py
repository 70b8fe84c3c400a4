"""The tracing seam: span helpers the kernel and plugins call where a trace should show the work.

Every helper does nothing (no span, no context work, no header) until a tracing plugin
installs its :class:`Tracer` with :func:`install` (``iac-code-tracing``: OpenTelemetry,
``tracing: true``). The spans it records:

* ``a2a <Method>`` per A2A call, parented on the request's ``traceparent`` (:func:`method_span`);
* ``a2a turn`` per turn, a child of the call that started it although it runs in its own
  task (:func:`turn_context` where the turn is created, :func:`turn_span` in its task);
* ``a2a tool <name>`` per tool call of a runtime (:func:`tool_spans`);
* ``a2a push delivery`` per push attempt, parented on the context the turn had when it
  queued the job (:func:`current_trace_carrier` at enqueue, :func:`push_span` and
  :func:`inject` at delivery: the POST carries ``traceparent``).

The process has one tracer: tracing context is per process (contextvars), not per server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

Headers = Mapping[str, str] | Callable[[], Mapping[str, str]] | None


class Span(Protocol):
    """The part of a span a caller may use inside a span helper's block."""

    def set_attribute(self, key: str, value: Any) -> None: ...

    def is_recording(self) -> bool: ...


class ToolSpans(Protocol):
    """Tool spans driven by a turn's runtime events; a context manager ending those left open."""

    def observe(self, event: Any) -> None: ...

    def __enter__(self) -> ToolSpans: ...

    def __exit__(self, *exc: object) -> bool | None: ...


class Tracer(Protocol):
    """What a tracing plugin installs; each method backs the module function of the same name."""

    def method_span(self, method: str, headers: Headers, binding: str, params: Mapping[str, Any] | None,
                    fields: Mapping[str, str] | None) -> AbstractContextManager[Span]: ...

    def turn_context(self) -> Any: ...

    def turn_span(self, context: Any, task_id: str, context_id: str) -> AbstractContextManager[Any]: ...

    def tool_spans(self) -> ToolSpans: ...

    def current_trace_carrier(self) -> dict[str, str]: ...

    def push_span(self, carrier: Mapping[str, str] | None,
                  attributes: dict[str, Any]) -> AbstractContextManager[Span]: ...

    def inject(self, headers: dict[str, str], carrier: Mapping[str, str] | None) -> None: ...


class _NullSpan:
    """What every helper returns without a tracer: a block that records nothing."""

    __slots__ = ()

    def __enter__(self) -> _NullSpan:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def is_recording(self) -> bool:
        return False

    def observe(self, event: Any) -> None:
        pass


NULL_SPAN = _NullSpan()
_tracer: Tracer | None = None


def install(tracer: Tracer) -> None:
    """Make ``tracer`` the process's tracer (a tracing plugin, when its server starts)."""
    global _tracer
    _tracer = tracer


def uninstall(tracer: Tracer) -> None:
    """Remove ``tracer`` if it is the installed one (its server stopped)."""
    global _tracer
    if _tracer is tracer:
        _tracer = None


def enabled() -> bool:
    """Whether spans are recorded (a tracer is installed)."""
    return _tracer is not None


def method_span(method: str, headers: Headers, binding: str, params: Mapping[str, Any] | None = None,
                fields: Mapping[str, str] | None = None) -> AbstractContextManager[Span]:
    """``a2a <Method>`` around one A2A call, child of the request's ``traceparent``.

    ``headers`` answers lower-case look-ups (or is a callable returning them, read only when
    tracing); ``params`` / ``fields`` (REST path parameters) name the task.
    """
    tracer = _tracer
    return NULL_SPAN if tracer is None else tracer.method_span(method, headers, binding, params, fields)


def turn_context() -> Any:
    """The context to carry into a turn's task (capture it where the turn is created); ``None`` untraced."""
    tracer = _tracer
    return None if tracer is None else tracer.turn_context()


def turn_span(context: Any, task_id: str = "", context_id: str = "") -> AbstractContextManager[Any]:
    """``a2a turn``, child of ``context`` (from :func:`turn_context`)."""
    tracer = _tracer
    return NULL_SPAN if tracer is None else tracer.turn_span(context, task_id, context_id)


def tool_spans() -> ToolSpans:
    """Tool spans for one turn's events (children of the current span): ``observe(event)`` each event."""
    tracer = _tracer
    return NULL_SPAN if tracer is None else tracer.tool_spans()


def current_trace_carrier() -> dict[str, str]:
    """The current context as W3C headers (``traceparent``, ``tracestate``), to store with queued work."""
    tracer = _tracer
    return {} if tracer is None else tracer.current_trace_carrier()


def push_span(carrier: Mapping[str, str] | None, **attributes: Any) -> AbstractContextManager[Span]:
    """``a2a push delivery`` (a client span), child of the stored ``carrier`` (a root span without one)."""
    tracer = _tracer
    return NULL_SPAN if tracer is None else tracer.push_span(carrier, attributes)


def inject(headers: dict[str, str], carrier: Mapping[str, str] | None = None) -> None:
    """Add ``traceparent``/``tracestate`` to outgoing ``headers``: the current span's, else ``carrier``'s."""
    tracer = _tracer
    if tracer is not None:
        tracer.inject(headers, carrier)
