"""Plugin manager factory, guarded entry-point loading and a typed façade.

The kernel never spells ``pm.hook.<name>``: it asks :class:`Plugins` for
transports, decoders, runtimes and so on. Built-in features are registered
from :data:`BUILTIN_PLUGINS` through the same manager as
installed plugins; every entry point is loaded in its own ``try`` so a broken
install is reported by name and the rest keep working. An installed plugin that
declares a plugin API version (``IAC_CODE_API_VERSION``) this kernel does not
provide is not registered either: it is ``failed`` with the reason, like a
broken one. One that declares nothing is taken as compatible (see
:mod:`iac_code.api`).
"""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from iac_code.base import hookspecs
from iac_code.base.api_version import API_VERSION_ATTRIBUTE, api_version_problem
from iac_code.base.errors import StartupError
from iac_code.base.instrumentation import Instrumentation, combine
from iac_code.base.records import (
    AgentRuntimeSpec,
    CardExtension,
    CardSignerSpec,
    CliCommandSpec,
    HttpRouteSpec,
    IacEngineSpec,
    InterfaceInfo,
    PartDecoderSpec,
    PipelineSpec,
    PriceSourceSpec,
    ProtocolAdapterSpec,
    Provided,
    PushQueueSpec,
    PushServiceSpec,
    RouterSpec,
    StateBackendSpec,
    ToolSpec,
    TransportSpec,
    normalise_name,
)
from iac_code.base.turn_gates import TurnGateSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

    from iac_code.base.records import PluginContext

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Which root extra brings which first-party plugin, for install hints.
EXTRA_FOR_PLUGIN: dict[str, str] = {
    "http": "a2a",
    "stdio": "a2a",
    "push": "a2a",
    "push-file": "a2a",
    "grpc": "a2a-grpc",
    "grpc-jsonrpc": "a2a-grpc",
    "redis-streams": "a2a-redis",
    "push-redis": "a2a-redis",
    "redis": "a2a-redis",
    "state-redis": "a2a-redis",
    "signing-jwks": "a2a-signing",
    "offline": "a2a",
    "runtime-offline": "a2a",
    "llm": "a2a-llm",
    "runtime-llm": "a2a-llm",
    "a2a-client": "a2a",
    "metrics": "a2a",
    "tracing": "a2a",
    "compat-v03": "a2a",
    "execution-control": "a2a",
}


# Every name (and alias) of the first-party transports, with the extra that installs each.
KNOWN_TRANSPORTS: dict[str, str] = {
    **dict.fromkeys(("http", "jsonrpc", "json-rpc", "http+jsonrpc", "http-jsonrpc", "https", "websocket", "ws",
                     "wss", "unix", "stdio"), "a2a"),
    **dict.fromkeys(("grpc", "grpcs", "grpc-jsonrpc", "grpc+jsonrpc"), "a2a-grpc"),
    **dict.fromkeys(("redis-streams", "redis", "redis-stream"), "a2a-redis"),
}
KNOWN_RUNTIMES: dict[str, str] = {"offline": "a2a", "llm": "a2a-llm"}
KNOWN_TASK_STORES: dict[str, str] = {"local": "a2a", "redis": "a2a-redis"}
# The commands first-party plugins add (as typed after ``iac-code``): the plugin and the distribution adding each.
KNOWN_COMMANDS: dict[str, tuple[str, str]] = {"a2a-client": ("a2a-client", "iac-code-a2a-client")}


def install_hint(component: str) -> str:
    """The pip command that brings the plugin providing ``component``."""
    extra = EXTRA_FOR_PLUGIN.get(normalise_name(component), "all")
    return f"pip install 'iac-code[{extra}]'"


def not_available(kind: str, name: str, installed: Iterable[str], known: Mapping[str, str]) -> str:
    """Why component ``name`` of ``kind`` (``Transport``, ``Agent runtime``, ...) cannot be used, in one line.

    A first-party name that is not installed gets the extra that brings it; any other name
    is a typo or a third-party plugin: the closest installed or first-party name is offered
    (``did you mean 'websocket'?``), never an install command that would change nothing.
    """
    key = normalise_name(name)
    names = sorted(set(installed))
    listed = ", ".join(names) or "none"
    if key in known:
        return f"{kind} {key!r} is not installed (installed: {listed}). Install with: pip install " \
               f"'iac-code[{known[key]}]'"
    close = difflib.get_close_matches(key, sorted(set(names) | set(known)), n=1, cutoff=0.6)
    if close:
        return f"Unknown {kind.lower()} {key!r}: did you mean {close[0]!r}? (installed: {listed})"
    return f"Unknown {kind.lower()} {key!r} (installed: {listed}); a third-party one needs its plugin installed."


