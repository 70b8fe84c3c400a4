"""The kernel: assembles configuration, plugins and a2a-sdk into a server.

``Kernel`` builds the Agent Card, the authenticator, the executor (an iac-code
runtime behind :class:`~iac_code.tasks.executor.RuntimeExecutor`, or an unchanged
a2a-sdk ``AgentExecutor``), a2a-sdk's request handler and the one JSON-RPC
dispatcher, then starts the configured transport plugin.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import inspect
import logging
from typing import Any

from a2a.server.agent_execution import AgentExecutor

from iac_code.tasks.artifacts import ArtifactStore
from iac_code.security.auth import Authenticator
from iac_code.base.background import spawn
from iac_code.protocol.card import CardService
from iac_code.base.cluster import NodeCall, NodeCalls, NodeLink, SharedRecords, StateBackend
from iac_code.base.config import ServerConfig, default_config_dir
from iac_code.tasks.contexts import ContextRegistry
from iac_code.tasks.gating import TurnGates
from iac_code.protocol.dispatcher import METHOD_PARAMS, JsonRpcDispatcher
from iac_code.base.errors import StartupError
from iac_code.tasks.executor import RuntimeExecutor
from iac_code.tasks.inputs import InputDecoder
from iac_code.tasks.llm_headers import LlmHeaderStore
from iac_code.base.instrumentation import Activity
from iac_code.tasks.permission_waits import LocalPermissionWaits, PermissionWaits, default_directory
from iac_code.tasks.permissions import AuditLog, PermissionBroker, PermissionPolicy
from iac_code.agents.runtime import AgentRuntime
from iac_code.tasks.run_modes import ModeRouter
from iac_code.server.plugins import KNOWN_RUNTIMES, KNOWN_TASK_STORES, Plugins, not_available
from iac_code.base.records import (
    CardDocument,
    HttpRouteSpec,
    PipelineServices,
    PipelineSpec,
    InterfaceInfo,
    ProtocolAdapterSpec,
    PushContext,
    PushService,
    SessionState,
    SigningKeySet,
    ToolSpec,
    TransportServer,
    TransportSpec,
)
from iac_code.tasks.projection import WireProjection
from iac_code.security.safe_mode import static_roots
from iac_code.tasks.request_handler import DecodingContextBuilder, KernelRequestHandler
from iac_code.server.state_lock import StateDirectoryLock
from iac_code.base.storage import SnapshotWriter, sweep_temp_files
from iac_code.tasks.task_events import LocalEventLog
from iac_code.tasks.task_store import KernelTaskStore

logger = logging.getLogger(__name__)

# How often a rotated signing key is looked for (the card is signed again only when it changed).
CARD_REFRESH_SECONDS = 5.0

def load_executor(reference: str) -> AgentExecutor:
    """Import ``package.module:attr`` and return an ``AgentExecutor`` instance.

    ``attr`` may be an instance, a class or a zero-argument factory.
    """
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise StartupError(f"agent-executor must look like 'package.module:attr', got {reference!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise StartupError(f"Cannot load agent-executor {reference!r}: {type(exc).__name__}: {exc}") from None
    if inspect.isclass(target) or (callable(target) and not isinstance(target, AgentExecutor)):
        try:
            target = target()
        except Exception as exc:
            raise StartupError(f"Cannot create agent-executor {reference!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(target, AgentExecutor):
        raise StartupError(f"agent-executor {reference!r} is not an a2a-sdk AgentExecutor")
    return target


def _transport_specs(plugins: Plugins, names: list[str]) -> list[TransportSpec]:
    """The configured transports; one named twice (also through an alias) is a start-up error."""
    specs: list[TransportSpec] = []
    for name in names:
        spec = plugins.transport(name)
        if any(s.name == spec.name for s in specs):
            raise StartupError(f"Transport {spec.name!r} is listed twice in 'transport'.")
        specs.append(spec)
    return specs


class Kernel:
    """One configured server: card, auth, executor, request handler, dispatcher, transport."""

    def __init__(self, config: ServerConfig, plugins: Plugins, *, state_lock: StateDirectoryLock | None = None) -> None:
        self.config = config
        self.plugins = plugins
        self.state_lock = state_lock  # taken by the caller; its PID is recorded once the sockets are bound
        self._owns_lock = False  # start() took it (no caller did): stop() gives it up again
        self.transport_specs: list[TransportSpec] = _transport_specs(plugins, config.transport)
        self.authenticator = Authenticator(config)
        self.state_dir = config.resolved_persistence_dir()
        # Metrics and tracing plugins observe the server through this (None: nothing does).
        self.instrumentation = plugins.instrumentation(config)
        self.writer = SnapshotWriter(backlog=config.task_cache_size)  # bounds unwritten tasks and contexts
        self.writer.instrumentation = self.instrumentation
        self.backend = self._state_backend()
        self.push: PushService | None = self._push_service()  # started after the transports bound
        # Other protocol versions (A2A 0.3) over the 1.0 call core: their method names, routes, card document.
        self.protocol_adapters: tuple[ProtocolAdapterSpec, ...] = tuple(
            p.record for p in plugins.protocol_adapters(reserved=METHOD_PARAMS))
        # Pipelines (iac_code_pipelines) by their own names, as requests spell them (selling_solution_first).
        self.pipeline_specs: dict[str, PipelineSpec] = {p.record.name.strip(): p.record
                                                        for p in plugins.pipelines().values()}
        self.cards = CardService(config, push_notifications=self.push is not None and self.push.enabled,
                                 documents=[a.card_document for a in self.protocol_adapters if a.card_document],
                                 pipelines=bool(self.pipeline_specs),
                                 # interrupts reach a turn running on this node: not across a shared backend's nodes
                                 interrupts=self.backend is None and any(p.interrupts for p in self.pipeline_specs.values()),
                                 extensions=lambda bound: [p.record for p in plugins.card_extensions(config, bound)])
        self.link: NodeLink | None = self.backend.link if self.backend is not None else None
        # Records features share with every node (execution control), and the calls forwarded to this node.
        self.shared_records: SharedRecords | None = self.backend.records if self.backend is not None else None
        self.node_calls = NodeCalls()
        self.task_store: Any = self.backend.task_store if self.backend is not None else KernelTaskStore(
            self.state_dir, self.writer, cache_size=config.task_cache_size,
            events=LocalEventLog(config.stream_resume_events, config.stream_resume_tasks),
            instrumentation=self.instrumentation)
        self.contexts = ContextRegistry(self.state_dir, self.writer, config.context_idle_timeout,
                                        cache_size=config.context_cache_size, link=self.link)
        self.artifacts = ArtifactStore(config.resolved_artifact_dir())
        # The server's own files (config file, state, artifacts, audit log) are never input or a workspace.
        from iac_code.security import workspace
        workspace.protect(self, workspace.ProtectedPaths.of(config))
        # Safe mode's path projection at every wire boundary (IAC_CODE_A2A_SAFE_MODE, read per use).
        self.projection = WireProjection(
            static_roots(str(default_config_dir()), str(self.state_dir),
                         str(config.config_file) if config.config_file else None),
            self.contexts.cwd_of, self.task_store, self.contexts.cwds_of_context)
        self.permissions = PermissionBroker()
        self.permission_waits = self._permission_waits()
        self.llm_headers = LlmHeaderStore()  # each context's LLM-provider headers (memory only)
        # Features that hold turns at their safe points and may refuse new ones (execution control).
        self.turn_gates = TurnGates([p.record.create(self) for p in plugins.turn_gates()])
        self.executor, self._decoder = self._build_executor()
        self.request_handler: KernelRequestHandler | None = None
        self.dispatcher: JsonRpcDispatcher | None = None
        self._servers: list[TransportServer] = []
        self.interfaces: list[InterfaceInfo] = []
        self.signing_keys: SigningKeySet | None = None
        self._card_refresher: asyncio.Task[None] | None = None
        self._stop_event: asyncio.Event | None = None
        self.readiness = "starting"  # "ready" once start() has finished, "stopping" from stop() on
        self.cards.set_signer(self._card_signer())

    def _state_backend(self) -> StateBackend | None:
        """The shared state backend ``task-store`` names (``None`` for ``local``), through the backend hook."""
        name = self.config.task_store.strip().lower().replace("_", "-")
        if name == "local":
            return None
        backends = self.plugins.state_backends()
        if name not in backends:
            raise StartupError(not_available("Task store", name, ["local", *backends], KNOWN_TASK_STORES))
        return backends[name].record.create(self)

    def _permission_waits(self) -> PermissionWaits:
        """Durable permission waits: checkpoints in the shared backend when it keeps them, else in
        ``<persistence-dir>/permission-waits`` (read at start-up)."""
        shared = self.backend.permission_waits if self.backend is not None else None
        records = shared if shared is not None else LocalPermissionWaits(default_directory(self.state_dir))
        wait = self.config.permission_wait
        return PermissionWaits(records, resident=wait.resident(self.config.permission_timeout), grace=wait.grace,
                               node_id=self.link.node_id if self.link is not None else "")

    def _push_service(self) -> PushService | None:
        """The push service of the push plugin (``None`` when none is installed), built but not started."""
        provided = self.plugins.push_service()
        if provided is None:
            return None
        context = PushContext(config=self.config, state_dir=self.state_dir,
                              queues=self.plugins.push_queue_factories(),
                              shared_configs=self.backend.push_configs if self.backend is not None else None,
                              server=self)
        return provided.record.create(context)

    def _card_signer(self) -> Any:
        """The configured card signer (``card-signer``) and its key set, through the signer hook."""
        name = self.config.effective_card_signer
        if not name:
            return None
        signers = self.plugins.card_signers()
        if name not in signers:
            hint = " Install iac-code[a2a-signing]." if name == "jwks" else ""
            raise StartupError(f"card-signer {name!r} is not installed.{hint}")
        spec = signers[name].record
        if spec.create_key_set is not None:
            self.signing_keys = spec.create_key_set(self.config, self.state_dir)
        return spec.create_signer(self) if spec.create_signer is not None else None

    # ------------------------------------------------------------------ what plugins see (iac_code.api.PluginContext)

    @property
    def transport_names(self) -> tuple[str, ...]:
        """The configured transports' canonical names, in configuration order."""
        return tuple(spec.name for spec in self.transport_specs)

    @property
    def card_document(self) -> CardDocument:
        """The public Agent Card as served (body, ``ETag``, ``Last-Modified``)."""
        return self.cards.document

    def tools(self) -> dict[str, ToolSpec]:
        """Every tool plugins provide, by name."""
        return {name: provided.record for name, provided in self.plugins.tools().items()}

    def http_routes(self) -> list[HttpRouteSpec]:
        """Every extra HTTP route plugins provide, for the HTTP transport to mount."""
        return [provided.record for provided in self.plugins.http_routes(self)]

    def public_jwks(self) -> dict[str, Any]:
        """The public keys receivers verify our signatures with (card signing keys, push signing key)."""
        keys: list[dict[str, Any]] = []
        if self.signing_keys is not None:
            keys += self.signing_keys.public_jwks()["keys"]
        if self.push is not None:
            keys += [k for k in self.push.public_jwks()["keys"] if k not in keys]
        return {"keys": keys}

    async def _refresh_card(self) -> None:
        while True:
            await asyncio.sleep(CARD_REFRESH_SECONDS)
            try:
                if self.cards.refresh():
                    logger.info("Agent Card signed again with the rotated key")
            except Exception:
                logger.exception("Signing the Agent Card again failed")

    def _build_handler(self) -> None:
        """Create a2a-sdk's request handler and the dispatcher once the card is final."""
        handler_class = KernelRequestHandler
        if self.instrumentation is not None:
            handler_class = self.instrumentation.handler_class(handler_class)
        push: dict[str, Any] = {}
        if self.push is not None:  # started: with push off, only its URL check (a2a-sdk answers -32003 after it)
            sender = self.push.sender
            push = {"push_config_store": self.push.config_store, "push_sender": sender,
                    "check_push_url": self.push.check_url,
                    "push_flushed": self.push.flushed if sender is not None else None}
        self.request_handler = handler_class(
            agent_executor=self.executor,
            task_store=self.task_store,
            agent_card=self.cards.card,
            extended_agent_card=self.cards.extended,
            request_context_builder=DecodingContextBuilder(
                self._decoder, default_mode=self.config.mode, pipelines=self.pipeline_specs.keys(),
            ) if self._decoder is not None else None,
            turn_ends_in_input_required=isinstance(self.executor, RuntimeExecutor),
            contexts=self.contexts if isinstance(self.executor, RuntimeExecutor) else None,
            permissions=self.permissions if isinstance(self.executor, RuntimeExecutor) else None,
            llm_headers=self.llm_headers if isinstance(self.executor, RuntimeExecutor) else None,
            waits=self.permission_waits if isinstance(self.executor, RuntimeExecutor) else None,
            max_active_turns_per_caller=self.config.max_active_turns_per_caller,
            link=self.link,
            gates=self.turn_gates if isinstance(self.executor, RuntimeExecutor) else None,
            **push,
        )
        self.dispatcher = JsonRpcDispatcher(
            self.request_handler, required_extensions=frozenset(self.config.required_extensions),
            instrumentation=self.instrumentation, adapters=self.protocol_adapters, projection=self.projection)

    def _build_executor(self) -> tuple[AgentExecutor, InputDecoder | None]:
        if self.config.agent_executor:
            return load_executor(self.config.agent_executor), None
        runtimes = self.plugins.agent_runtimes()
        name = self.config.agent_runtime.strip().lower().replace("_", "-")
        if name not in runtimes:
            raise StartupError(not_available("Agent runtime", name, runtimes, KNOWN_RUNTIMES))
        spec = runtimes[name].record
        if spec.create_executor is not None:
            executor = spec.create_executor(self)
            if not isinstance(executor, AgentExecutor):
                raise StartupError(f"Agent runtime {name!r} did not return an a2a-sdk AgentExecutor")
            return executor, None
        assert spec.create_runtime is not None
        runtime = self._with_pipelines(spec.create_runtime(self))
        rules = self.config.permission_rules
        executor = RuntimeExecutor(
            runtime, self.contexts, self.artifacts,
            policy=PermissionPolicy(rules.allow, rules.deny, self.config.auto_approve_permissions),
            llm_headers=self.llm_headers,
            broker=self.permissions, audit=AuditLog(self.config.resolved_audit_log()),
            exposure=self.config.thinking_types, permission_timeout=self.config.permission_timeout or None,
            inline_bytes=self.config.artifact_inline_bytes, gates=self.turn_gates, waits=self.permission_waits)
        return executor, InputDecoder(self.plugins.part_decoders())

    def _with_pipelines(self, chat: AgentRuntime) -> AgentRuntime:
        """``chat``, or a :class:`ModeRouter` that runs a turn on it or on a pipeline when pipelines are installed."""
        default = self.config.pipeline_name.strip()
        if not self.pipeline_specs:
            if self.config.mode == "pipeline":
                raise StartupError("mode: pipeline needs a pipeline plugin; none is installed. "
                                   "Install it with: pip install 'iac-code[a2a]'")
            return chat
        explicit = "pipeline_name" in self.config.explicit_keys or self.config.mode == "pipeline"
        if default not in self.pipeline_specs and not explicit:
            default = sorted(self.pipeline_specs)[0]  # nobody asked for the default one: any installed pipeline
        if default not in self.pipeline_specs:
            raise StartupError(f"pipeline-name {default!r} is not an installed pipeline; installed: "
                               f"{', '.join(sorted(self.pipeline_specs))}.")
        engines = self.plugins.iac_engines()
        engine = next(iter(engines.values())).record.create(self) if engines else None
        services = PipelineServices(context=self, chat=chat, engine=engine, state_dir=self.state_dir,
                                    price_sources={n: p.record for n, p in self.plugins.price_sources().items()})
        return ModeRouter(chat, {name: spec.create(services) for name, spec in self.pipeline_specs.items()}, default)

    async def start(self) -> list[InterfaceInfo]:
        """Start the instrumentation, bind every transport, then restore state and start push; the interfaces.

        ``iac-code a2a`` locks the state directory before it builds the kernel; a kernel built
        without that lock (embedded, tests) takes it here, and releases it in :meth:`stop`.
        """
        if self.state_lock is None:
            lock = StateDirectoryLock(self.state_dir)
            lock.acquire()
            self.state_lock, self._owns_lock = lock, True
        try:
            return await self._start()
        except BaseException:
            if self.instrumentation is not None:
                await self.instrumentation.stop()
            self._release_lock()
            raise

    def _release_lock(self) -> None:
        if self.state_lock is not None:
            self.state_lock.release()
            if self._owns_lock:
                self.state_lock, self._owns_lock = None, False

    async def _start(self) -> list[InterfaceInfo]:
        # Every socket binds before any state is read or repaired: a server that cannot bind (an
        # address in use) stops having changed nothing. Transports look up ``kernel.dispatcher`` per
        # request; until it is built below a request gets the transport's "starting" answer.
        interfaces: list[InterfaceInfo] = []
        try:
            if self.instrumentation is not None:
                await self.instrumentation.start(self)  # a metrics port binds here too
            for spec in self.transport_specs:
                server = spec.create(self)
                self._servers.append(server)
                try:
                    interfaces += await server.start()
                except OSError as exc:
                    raise StartupError(f"Transport {spec.name!r} cannot start: {exc.strerror or exc}") from None
        except BaseException:
            await self._stop_servers()
            raise
        self.interfaces = interfaces
        self.cards.set_interfaces(self.interfaces)
        if self.state_lock is not None:
            self.state_lock.record_owner()
        try:
            await self._restore_state()
            if self.signing_keys is not None:
                self._card_refresher = spawn(self._refresh_card(), name="card-refresh")
            await self._start_push()
        except BaseException:
            await self._stop_servers()
            raise
        self._build_handler()
        if self.link is not None:
            assert self.request_handler is not None
            self.node_calls.fallback = self.request_handler
            await self.link.serve(self.node_calls)
        await self.turn_gates.start()
        self.readiness = "ready"
        return self.interfaces

    def activity(self) -> Activity:
        """What the server holds right now (running turns, permission waits, contexts, connections)."""
        engine = getattr(self.request_handler, "engine", None)
        connections: dict[str, int] = {}
        for spec, server in zip(self.transport_specs, self._servers, strict=False):
            count = getattr(server, "open_connections", None)  # transports that count their connections
            if callable(count):
                connections[spec.name] = int(count())
        return Activity(turns_active=engine.active() if engine is not None else 0,
                        permission_waits=self.permissions.waiting(), contexts_loaded=len(self.contexts),
                        connections=connections, held=self.turn_gates.busy())

    async def push_queue_depth(self) -> dict[str, int] | None:
        """The push queue's job counts by state (``pending``, ``inflight``, ``dead``); ``None`` without push."""
        queue = getattr(self.push, "queue", None)
        return dict(await queue.depth()) if queue is not None else None

    def serve_node_call(self, op: str, handler: NodeCall) -> None:
        """Answer ``op`` when another node forwards it here (``link.call``); only meaningful with a shared backend."""
        self.node_calls.register(op, handler)

    async def restore_session(self, owner: str, context_id: str, cwd: str | None = None) -> SessionState | None:
        """The caller's context, loaded from the persistence directory when it is not in memory (``None``: no
        such context, or it belongs to another workspace than ``cwd``); ``ValueError`` for an unacceptable
        ``cwd``, ``NotImplementedError`` with a shared task store."""
        from iac_code.security.workspace import resolve_workspace

        resolved = resolve_workspace(cwd) if cwd is not None else None
        found = self.contexts.ensure_loaded(owner, context_id)
        if found is None:
            return None
        state, restored = found
        if resolved is not None and state.cwd != resolved:
            return None
        return SessionState(context_id=context_id, cwd=state.cwd, status="restored" if restored else "current",
                            history=tuple(dict(h) for h in state.history))

    async def _restore_state(self) -> None:
        """Tidy what a crash left, join the cluster, restore the task snapshots, start the contexts."""
        swept = sum(sweep_temp_files(root) for root in {self.state_dir, self.config.resolved_artifact_dir()})
        if swept:
            logger.info("Removed %d temporary file(s) left by an earlier crash", swept)
        if self.link is not None:
            await self.link.start()
        restored = self.task_store.restore()
        if restored:
            logger.info("Restored %d task snapshot(s)", restored)
        local_waits = self.permission_waits.local
        if local_waits is not None and local_waits.open():
            suspended = await self.permission_waits.reconcile()  # their turns died with the last process
            if suspended:
                logger.info("Suspended %d permission wait(s) the last process left waiting", suspended)
        self.contexts.start()

    async def _start_push(self) -> None:
        if self.push is not None:
            await self.push.start(self.interfaces[0].url if self.interfaces else "iac-code")

    async def stop(self) -> None:
        """Stop the transports, then drain the running turns and the pushes they queued.

        ``/ready`` answers 503 from the start; with ``shutdown-drain-seconds`` the transports keep
        serving that long first, so a load balancer stops sending new requests before they close.
        """
        self.readiness = "stopping"
        if self.config.shutdown_drain_seconds and self._servers:
            await asyncio.sleep(self.config.shutdown_drain_seconds)
        if self._card_refresher is not None:
            self._card_refresher.cancel()
            self._card_refresher = None
        await self._stop_servers()
        if self.request_handler is not None:
            await self.request_handler.aclose()
        await self.turn_gates.stop()
        if self.push is not None:
            await self.push.stop()
        await self.contexts.stop()
        if self.link is not None:
            await self.link.stop()
        await self.task_store.close()
        await self.writer.close()
        self._release_lock()
        if self.instrumentation is not None:
            await self.instrumentation.stop()  # a tracer flushes the spans it still holds

    async def _stop_servers(self) -> None:
        servers, self._servers = self._servers, []
        for server in reversed(servers):
            try:
                await server.stop()
            except Exception:
                logger.exception("Transport failed to stop cleanly")

    def request_stop(self) -> None:
        """Ask :meth:`serve_forever` to stop (a transport whose channel ended, e.g. stdin at EOF)."""
        if self._stop_event is not None:
            self._stop_event.set()

    async def serve_forever(self, stop: asyncio.Event | None = None) -> None:
        """Start, log where we listen, and run until ``stop`` is set (or :meth:`request_stop`)."""
        stop = stop or asyncio.Event()
        self._stop_event = stop
        interfaces = await self.start()
        for i in interfaces:
            logger.info("iac-code A2A server listening: %s (%s)", i.url, i.protocol_binding)
        # Everything built so far lives as long as the server: out of the collector's way, so a full
        # collection no longer walks the modules, plugins and caches of start-up on every request burst.
        gc.collect()
        gc.freeze()
        try:
            await stop.wait()
        finally:
            await self.stop()
