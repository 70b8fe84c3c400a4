"""The public plugin API of iac-code: the one kernel module a plugin imports.

Everything a plugin distribution needs from the kernel is re-exported here: the hook
marker, the typed records its hooks return, the errors it raises, the context object its
factories and hooks receive (:class:`PluginContext`), and the helpers a feature
legitimately shares with the kernel (atomic owner-only storage, the JSON-RPC framing,
runtime events, the push-job interface, ...). Nothing else in ``iac_code`` is promised:
the kernel's own modules may move or change between releases, this module may not
without a new :data:`API_VERSION`.

A plugin declares the API version it was built for with a module attribute next to its
hook implementations::

    IAC_CODE_API_VERSION = "1.0"

The plugin manager loads it only when the major versions match and the plugin's minor
version is not newer than the kernel's; otherwise the plugin is listed as ``failed`` with
the reason, and start-up fails only when the configuration needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from iac_code import compat03, jsonio, messages, tracing
from iac_code.artifacts import ROUTE_PREFIX as ARTIFACT_ROUTE_PREFIX
from iac_code.auth import ANONYMOUS_PRINCIPAL, Principal, PrincipalUser
from iac_code.background import spawn
from iac_code.cluster import ControlHandler, Lease, NodeLink, NodeUnavailableError, StateBackend, task_scope
from iac_code.config import in_conflict, without_effect
from iac_code.dispatcher import (
    MESSAGE_METHODS,
    RAW_PARAMS_KEY,
    CallInfo,
    JsonRpcDispatcher,
    error_code,
    protocol_error,
)
from iac_code.errors import ConfigProblems, StartupError
from iac_code.framing import (
    TOO_LARGE,
    UNAUTHORIZED,
    Answer,
    decode_frame,
    dumps,
    error_response,
    final_marker,
    log_client_error,
    peek,
    request_id_of,
    serve_frame,
)
from iac_code.hookspecs import ENTRY_POINT_GROUP, hookimpl
from iac_code.i18n import Translator, translator
from iac_code.instrumentation import Activity, Instrumentation
from iac_code.jsonio import message_to_json
from iac_code.log_limits import RateLimitedLog
from iac_code.ndjson import NdjsonSession, grace_seconds, reader_limit
from iac_code.push_configs import DELIVERY_CACHE_SIZE, EncryptedPushConfigStore, storable_config
from iac_code.push_crypto import PushKeyring, write_new_private_file
from iac_code.push_jobs import ClaimedJob, JobCodec, PushJob, PushQueue, QueueContext, next_seq
from iac_code.push_signing import key_id, public_jwks
from iac_code.records import (
    AgentRuntimeSpec,
    CardSignerSpec,
    CliCommandSpec,
    ClientTarget,
    DecodeContext,
    DecodedPart,
    HttpRouteSpec,
    InputPart,
    InterfaceInfo,
    JsonRpcChannel,
    PartDecodeError,
    PartDecoderSpec,
    PushQueueSpec,
    Route,
    RouteCandidate,
    RouteQuery,
    RouterSpec,
    SigningKeySet,
    StateBackendSpec,
    ToolSpec,
    TransportServer,
    TransportSpec,
    normalise_name,
)
from iac_code.rest import BINDING, REST_ROUTES, TENANT_PREFIX, RestBinding, RestReply, RestRoute, error_reply
from iac_code.runtime import (
    ArtifactPayload,
    RuntimeEvent,
    TextDelta,
    Thinking,
    ToolCompleted,
    ToolFailed,
    ToolInputDelta,
    ToolStarted,
    TurnFailed,
    TurnRequest,
    Usage,
)
from iac_code.storage import atomic_write, file_lock, private_dir, sweep_temp_files
from iac_code.task_events import DEFAULT_RETAINED_EVENTS, Event, missed, seq_of, version_number
from iac_code.task_store import (
    DEFAULT_PAGE_SIZE,
    NOT_STORED,
    PageTokens,
    SortKey,
    interruption,
    is_interrupted,
    sort_key,
)
from iac_code.tools import Permission, Tool, ToolCall, ToolContext, ToolOutcome, run_tool
from iac_code.transport_clients import NdjsonClient, WebSocketClient
from iac_code.turns import ALREADY_WORKING
from iac_code.url_credentials import mask_url, redact, redis_location, url_secrets
from iac_code.workspace import is_protected_file, is_within

API_VERSION = "1.0"
"""The version of this API: a new minor adds names, a new major removes or changes one."""

API_VERSION_ATTRIBUTE = "IAC_CODE_API_VERSION"
"""The module attribute in which a plugin declares the API version it was built for."""


def api_version_problem(declared: object) -> str | None:
    """Why a plugin built for API ``declared`` cannot run on this kernel, or ``None`` when it can."""
    try:
        major, minor = (int(part) for part in str(declared).split(".", 1))
    except ValueError:
        return f"declares {API_VERSION_ATTRIBUTE} = {declared!r}, which is not a 'MAJOR.MINOR' version"
    ours_major, ours_minor = (int(part) for part in API_VERSION.split("."))
    if major != ours_major or minor > ours_minor:
        return f"built for plugin API {major}.{minor}; this iac-code provides API {API_VERSION}"
    return None


@runtime_checkable
class PluginContext(Protocol):
    """What a plugin's factories and hooks receive from the running server.

    A narrow view of the kernel: the settings (the plugin's own keys among them), the
    state directory, the authenticator, the dispatcher and request handler a transport
    hands calls to, the read side of the task store, the instrumentation, what the server
    holds right now (for gauges), the card's signing keys, and the server's lifecycle.
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


ContextFactory = Callable[[PluginContext], Any]
"""The shape of every ``create(context)`` factory in a component record."""

__all__ = [
    "ALREADY_WORKING",
    "ANONYMOUS_PRINCIPAL",
    "API_VERSION",
    "API_VERSION_ATTRIBUTE",
    "ARTIFACT_ROUTE_PREFIX",
    "BINDING",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_RETAINED_EVENTS",
    "DELIVERY_CACHE_SIZE",
    "ENTRY_POINT_GROUP",
    "MESSAGE_METHODS",
    "NOT_STORED",
    "RAW_PARAMS_KEY",
    "REST_ROUTES",
    "TENANT_PREFIX",
    "TOO_LARGE",
    "UNAUTHORIZED",
    "Activity",
    "AgentRuntimeSpec",
    "Answer",
    "ArtifactPayload",
    "CallInfo",
    "CardSignerSpec",
    "ClaimedJob",
    "CliCommandSpec",
    "ClientTarget",
    "ConfigProblems",
    "ContextFactory",
    "ControlHandler",
    "DecodeContext",
    "DecodedPart",
    "EncryptedPushConfigStore",
    "Event",
    "HttpRouteSpec",
    "InputPart",
    "Instrumentation",
    "InterfaceInfo",
    "JobCodec",
    "JsonRpcChannel",
    "JsonRpcDispatcher",
    "Lease",
    "NdjsonClient",
    "NdjsonSession",
    "NodeLink",
    "NodeUnavailableError",
    "PageTokens",
    "PartDecodeError",
    "PartDecoderSpec",
    "Permission",
    "PluginContext",
    "Principal",
    "PrincipalUser",
    "PushJob",
    "PushKeyring",
    "PushQueue",
    "PushQueueSpec",
    "QueueContext",
    "RateLimitedLog",
    "RestBinding",
    "RestReply",
    "RestRoute",
    "Route",
    "RouteCandidate",
    "RouteQuery",
    "RouterSpec",
    "RuntimeEvent",
    "SigningKeySet",
    "SortKey",
    "StartupError",
    "StateBackend",
    "StateBackendSpec",
    "TextDelta",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolCompleted",
    "ToolContext",
    "ToolFailed",
    "ToolInputDelta",
    "ToolOutcome",
    "ToolSpec",
    "ToolStarted",
    "TransportServer",
    "TransportSpec",
    "Translator",
    "TurnFailed",
    "TurnRequest",
    "Usage",
    "WebSocketClient",
    "api_version_problem",
    "atomic_write",
    "compat03",
    "decode_frame",
    "dumps",
    "error_code",
    "error_reply",
    "error_response",
    "file_lock",
    "final_marker",
    "grace_seconds",
    "hookimpl",
    "in_conflict",
    "interruption",
    "is_interrupted",
    "is_protected_file",
    "is_within",
    "jsonio",
    "key_id",
    "log_client_error",
    "mask_url",
    "message_to_json",
    "messages",
    "missed",
    "next_seq",
    "peek",
    "private_dir",
    "protocol_error",
    "public_jwks",
    "reader_limit",
    "redact",
    "redis_location",
    "request_id_of",
    "seq_of",
    "serve_frame",
    "sort_key",
    "spawn",
    "storable_config",
    "sweep_temp_files",
    "task_scope",
    "tracing",
    "translator",
    "url_secrets",
    "version_number",
    "without_effect",
    "write_new_private_file",
]