def missing_command(command: str, plugins: Plugins) -> str:
    """Why the first-party command ``command`` (a :data:`KNOWN_COMMANDS` key) is not available, in one line."""
    plugin, distribution = KNOWN_COMMANDS[command]
    broken = plugins.failed(plugin)
    if broken is not None:
        return (f"'iac-code {command}' comes with plugin {broken.name!r} ({broken.distribution} {broken.version}), "
                f"which failed to load: {broken.reason}. Reinstall with: {install_hint(plugin)}")
    return f"'iac-code {command}' needs the plugin distribution {distribution}, which is not installed. " \
           f"Install with: {install_hint(plugin)}"


@dataclass
class PluginInfo:
    """What ``iac-code a2a --plugins list`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    builtin: bool
    status: str = "active"  # active | blocked | failed
    reason: str = ""
    hooks: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": list(self.hooks),
            "kind": "built-in" if self.builtin else "installed",
            "status": self.status,
            "reason": self.reason,
        }


# The kernel's own plugins (``iac_code.builtin``), registered by module name like an entry point.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "iac_code.builtin.text_parts",
    "iac_code.builtin.data_parts",
    "iac_code.builtin.raw_parts",
    "iac_code.builtin.file_url_parts",
    "iac_code.builtin.multimodal_parts",
    "iac_code.builtin.jwks",
    "iac_code.builtin.hmac_signer",
    "iac_code.builtin.readiness",
    "iac_code.builtin.ask_user_question",
)


_UNDECLARED = object()


def _api_version_problem(plugin: object) -> str | None:
    """Why ``plugin``'s declared ``IAC_CODE_API_VERSION`` rules it out; ``None`` when it fits or declares none."""
    declared = getattr(plugin, API_VERSION_ATTRIBUTE, _UNDECLARED)
    return None if declared is _UNDECLARED else api_version_problem(declared)


