"""Typed records that plugins return from the component hooks.

Every "provides a component" hook in :mod:`iac_code.base.hookspecs` returns a list of
these records. The plugin manager collects them, normalises their names and
rejects duplicates with an error naming both distributions, so the rest of the
kernel selects implementations by configured name, never by registration order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from a2a.server.tasks import PushNotificationConfigStore, PushNotificationSender
    from aiohttp import web

    from iac_code.base.cluster import NodeLink, SharedRecords, StateBackend
    from iac_code.base.instrumentation import Activity, Instrumentation
    from iac_code.base.push_jobs import PushConfigRecords, PushQueue, QueueContext
    from iac_code.agents.iac_engine import IacEngine
    from iac_code.agents.runtime import AgentRuntime


def normalise_name(name: str) -> str:
    """Component names compare trimmed, lower-case, with ``_`` spelled ``-``."""
    return name.strip().lower().replace("_", "-")


T = TypeVar("T")


@dataclass(frozen=True)
class Provided(Generic[T]):
    """A component record together with the plugin that provided it."""

    record: T
    plugin: str
    distribution: str



# --------------------------------------------------------------------------- transports


@dataclass(frozen=True)
class InterfaceInfo:
    """One entry of the Agent Card's ``supportedInterfaces``."""

    url: str
    protocol_binding: str
    protocol_version: str = "1.0"


class TransportServer(Protocol):
    """A running transport: binds on ``start`` and frames requests for the kernel."""

    async def start(self) -> list[InterfaceInfo]:
        """Bind and start serving; return the interfaces to advertise."""
        ...

    async def stop(self) -> None:
        """Stop accepting requests and release every resource."""
        ...


