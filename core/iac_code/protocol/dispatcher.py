"""The one transport-neutral A2A dispatcher: JSON-RPC 2.0 envelope over one call core.

A transport authenticates, then calls :meth:`JsonRpcDispatcher.dispatch` with the
request body and a :class:`CallInfo`. The result is either one JSON-RPC response
dict or an async iterator of response dicts (streaming methods), so transports
only add framing. Protocol semantics stay in a2a-sdk's request handler; this
module validates the envelope (:func:`validate_envelope`, the one frame validator
every transport uses), checks ``A2A-Version`` (header, else query
parameter; Major.Minor must be 1.0) and required extensions, parses params into
the SDK's protobuf requests and maps errors to the standard codes with our own
texts, never the parser's. Results leave as JSON through
:func:`iac_code.base.jsonio.message_to_json`.

Everything after the envelope is :meth:`JsonRpcDispatcher.invoke` (method name +
params -> validated protobuf request -> handler call -> result, or
:class:`CallError`); the HTTP transport's HTTP+JSON binding frames the same core,
so both bindings share one implementation of the protocol.

Another protocol version's method names (A2A 0.3's ``message/send`` ...) are answered by
the protocol adapter that claims them (``iac_code_protocol_adapters``, e.g. the
``iac-code-compat-v03`` plugin), which maps each call onto the same
:meth:`~JsonRpcDispatcher.invoke`; without one such a name is an unknown method. The 1.0
path pays nothing for it: adapters are looked up only for a name that is not a 1.0 method.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a.extensions.common import get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import (
    InternalError as JsonRpcInternalError,
)
from a2a.server.jsonrpc_models import (
    InvalidParamsError as JsonRpcInvalidParams,
)
from a2a.server.jsonrpc_models import (
    InvalidRequestError as JsonRpcInvalidRequest,
)
from a2a.server.jsonrpc_models import (
    JSONParseError,
    JSONRPCError,
)
from a2a.server.jsonrpc_models import (
    MethodNotFoundError as JsonRpcMethodNotFound,
)
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils import proto_utils
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, VERSION_HEADER
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ContentTypeNotSupportedError,
    ExtensionSupportRequiredError,
    InvalidParamsError,
    TaskNotFoundError,
    VersionNotSupportedError,
)
from google.protobuf.json_format import ParseDict, ParseError

from iac_code.base import jsonio
from iac_code.security.auth import ANONYMOUS_PRINCIPAL, Principal, PrincipalUser
from iac_code.base.instrumentation import Instrumentation
from iac_code.base.jsonio import message_to_json
from iac_code.base.records import ProtocolAdapterSpec

logger = logging.getLogger(__name__)

Response = dict[str, Any]

STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})
METHOD_PARAMS: dict[str, type] = {
    "SendMessage": SendMessageRequest,
    "SendStreamingMessage": SendMessageRequest,
    "GetTask": GetTaskRequest,
    "ListTasks": ListTasksRequest,
    "CancelTask": CancelTaskRequest,
    "SubscribeToTask": SubscribeToTaskRequest,
    "CreateTaskPushNotificationConfig": TaskPushNotificationConfig,
    "GetTaskPushNotificationConfig": GetTaskPushNotificationConfigRequest,
    "ListTaskPushNotificationConfigs": ListTaskPushNotificationConfigsRequest,
    "DeleteTaskPushNotificationConfig": DeleteTaskPushNotificationConfigRequest,
    "GetExtendedAgentCard": GetExtendedAgentCardRequest,
}
# The decoded JSON params, kept so JSON data parts round-trip exactly (protobuf
# Values would turn every integer into a float).
RAW_PARAMS_KEY = "iac_code.raw_params"
# Methods exempt from the required-extension check (the card must stay reachable).
EXTENSION_EXEMPT = frozenset({"GetExtendedAgentCard"})
# Methods whose params carry message parts (``raw`` is checked as strict base64).
MESSAGE_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})

PARSE_ERROR_TEXT = "Parse error: request body is not valid JSON"
SURROGATE_ERROR_TEXT = "Parse error: request body is not valid JSON (unpaired surrogate escape)"
SCHEMA_ERROR_TEXT = "Invalid params: request does not match the A2A schema"
# Major.Minor with an optional patch: "1.0", "1.0.3".
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")
SUPPORTED_VERSION = (1, 0)
# ParseError texts name the failing field "at Type.field.sub[0]" and/or as a chain of
# "Failed to parse <name> field:" prefixes; only these ASCII shapes are echoed.
_PATH_AT = re.compile(r' at "?([A-Za-z_]\w*(?:\.\w+|\[\d+\])*)', re.ASCII)
_FIELD_CHAIN = re.compile(r"Failed to parse (\w+) field:", re.ASCII)
_INDEX = re.compile(r"\[\d+\]")
_URLSAFE = str.maketrans("-_", "+/")


@dataclass
class CallInfo:
    """What a transport knows about one call.

    ``headers`` must answer lower-case look-ups (``a2a-version``);
    ``extensions`` holds every raw ``A2A-Extensions`` value (comma lists allowed);
    ``query`` holds the request URL's query parameters, if the transport has a URL
    (``A2A-Version`` may come from there; the header wins);
    ``content_type`` is the body's declared media type, if the transport has one.
    """

    principal: Principal = ANONYMOUS_PRINCIPAL
    headers: Mapping[str, str] = field(default_factory=dict)
    extensions: list[str] = field(default_factory=list)
    transport: str = ""
    query: Mapping[str, str] = field(default_factory=dict)
    content_type: str = ""


def _error(request_id: Any, error: A2AError | JSONRPCError) -> Response:
    if isinstance(error, InvalidParamsError) and isinstance(error.data, dict) and error.data:
        # An invalid-params error with its own details (e.g. which pipeline a session runs) keeps them as
        # its ``data``, as the product's clients read it, instead of a2a-sdk's ErrorInfo list.
        return build_error_response(request_id, JsonRpcInvalidParams(message=str(error), data=dict(error.data)))
    return build_error_response(request_id, error)


def _result(request_id: Any, result: Any) -> Response:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


@functools.lru_cache(maxsize=64)  # a handful of spellings per deployment; every call checks one
def _version_compatible(version: str) -> bool:
    """Whether ``version`` (Major.Minor[.Patch]) is the 1.0 this server implements."""
    match = _VERSION.fullmatch(version)
    return match is not None and (int(match[1]), int(match[2])) == SUPPORTED_VERSION


def requested_version(call: CallInfo) -> str:
    """``A2A-Version`` from the headers, else from the query string; ``""`` when absent."""
    version = (call.headers.get("a2a-version") or "").strip()
    if not version:
        version = (call.query.get(VERSION_HEADER) or call.query.get("a2a-version") or "").strip()
    return version


def _shown(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, if it is printable ASCII (safe to echo); else ``'?'``."""
    text = text[:limit]
    return text if text.isascii() and text.isprintable() else "?"