def _short_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Plugins:
    """The kernel's typed façade over one pluggy manager.

    Build it with :meth:`load`; tests register extra plugins with
    :meth:`register` and remove them with :meth:`unregister`.
    """

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._infos: dict[str, PluginInfo] = {}

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        *,
        blocked: Iterable[str] = (),
        entry_point_group: str = hookspecs.ENTRY_POINT_GROUP,
        load_entry_points: bool = True,
    ) -> Plugins:
        """Create a manager with the built-ins and every installed plugin.

        ``blocked`` names plugins to skip (shown as ``blocked``).
        """
        plugins = cls()
        blocked_names = {normalise_name(b) for b in blocked if b.strip()}
        kernel_version = _dist_version("iac-code")  # one metadata search, not one per built-in
        for module_name in BUILTIN_PLUGINS:
            short = module_name.rsplit(".", 1)[-1].replace("_", "-")
            if short in blocked_names:
                plugins._infos[short] = PluginInfo(short, "iac-code", kernel_version, True, "blocked")
                continue
            module = importlib.import_module(module_name)
            plugins._register(module, short, "iac-code", kernel_version, builtin=True)
        if load_entry_points:
            for ep in sorted(entry_points(group=entry_point_group), key=lambda e: e.name):
                plugins._load_entry_point(ep, blocked_names)
        plugins._pm.check_pending()
        return plugins

    def _load_entry_point(self, ep: EntryPoint, blocked: set[str]) -> None:
        name = normalise_name(ep.name)
        dist = ep.dist.name if ep.dist is not None else "?"
        version = ep.dist.version if ep.dist is not None else "?"
        if name in self._infos:
            self._infos[f"{name}@{dist}"] = PluginInfo(
                name, dist, version, False, "failed",
                f"name already taken by {self._infos[name].distribution}",
            )
            logger.error("Plugin %r from %s skipped: name already used by %s", name, dist, self._infos[name].distribution)
            return
        if name in blocked:
            self._infos[name] = PluginInfo(name, dist, version, False, "blocked")
            return
        try:
            plugin = ep.load()
            reason = _api_version_problem(plugin)
            if reason is None:
                self._register(plugin, name, dist, version, builtin=False)
        except Exception as exc:  # a broken plugin must not take the host down
            reason = _short_reason(exc)
        if reason is not None:
            self._infos[name] = PluginInfo(name, dist, version, False, "failed", reason)
            # Reported by whoever knows whether it matters: a start that needs it fails naming it,
            # the CLI warns of it otherwise, and ``--plugins list`` shows it as failed.
            logger.debug("Plugin %r (%s %s) failed to load: %s", name, dist, version, reason)

    def _register(self, plugin: object, name: str, dist: str, version: str, *, builtin: bool) -> None:
        self._pm.register(plugin, name=name)
        hooks = sorted(
            impl_caller.name
            for impl_caller in self._pm.get_hookcallers(plugin) or []
        )
        self._infos[name] = PluginInfo(name, dist, version, builtin, "active", "", hooks)

    def register(self, plugin: object, name: str, *, distribution: str = "(registered)") -> None:
        """Register an extra plugin object or module at run time (tests, embedding)."""
        self._register(plugin, normalise_name(name), distribution, "", builtin=False)
        self._pm.check_pending()

    def unregister(self, name: str) -> None:
        """Remove a plugin registered with :meth:`register`."""
        name = normalise_name(name)
        self._pm.unregister(name=name)
        self._infos.pop(name, None)

    # ------------------------------------------------------------------ introspection

    def infos(self) -> list[PluginInfo]:
        """Every known plugin: active, blocked and failed; built-ins first."""
        return sorted(self._infos.values(), key=lambda i: (not i.builtin, i.name))

    def failed(self, name: str) -> PluginInfo | None:
        info = self._infos.get(normalise_name(name))
        return info if info is not None and info.status == "failed" else None

    # ------------------------------------------------------------------ collection

    def _collect(self, hook_name: str, kind: type[T], **kwargs: Any) -> list[Provided[T]]:
        hook = getattr(self._pm.hook, hook_name)
        provided: list[Provided[T]] = []
        for impl in hook.get_hookimpls():
            info = self._infos.get(impl.plugin_name)
            dist = info.distribution if info else impl.plugin_name
            try:
                result = impl.function(**{k: kwargs[k] for k in impl.argnames})
            except Exception as exc:
                raise StartupError(f"Plugin {impl.plugin_name!r} failed in {hook_name}: {_short_reason(exc)}") from exc
            if result is None:
                continue
            items = result if isinstance(result, list | tuple) else [result]
            for item in items:
                if not isinstance(item, kind):
                    raise StartupError(
                        f"Plugin {impl.plugin_name!r} returned {type(item).__name__} from {hook_name}; expected {kind.__name__}"
                    )
                provided.append(Provided(item, impl.plugin_name, dist))
        return provided

    def _by_name(self, hook_name: str, kind: type[T], what: str,
                 names: Callable[[T], Iterable[str]]) -> dict[str, Provided[T]]:
        table: dict[str, Provided[T]] = {}
        for p in self._collect(hook_name, kind):
            for n in names(p.record):
                key = normalise_name(n)
                if key in table and table[key].plugin != p.plugin:
                    other = table[key]
                    raise StartupError(
                        f"{what} {key!r} is provided by both {other.plugin} ({other.distribution}) "
                        f"and {p.plugin} ({p.distribution}); block one with disabled-plugins"
                    )
                table[key] = p
        return table

    def cli_commands(self, parent: str = "") -> dict[str, Provided[CliCommandSpec]]:
        """The commands plugins add under ``parent`` (``""`` top level, ``"a2a"`` the server group)."""
        return {name: p for name, p in self._by_name("iac_code_cli_commands", CliCommandSpec, "Command",
                                                     lambda c: (c.name,)).items() if p.record.parent == parent}

    def transports(self) -> dict[str, Provided[TransportSpec]]:
        """Transports by name and alias."""
        return self._by_name("iac_code_transports", TransportSpec, "Transport",
                             lambda t: (t.name, *t.aliases))

    def transport(self, name: str) -> TransportSpec:
        """The transport called ``name``, or a StartupError with an install hint."""
        key = normalise_name(name)
        table = self.transports()
        if key in table:
            return table[key].record
        broken = self.failed(key)
        if broken is not None:
            raise StartupError(
                f"Plugin {broken.name!r} ({broken.distribution} {broken.version}) needed for transport "
                f"{key!r} failed to load: {broken.reason}. Reinstall with: {install_hint(key)}"
            )
        raise StartupError(not_available("Transport", key, {p.record.name for p in table.values()},
                                         KNOWN_TRANSPORTS))

    def state_backends(self) -> dict[str, Provided[StateBackendSpec]]:
        return self._by_name("iac_code_state_backends", StateBackendSpec, "State backend", lambda b: (b.name,))

    def push_queues(self) -> dict[str, Provided[PushQueueSpec]]:
        return self._by_name("iac_code_push_queues", PushQueueSpec, "Push queue", lambda q: (q.name,))

    def push_service(self) -> Provided[PushServiceSpec] | None:
        """The installed push service (``None``: no push notifications); two are a conflict naming both."""
        provided = list(self._by_name("iac_code_push_services", PushServiceSpec, "Push service",
                                      lambda p: (p.name,)).values())
        if len(provided) > 1:
            first, second = provided[0], provided[1]
            raise StartupError(f"Push notifications are provided by both {first.plugin} ({first.distribution}) "
                               f"and {second.plugin} ({second.distribution}); block one with disabled-plugins")
        return provided[0] if provided else None

    def push_queue_factories(self) -> dict[str, Callable[[Any], Any]]:
        """Every installed push queue's ``create`` by name (what a push service selects from)."""
        return {name: p.record.create for name, p in self.push_queues().items()}

    def card_signers(self) -> dict[str, Provided[CardSignerSpec]]:
        return self._by_name("iac_code_card_signers", CardSignerSpec, "Card signer", lambda s: (s.name,))

    def routers(self) -> dict[str, Provided[RouterSpec]]:
        return self._by_name("iac_code_routers", RouterSpec, "Router", lambda r: (r.name,))

    def tools(self) -> dict[str, Provided[ToolSpec]]:
        return self._by_name("iac_code_tools", ToolSpec, "Tool", lambda t: (t.name,))

    def pipelines(self) -> dict[str, Provided[PipelineSpec]]:
        return self._by_name("iac_code_pipelines", PipelineSpec, "Pipeline", lambda p: (p.name,))

    def price_sources(self) -> dict[str, Provided[PriceSourceSpec]]:
        return self._by_name("iac_code_price_sources", PriceSourceSpec, "Price source", lambda s: (s.name,))

    def iac_engines(self) -> dict[str, Provided[IacEngineSpec]]:
        return self._by_name("iac_code_iac_engines", IacEngineSpec, "IaC engine", lambda e: (e.name,))

    def agent_runtimes(self) -> dict[str, Provided[AgentRuntimeSpec]]:
        return self._by_name("iac_code_agent_runtimes", AgentRuntimeSpec, "Agent runtime", lambda r: (r.name,))

    def part_decoders(self) -> dict[tuple[str, str], Provided[PartDecoderSpec]]:
        """Decoders keyed by ``(kind, media type pattern)``; a shared key is an error."""
        table: dict[tuple[str, str], Provided[PartDecoderSpec]] = {}
        for p in self._collect("iac_code_part_decoders", PartDecoderSpec):
            for mt in p.record.media_types:
                key = (p.record.kind, mt.strip().lower())
                if key in table:
                    other = table[key]
                    raise StartupError(
                        f"Part decoder for {key[0]} {key[1]!r} is provided by both "
                        f"{other.plugin} ({other.distribution}) and {p.plugin} ({p.distribution})"
                    )
                table[key] = p
        return table

    def http_routes(self, kernel: PluginContext) -> list[Provided[HttpRouteSpec]]:
        return self._collect("iac_code_http_routes", HttpRouteSpec, kernel=kernel)

    def card_extensions(self, config: Any, interfaces: list[InterfaceInfo]) -> list[Provided[CardExtension]]:
        """Every plugin's Agent Card extensions for this configuration and these bound interfaces."""
        return self._collect("iac_code_card_extensions", CardExtension, config=config, interfaces=interfaces)

    def turn_gates(self) -> list[Provided[TurnGateSpec]]:
        """Every turn gate (all are active, in plugin order)."""
        return self._collect("iac_code_turn_gates", TurnGateSpec)

    def instrumentation(self, config: Any) -> Instrumentation | None:
        """Every plugin's instrumentation for a server with ``config`` as one object (``None`` without any)."""
        return combine([p.record for p in self._collect("iac_code_instrumentation", Instrumentation, config=config)])
    def protocol_adapters(self, reserved: Collection[str] = ()) -> list[Provided[ProtocolAdapterSpec]]:
        """Every protocol adapter; a method name two adapters claim, or one of ``reserved`` (the A2A 1.0
        names), is a start-up error naming the plugins."""
        provided = self._collect("iac_code_protocol_adapters", ProtocolAdapterSpec)
        owners: dict[str, Provided[ProtocolAdapterSpec]] = {}
        for p in provided:
            for method in p.record.methods:
                if method in reserved:
                    raise StartupError(f"Protocol adapter {p.record.name!r} of {p.plugin} ({p.distribution}) "
                                       f"claims the A2A 1.0 method {method!r}")
                other = owners.setdefault(method, p)
                if other is not p:
                    raise StartupError(
                        f"Method {method!r} is answered by both {other.plugin} ({other.distribution}) and "
                        f"{p.plugin} ({p.distribution}); block one with disabled-plugins")
        return provided

    def check_config(self, config: Any, transports: list[str]) -> list[str]:
        """Every plugin's problem lines for ``config`` (``iac_code_check_config``), in plugin order."""
        problems: list[str] = []
        for impl in reversed(self._pm.hook.iac_code_check_config.get_hookimpls()):
            kwargs = {"config": config, "transports": transports}
            try:
                result = impl.function(**{k: kwargs[k] for k in impl.argnames})
            except Exception as exc:
                problems.append(f"Plugin {impl.plugin_name!r} failed checking the configuration: {_short_reason(exc)}")
                continue
            problems += [str(line) for line in result or ()]
        return problems

    def config_models(self) -> list[Provided[type[BaseModel]]]:
        from pydantic import BaseModel

        return self._collect("iac_code_config_model", type(BaseModel))  # type: ignore[arg-type]


def _dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "0.0.0"