class JsonRpcChannel(Protocol):
    """The client side of a custom JSON-RPC transport: one connection, many concurrent calls.

    ``iac-code a2a-client`` wraps a channel in an a2a-sdk ``ClientTransport``, so a card
    interface on this transport is reachable with the SDK's ``Client``.
    """

    async def request(self, payload: Mapping[str, Any], *,
                      headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Send one JSON-RPC request; return its JSON-RPC response object."""
        ...

    def stream(self, payload: Mapping[str, Any], *,
               headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send one streaming JSON-RPC request; yield each JSON-RPC response object of its stream."""
        ...

    async def aclose(self) -> None:
        """Close the connection (and stop a spawned server)."""
        ...


@dataclass(frozen=True)
class ClientTarget:
    """Where and how a client connects: the interface ``url`` (from the card or ``--url``).

    ``headers`` (auth, ``A2A-Version``) are for transports that authenticate once at connect
    time (a WebSocket handshake); every call also carries them. ``options`` holds the client
    configuration's transport settings (e.g. ``stdio_command``).
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TransportSpec:
    """A transport (HTTP, gRPC, ...): ``create`` builds a server bound to a kernel.

    A custom JSON-RPC transport also gives its client side: ``connect`` opens a
    :class:`JsonRpcChannel` to an interface URL whose scheme is one of ``url_schemes``.
    The name is the ``protocolBinding`` the server advertises.
    """

    name: str
    create: Callable[[PluginContext], TransportServer]
    aliases: tuple[str, ...] = ()
    description: str = ""
    connect: Callable[[ClientTarget], Awaitable[JsonRpcChannel]] | None = None
    url_schemes: tuple[str, ...] = ()


# --------------------------------------------------------------------------- shared state, push


@dataclass(frozen=True)
class StateBackendSpec:
    """A shared state backend selected by the ``task-store`` setting (several server nodes, one service).

    ``push_configs(config)`` gives the backend's shared push-config records alone, for
    processes that are not server nodes (``iac-code a2a push-worker``).
    """

    name: str
    create: Callable[[PluginContext], StateBackend]
    description: str = ""
    push_configs: Callable[[Any], PushConfigRecords] | None = None


@dataclass(frozen=True)
class PushQueueSpec:
    """A push delivery queue backend selected by the ``push-queue`` setting."""

    name: str
    create: Callable[[QueueContext], PushQueue]
    description: str = ""


@dataclass(frozen=True)
class PushContext:
    """What a push service's ``create`` receives.

    The settings (every plugin's keys), the persistence directory, the installed push
    queues' factories by name, the shared state backend's push-config records (``None``
    with ``task-store: local``), and ``server``: the running server's
    :class:`~iac_code.api.PluginContext`, or ``None`` in a command that runs apart from
    the server (``iac-code a2a push-worker``).
    """

    config: Any
    state_dir: Path
    queues: Mapping[str, Callable[[QueueContext], PushQueue]] = field(default_factory=dict)
    shared_configs: PushConfigRecords | None = None
    server: Any = None


class PushService(Protocol):
    """A server's push notifications, as the kernel's request handler and lifecycle use them.

    ``enabled`` is the card's ``pushNotifications`` capability; ``config_store`` and
    ``sender`` are a2a-sdk's interfaces the request handler is given (``None`` until
    :meth:`start`, and always ``None`` when not enabled: a2a-sdk then answers the push-config
    methods with its push-not-supported error). ``signs``: notifications carry a signature
    whose keys :meth:`public_jwks` publishes at ``/.well-known/jwks.json``.
    """

    enabled: bool
    signs: bool

    @property
    def config_store(self) -> PushNotificationConfigStore | None:
        ...

    @property
    def sender(self) -> PushNotificationSender | None:
        ...

    async def check_url(self, url: str) -> None:
        """Screen a callback URL before a configuration is stored (also when not enabled).

        Raises ``ValueError`` whose text the client gets as invalid params (``-32602``).
        """
        ...

    async def start(self, issuer: str) -> None:
        """Open stores and queues and start delivering; ``issuer`` is the server's first interface URL."""
        ...

    async def flushed(self, task_id: str) -> None:
        """Wait until every notification of ``task_id`` sent so far is durably queued (before an answer leaves)."""
        ...

    async def stop(self) -> None:
        """Let queued enqueues finish, stop delivering and release everything."""
        ...

    def public_jwks(self) -> dict[str, Any]:
        """``{"keys": [...]}``: the public keys receivers verify notifications with."""
        ...


@dataclass(frozen=True)
class PushServiceSpec:
    """Push notifications for the server: the push-config API's store, the sender, delivery.

    ``create(context)`` builds the (not yet started) :class:`PushService` without I/O;
    ``check(config, queues)`` reports configuration problems before anything starts, given
    the names of the installed push queues. At most one push service may be installed: a
    second is a conflict naming both (block one with ``disabled-plugins``); with none, the
    server has no push notifications.
    """

    name: str
    create: Callable[[PushContext], PushService]
    check: Callable[[Any, Collection[str]], list[str]] | None = None
    description: str = ""


# --------------------------------------------------------------------------- card signing


class SigningKeySet(Protocol):
    """A signer plugin's asymmetric keys: one active private key, older ones published until retired.

    Keys are ``jwcrypto.jwk.JWK`` objects with ``kid`` and ``alg`` set. The Agent Card
    signer and signed push notifications both sign with :meth:`active_key`; receivers
    find every key that may still have signed something in :meth:`public_jwks`.
    """

    def active_key(self) -> Any:
        """The private key new signatures use (rotated first when ``signing-rotate-days`` says it is due)."""
        ...

    def public_jwks(self) -> dict[str, Any]:
        """``{"keys": [...]}``: the public halves of the active key and of retired keys still in their grace period."""
        ...

    def rotate(self) -> str:
        """Make a new key active now (the old one enters its grace period); the new ``kid``."""
        ...

    def describe(self) -> list[dict[str, Any]]:
        """Every stored key without key material: ``kid``, ``alg``, ``status`` (active, retired, expired), times."""
        ...


@dataclass(frozen=True)
class CardSignerSpec:
    """Signs the served Agent Cards, selected by the ``card-signer`` setting.

    ``create_signer(kernel)`` returns ``sign(card) -> card`` (appends one
    ``AgentCardSignature`` to the ``AgentCard`` proto, a2a-sdk's signing utility
    does the JWS) or ``None`` when the plugin is not configured. ``create_key_set``
    (asymmetric signers) gives the :class:`SigningKeySet` that signed push
    notifications, ``/.well-known/jwks.json`` and ``iac-code a2a keys`` use; it
    receives the settings and the persistence directory, so the CLI can build it
    without a server.
    """

    name: str
    create_signer: Callable[[PluginContext], Callable[[Any], Any] | None] | None = None
    create_key_set: Callable[[Any, Path], SigningKeySet] | None = None
    description: str = ""


@dataclass(frozen=True)
class CardExtension:
    """An entry a plugin adds to the Agent Card's ``capabilities.extensions`` (``iac_code_card_extensions``).

    ``params`` must be JSON (numbers are served as protobuf Struct numbers, e.g. ``300.0``).
    """

    uri: str
    description: str = ""
    required: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- input parts


@dataclass(frozen=True)
class InputPart:
    """A transport- and SDK-neutral view of one message part handed to decoders.

    ``kind`` is one of ``text``, ``data``, ``raw`` or ``url``; exactly the
    matching payload attribute is set.
    """

    kind: str
    media_type: str
    text: str | None = None
    data: Any = None
    raw: bytes | None = None
    url: str | None = None
    filename: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DecodeContext:
    """What a decoder may consult: the workspace and the server's limits."""

    cwd: str
    allowed_roots: tuple[str, ...]


@dataclass(frozen=True)
class DecodedPart:
    """A decoder's result: text for the prompt and/or a prompt-manifest entry."""

    text: str = ""
    manifest_entry: Mapping[str, Any] | None = None


class PartDecodeError(ValueError):
    """Raised by a decoder for input it understands but must refuse.

    The message is sent to the caller as an invalid-params error, so it must not
    contain local paths or secrets.
    """


@dataclass(frozen=True)
class PartDecoderSpec:
    """Decodes parts of one ``kind`` whose media type matches ``media_types``.

    ``media_types`` entries are exact types (``text/plain``), a major wildcard
    (``image/*``) or ``*``; lookup prefers the most specific match.
    """

    name: str
    kind: str
    media_types: tuple[str, ...]
    decode: Callable[[InputPart, DecodeContext], DecodedPart]


# --------------------------------------------------------------------------- routers, runtimes, tools


@dataclass(frozen=True)
class Route:
    """A remote agent the client can call by name: ``name=url;skills=a,b;tags=x,y``."""

    name: str
    url: str
    skills: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RouteQuery:
    """What one call asks for: an explicit route ``name``, a ``skill``, the ``prompt`` text."""

    name: str = ""
    skill: str = ""
    prompt: str = ""


@dataclass(frozen=True)
class RouteCandidate:
    """A route a router considered, its ``score`` (higher wins) and why, for ``route-preview``."""

    route: Route
    score: int
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class RouterSpec:
    """Chooses the remote agent for ``iac-code a2a-client`` calls (``router`` client setting).

    ``rank`` returns the matching candidates best first (the first one wins) or raises
    ``ValueError`` with a message for the user (unknown name, no match).
    """

    name: str
    rank: Callable[[Sequence[Route], RouteQuery], list[RouteCandidate]]
    description: str = ""


@dataclass(frozen=True)
class AgentRuntimeSpec:
    """An agent runtime, selected by the ``agent-runtime`` setting.

    Exactly one of ``create_runtime`` (an iac-code runtime speaking runtime
    events, see :mod:`iac_code.agents.runtime`) or ``create_executor`` (an unchanged
    a2a-sdk ``AgentExecutor``) is set.
    """

    name: str
    create_runtime: Callable[[PluginContext], AgentRuntime] | None = None
    create_executor: Callable[[PluginContext], Any] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if (self.create_runtime is None) == (self.create_executor is None):
            raise ValueError(
                f"agent runtime {self.name!r} must set exactly one of create_runtime or create_executor"
            )


@dataclass(frozen=True)
class ToolSpec:
    """A tool an agent runtime may call; ``create`` returns the tool object.

    ``description`` and ``parameters`` (a JSON Schema of the tool's input) are what a
    model-driven runtime shows the model, so it can call the tool by name.
    """

    name: str
    create: Callable[[PluginContext], Any]
    description: str = ""
    parameters: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class IacEngineSpec:
    """An IaC engine (:class:`~iac_code.agents.iac_engine.IacEngine`): understands requests, writes and
    reviews templates for features that need them without a runtime (the selling pipelines)."""

    name: str
    create: Callable[[PluginContext], IacEngine]
    description: str = ""


class PriceSource(Protocol):
    """Prices a template's resources per month, for the selling pipelines' cost step (``price-source`` setting).

    ``estimate`` returns one cost: ``items`` (per resource ``name``, ``type``, ``spec``, ``monthly_cost`` as
    text, ``priced``, ``count``, ``price_source`` and, when not priced, the ``reason``), ``total_monthly_cost``
    (text), ``total`` (number, priced items only), ``currency``, ``unpriced_types``, ``price_source``,
    ``price_date``, ``official`` and ``disclaimer``. A resource the source cannot price is reported in its item
    (``priced: false``) and left out of the total, never priced at 0.
    """

    name: str

    @property
    def disclaimer(self) -> str:
        """What every cost from this source says about its prices (where they come from, how official, when)."""
        ...

    async def estimate(self, resources: Sequence[Mapping[str, Any]], *, region: str = "") -> dict[str, Any]:
        """The monthly cost of ``resources`` (``{"name", "type", "properties"}``) in ``region`` (``""``: the
        source's default)."""
        ...


@dataclass(frozen=True)
class PriceSourceSpec:
    """A price source (:class:`PriceSource`), selected by the ``price-source`` setting of the pipelines that
    price candidates; ``create(context)`` builds it from the server's settings."""

    name: str
    create: Callable[[PluginContext], PriceSource]
    description: str = ""


@dataclass(frozen=True)
class PipelineServices:
    """What the kernel hands a pipeline it builds.

    ``chat`` is the configured agent runtime (the context continues with it after the pipeline's
    handoff); ``engine`` the installed IaC engine (``None`` when no plugin provides one);
    ``state_dir`` where the pipeline journals its runs (``None``: persistence is off);
    ``price_sources`` every installed price source (``iac_code_price_sources``) by normalised name.
    """

    context: PluginContext
    chat: AgentRuntime
    engine: IacEngine | None
    state_dir: Path | None
    price_sources: Mapping[str, PriceSourceSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineSpec:
    """A pipeline (``mode: pipeline``, ``pipeline-name`` or a request's ``pipeline_name``).

    ``create`` returns an agent runtime that runs the pipeline's turns: the kernel calls it with
    ``turn.run_mode == "pipeline"`` and ``turn.pipeline_name`` set to this name, keeps
    ``turn.session`` between turns, and publishes each :class:`~iac_code.agents.runtime.Progress`
    event (``{"pipeline": envelope}``) as a status update.

    ``interrupts``: the runtime implements ``interrupt`` (user text for a running turn, see
    :class:`~iac_code.agents.runtime.AgentRuntime`); the card's pipeline-events extension then says
    ``supportsInterrupts: true``.
    """

    name: str
    create: Callable[[PipelineServices], AgentRuntime]
    description: str = ""
    interrupts: bool = False


# --------------------------------------------------------------------------- extra HTTP routes


@dataclass(frozen=True)
class HttpRouteSpec:
    """An extra aiohttp route added to the HTTP transport.

    ``auth`` false exempts the route from authentication (like ``/health``);
    keep that for routes that reveal nothing.
    """

    method: str
    path: str
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    auth: bool = True
    name: str = ""


# --------------------------------------------------------------------------- protocol adapters


@dataclass(frozen=True)
class HttpReply:
    """A unary HTTP+JSON answer: HTTP ``status``, JSON ``body`` and its media type."""

    status: int
    body: dict[str, Any]
    media_type: str = "application/json"


@dataclass(frozen=True)
class HttpStream:
    """A streaming HTTP+JSON answer: SSE events as ``(event name or "", JSON data)``."""

    events: AsyncIterator[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class AdapterRoute:
    """An HTTP+JSON route of a protocol adapter, which the HTTP transport frames like its own routes.

    ``handle(dispatcher, path_params, body, call)`` answers one request (``body`` read, decoded
    and bounded by the transport; ``call`` a ``CallInfo``) and never raises for bad input.
    ``error(code, message, status)`` is the answer when the request fails before it (body too
    large, server starting; ``code`` the JSON-RPC code of the failure). When ``accepts(call)``
    is false the request is served as if the route were not there (by the transport's own
    routes, a 404 when none matches).
    """

    http_method: str
    path: str
    handle: Callable[[Any, Mapping[str, str], bytes, Any], Awaitable[HttpReply | HttpStream]]
    error: Callable[[int, str, int], HttpReply]
    accepts: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class ProtocolAdapterSpec:
    """Another protocol version answered over the one A2A 1.0 call core (A2A 0.3: ``iac-code-compat-v03``).

    ``methods`` maps each JSON-RPC method name the adapter answers (never an A2A 1.0 name)
    to ``dispatch(dispatcher, request, call)``: ``request`` is the decoded request object,
    its JSON-RPC envelope already valid; the answer is what ``JsonRpcDispatcher.dispatch``
    gives (one response dict, or an async iterator of them), never an exception for bad
    input. The call itself goes through ``dispatcher.invoke(..., legacy=True)``, so the 1.0
    path's checks, scoping and error texts apply. ``streaming`` names those of ``methods``
    whose answer is a stream (custom transports frame it as one). ``http_routes`` are served
    by the HTTP transport beside its HTTP+JSON routes. ``card_document(card, config)`` is
    the JSON document to serve for the public Agent Card instead of the 1.0 card's, or ``None``.
    """

    name: str
    methods: Mapping[str, Callable[[Any, Mapping[str, Any], Any], Awaitable[Any]]] = field(default_factory=dict)
    streaming: frozenset[str] = frozenset()
    http_routes: Sequence[AdapterRoute] = ()
    card_document: Callable[[Any, Any], dict[str, Any] | None] | None = None


# --------------------------------------------------------------------------- command-line commands


@dataclass(frozen=True)
class CliCommandSpec:
    """A command a plugin adds to the ``iac-code`` command line.

    ``load`` returns the ``click.Command`` (or group) and is called only when the command
    runs or help lists it, so a server start never imports a client's dependencies.
    ``parent`` is ``""`` for a top-level command (``iac-code <name>``) or ``"a2a"`` for a
    sub-command of the server (``iac-code a2a <name>``).
    """

    name: str
    load: Callable[[], Any]
    parent: str = ""
    help: str = ""


# --------------------------------------------------------------------------- what plugins receive


@dataclass(frozen=True)
class CardDocument:
    """The serialised card and its HTTP cache validators."""

    body: bytes
    etag: str
    last_modified: str


@dataclass(frozen=True)
class StoredArtifact:
    """One stored artifact: where clients fetch it (``uri``) and what they get."""

    artifact_id: str
    task_id: str
    uri: str
    name: str
    media_type: str
    byte_size: int
    sha256: str


@runtime_checkable
class ArtifactFiles(Protocol):
    """The artifact store as the transport serving artifacts over HTTP sees it."""

    base_url: str
    """Where artifact URLs point (``<base_url>iac-code/artifacts/<id>/<name>``); the HTTP transport sets it
    once bound, and without one artifacts get local ``iac-code-artifact://`` URIs."""

    async def find(self, artifact_id: str, name: str) -> tuple[StoredArtifact, bytes] | None:
        """The stored artifact ``artifact_id`` named ``name`` and its content, or ``None``."""
        ...


@dataclass(frozen=True)
class SessionState:
    """A conversation context (an iac-code session) as :meth:`PluginContext.restore_session` finds it.

    ``status`` is ``current`` (it was in memory) or ``restored`` (it was read back from the persistence
    directory); ``cwd`` is its workspace; ``history`` its conversation entries (``{"role", "text"}``).
    """

    context_id: str
    cwd: str
    status: str
    history: tuple[Mapping[str, str], ...] = ()


@runtime_checkable
class PluginContext(Protocol):
    """What a plugin's factories and hooks receive from the running server.

    A narrow view of the kernel: the settings (the plugin's own keys among them), the
    state directory, the authenticator, the dispatcher and request handler a transport
    hands calls to, the read side of the task store, the instrumentation, what the server
    holds right now (for gauges), the card's signing keys and served document, the artifacts a
    transport serves, the interfaces the transports bound, the tools and HTTP routes plugins
    provide, the conversation contexts (restored on demand), and the server's lifecycle.
    Anything not here is private to the kernel.
    """

    config: Any
    """The effective settings; a plugin's own keys are attributes named like its config model's fields."""

    state_dir: Path
    """The server's persistence directory (owner-only; the server holds its lock)."""

    authenticator: Any
    """``authenticate(headers) -> Principal | None``: the configured authentication schemes."""

    dispatcher: Any
    """The one JSON-RPC dispatcher (``None`` until the server has started its transports)."""

    request_handler: Any
    """The A2A request handler behind every binding (``None`` until start-up completes)."""

    task_store: Any
    """The task store: ``await get(task_id)`` and the list/page API for features that read tasks."""

    instrumentation: Instrumentation | None
    """What observes the server (metrics and tracing plugins), ``None`` when nothing does: a
    feature calls it at its own measuring points (e.g. ``push_attempt``)."""

    signing_keys: SigningKeySet | None
    """The Agent Card's signing keys when a JWS signer is configured."""

    readiness: str
    """``starting``, ``ready`` or ``stopping``."""

    transport_names: tuple[str, ...]
    """The configured transports' canonical names (aliases resolved), in configuration order."""

    interfaces: Sequence[InterfaceInfo]
    """The interfaces the transports bound, as the Agent Card lists them (empty until they have started)."""

    artifacts: ArtifactFiles
    """The stored artifacts, for the transport that serves them."""

    protocol_adapters: Sequence[ProtocolAdapterSpec]
    """The installed protocol adapters (``iac_code_protocol_adapters``): the HTTP transport serves their routes."""

    projection: Any
    """Safe mode's path projection (``IAC_CODE_A2A_SAFE_MODE``) for wire boundaries outside the dispatcher
    (gRPC messages, push payloads, plugin routes' JSON): ``enabled()``, ``await project(value, principal,
    request)`` (``value`` itself when safe mode is off) and ``scope(principal, request)`` whose
    ``await project(value)`` reuses its roots per event. Results of the dispatcher are already projected."""

    @property
    def card_document(self) -> CardDocument:
        """The public Agent Card as served: its JSON body and cache validators (``ETag``, ``Last-Modified``)."""
        ...

    def tools(self) -> Mapping[str, ToolSpec]:
        """Every tool plugins provide, keyed by normalised name (``read-file``): what an agent runtime offers its model."""
        ...

    def http_routes(self) -> list[HttpRouteSpec]:
        """Every extra HTTP route plugins provide (``iac_code_http_routes``), for the HTTP transport to mount."""
        ...

    def public_jwks(self) -> dict[str, Any]:
        """The public JWK set served at ``/.well-known/jwks.json``."""
        ...

    def request_stop(self) -> None:
        """Ask the running server to stop (as SIGTERM would)."""
        ...

    def activity(self) -> Activity:
        """What the server holds right now: running turns, permission waits, contexts, connections."""
        ...

    async def push_queue_depth(self) -> dict[str, int] | None:
        """The push queue's job counts by state, ``None`` without push notifications."""
        ...

    link: NodeLink | None
    """This node's membership of the cluster with a shared ``task-store`` (``None`` with ``local``):
    ``node_id``, ``await runner(owner, context_id, task_id)`` (the live node running that turn) and
    ``await call(node_id, op, payload, timeout)`` (an operation served there with :meth:`serve_node_call`)."""

    shared_records: SharedRecords | None
    """Small records a feature shares with every node (``None`` with ``task-store: local``)."""

    def serve_node_call(self, op: str, handler: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> None:
        """Answer ``op`` (a feature's own operation name) when another node forwards it here through
        ``link.call``; the handler gets the payload and returns the JSON reply."""
        ...

    async def restore_session(self, owner: str, context_id: str, cwd: str | None = None) -> SessionState | None:
        """The caller's (``owner``'s) context ``context_id``, loaded into memory from the persistence directory
        when it is not there; ``None`` when there is none, or when ``cwd`` is given and the context belongs to
        another workspace. ``cwd`` gets the checks a message's ``cwd`` gets: ``ValueError`` (a path-free text)
        when it is not acceptable. ``NotImplementedError`` with a shared task store (contexts live there)."""
        ...
