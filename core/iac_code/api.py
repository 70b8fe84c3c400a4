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
version is not newer than the kernel's; otherwise (or when the declaration is not a
``"MAJOR.MINOR"`` string) the plugin is listed as ``failed`` with the reason, and start-up
fails only when the configuration needs it. A plugin that declares nothing is loaded as
compatible, without a warning: every plugin written before the API was versioned was written
against 1.0. That default may become a warning in a later minor release, never a refusal
before the next major one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from iac_code.agents.iac_engine import Finding, GeneratedTemplate, IacEngine, TemplateFixer, Understanding
from iac_code.agents.questions import ASK_USER_QUESTION, QUESTION_TIMEOUT_SECONDS, UserQuestion, match_question
from iac_code.agents.tool_metadata import input_summary
from iac_code.agents.working_template import WorkingTemplate, set_working_template, working_template
from iac_code.agents.runtime import (
    AgentRuntime,
    ApiCall,
    ArtifactPayload,
    Interrupt,
    ModelWriter,
    PermissionRequest,
    Progress,
    ResumableRuntime,
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
    Written,
)
from iac_code.agents.tools import (
    InputPause,
    Permission,
    Resumed,
    Tool,
    ToolCall,
    ToolContext,
    ToolOffer,
    ToolOutcome,
    offered_tools,
    run_tool,
)
from iac_code.base import jsonio, tracing
from iac_code.base.api_version import API_VERSION, API_VERSION_ATTRIBUTE, api_version_problem
from iac_code.base.background import spawn
from iac_code.base.cluster import (
    ControlHandler,
    Lease,
    NodeLink,
    NodeUnavailableError,
    PermissionWaitRecords,
    SharedRecords,
    StateBackend,
    task_scope,
)
from iac_code.base.config import AUTH_ENV, DEFAULT_API_KEY_HEADER, in_conflict, read_config_file, without_effect
from iac_code.base.errors import ConfigProblems, StartupError
from iac_code.base.hookspecs import ENTRY_POINT_GROUP, hookimpl
from iac_code.base.instrumentation import Activity, Instrumentation
from iac_code.base.jsonio import message_to_json
from iac_code.base.push_jobs import (
    ClaimedJob,
    JobCodec,
    PushConfigRecords,
    PushJob,
    PushQueue,
    QueueContext,
    next_seq,
    order_key,
)
from iac_code.base.records import (
    AdapterRoute,
    AgentRuntimeSpec,
    ArtifactFiles,
    CardDocument,
    CardExtension,
    CardSignerSpec,
    CliCommandSpec,
    ClientTarget,
    DecodeContext,
    DecodedPart,
    HttpReply,
    HttpRouteSpec,
    HttpStream,
    IacEngineSpec,
    InputPart,
    InterfaceInfo,
    JsonRpcChannel,
    PartDecodeError,
    PartDecoderSpec,
    PipelineServices,
    PipelineSpec,
    PluginContext,
    PriceSource,
    PriceSourceSpec,
    ProtocolAdapterSpec,
    PushContext,
    PushQueueSpec,
    PushService,
    PushServiceSpec,
    Route,
    RouteCandidate,
    RouteQuery,
    RouterSpec,
    SessionState,
    SigningKeySet,
    StateBackendSpec,
    StoredArtifact,
    ToolSpec,
    TransportServer,
    TransportSpec,
    normalise_name,
)
from iac_code.base.signing_keys import key_alg, key_id, public_jwks
from iac_code.base.turn_gates import SAFE_POINTS, TURN_END_STATUSES, TurnGate, TurnGateSpec, TurnPoint
from iac_code.base.cloud_endpoints import split_endpoint
from iac_code.base.storage import (
    atomic_write,
    file_lock,
    fsync_dir,
    private_dir,
    read_private_file,
    sweep_temp_files,
    write_new_private_file,
)
from iac_code.base.url_credentials import mask_url, mask_urls_in, redact, redis_location, url_secrets
from iac_code.language import messages
from iac_code.language.i18n import Translator, translator
from iac_code.protocol.dispatcher import (
    MESSAGE_METHODS,
    RAW_PARAMS_KEY,
    STREAMING_METHODS,
    CallError,
    CallInfo,
    JsonRpcDispatcher,
    decode_json,
    error_code,
    protocol_error,
    requested_version,
)
from iac_code.protocol.framing import (
    TOO_LARGE,
    UNAUTHORIZED,
    Answer,
    decode_frame,
    dumps,
    error_response,
    final_marker,
    inspect_frame,
    log_client_error,
    peek,
    request_frame,
    request_id_of,
    serve_frame,
)
from iac_code.security.auth import ANONYMOUS_PRINCIPAL, Principal, PrincipalUser
from iac_code.security.log_limits import RateLimitedLog
from iac_code.security.safe_mode import SAFE_MODE_ENV, SAFE_MODE_TOOLS, safe_mode, safe_mode_tools
from iac_code.security.workspace import is_protected_file, is_within
from iac_code.server.cli import CommandContext, command_context, fail, run_until_stopped
from iac_code.tasks.artifacts import ROUTE_PREFIX as ARTIFACT_ROUTE_PREFIX
from iac_code.tasks.permissions import envelope as permission_envelope
from iac_code.tasks.task_events import DEFAULT_RETAINED_EVENTS, Event, missed, seq_of, version_number
from iac_code.tasks.task_store import (
    DEFAULT_PAGE_SIZE,
    NOT_STORED,
    PageTokens,
    SortKey,
    interruption,
    is_interrupted,
    sort_key,
)
from iac_code.tasks.run_modes import mark_pipeline_handoff, mark_pipeline_waiting
from iac_code.tasks.sessions import SESSION_ID_FIELD, context_of_session, session_id_of
from iac_code.tasks.turns import ALREADY_WORKING

