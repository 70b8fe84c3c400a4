"""Prometheus metrics at GET /metrics: a scripted workload, then the scrape."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from iac_code_metrics.plugin import iac_code_instrumentation
from iac_code_metrics.registry import CountedStream, PrometheusMetrics, code_text, metrics_of
from prometheus_client.parser import text_string_to_metric_families

from iac_code.api import StartupError, error_code
from iac_code.testing import A2A_HEADERS, RunningServer, make_kernel, send_message_body, start_server

TOKEN = "metrics-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@asynccontextmanager
async def serving(settings: dict[str, Any] | None = None) -> AsyncIterator[tuple[RunningServer, aiohttp.ClientSession]]:
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        yield server, http


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)  # the default workspace: nothing lands in the repository
    yield


async def scrape(server: RunningServer, http: aiohttp.ClientSession, headers: dict[str, str] | None = None) -> Samples:
    async with http.get(server.url + "metrics", headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/plain"
        text = await response.text()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def rpc(server: RunningServer, http: aiohttp.ClientSession, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as response:
        result: dict[str, Any] = await response.json()
        return result


async def settled(server: RunningServer, http: aiohttp.ClientSession, **gauges: float) -> Samples:
    """Scrape until every named gauge has its value (turns and streams end just after the answer)."""
    deadline = asyncio.get_running_loop().time() + 5
    while True:
        samples = await scrape(server, http)
        if all(value(samples, name) == want for name, want in gauges.items()):
            return samples
        assert asyncio.get_running_loop().time() < deadline, {name: value(samples, name) for name in gauges}
        await asyncio.sleep(0.02)


def open_streams(samples: Samples) -> float:
    return sum(v for (name, _), v in samples.items() if name == "iac_code_a2a_open_streams")


async def test_scripted_workload_is_counted() -> None:
    async with serving() as (server, http):
        for number in range(3):
            answer = await rpc(server, http, send_message_body("hello", message_id=f"m-{number}", request_id=number))
            assert "result" in answer, answer
        missing = await rpc(server, http, {"jsonrpc": "2.0", "id": "g", "method": "GetTask",
                                           "params": {"id": "no-such-task"}})
        assert missing["error"]["code"] == -32001
        stream_body = send_message_body("hello", message_id="m-stream", request_id="s", method="SendStreamingMessage")
        async with http.post(server.url, json=stream_body, headers={**A2A_HEADERS, "Accept": "text/event-stream"}) as r:
            assert r.status == 200
            assert "data:" in await r.text()

        samples = await settled(server, http, iac_code_a2a_turns_active=0)
        ok = {"binding": "http", "code": "ok"}
        assert value(samples, "iac_code_a2a_requests_total", method="SendMessage", **ok) == 3
        assert value(samples, "iac_code_a2a_requests_total", method="SendStreamingMessage", **ok) == 1
        assert value(samples, "iac_code_a2a_requests_total", method="GetTask", binding="http", code="-32001") == 1
        assert value(samples, "iac_code_a2a_request_duration_seconds_count", method="SendMessage", binding="http") == 3
        assert value(samples, "iac_code_a2a_request_duration_seconds_count", method="GetTask", binding="http") == 1
        assert value(samples, "iac_code_a2a_request_duration_seconds_bucket", method="SendMessage", binding="http",
                     le="+Inf") == 3
        assert value(samples, "iac_code_a2a_request_duration_seconds_sum", method="SendMessage", binding="http") > 0
        assert value(samples, "iac_code_a2a_journal_commit_seconds_count") >= 1
        assert value(samples, "iac_code_a2a_permission_waits") == 0
        assert value(samples, "iac_code_a2a_contexts_loaded") >= 1
        samples = await settled(server, http)
        deadline = asyncio.get_running_loop().time() + 5
        while open_streams(samples) != 0:
            assert asyncio.get_running_loop().time() < deadline, "a stream stayed open"
            await asyncio.sleep(0.02)
            samples = await scrape(server, http)
        assert ("iac_code_a2a_open_streams", frozenset({("binding", "http")})) in samples
        # Bounded labels: no task or context id anywhere.
        for (_, labels) in samples:
            assert all(key in {"method", "binding", "code", "outcome", "state", "transport", "le"} for key, _ in labels), labels


@asynccontextmanager
async def webhook(statuses: list[int]) -> AsyncIterator[tuple[str, asyncio.Queue[int]]]:
    """A webhook answering ``statuses`` in turn (then 200); its queue gets each answer's status."""
    answered: asyncio.Queue[int] = asyncio.Queue()

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        status = statuses.pop(0) if statuses else 200
        answered.put_nowait(status)
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/hook", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/hook", answered  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def test_push_deliveries_are_counted_by_outcome(tmp_path: Path) -> None:
    settings = {"push-notifications": True, "push-allowed-hosts": ["127.0.0.1"], "push-retry-base-delay": 0.05,
                "push-retry-max-delay": 0.2, "push-max-attempts": 3, "persistence-dir": str(tmp_path)}
    async with webhook([503]) as (url, answered), serving(settings) as (server, http):
        body = send_message_body("hello", message_id=uuid.uuid4().hex)
        body["params"]["configuration"] = {"taskPushNotificationConfig": {"url": url, "id": "hook-1"}}
        assert "result" in await rpc(server, http, body)
        first = await asyncio.wait_for(answered.get(), 20)
        await asyncio.wait_for(answered.get(), 20)  # the retry, or the next event's delivery
        assert first == 503
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            samples = await scrape(server, http)
            outcomes = {o: value(samples, "iac_code_a2a_push_deliveries_total", outcome=o)
                        for o in ("delivered", "retried", "dead_lettered", "deferred")}
            if outcomes["retried"] >= 1 and outcomes["delivered"] >= 1:
                break
            assert asyncio.get_running_loop().time() < deadline, outcomes
            await asyncio.sleep(0.05)
        assert outcomes["dead_lettered"] == 0
        assert ("iac_code_a2a_push_queue_jobs", frozenset({("state", "dead")})) in samples
        attempts = value(samples, "iac_code_a2a_push_delivery_seconds_count")
        assert attempts == outcomes["delivered"] + outcomes["retried"] + outcomes["dead_lettered"]