def _is_json_media_type(content_type: str) -> bool:
    """Absent, ``application/json`` or ``application/*+json`` (parameters ignored)."""
    media = content_type.partition(";")[0].strip().lower()
    return not media or media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _parse_error(call: CallInfo, exc: Exception) -> A2AError | JSONRPCError:
    """The error for a body that does not parse: wrong Content-Type first, then the JSON problem."""
    if not _is_json_media_type(call.content_type):
        media = _shown(call.content_type.partition(";")[0].strip(), 100)
        return ContentTypeNotSupportedError(
            message=f"Content type '{media}' is not supported: send application/json")
    if isinstance(exc, jsonio.UnpairedSurrogateError):
        return JSONParseError(message=SURROGATE_ERROR_TEXT)
    return JSONParseError(message=PARSE_ERROR_TEXT)


def _valid_base64(text: str) -> bool:
    """Standard or URL-safe alphabet, padded correctly or not at all (proto3 JSON ``bytes``)."""
    data = text.rstrip("=")
    padding = len(text) - len(data)
    if padding > 2 or (padding and len(text) % 4):
        return False
    try:
        base64.b64decode(data.translate(_URLSAFE) + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _invalid_raw_part(params: Mapping[str, Any]) -> str | None:
    """The path of the first message part whose ``raw`` is not valid base64, if any."""
    message = params.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return None
    for index, part in enumerate(parts):
        if isinstance(part, dict):
            raw = part.get("raw")
            if isinstance(raw, str) and not _valid_base64(raw):
                return f"message.parts[{index}].raw"
    return None


def _field_path(text: str) -> str:
    """The failing field's path (``message.parts[0].text``) from a ParseError text, or ``""``."""
    chain = _FIELD_CHAIN.findall(text)
    found = _PATH_AT.findall(text)
    # Drop the request type's name ("SendMessageRequest.message.role" -> "message.role").
    at = found[-1].partition(".")[2] if found else ""
    if not at:
        return ".".join(chain)
    names = _INDEX.sub("", at).split(".")
    if len(chain) > len(names) and chain[:len(names)] == names:
        return ".".join([at, *chain[len(names):]])  # a repeated field's error names its parent
    return at


def _invalid_params_text(exc: Exception) -> str:
    """Our stable text for a params document protobuf refused; never the parser's own words."""
    path = _field_path(str(exc)) if isinstance(exc, ParseError) else ""
    if not path or len(path) > 200:
        return SCHEMA_ERROR_TEXT
    return f"Invalid params: field '{path}' has an invalid value"


def protocol_error(method: str, version: str, requested: frozenset[str] | set[str],
                   required: frozenset[str], *, legacy: bool = False) -> A2AError | None:
    """The A2A-Version (Major.Minor must be 1.0; none means 0.3) and required-extension checks
    every binding applies before a call, with their texts; ``None`` when the call may go on.

    ``legacy``: a protocol adapter has settled the call's version (a 0.3 call mapped to 1.0),
    so only the extension check applies."""
    if not legacy and not _version_compatible(version):
        given = f"A2A version '{_shown(version, 20)}'" if version else (
            f"A2A version '{PROTOCOL_VERSION_0_3}' (no A2A-Version header)")
        return VersionNotSupportedError(
            message=f"{given} is not supported by this handler. Expected version '{PROTOCOL_VERSION_1_0}'; "
            f"send the header 'A2A-Version: {PROTOCOL_VERSION_1_0}'.")
    if required and method not in EXTENSION_EXEMPT:
        missing = sorted(required - requested)
        if missing:
            return ExtensionSupportRequiredError(
                message=f"Required A2A extensions were not requested: {', '.join(missing)}")
    return None


def _plain_get_task(params: Mapping[str, Any]) -> bool:
    """GetTask params that are just a string ``id`` and an in-range integer ``historyLength``."""
    if not isinstance(params.get("id"), str) or len(params) > 2:
        return False
    if len(params) == 1:
        return True
    length = params.get("historyLength")
    return type(length) is int and -(2**31) <= length < 2**31


class CallError(Exception):
    """A call refused or failed; ``error`` is what the binding reports (its own framing)."""

    def __init__(self, error: A2AError | JSONRPCError) -> None:
        super().__init__(error.message)
        self.error = error


def error_code(error: Any) -> int:
    """The JSON-RPC code a call's error is reported with."""
    code = getattr(error, "code", None)
    return code if isinstance(code, int) else JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)