ContextFactory = Callable[[PluginContext], Any]
"""The shape of every ``create(context)`` factory in a component record."""


def client_transports() -> dict[str, TransportSpec]:
    """The installed transports that have a client side (``TransportSpec.connect``), by name and by alias.

    For clients outside a server (``iac-code a2a-client``): each record's ``connect`` opens a
    :class:`JsonRpcChannel` to a :class:`ClientTarget`.
    """
    from iac_code.server.plugins import Plugins

    return {key: p.record for key, p in Plugins.load().transports().items() if p.record.connect is not None}


def routers() -> dict[str, RouterSpec]:
    """The installed routers by name (``iac-code-a2a-client`` brings ``default``), for a client that picks a remote agent."""
    from iac_code.server.plugins import Plugins

    return {key: p.record for key, p in Plugins.load().routers().items()}


__all__ = [
    "ALREADY_WORKING",
    "ANONYMOUS_PRINCIPAL",
    "API_VERSION",
    "API_VERSION_ATTRIBUTE",
    "ARTIFACT_ROUTE_PREFIX",
    "ASK_USER_QUESTION",
    "AUTH_ENV",
    "DEFAULT_API_KEY_HEADER",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_RETAINED_EVENTS",
    "ENTRY_POINT_GROUP",
    "MESSAGE_METHODS",
    "NOT_STORED",
    "QUESTION_TIMEOUT_SECONDS",
    "RAW_PARAMS_KEY",
    "SAFE_MODE_ENV",
    "SAFE_MODE_TOOLS",
    "SAFE_POINTS",
    "SESSION_ID_FIELD",
    "STREAMING_METHODS",
    "TOO_LARGE",
    "TURN_END_STATUSES",
    "UNAUTHORIZED",
    "Activity",
    "AdapterRoute",
    "AgentRuntime",
    "AgentRuntimeSpec",
    "Answer",
    "ApiCall",
    "ArtifactFiles",
    "ArtifactPayload",
    "CallError",
    "CallInfo",
    "CardDocument",
    "CardExtension",
    "CardSignerSpec",
    "ClaimedJob",
    "CliCommandSpec",
    "ClientTarget",
    "CommandContext",
    "ConfigProblems",
    "ContextFactory",
    "ControlHandler",
    "DecodeContext",
    "DecodedPart",
    "Event",
    "Finding",
    "GeneratedTemplate",
    "HttpReply",
    "HttpRouteSpec",
    "HttpStream",
    "IacEngine",
    "IacEngineSpec",
    "InputPart",
    "InputPause",
    "Instrumentation",
    "InterfaceInfo",
    "Interrupt",
    "JobCodec",
    "JsonRpcChannel",
    "JsonRpcDispatcher",
    "Lease",
    "ModelWriter",
    "NodeLink",
    "NodeUnavailableError",
    "PageTokens",
    "PartDecodeError",
    "PartDecoderSpec",
    "Permission",
    "PermissionRequest",
    "PermissionWaitRecords",
    "PipelineServices",
    "PipelineSpec",
    "PluginContext",
    "PriceSource",
    "PriceSourceSpec",
    "Principal",
    "PrincipalUser",
    "Progress",
    "ProtocolAdapterSpec",
    "PushConfigRecords",
    "PushContext",
    "PushJob",
    "PushQueue",
    "PushQueueSpec",
    "PushService",
    "PushServiceSpec",
    "QueueContext",
    "RateLimitedLog",
    "ResumableRuntime",
    "Resumed",
    "Route",
    "RouteCandidate",
    "RouteQuery",
    "RouterSpec",
    "RuntimeEvent",
    "SessionState",
    "SharedRecords",
    "SigningKeySet",
    "SortKey",
    "StartupError",
    "StateBackend",
    "StateBackendSpec",
    "StoredArtifact",
    "TemplateFixer",
    "TextDelta",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolCompleted",
    "ToolContext",
    "ToolFailed",
    "ToolInputDelta",
    "ToolOffer",
    "ToolOutcome",
    "ToolSpec",
    "ToolStarted",
    "Translator",
    "TransportServer",
    "TransportSpec",
    "TurnFailed",
    "TurnGate",
    "TurnGateSpec",
    "TurnPoint",
    "TurnRequest",
    "Understanding",
    "Usage",
    "UserQuestion",
    "WorkingTemplate",
    "Written",
    "api_version_problem",
    "atomic_write",
    "client_transports",
    "command_context",
    "context_of_session",
    "decode_frame",
    "decode_json",
    "dumps",
    "error_code",
    "error_response",
    "fail",
    "file_lock",
    "final_marker",
    "fsync_dir",
    "hookimpl",
    "in_conflict",
    "input_summary",
    "inspect_frame",
    "interruption",
    "is_interrupted",
    "is_protected_file",
    "is_within",
    "jsonio",
    "key_alg",
    "key_id",
    "log_client_error",
    "mark_pipeline_handoff",
    "mark_pipeline_waiting",
    "mask_url",
    "mask_urls_in",
    "match_question",
    "message_to_json",
    "messages",
    "missed",
    "next_seq",
    "normalise_name",
    "offered_tools",
    "order_key",
    "peek",
    "permission_envelope",
    "private_dir",
    "protocol_error",
    "public_jwks",
    "read_config_file",
    "read_private_file",
    "redact",
    "redis_location",
    "request_frame",
    "request_id_of",
    "requested_version",
    "routers",
    "run_tool",
    "run_until_stopped",
    "safe_mode",
    "safe_mode_tools",
    "seq_of",
    "serve_frame",
    "session_id_of",
    "set_working_template",
    "sort_key",
    "spawn",
    "split_endpoint",
    "sweep_temp_files",
    "task_scope",
    "tracing",
    "translator",
    "url_secrets",
    "version_number",
    "without_effect",
    "working_template",
    "write_new_private_file",
]
