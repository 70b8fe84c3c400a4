"""Every hookspec: documented, implemented by a test plugin, collected and used by the kernel."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import click
import pluggy
import pytest
from pydantic import BaseModel

from iac_code.base import hookspecs
from iac_code.server import validation
from iac_code.base.config import build_config_model, load_config
from iac_code.protocol.dispatcher import CallInfo
from iac_code.base.errors import StartupError
from iac_code.base.hookspecs import hookimpl
from iac_code.base.instrumentation import Instrumentation
from iac_code.server.plugins import Plugins
from iac_code.base.records import (
    AgentRuntimeSpec,
    CardExtension,
    CardSignerSpec,
    CliCommandSpec,
    DecodedPart,
    HttpRouteSpec,
    IacEngineSpec,
    InterfaceInfo,
    PartDecoderSpec,
    PipelineSpec,
    PriceSourceSpec,
    ProtocolAdapterSpec,
    PushContext,
    PushQueueSpec,
    PushServiceSpec,
    RouterSpec,
    StateBackendSpec,
    ToolSpec,
    TransportSpec,
)
from iac_code.base.turn_gates import TurnGateSpec, TurnPoint
from iac_code.testing import A2A_HEADERS, make_kernel, send_message_body, start_server

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugin-hooks.md"
HOOKS = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("iac_code_"))


class LoopbackTransport:
    """A transport with no network: callers hand it JSON-RPC bodies directly."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        LoopbackTransport.last = self

    async def start(self) -> list[InterfaceInfo]:
        return [InterfaceInfo(url="loopback://iac-code", protocol_binding="loopback")]

    async def stop(self) -> None:
        pass

    async def call(self, body: bytes) -> Any:
        return await self.kernel.dispatcher.dispatch(body, CallInfo(headers={"a2a-version": "1.0"},
                                                                    transport="loopback"))


class LoopbackConfig(BaseModel):
    loopback_label: str = "demo"


class MemoryPush:
    """A push service keeping configurations in memory and sending nothing; refuses ``.invalid`` callbacks."""

    def __init__(self, context: PushContext) -> None:
        self.context = context
        self.enabled = True
        self.signs = False
        self.config_store: Any = None
        self.sender: Any = None
        self.started_with = ""

    async def check_url(self, url: str) -> None:
        if ".invalid" in url:
            raise ValueError("memory push refuses .invalid hosts")

    async def start(self, issuer: str) -> None:
        from a2a.server.tasks import InMemoryPushNotificationConfigStore

        self.config_store = InMemoryPushNotificationConfigStore()
        self.started_with = issuer

    async def flushed(self, task_id: str) -> None:
        pass

    async def stop(self) -> None:
        self.config_store = None

    def public_jwks(self) -> dict[str, Any]:
        return {"keys": []}