def decode_json(body: bytes | str, call: CallInfo) -> Any:
    """The JSON document in ``body``; :class:`CallError` (our text) when it does not parse."""
    try:
        return jsonio.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CallError(_parse_error(call, exc)) from None


def answer_id(payload: Any) -> str | int | None:
    """The id an answer to ``payload`` carries: its ``id`` when that is a string, an integer or null; else null."""
    if isinstance(payload, dict):
        value = payload.get("id")
        if value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


@dataclass(frozen=True, slots=True)
class Envelope:
    """A JSON-RPC request object that passed :func:`validate_envelope`: its id and its method name."""

    request_id: str | int | None
    method: str


class InvalidEnvelope(CallError):
    """A frame that is not a JSON-RPC 2.0 request object; ``request_id`` is the id its error answer carries."""

    def __init__(self, request_id: str | int | None, message: str) -> None:
        super().__init__(JsonRpcInvalidRequest(message=message))
        self.request_id = request_id


def validate_envelope(payload: Any) -> Envelope:
    """The one frame validator: ``payload`` (decoded JSON) as a JSON-RPC 2.0 request object, or
    :class:`InvalidEnvelope` (``-32600``).

    Every transport's frames go through it before anything reads the method (the
    dispatcher's :meth:`~JsonRpcDispatcher.dispatch`, and :func:`iac_code.protocol.framing.inspect_frame`
    where a transport frames the answer by method), so a ``method`` that is a list or an
    object is a client error everywhere, never an exception. ``params`` is checked later,
    after the method is known (an unknown method is ``-32601`` whatever its params).
    """
    if isinstance(payload, list):
        raise InvalidEnvelope(None, "Batch requests are not supported")
    if not isinstance(payload, dict):
        raise InvalidEnvelope(None, "Invalid request: expected a JSON object")
    request_id = payload.get("id")
    if isinstance(request_id, bool) or not (request_id is None or isinstance(request_id, str | int)):
        raise InvalidEnvelope(None, "Invalid request: id must be a string, integer, or null")
    if payload.get("jsonrpc") != "2.0":
        raise InvalidEnvelope(request_id, "Invalid request: 'jsonrpc' must be exactly '2.0'")
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidEnvelope(request_id, "Invalid request: 'method' must be a non-empty string")
    return Envelope(request_id, method)


