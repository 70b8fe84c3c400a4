"""OpenTelemetry tracing (``tracing: true``): one trace from the caller's ``traceparent`` through the
A2A call, its turn, the turn's tool calls and the push deliveries it queued, to the webhook.

Spans go to the SDK's in-memory exporter on a tracer provider set before the server
starts (the plugin reuses a provider already set).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from iac_code_tracing import otel
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from iac_code.api import PushJob, tracing
from iac_code.testing import A2A_HEADERS, permission_answer_body, send_message_body, start_server

TRACE_ID = uuid.uuid4().hex
PARENT_SPAN_ID = uuid.uuid4().hex[:16]
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
PROMPT = "Create a VPC with two vSwitches."
SETTINGS = {"push-notifications": True, "push-allowed-hosts": ["127.0.0.1"], "push-retry-base-delay": 0.05}


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    otel.disable()
    memory.shutdown()


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    otel.disable()


@dataclass
class Receiver:
    requests: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        async with self.arrived:
            self.requests.append(({k.lower(): v for k, v in request.headers.items()}, body))
            self.arrived.notify_all()
        return web.Response(status=200)

    async def wait_for(self, predicate: Any, timeout: float = 20) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: predicate(self.requests)), timeout)


@contextlib.asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    hook = Receiver()
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    hook.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/hook"  # type: ignore[union-attr]
    try:
        yield hook
    finally:
        await runner.cleanup()


def _descends(span: Any, ancestor: Any, spans: list[Any]) -> bool:
    """Whether ``ancestor`` is ``span``'s parent, grandparent ... among ``spans``."""
    by_id = {s.context.span_id: s for s in spans}
    while span.parent is not None:
        if span.parent.span_id == ancestor.context.span_id:
            return True
        span = by_id.get(span.parent.span_id)
        if span is None:
            return False
    return False


def _state(body: dict[str, Any]) -> str:
    event = body.get("statusUpdate") or body.get("task") or {}
    return str(event.get("status", {}).get("state", ""))


def _final_answer_pushed(requests: list[tuple[dict[str, str], dict[str, Any]]]) -> bool:
    """The turn's end (INPUT_REQUIRED without a pending permission) has reached the webhook."""
    for _, body in requests:
        update = body.get("statusUpdate") or {}
        if _state(body) == "TASK_STATE_INPUT_REQUIRED" and "input" not in update.get("metadata", {}).get("iac_code", {}):
            return True
    return False