async def test_unknown_methods_are_not_counted_and_kernels_do_not_share_metrics() -> None:
    async with serving() as (first, http), serving() as (second, _):
        assert metrics_of(first.kernel) is not metrics_of(second.kernel)
        await rpc(first, http, {"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}})
        await rpc(first, http, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
        one, two = await scrape(first, http), await scrape(second, http)
        assert value(one, "iac_code_a2a_requests_total", method="ListTasks", binding="http", code="ok") == 1
        assert value(two, "iac_code_a2a_requests_total", method="ListTasks", binding="http", code="ok") == 0
        assert not any("NoSuchMethod" in dict(labels).get("method", "") for _, labels in one)


async def test_metrics_needs_credentials_unless_public() -> None:
    async with serving({"token": TOKEN}) as (server, http):
        async with http.get(server.url + "metrics") as response:
            assert response.status == 401
        samples = await scrape(server, http, AUTH)
        assert ("iac_code_a2a_turns_active", frozenset()) in samples
    async with serving({"token": TOKEN, "metrics-public": True}) as (server, http):
        await scrape(server, http)


async def test_metrics_off_means_no_route_and_no_registry() -> None:
    async with serving({"metrics": False}) as (server, http):
        assert metrics_of(server.kernel) is None
        assert server.kernel.dispatcher is not None and server.kernel.dispatcher.instrumentation is None
        async with http.get(server.url + "metrics") as response:
            assert response.status == 404


# --------------------------------------------------------------------------- units


class _Config:
    metrics = True


def test_the_instrumentation_follows_the_config_key() -> None:
    assert isinstance(iac_code_instrumentation(_Config()), PrometheusMetrics)
    assert iac_code_instrumentation(object()) is None


def test_methods_outside_a2a_are_other_and_codes_are_text() -> None:
    from a2a.utils.errors import TaskNotFoundError

    assert error_code(TaskNotFoundError()) == -32001
    metrics = PrometheusMetrics()
    metrics.request_done("message/send", "http", "ok", 0.01)
    metrics.request_done("GetTask", "http", code_text(TaskNotFoundError()), 0.01)
    metrics.push_outcome("delivered")
    metrics.push_outcome("dead_lettered")
    metrics.push_attempt(0.2)
    metrics.journal_committed(0.001)
    text = metrics.exposition().decode()
    assert 'iac_code_a2a_requests_total{binding="http",code="ok",method="other"} 1.0' in text
    assert 'iac_code_a2a_requests_total{binding="http",code="-32001",method="GetTask"} 1.0' in text
    assert 'iac_code_a2a_push_deliveries_total{outcome="delivered"} 1.0' in text
    assert 'iac_code_a2a_push_deliveries_total{outcome="retried"} 0.0' in text
    assert "iac_code_a2a_push_delivery_seconds_count 1.0" in text
    assert "iac_code_a2a_journal_commit_seconds_count 1.0" in text


async def test_a_counted_stream_closes_once_however_it_ends() -> None:
    metrics = PrometheusMetrics()
    gauge = metrics.open_streams.labels("t")

    async def events() -> AsyncIterator[int]:
        yield 1
        yield 2

    finished = metrics.track_stream(events(), "t")
    closed = metrics.track_stream(events(), "t")
    dropped = metrics.track_stream(events(), "t")
    assert isinstance(finished, CountedStream) and gauge._value.get() == 3
    assert [item async for item in finished] == [1, 2]
    assert await anext(closed) == 1
    await closed.aclose()
    await closed.aclose()
    assert gauge._value.get() == 1
    del dropped
    assert gauge._value.get() == 0


async def test_connections_by_transport_and_snapshot_writes_are_measured() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.post(server.url, json=send_message_body("hello"), headers=A2A_HEADERS) as r:
            assert "result" in await r.json()
        deadline = asyncio.get_running_loop().time() + 10
        while True:  # snapshots are written behind, in batches
            async with http.get(server.url + "metrics") as r:
                families = {f.name: f for f in text_string_to_metric_families(await r.text())}
            writes = [s.value for s in families["iac_code_a2a_snapshot_write_seconds"].samples
                      if s.name.endswith("_count")]
            if writes and writes[0] >= 1:
                break
            assert asyncio.get_running_loop().time() < deadline, "no snapshot batch was measured"
            await asyncio.sleep(0.05)
        (open_http,) = [s.value for s in families["iac_code_a2a_connections"].samples if s.labels == {"transport": "http"}]
        assert open_http >= 1  # this session's keep-alive connection


async def test_a_private_metrics_port_serves_without_credentials() -> None:
    async with start_server({"token": "t0ken", "metrics-port": 0}) as server, aiohttp.ClientSession() as http:
        metrics = metrics_of(server.kernel)
        assert metrics is not None and metrics.port is not None
        port = metrics.port.port
        async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
            assert r.status == 200 and "iac_code_a2a_requests_total" in await r.text()
        async with http.get(server.url + "metrics") as r:  # the main port still asks for credentials
            assert r.status == 401


async def test_a_metrics_port_in_use_stops_the_start_and_leaves_the_state_directory_free(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = {"metrics-port": port, "persistence-dir": str(tmp_path / "state")}
        with pytest.raises(StartupError, match=f"Cannot bind metrics-port to 127.0.0.1:{port}"):
            async with start_server(settings):
                pass
        kernel = make_kernel({"metrics-port": 0, "port": port})  # the metrics port binds, then HTTP cannot
        with pytest.raises(StartupError, match="Transport 'http' cannot start"):
            await kernel.start()
        assert metrics_of(kernel) is None  # stopped again: its port closed
    async with serving({**settings, "metrics-port": 0}) as (server, http):  # the lock was given up
        metrics = metrics_of(server.kernel)
        assert metrics is not None and metrics.port is not None
        async with http.get(f"http://127.0.0.1:{metrics.port.port}/metrics") as r:
            assert r.status == 200