class _QueryParams:
    """A multi-valued query mapping with the ``keys``/``getlist`` face ``proto_utils.parse_params`` reads."""

    def __init__(self, values: Mapping[str, Sequence[str]]) -> None:
        self._values = values

    def keys(self) -> Any:
        return self._values.keys()

    def getlist(self, key: str) -> list[str]:
        return list(self._values[key])


class JsonRpcDispatcher:
    """Validates JSON-RPC envelopes and routes A2A 1.0 methods to a RequestHandler.

    Method names of another protocol version go to the protocol adapter claiming them
    (``adapters``); ``streaming_methods`` are the names whose answer is a stream, 1.0's and
    the adapters', which custom transports frame as streams.
    """

    def __init__(
        self,
        handler: RequestHandler,
        *,
        adapters: Sequence[ProtocolAdapterSpec] = (),
        required_extensions: frozenset[str] = frozenset(),
        instrumentation: Instrumentation | None = None,
        projection: Any = None,
    ) -> None:
        self._handler = handler
        # Safe mode's path projection (iac_code.tasks.projection.WireProjection): applied to every result and
        # stream event here, the one call core of every JSON-RPC and HTTP+JSON framing. None: never.
        self.projection = projection
        # Method name -> the protocol adapter's dispatch, for names that are not A2A 1.0 methods.
        self._adapted = {method: call for adapter in adapters for method, call in adapter.methods.items()}
        self.streaming_methods: frozenset[str] = STREAMING_METHODS.union(
            *(adapter.streaming for adapter in adapters))
        self._required = required_extensions
        # What observes each call (metrics, tracing plugins); None: nothing does.
        self.instrumentation = instrumentation
        self._unary: dict[str, Callable[[Any, ServerCallContext], Any]] = {
            "SendMessage": self._send_message,
            "GetTask": self._get_task,
            "ListTasks": self._list_tasks,
            "CancelTask": self._cancel_task,
            "CreateTaskPushNotificationConfig": self._create_push_config,
            "GetTaskPushNotificationConfig": self._get_push_config,
            "ListTaskPushNotificationConfigs": self._list_push_configs,
            "DeleteTaskPushNotificationConfig": self._delete_push_config,
            "GetExtendedAgentCard": self._extended_card,
        }

    @property
    def handler(self) -> RequestHandler:
        """The request handler every call runs on."""
        return self._handler

    # ------------------------------------------------------------------ JSON-RPC envelope

    async def dispatch(self, body: bytes | str | Mapping[str, Any], call: CallInfo) -> Response | AsyncIterator[Response]:
        """Handle one JSON-RPC request; never raises for bad input."""
        if isinstance(body, bytes | str):
            try:
                payload: Any = decode_json(body, call)
            except CallError as exc:
                return _error(None, exc.error)
        else:
            payload = body
        try:
            envelope = validate_envelope(payload)
        except InvalidEnvelope as exc:
            return _error(exc.request_id, exc.error)
        request_id, method = envelope.request_id, envelope.method
        if method not in METHOD_PARAMS:
            adapted = self._adapted.get(method)
            if adapted is not None:
                return await adapted(self, payload, call)
            return _error(request_id, JsonRpcMethodNotFound(message=f"Method not found: {method[:100]}"))
        params = payload.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(request_id, JsonRpcInvalidParams(message="Invalid params: 'params' must be an object"))
        try:
            result = await self.invoke(method, params, call, request_id=request_id)
        except CallError as exc:
            return _error(request_id, exc.error)
        if method in STREAMING_METHODS:
            return _frames(result, request_id)
        return _result(request_id, result)

    # ------------------------------------------------------------------ the call core

    async def invoke(  # noqa: PLR0913 - one core for every binding's framing
        self,
        method: str,
        params: Mapping[str, Any],
        call: CallInfo,
        *,
        request_id: Any = None,
        query: Mapping[str, Sequence[str]] | None = None,
        fields: Mapping[str, str] | None = None,
        tenant: str | None = None,
        legacy: bool = False,
    ) -> Any:
        """Run one A2A method; the binding adds the framing.

        ``params`` is the method's params object as decoded JSON (kept in
        ``context.state[RAW_PARAMS_KEY]``); ``query`` holds REST query parameters
        (parsed as a2a-sdk's REST routes do, before ``params``); ``fields`` are
        request fields set last (REST path parameters: ``{"task_id": ...}``);
        ``tenant`` overrides the call's tenant (a REST ``/{tenant}/`` prefix);
        ``legacy`` marks a 0.3 call mapped to ``method`` (no A2A-Version check).

        Returns the JSON result of a unary method, or for a streaming method an
        async iterator of StreamResponse JSON objects whose first event has
        already arrived. Raises :class:`CallError` when the call is refused or
        fails, also mid-stream.
        """
        instrumentation = self.instrumentation
        if instrumentation is None:
            result = await self._invoke(method, params, call, request_id, query, fields, tenant, legacy)
        else:
            result = await instrumentation.observe_call(
                method, call, params, fields,
                self._invoke(method, params, call, request_id, query, fields, tenant, legacy))
        projection = self.projection
        if projection is None or not projection.enabled():
            return result
        scope = projection.scope(call.principal, {"params": params, "fields": dict(fields or {})})
        if method in STREAMING_METHODS:
            return scope.stream(result)
        return await scope.project(result)

    async def _invoke(  # noqa: PLR0913
        self,
        method: str,
        params: Mapping[str, Any],
        call: CallInfo,
        request_id: Any,
        query: Mapping[str, Sequence[str]] | None,
        fields: Mapping[str, str] | None,
        tenant: str | None,
        legacy: bool,
    ) -> Any:
        model = METHOD_PARAMS.get(method)
        if model is None:
            raise CallError(JsonRpcMethodNotFound(message=f"Method not found: {method[:100]}"))
        requested = get_requested_extensions(call.extensions)
        refused = protocol_error(method, requested_version(call), requested, self._required, legacy=legacy)
        if refused is not None:
            raise CallError(refused)

        if method in MESSAGE_METHODS:
            bad_part = _invalid_raw_part(params)
            if bad_part is not None:
                raise CallError(JsonRpcInvalidParams(message=f"Invalid params: {bad_part} is not valid base64"))
        try:
            request = model()
            if query:
                proto_utils.parse_params(_QueryParams(query), request)
            if model is GetTaskRequest and _plain_get_task(params):
                # json_format's ParseDict was ~9 % of a GetTask; these two fields need none of it.
                request.id = params["id"]
                if "historyLength" in params:
                    request.history_length = params["historyLength"]
            else:
                ParseDict(params, request, ignore_unknown_fields=True)
            for name, value in (fields or {}).items():
                setattr(request, name, value)
        except (ParseError, ValueError, TypeError, AttributeError) as exc:
            logger.debug("Invalid params for %s (request id %r): %s", method, request_id, exc)
            raise CallError(JsonRpcInvalidParams(message=_invalid_params_text(exc))) from None

        # model_construct: every field is built here, pydantic validation would only cost time.
        context = ServerCallContext.model_construct(
            user=PrincipalUser(call.principal),
            state={"headers": call.headers, "method": method, "request_id": request_id,
                   "transport": call.transport, RAW_PARAMS_KEY: params},
            requested_extensions=requested,
            tenant=getattr(request, "tenant", "") if tenant is None else tenant,
        )
        if method in STREAMING_METHODS:
            return await self._stream(method, request_id, request, context)
        try:
            return await self._unary[method](request, context)
        except A2AError as exc:
            raise CallError(exc) from None
        except Exception:
            logger.exception("Unhandled error in %s (request id %r)", method, request_id)
            raise CallError(JsonRpcInternalError(message="Internal error")) from None

    # ------------------------------------------------------------------ streaming

    async def _stream(self, method: str, request_id: Any, request: Any,
                      context: ServerCallContext) -> AsyncIterator[dict[str, Any]]:
        if method == "SendStreamingMessage":
            stream = self._handler.on_message_send_stream(request, context)
        else:
            stream = self._handler.on_subscribe_to_task(request, context)
        # Fetch the first event eagerly: errors before it are a plain error response.
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return _empty()
        except A2AError as exc:
            raise CallError(exc) from None
        except Exception:
            logger.exception("Unhandled error in %s (request id %r)", method, request_id)
            raise CallError(JsonRpcInternalError(message="Internal error")) from None
        return _events(stream, first, request_id, method)

    # ------------------------------------------------------------------ unary methods

    async def _send_message(self, request: SendMessageRequest, context: ServerCallContext) -> Any:
        result = await self._handler.on_message_send(request, context)
        if isinstance(result, Task):
            return message_to_json(SendMessageResponse(task=result))
        return message_to_json(SendMessageResponse(message=result))

    async def _get_task(self, request: GetTaskRequest, context: ServerCallContext) -> Any:
        view = getattr(self._handler, "get_task_view", None)
        if view is not None:
            return await view(request, context)
        task = await self._handler.on_get_task(request, context)
        if task is None:
            raise TaskNotFoundError
        return message_to_json(task)

    async def _list_tasks(self, request: ListTasksRequest, context: ServerCallContext) -> Any:
        view = getattr(self._handler, "list_tasks_view", None)
        if view is not None:
            return await view(request, context)
        response = await self._handler.on_list_tasks(request, context)
        result = message_to_json(response, always_print_fields_with_no_presence=True)
        if not request.include_artifacts:
            for task in result.get("tasks", []):
                task.pop("artifacts", None)
        return result

    async def _cancel_task(self, request: CancelTaskRequest, context: ServerCallContext) -> Any:
        task = await self._handler.on_cancel_task(request, context)
        if task is None:
            raise TaskNotFoundError
        return message_to_json(task)

    async def _create_push_config(self, request: TaskPushNotificationConfig, context: ServerCallContext) -> Any:
        return message_to_json(await self._handler.on_create_task_push_notification_config(request, context))

    async def _get_push_config(self, request: GetTaskPushNotificationConfigRequest, context: ServerCallContext) -> Any:
        return message_to_json(await self._handler.on_get_task_push_notification_config(request, context))

    async def _list_push_configs(self, request: ListTaskPushNotificationConfigsRequest,
                                 context: ServerCallContext) -> Any:
        return message_to_json(await self._handler.on_list_task_push_notification_configs(request, context))

    async def _delete_push_config(self, request: DeleteTaskPushNotificationConfigRequest,
                                  context: ServerCallContext) -> Any:
        await self._handler.on_delete_task_push_notification_config(request, context)
        return None

    async def _extended_card(self, request: GetExtendedAgentCardRequest, context: ServerCallContext) -> Any:
        return message_to_json(await self._handler.on_get_extended_agent_card(request, context))



async def _events(stream: AsyncIterator[Any], first: Any, request_id: Any,
                  method: str) -> AsyncIterator[dict[str, Any]]:
    """The handler's events as StreamResponse JSON; a failure mid-stream raises :class:`CallError`."""
    to_stream = proto_utils.to_stream_response
    try:
        yield message_to_json(to_stream(first))
        async for event in stream:
            yield message_to_json(to_stream(event))
    except A2AError as exc:
        raise CallError(exc) from None
    except Exception:
        logger.exception("Unhandled error while streaming %s (request id %r)", method, request_id)
        raise CallError(JsonRpcInternalError(message="Internal error")) from None
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _frames(events: AsyncIterator[dict[str, Any]], request_id: Any) -> AsyncIterator[Response]:
    """JSON-RPC framing of a stream: one response per event, a failure as a final error response."""
    try:
        async for event in events:
            yield _result(request_id, event)
    except CallError as exc:
        yield _error(request_id, exc.error)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


async def _empty() -> AsyncIterator[Any]:
    return
    yield  # pragma: no cover - makes this an async generator