class CallCounter(Instrumentation):
    """Counts the A2A calls it observes, by method."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        CallCounter.last = self

    async def observe_call(self, method: str, call: Any, params: Any, fields: Any, pending: Any) -> Any:
        self.calls.append(method)
        return await pending


async def count_tasks(dispatcher: Any, request: Any, call: CallInfo) -> dict[str, Any]:
    """A protocol adapter's one method, ``test/countTasks``: the caller's tasks, counted through the 1.0 ListTasks."""
    page = await dispatcher.invoke("ListTasks", {}, call, request_id=request.get("id"), legacy=True)
    return {"jsonrpc": "2.0", "id": request.get("id"), "result": {"count": len(page.get("tasks", []))}}


class CountingGate:
    """A turn gate that records the safe points and turn ends it sees, refuses turns on context ``closed``
    and tags the status updates."""

    def __init__(self, kernel: Any) -> None:
        self.points: list[str] = []
        self.ended: list[str] = []
        CountingGate.last = self

    def admit(self, owner: str, context_id: str, task_id: str) -> str | None:
        return "This context is closed." if context_id == "closed" else None

    async def safe_point(self, point: TurnPoint) -> None:
        self.points.append(point.kind)

    def waiting(self, point: TurnPoint, waiting: bool) -> None:
        pass

    async def turn_ended(self, point: TurnPoint, status: str) -> None:
        self.ended.append(status)

    def metadata(self, owner: str, context_id: str) -> dict[str, Any]:
        return {"gate": "counted"}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class EveryHookPlugin:
    """Implements every hookspec."""

    @hookimpl
    def iac_code_config_model(self) -> type[BaseModel]:
        return LoopbackConfig

    @hookimpl
    def iac_code_check_config(self, config: Any, transports: list[str]) -> list[str]:
        if "loopback" in transports and config.loopback_label == "forbidden":
            return ["'loopback-label' must not be 'forbidden' with transport: loopback."]
        return []

    @hookimpl
    def iac_code_transports(self) -> list[TransportSpec]:
        return [TransportSpec(name="loopback", aliases=("lb",), create=LoopbackTransport)]

    @hookimpl
    def iac_code_push_queues(self) -> list[PushQueueSpec]:
        return [PushQueueSpec(name="memory-test", create=lambda kernel: object())]  # type: ignore[arg-type,return-value]

    @hookimpl
    def iac_code_push_services(self) -> list[PushServiceSpec]:
        def check(config: Any, queues: Any) -> list[str]:
            if config.loopback_label != "no-push":
                return []
            return [f"'loopback-label: no-push' with push queues {', '.join(sorted(queues))}."]

        return [PushServiceSpec(name="memory-push", create=MemoryPush, check=check)]

    @hookimpl
    def iac_code_state_backends(self) -> list[StateBackendSpec]:
        def refuse(kernel: Any) -> Any:
            raise StartupError("test-state has no backend")

        return [StateBackendSpec(name="test-state", create=refuse)]

    @hookimpl
    def iac_code_card_signers(self) -> list[CardSignerSpec]:
        return [CardSignerSpec(name="test-signer")]

    @hookimpl
    def iac_code_part_decoders(self) -> list[PartDecoderSpec]:
        return [PartDecoderSpec(name="csv", kind="text", media_types=("text/csv",),
                                decode=lambda part, ctx: DecodedPart(text=f"CSV:{part.text}"))]

    @hookimpl
    def iac_code_routers(self) -> list[RouterSpec]:
        return [RouterSpec(name="test-router", rank=lambda routes, query: [])]

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="test-runtime", create_runtime=lambda kernel: object())]  # type: ignore[arg-type,return-value]

    @hookimpl
    def iac_code_iac_engines(self) -> list[IacEngineSpec]:
        return [IacEngineSpec(name="test-engine", create=lambda kernel: object())]  # type: ignore[arg-type,return-value]

    @hookimpl
    def iac_code_pipelines(self) -> list[PipelineSpec]:
        return [PipelineSpec(name="test_pipeline", create=lambda services: object())]  # type: ignore[arg-type,return-value]

    @hookimpl
    def iac_code_price_sources(self) -> list[PriceSourceSpec]:
        return [PriceSourceSpec(name="test_prices", create=lambda kernel: object())]  # type: ignore[arg-type,return-value]

    @hookimpl
    def iac_code_tools(self) -> list[ToolSpec]:
        return [ToolSpec(name="test-tool", create=lambda kernel: object())]

    @hookimpl
    def iac_code_cli_commands(self) -> list[CliCommandSpec]:
        return [CliCommandSpec(name="every-hook", load=lambda: click.Command("every-hook"), parent="a2a")]

    @hookimpl
    def iac_code_instrumentation(self, config: Any) -> Instrumentation | None:
        return CallCounter() if config.loopback_label == "counted" else None

    @hookimpl
    def iac_code_http_routes(self, kernel: Any) -> list[HttpRouteSpec]:
        async def handler(request: Any) -> Any:
            raise NotImplementedError

        return [HttpRouteSpec("GET", "/every-hook", handler)]

    @hookimpl
    def iac_code_protocol_adapters(self) -> list[ProtocolAdapterSpec]:
        return [ProtocolAdapterSpec(name="test-adapter", methods={"test/countTasks": count_tasks})]

    @hookimpl
    def iac_code_card_extensions(self, config: Any, interfaces: list[InterfaceInfo]) -> list[CardExtension]:
        bound = [i.protocol_binding for i in interfaces]
        return [CardExtension(uri="urn:test:every-hook:v1", params={"bindings": bound})]

    @hookimpl
    def iac_code_turn_gates(self) -> list[TurnGateSpec]:
        return [TurnGateSpec(name="counting", create=CountingGate)]


def test_every_hook_is_documented_and_has_a_docstring() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    headings = set(re.findall(r"^## `?(iac_code_\w+)`?", docs, re.MULTILINE))
    assert set(HOOKS) == headings
    for name in HOOKS:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "Called" in doc or "called" in doc, name
        assert ":return:" in doc, name


def test_test_plugin_covers_every_hook() -> None:
    implemented = {n for n, _ in inspect.getmembers(EveryHookPlugin, inspect.isfunction) if n.startswith("iac_code_")}
    assert implemented == set(HOOKS)


def test_every_hook_is_collected() -> None:
    plugins = Plugins.load()
    plugins.register(EveryHookPlugin(), "every-hook", distribution="tests")
    assert {"loopback", "lb"} <= set(plugins.transports())
    assert plugins.transports()["lb"].plugin == "every-hook"
    assert plugins.push_queues()["memory-test"].distribution == "tests"
    with pytest.raises(StartupError, match=r"Push notifications are provided by both push \(iac-code-push\) and "
                                           r"every-hook \(tests\)"):
        plugins.push_service()
    assert "test-signer" in plugins.card_signers()
    assert ("text", "text/csv") in plugins.part_decoders()
    assert "test-router" in plugins.routers()
    assert "test-runtime" in plugins.agent_runtimes() and "offline" in plugins.agent_runtimes()
    assert "test-tool" in plugins.tools()
    assert plugins.iac_engines()["test-engine"].plugin == "every-hook"
    assert plugins.pipelines()["test-pipeline"].record.name == "test_pipeline"  # keyed like every component name
    assert plugins.price_sources()["test-prices"].plugin == "every-hook" and "price-table" in plugins.price_sources()
    assert plugins.state_backends()["test-state"].plugin == "every-hook"
    assert any(p.record.path == "/every-hook" for p in plugins.http_routes(kernel=None))  # type: ignore[arg-type]
    assert [p.record.name for p in plugins.protocol_adapters() if p.plugin == "every-hook"] == ["test-adapter"]
    assert [p.record.params for p in plugins.card_extensions(None, [InterfaceInfo("x://", "X")])
            if p.plugin == "every-hook"] == [{"bindings": ["X"]}]
    assert [p.record.name for p in plugins.turn_gates() if p.plugin == "every-hook"] == ["counting"]
    assert plugins.cli_commands("a2a")["every-hook"].plugin == "every-hook" and "every-hook" not in plugins.cli_commands()
    assert [p.record for p in plugins.config_models() if p.plugin == "every-hook"] == [LoopbackConfig]
    model = build_config_model([(p.plugin, p.record) for p in plugins.config_models()])
    forbidden = load_config(raw={"loopback_label": "forbidden"}, model=model, environ={})
    assert plugins.check_config(forbidden, ["loopback"]) == [
        "'loopback-label' must not be 'forbidden' with transport: loopback."]
    assert plugins.check_config(forbidden, ["http"]) == []
    counted = load_config(raw={"loopback_label": "counted", "metrics": False}, model=model, environ={})
    assert isinstance(plugins.instrumentation(counted), CallCounter)
    assert plugins.instrumentation(forbidden) is not None  # the metrics plugin's (metrics: true by default)
    info = {i.name: i for i in plugins.infos()}["every-hook"]
    assert info.hooks == HOOKS and info.status == "active" and not info.builtin
    plugins.unregister("every-hook")
    assert "loopback" not in plugins.transports()


async def test_kernel_uses_plugin_transport_decoder_push_and_config() -> None:
    kernel = make_kernel({"transport": "LB", "loopback-label": "counted", "disabled-plugins": ["push"]},
                         extra_plugins={"every-hook": EveryHookPlugin()})
    assert kernel.config.loopback_label == "counted"  # type: ignore[attr-defined]
    assert validation.check_startup(kernel.config, kernel.plugins) == []
    refused = load_config(raw={"loopback_label": "no-push"}, model=type(kernel.config), environ={})
    assert "'loopback-label: no-push' with push queues local-file, memory-test, redis-streams." in \
        validation.check_startup(refused, kernel.plugins)  # the push service's check, given the installed queues
    interfaces = await kernel.start()
    try:
        assert interfaces[0].protocol_binding == "loopback"
        assert kernel.cards.card.supported_interfaces[0].url == "loopback://iac-code"
        assert kernel.cards.card.capabilities.push_notifications
        assert isinstance(kernel.push, MemoryPush) and kernel.push.started_with == "loopback://iac-code"
        body = (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m",'
                b'"role":"ROLE_USER","parts":[{"text":"a,b","mediaType":"text/csv"}]}}}')
        reply = await LoopbackTransport.last.call(body)
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id = reply["result"]["task"]["id"]

        def create(url: str) -> bytes:
            return json.dumps({"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig",
                               "params": {"taskId": task_id, "id": "c1", "url": url}}).encode()

        refused = await LoopbackTransport.last.call(create("https://hook.invalid/"))
        assert refused["error"]["code"] == -32602 and refused["error"]["message"] == "memory push refuses .invalid hosts"
        created = await LoopbackTransport.last.call(create("https://hook.example/"))
        assert created["result"]["url"] == "https://hook.example/"
        listed = await LoopbackTransport.last.call(json.dumps({
            "jsonrpc": "2.0", "id": 3, "method": "ListTaskPushNotificationConfigs", "params": {"taskId": task_id}}).encode())
        assert [c["id"] for c in listed["result"]["configs"]] == ["c1"]
        extension = next(e for e in kernel.cards.card.capabilities.extensions if e.uri == "urn:test:every-hook:v1")
        assert list(extension.params["bindings"]) == ["loopback"]  # built again once the transports bound
        gate = CountingGate.last
        assert gate.points == ["turn_started"] and gate.ended == ["normal-turn-ended"]
        assert reply["result"]["task"]["metadata"]["iac_code"]["gate"] == "counted"
        closed = await LoopbackTransport.last.call(json.dumps(send_message_body("x", contextId="closed")).encode())
        assert (closed["error"]["code"], closed["error"]["message"]) == (-32602, "This context is closed.")
        counted = await LoopbackTransport.last.call(b'{"jsonrpc":"2.0","id":4,"method":"test/countTasks"}')
        assert counted == {"jsonrpc": "2.0", "id": 4, "result": {"count": 1}}  # the adapter, over the 1.0 core
        assert CallCounter.last.calls == ["SendMessage", "CreateTaskPushNotificationConfig",  # instrumentation saw each call
                                          "CreateTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
                                          "SendMessage", "ListTasks"]
    finally:
        await kernel.stop()


async def test_several_transports_share_one_kernel() -> None:
    async with start_server({"transport": ["http", "lb"], "port": 0, "disabled-plugins": ["push"]},
                            extra_plugins={"every-hook": EveryHookPlugin()}) as server, aiohttp.ClientSession() as http:
        bindings = [i.protocol_binding for i in server.kernel.cards.card.supported_interfaces]
        assert bindings[0] == "JSONRPC" and "loopback" in bindings
        body = send_message_body("hello")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            task = (await r.json())["result"]["task"]
        get = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}).encode()
        seen = await LoopbackTransport.last.call(get)  # the task sent over HTTP, read over the other transport
        assert seen["result"]["id"] == task["id"]


def test_a_transport_named_twice_is_a_startup_error() -> None:
    with pytest.raises(StartupError, match="listed twice"):
        make_kernel({"transport": ["http", "jsonrpc"]})


class DuplicateTransport:
    @hookimpl
    def iac_code_transports(self) -> list[TransportSpec]:
        return [TransportSpec(name="http", create=LoopbackTransport)]


class DuplicateKey:
    class Model(BaseModel):
        public_url: str = ""

    @hookimpl
    def iac_code_config_model(self) -> type[BaseModel]:
        return self.Model


class WrongRecord:
    @hookimpl
    def iac_code_transports(self) -> list[Any]:
        return ["not a record"]


class DuplicateDecoder:
    @hookimpl
    def iac_code_part_decoders(self) -> list[PartDecoderSpec]:
        return [PartDecoderSpec(name="dup", kind="text", media_types=("text/plain",),
                                decode=lambda part, ctx: DecodedPart())]


class DuplicateAdapter:
    @hookimpl
    def iac_code_protocol_adapters(self) -> list[ProtocolAdapterSpec]:
        return [ProtocolAdapterSpec(name="dup", methods={"message/send": count_tasks})]


class ReservedAdapter:
    @hookimpl
    def iac_code_protocol_adapters(self) -> list[ProtocolAdapterSpec]:
        return [ProtocolAdapterSpec(name="reserved", methods={"GetTask": count_tasks})]


def test_conflicts_name_both_plugins() -> None:
    with pytest.raises(StartupError, match=r"'http' is provided by both http \(iac-code-transport-http\) and dup"):
        make_kernel(extra_plugins={"dup": DuplicateTransport()})
    with pytest.raises(StartupError, match="'public-url' is declared by both http and dup-key"):
        make_kernel(extra_plugins={"dup-key": DuplicateKey()})
    with pytest.raises(StartupError, match=r"text/plain'? is provided by both text-parts \(iac-code\) and dup-dec"):
        make_kernel(extra_plugins={"dup-dec": DuplicateDecoder()})
    with pytest.raises(StartupError, match="returned str from iac_code_transports"):
        make_kernel(extra_plugins={"wrong": WrongRecord()})
    with pytest.raises(StartupError, match=r"Method 'message/send' is answered by both compat-v03 "
                                           r"\(iac-code-compat-v03\) and dup-adapter \(tests\)"):
        make_kernel(extra_plugins={"dup-adapter": DuplicateAdapter()})
    plugins = Plugins.load()
    plugins.register(DuplicateAdapter(), "dup-adapter", distribution="tests")
    assert any(line.startswith("Method 'message/send' is answered by both compat-v03") for line in
               validation.check_startup(make_kernel().config, plugins))  # --check-config reports it too
    with pytest.raises(StartupError, match=r"Protocol adapter 'reserved' of reserved-adapter \(tests\) claims the "
                                           r"A2A 1.0 method 'GetTask'"):
        make_kernel(extra_plugins={"reserved-adapter": ReservedAdapter()})


def test_misspelled_hook_fails_loudly() -> None:
    class Misspelled:
        @hookimpl
        def iac_code_transport(self) -> list[TransportSpec]:  # missing the trailing "s"
            return []

    with pytest.raises(pluggy.PluginValidationError):
        Plugins.load().register(Misspelled(), "misspelled")


def test_blocked_plugins_are_not_registered() -> None:
    """A blocked built-in and blocked installed plugins: the default router comes with the a2a-client distribution."""
    assert "default" in Plugins.load().routers()
    plugins = Plugins.load(blocked=["text-parts", "a2a-client", "runtime-offline"])
    assert all(p.plugin != "text-parts" for p in plugins.part_decoders().values())
    assert "default" not in plugins.routers()
    assert "offline" not in plugins.agent_runtimes()
    status = {i.name: i.status for i in plugins.infos()}
    assert status["text-parts"] == status["a2a-client"] == status["runtime-offline"] == "blocked"


def test_without_the_offline_runtime_the_error_names_the_extra() -> None:
    from iac_code.testing import make_kernel

    with pytest.raises(StartupError, match=r"Agent runtime 'offline' is not installed .*pip install 'iac-code\[a2a\]'"):
        make_kernel({"disabled-plugins": ["runtime-offline"]})


def test_a_state_backend_failing_to_start_is_a_startup_error() -> None:
    with pytest.raises(StartupError, match="test-state has no backend"):
        make_kernel({"task-store": "test-state"}, extra_plugins={"every-hook": EveryHookPlugin()})
    with pytest.raises(StartupError, match=r"Unknown task store 'nosuch' \(installed: local, redis"):
        make_kernel({"task-store": "nosuch"})
