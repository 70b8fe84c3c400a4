"""The instrumentation seam: a server without the metrics and tracing plugins, and a plugin observing the kernel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.api import error_code
from iac_code.base import tracing
from iac_code.base.config import PLUGIN_KEYS
from iac_code.base.errors import ConfigProblems
from iac_code.base.hookspecs import hookimpl
from iac_code.base.instrumentation import Activity, Instrumentation
from iac_code.server.plugins import Plugins
from iac_code.testing import A2A_HEADERS, make_kernel, send_message_body, start_server
from tests.test_cli import _env, run, serving

WITHOUT = {"disabled-plugins": ["metrics", "tracing"]}


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default workspace: nothing lands in the repository


async def test_a_server_with_metrics_and_tracing_blocked_serves_without_them(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text("disabled-plugins: [metrics, tracing]\n")
    async with serving("--config", str(config), env=_env()) as (url, _lines), aiohttp.ClientSession() as http:
        async with http.post(url, json=send_message_body("hello"), headers=A2A_HEADERS) as r:
            assert (await r.json())["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        async with http.get(url + "metrics") as r:
            assert r.status == 404
    code, out, err = await run("a2a", "--plugins", "list", "--output", "json", "--config", str(config))
    assert code == 0, err
    status = {p["name"]: (p["status"], p["distribution"]) for p in json.loads(out)["plugins"]}
    assert status["metrics"] == ("blocked", "iac-code-metrics")
    assert status["tracing"] == ("blocked", "iac-code-tracing")


@pytest.mark.parametrize(("yaml_text", "key", "plugin"), [
    ("disabled-plugins: [metrics]\nmetrics-port: 9464\n", "metrics-port", "metrics"),
    ("disabled-plugins: [tracing]\ntracing: true\n", "tracing", "tracing"),
    ("disabled-plugins: [push]\npush-queue: local-file\n", "push-queue", "push"),
    ("disabled-plugins: [compat-v03]\ncard-legacy-fields: true\n", "card-legacy-fields", "compat-v03"),
])
async def test_a_key_of_a_missing_plugin_names_the_plugin_and_the_extra(tmp_path: Path, yaml_text: str,
                                                                        key: str, plugin: str) -> None:
    config = tmp_path / "server.yml"
    config.write_text(yaml_text)
    code, out, err = await run("a2a", "--config", str(config))
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert f"unknown configuration key '{key}': it belongs to the '{plugin}' plugin" in line, line
    assert "pip install 'iac-code[a2a]'" in line and "Traceback" not in err


def test_the_table_of_plugin_keys_matches_the_plugins_config_models() -> None:
    owners = {plugin for plugin, _extra in PLUGIN_KEYS.values()}
    models = {p.plugin: p.record for p in Plugins.load().config_models() if p.plugin in owners}
    assert set(models) == owners  # every plugin the table names is installed and has keys
    for plugin, model in models.items():
        assert {key for key, (owner, _) in PLUGIN_KEYS.items() if owner == plugin} == set(model.model_fields), plugin


def test_without_an_instrumentation_plugin_nothing_is_observed() -> None:
    kernel = make_kernel(WITHOUT)
    assert kernel.instrumentation is None and kernel.writer.instrumentation is None
    with pytest.raises(ConfigProblems, match="unknown configuration key 'metrics'"):
        make_kernel({**WITHOUT, "metrics": True})


class Recorder(Instrumentation):
    """Records what the kernel tells it."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.context: Any = None
        self.commits = 0
        self.snapshots = asyncio.Event()
        Recorder.last = self

    async def start(self, context: Any) -> None:
        self.context = context
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")

    def handler_class(self, base: type[Any]) -> type[Any]:
        return type("RecordedHandler", (base,), {})

    async def observe_call(self, method: str, call: Any, params: Any, fields: Any, pending: Any) -> Any:
        try:
            result = await pending
        except Exception as exc:
            self.events.append(f"{method} {call.transport} error {error_code(exc.error)}")  # type: ignore[attr-defined]
            raise
        self.events.append(f"{method} {call.transport} ok")
        return result

    def journal_committed(self, seconds: float) -> None:
        self.commits += 1

    def snapshot_written(self, seconds: float) -> None:
        self.snapshots.set()


class RecorderPlugin:
    @hookimpl
    def iac_code_instrumentation(self, config: Any) -> Instrumentation:
        return Recorder()


async def test_a_plugin_observes_calls_commits_and_the_servers_life() -> None:
    async with start_server(WITHOUT, extra_plugins={"recorder": RecorderPlugin()}) as server, \
            aiohttp.ClientSession() as http:
        recorder = Recorder.last
        assert server.kernel.instrumentation is recorder and recorder.context is server.kernel
        assert type(server.kernel.request_handler).__name__ == "RecordedHandler"
        async with http.post(server.url, json=send_message_body("hello"), headers=A2A_HEADERS) as r:
            assert "result" in await r.json()
        missing = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "no-such-task"}}
        async with http.post(server.url, json=missing, headers=A2A_HEADERS) as r:
            assert (await r.json())["error"]["code"] == -32001
        await asyncio.wait_for(recorder.snapshots.wait(), 10)  # snapshots are written behind, in batches
        assert recorder.commits >= 1
        activity = server.kernel.activity()
        assert isinstance(activity, Activity) and activity.contexts_loaded >= 1 and activity.connections["http"] >= 1
        assert await server.kernel.push_queue_depth() is None  # push notifications are off
    assert recorder.events == ["start", "SendMessage http ok", "GetTask http error -32001", "stop"]


def test_the_tracing_helpers_do_nothing_without_a_tracer() -> None:
    assert not tracing.enabled()
    headers: dict[str, str] = {}
    tracing.inject(headers, {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
    assert headers == {} and tracing.current_trace_carrier() == {} and tracing.turn_context() is None
    with tracing.push_span({}, task_id="t") as span:
        span.set_attribute("http.response.status_code", 200)
        assert not span.is_recording()
    with tracing.tool_spans() as tools:
        tools.observe(object())
