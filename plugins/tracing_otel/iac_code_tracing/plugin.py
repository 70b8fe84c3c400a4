"""Plugin registration: OpenTelemetry tracing (``tracing: true``) and its configuration key.

With ``tracing: true`` each server gets a :class:`TracingInstrumentation`: it installs the
OpenTelemetry tracer (:mod:`iac_code_tracing.otel`) when the server starts, wraps each A2A
call in its ``a2a <Method>`` span, and adds a2a-sdk's own spans to the request handler's
methods; the kernel's other span points (turns, tool calls, push deliveries) go through
``iac_code.api.tracing``, which now records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import Instrumentation, hookimpl, tracing
from iac_code_tracing import otel

IAC_CODE_API_VERSION = "1.0"

T = TypeVar("T")

# The request handler methods a2a-sdk's trace_class wraps in a span of their own.
TRACED_METHODS = ["on_message_send", "on_message_send_stream", "on_get_task", "get_task_view", "on_list_tasks",
                  "on_cancel_task", "on_subscribe_to_task", "on_get_extended_agent_card"]


class TracingConfig(BaseModel):
    """The key the tracing plugin adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    tracing: bool = Field(
        False, description="OpenTelemetry traces: W3C traceparent in, spans per method, turn, tool call and push "
        "delivery, traceparent out on pushes; exporter from OTEL_TRACES_EXPORTER (otlp, console, none).")


class TracingInstrumentation(Instrumentation):
    """Tracing for one server: the tracer installed while it runs, a span around each A2A call."""

    async def start(self, context: Any) -> None:
        otel.enable()  # the exporter from the OTEL_* variables

    async def stop(self) -> None:
        otel.disable()  # flushes the spans a provider of ours still holds

    def handler_class(self, base: type[T]) -> type[T]:
        """``base`` with a2a-sdk's OpenTelemetry spans on every A2A method."""
        from a2a.utils.telemetry import SpanKind, trace_class

        traced = type(f"Traced{base.__name__}", (base,), {"__module__": __name__})
        return trace_class(include_list=TRACED_METHODS, kind=SpanKind.SERVER)(traced)  # type: ignore[no-any-return]

    async def observe_call(self, method: str, call: Any, params: Mapping[str, Any] | None,
                           fields: Mapping[str, str] | None, pending: Awaitable[Any]) -> Any:
        with tracing.method_span(method, call.headers, call.transport, params, fields):
            return await pending


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return TracingConfig


@hookimpl
def iac_code_instrumentation(config: Any) -> TracingInstrumentation | None:
    return TracingInstrumentation() if getattr(config, "tracing", False) else None