async def _run_traced_turn(settings: dict[str, Any]) -> tuple[Receiver, str]:
    """A SendMessage carrying ``TRACEPARENT`` whose turn calls tools, pauses for a permission (answered)
    and ends; returns the receiver once the turn's end was pushed, and the task id."""
    async with receiver() as hook, start_server(settings) as server, aiohttp.ClientSession() as http:
        body = send_message_body(PROMPT, message_id=uuid.uuid4().hex)
        body["params"]["configuration"] = {"taskPushNotificationConfig": {"url": hook.url, "id": "hook-1"}}
        async with http.post(server.url, json=body, headers={**A2A_HEADERS, "traceparent": TRACEPARENT}) as r:
            reply = await r.json()
        task = reply["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        envelope = task["metadata"]["iac_code"]["input"]
        async with http.post(server.url, json=permission_answer_body(envelope, message_id=uuid.uuid4().hex),
                             headers=A2A_HEADERS) as r:
            assert "result" in await r.json()
        await hook.wait_for(_final_answer_pushed)
        return hook, task["id"]


async def test_one_trace_from_request_to_webhook(spans: InMemorySpanExporter, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the server's default workspace: the generated template lands here
    hook, task_id = await _run_traced_turn({"tracing": True, **SETTINGS})
    finished = spans.get_finished_spans()
    ours = [s for s in finished if s.context.trace_id == int(TRACE_ID, 16)]
    by_name: dict[str, list[Any]] = {}
    for span in ours:
        by_name.setdefault(span.name, []).append(span)

    # The A2A call: a SERVER span whose parent is the caller's span.
    (request,) = by_name["a2a SendMessage"]
    assert request.kind == SpanKind.SERVER
    assert request.parent is not None and request.parent.span_id == int(PARENT_SPAN_ID, 16)
    assert request.parent.is_remote
    assert request.attributes["rpc.system"] == "a2a"
    assert request.attributes["rpc.method"] == "SendMessage"
    assert request.attributes["a2a.binding"]

    # The turn: under the call (through a2a-sdk's own handler span), although it ran in its own task.
    (turn,) = by_name["a2a turn"]
    assert _descends(turn, request, ours)
    assert turn.attributes["a2a.task_id"] == task_id

    # Tool calls: children of the turn.
    tools = [s for name, group in by_name.items() if name.startswith("a2a tool ") for s in group]
    assert tools, sorted(by_name)
    assert all(s.parent.span_id == turn.context.span_id for s in tools)
    assert {s.attributes["a2a.tool.name"] for s in tools} >= {"generate_template"}

    # Push deliveries: CLIENT spans in the same trace, one per attempt.
    deliveries = by_name["a2a push delivery"]
    assert deliveries and all(s.kind == SpanKind.CLIENT for s in deliveries)
    assert all(s.attributes["a2a.task_id"] == task_id for s in deliveries)
    assert all(s.attributes["http.response.status_code"] == 200 for s in deliveries)
    in_turn = {turn.context.span_id} | {s.context.span_id for s in tools}
    assert all(s.parent.span_id in in_turn for s in deliveries)

    # The webhook saw the trace: traceparent of a delivery span, in the caller's trace.
    assert hook.requests
    delivery_ids = {format(s.context.span_id, "016x") for s in deliveries}
    for headers, _ in hook.requests:
        version, trace_id, span_id, _flags = headers["traceparent"].split("-")
        assert version == "00" and trace_id == TRACE_ID
        assert span_id in delivery_ids


async def test_tracing_off_records_nothing(spans: InMemorySpanExporter, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    hook, _ = await _run_traced_turn(SETTINGS)
    assert not tracing.enabled()
    # a2a-sdk's import-time decorators ("a2a.server....") are the CLI's to switch off
    # (OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false); none of ours, nor the traced handler's, is recorded.
    names = [s.name for s in spans.get_finished_spans()]
    assert not [n for n in names if not n.startswith("a2a.server.")], names
    assert hook.requests and all("traceparent" not in headers for headers, _ in hook.requests)


def test_helpers_are_no_ops_when_off() -> None:
    otel.disable()
    assert tracing.current_trace_carrier() == {}
    assert otel.trace_id() == ""
    headers: dict[str, str] = {}
    tracing.inject(headers, {"traceparent": TRACEPARENT})
    assert headers == {}
    with tracing.method_span("GetTask", {"traceparent": TRACEPARENT}, "jsonrpc") as span:
        assert not span.is_recording()
    assert tracing.turn_context() is None


def test_push_job_record_carries_the_trace() -> None:
    job = PushJob.new(task_id="t", config_id="c", owner="o", url="http://127.0.0.1/hook", payload={},
                      trace={"traceparent": TRACEPARENT})
    record = job.to_record()
    assert record["trace"] == {"traceparent": TRACEPARENT}
    assert PushJob.from_record(record).trace == {"traceparent": TRACEPARENT}
    plain = PushJob.new(task_id="t", config_id="c", owner="o", url="http://127.0.0.1/hook", payload={})
    assert "trace" not in plain.to_record() and PushJob.from_record(plain.to_record()).trace == {}


def test_log_records_carry_the_trace_id(spans: InMemorySpanExporter) -> None:
    otel.enable()
    seen: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        otel.install_log_filter()
        with tracing.method_span("GetTask", {"traceparent": TRACEPARENT}, "jsonrpc"):
            logging.getLogger("iac_code.test").warning("inside")
        logging.getLogger("iac_code.test").warning("outside")
    finally:
        root.removeHandler(handler)
    assert getattr(seen[0], "trace_id", None) == TRACE_ID
    assert not getattr(seen[1], "trace_id", None)


async def test_official_grpc_binding_continues_the_callers_trace(spans: InMemorySpanExporter) -> None:
    grpc = pytest.importorskip("grpc")
    pytest.importorskip("iac_code_transport_grpc")
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    async with start_server({"tracing": True, "transport": "grpc", "grpc-port": 0}) as server:
        metadata = (("a2a-version", "1.0"), ("traceparent", TRACEPARENT))
        async with grpc.aio.insecure_channel(server.url) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            reply = await stub.SendMessage(a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(
                message_id=uuid.uuid4().hex, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hello")])),
                metadata=metadata)
    ours = [s for s in spans.get_finished_spans() if s.context.trace_id == int(TRACE_ID, 16)]
    (request,) = [s for s in ours if s.name == "a2a SendMessage"]
    assert request.parent.span_id == int(PARENT_SPAN_ID, 16)
    assert request.attributes["a2a.binding"] == "grpc"
    (turn,) = [s for s in ours if s.name == "a2a turn"]
    assert _descends(turn, request, ours) and turn.attributes["a2a.task_id"] == reply.task.id
