"""A2A 0.3 clients (A2A 1.0 §3.6: a missing ``A2A-Version`` means 0.3), over the one call core.

Every official SDK still answers 0.3 clients; so does this server, with
a2a-sdk's own 0.3 compatibility layer (:mod:`a2a.compat.v0_3`): its pydantic
0.3 models validate requests and shape results, its conversions map 0.3 to 1.0
and back, and its protocol-agnostic :class:`~a2a.compat.v0_3.request_handler.RequestHandler03`
(JSON-RPC) and :class:`~a2a.compat.v0_3.rest_handler.REST03Handler` (HTTP+JSON)
do the per-method work. Nothing here writes a 0.3 model by hand.

Those SDK adapters wrap a 1.0 ``RequestHandler``. They get :class:`CoreHandler`,
a 1.0 handler whose every method is :meth:`iac_code.dispatcher.JsonRpcDispatcher.invoke`
with the converted 1.0 request, so a 0.3 call runs exactly the path a 1.0 call
does (required extensions, validation, auth scoping, permission answers, limits,
our error texts); only the version check is settled here.

Which calls are 0.3:

* JSON-RPC: a 0.3 method name (``message/send`` ...), whatever ``A2A-Version``
  says (the spec digest, transports.md §2.4). A 1.0 name without a 1.0 version
  is still refused with -32009. Errors are 0.3 JSON-RPC error objects: the
  code a2a-sdk's 0.3 adapter maps (codes 0.3 does not know become -32603), the
  error's own ``data``, no ErrorInfo list.
* HTTP+JSON: the ``/v1/...`` routes of a2a-sdk's ``REST03Adapter`` (plus the
  0.3 spec's ``DELETE`` of a push config), when ``A2A-Version`` is absent or
  0.x. With any other version the request is the 1.0 route of a tenant named
  ``v1``, as before. Bodies and results are 0.3 proto-JSON; errors are the
  1.0 REST error bodies a2a-sdk's 0.3 REST adapter answers too.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

import pydantic
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.extension_headers import LEGACY_HTTP_EXTENSION_HEADER
from a2a.compat.v0_3.request_handler import RequestHandler03
from a2a.compat.v0_3.rest_handler import REST03Handler
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InternalError as JsonRpcInternalError
from a2a.server.jsonrpc_models import InvalidParamsError as JsonRpcInvalidParams
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    ListTaskPushNotificationConfigsResponse,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
from google.protobuf.json_format import MessageToJson, Parse, ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage

from iac_code.card import legacy_interfaces
from iac_code.dispatcher import CallError, CallInfo, decode_json, requested_version
from iac_code.jsonio import integral_floats_to_int, message_to_json
from iac_code.rest import REST_ROUTES, RestReply, RestRoute, RestStream, sse_events

if TYPE_CHECKING:
    from iac_code.dispatcher import JsonRpcDispatcher

logger = logging.getLogger(__name__)

Response = dict[str, Any]

# The 0.3 JSON-RPC methods (a2a-sdk's JSONRPC03Adapter.METHOD_TO_MODEL): request model,
# RequestHandler03 method.
JSONRPC_METHODS: dict[str, tuple[type[pydantic.BaseModel], str]] = {
    "message/send": (types_v03.SendMessageRequest, "on_message_send"),
    "message/stream": (types_v03.SendStreamingMessageRequest, "on_message_send_stream"),
    "tasks/get": (types_v03.GetTaskRequest, "on_get_task"),
    "tasks/cancel": (types_v03.CancelTaskRequest, "on_cancel_task"),
    "tasks/resubscribe": (types_v03.TaskResubscriptionRequest, "on_subscribe_to_task"),
    "tasks/pushNotificationConfig/set": (types_v03.SetTaskPushNotificationConfigRequest,
                                         "on_create_task_push_notification_config"),
    "tasks/pushNotificationConfig/get": (types_v03.GetTaskPushNotificationConfigRequest,
                                         "on_get_task_push_notification_config"),
    "tasks/pushNotificationConfig/list": (types_v03.ListTaskPushNotificationConfigRequest,
                                          "on_list_task_push_notification_configs"),
    "tasks/pushNotificationConfig/delete": (types_v03.DeleteTaskPushNotificationConfigRequest,
                                            "on_delete_task_push_notification_config"),
    "agent/getAuthenticatedExtendedCard": (types_v03.GetAuthenticatedExtendedCardRequest,
                                           "on_get_extended_agent_card"),
}
STREAMING_METHODS = frozenset({"message/stream", "tasks/resubscribe"})

SCHEMA_ERROR_TEXT = "Invalid params: request does not match the A2A 0.3 schema"
# Codes the 0.3 error models define (a2a-sdk's 0.3 adapter derives them the same way).
V03_ERROR_CODES = frozenset(
    cls.model_fields["code"].default for cls in get_args(types_v03.A2AError.model_fields["root"].annotation))
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII)
JSON_MEDIA_TYPE = "application/json"
# a2a-sdk 0.3's REST handler (``A2AErrorToHttpStatus``): the HTTP status per error, body ``{"message": ...}``.
# Errors 0.3 does not define (extension required, version) are the caller's: 400, never a 500.
REST03_HTTP_STATUS: dict[int, int] = {
    -32700: 400, -32600: 400, -32601: 404, -32602: 422, -32603: 500, -32001: 404, -32002: 409,
    -32003: 501, -32004: 501, -32005: 415, -32006: 502, -32007: 404,
}
# 0.3 states after which a stream ends (interrupted or terminal): its last event says ``final: true``.
_V03_STOP_STATES = frozenset({"input-required", "auth-required", "completed", "canceled", "failed", "rejected"})
_V03_TERMINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
# The same states as 0.3 proto-JSON (HTTP+JSON) names them.
_V03_PROTO_STATES = {
    "TASK_STATE_INPUT_REQUIRED": "input-required", "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_COMPLETED": "completed", "TASK_STATE_CANCELLED": "canceled", "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
}


# ------------------------------------------------------------------ shared


def is_legacy_call(call: CallInfo) -> bool:
    """Whether ``A2A-Version`` (header, else query) is absent or a 0.x version: a 0.3 REST call."""
    version = requested_version(call)
    return not version or is_legacy_version(version)


def _with_legacy_extensions(call: CallInfo) -> CallInfo:
    """``call`` with the 0.3 ``X-A2A-Extensions`` header's values also requested."""
    headers = call.headers
    getall = getattr(headers, "getall", None)
    if getall is not None:
        legacy = list(getall(LEGACY_HTTP_EXTENSION_HEADER, []))
    else:
        value = headers.get(LEGACY_HTTP_EXTENSION_HEADER.lower())
        legacy = [value] if value else []
    return dataclasses.replace(call, extensions=[*call.extensions, *legacy]) if legacy else call


def v03_error(error: A2AError | JSONRPCError) -> dict[str, Any]:
    """The 0.3 JSON-RPC error object for ``error``: a code 0.3 knows, our message, the error's ``data``."""
    if isinstance(error, A2AError):
        code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
        if code not in V03_ERROR_CODES:
            code = -32603
    else:
        code = error.code
    body: dict[str, Any] = {"code": code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return body


def _error(request_id: Any, error: A2AError | JSONRPCError) -> Response:
    return {"jsonrpc": "2.0", "id": request_id, "error": v03_error(error)}


def rest03_error_body(error: A2AError | JSONRPCError) -> dict[str, Any]:
    """The body a2a-sdk 0.3's REST handler answered an error with: ``{"message": ...}``."""
    return {"message": error.message}


def rest03_error_reply(error: A2AError | JSONRPCError, status: int | None = None) -> RestReply:
    """A 0.3 REST error: a2a-sdk 0.3's body and HTTP status (``status`` overrides the mapping's)."""
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603) if isinstance(error, A2AError) else error.code
    return RestReply(status=status or REST03_HTTP_STATUS.get(code, 400), body=rest03_error_body(error))


def ends_stream(state: str, *, follows_next_turn: bool) -> bool:
    """Whether a 0.3 status update in ``state`` is its stream's last event (``final: true``).

    Streams end at an interrupted or terminal state; a subscription to an a2a-sdk
    executor's task follows it into its next turn and ends only at a terminal state.
    """
    return state in (_V03_TERMINAL_STATES if follows_next_turn else _V03_STOP_STATES)


def _follows_next_turn(dispatcher: JsonRpcDispatcher, subscribe: bool) -> bool:
    return subscribe and not getattr(dispatcher.handler, "turn_ends_in_input_required", False)


def _dump(value: Any) -> Any:
    """A 0.3 model (or list of them) as its JSON (conversions leave Struct integers as floats)."""
    if value is None:
        return None
    if isinstance(value, list):
        return [_dump(item) for item in value]
    return integral_floats_to_int(value.model_dump(mode="json", by_alias=True, exclude_none=True))


def _schema_text(exc: pydantic.ValidationError) -> str:
    """Our text for a 0.3 request pydantic refused: the first failing field's path, if plain."""
    errors = exc.errors()
    if not errors:
        return SCHEMA_ERROR_TEXT
    path = ""
    for item in errors[0].get("loc", ()):
        if isinstance(item, int):
            path += f"[{item}]"
        elif isinstance(item, str) and _FIELD.fullmatch(item):
            path += f".{item}" if path else item
        else:
            return SCHEMA_ERROR_TEXT
    if not path or len(path) > 200:
        return SCHEMA_ERROR_TEXT
    return f"Invalid params: field '{path}' has an invalid value"


def _json_data_parts(request: SendMessageRequest) -> SendMessageRequest:
    """A 0.3 DataPart is JSON by definition: its 1.0 part says ``application/json``."""
    for part in request.message.parts:
        if part.WhichOneof("content") == "data" and not part.media_type:
            part.media_type = JSON_MEDIA_TYPE
    return request


class CoreHandler(RequestHandler):
    """A 1.0 RequestHandler whose every method is the dispatcher's call core, for one call.

    The SDK's 0.3 adapters convert a 0.3 request to the 1.0 protobuf request and
    call this; it sends the request's JSON through :meth:`JsonRpcDispatcher.invoke`
    (``legacy=True``: the version is settled) and parses the JSON result back.
    The ``context`` the adapters pass is ignored: :meth:`invoke` builds the real one.
    Failures raise :class:`~iac_code.dispatcher.CallError`, as :meth:`invoke` does.
    """

    def __init__(self, dispatcher: JsonRpcDispatcher, call: CallInfo, request_id: Any) -> None:
        self._dispatcher = dispatcher
        self._call = _with_legacy_extensions(call)
        self._request_id = request_id

    async def _invoke(self, method: str, request: ProtoMessage) -> Any:
        return await self._dispatcher.invoke(method, message_to_json(request), self._call,
                                             request_id=self._request_id, legacy=True)

    async def _parsed(self, method: str, request: ProtoMessage, result_type: type[ProtoMessage]) -> Any:
        return ParseDict(await self._invoke(method, request), result_type(), ignore_unknown_fields=True)

    async def _events(self, method: str, request: ProtoMessage) -> AsyncIterator[Any]:
        events = await self._invoke(method, request)
        try:
            async for event in events:
                response = ParseDict(event, StreamResponse(), ignore_unknown_fields=True)
                yield getattr(response, response.WhichOneof("payload"))
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    async def on_message_send(self, params: Any, context: Any = None) -> Any:
        response = await self._parsed("SendMessage", _json_data_parts(params), SendMessageResponse)
        return response.task if response.HasField("task") else response.message

    async def on_message_send_stream(self, params: Any, context: Any = None) -> AsyncIterator[Any]:
        async for event in self._events("SendStreamingMessage", _json_data_parts(params)):
            yield event

    async def on_subscribe_to_task(self, params: Any, context: Any = None) -> AsyncIterator[Any]:
        async for event in self._events("SubscribeToTask", params):
            yield event

    async def on_get_task(self, params: Any, context: Any = None) -> Task:
        result: Task = await self._parsed("GetTask", params, Task)
        return result

    async def on_list_tasks(self, params: Any, context: Any = None) -> ListTasksResponse:
        result: ListTasksResponse = await self._parsed("ListTasks", params, ListTasksResponse)
        return result

    async def on_cancel_task(self, params: Any, context: Any = None) -> Task:
        result: Task = await self._parsed("CancelTask", params, Task)
        return result

    async def on_create_task_push_notification_config(self, params: Any, context: Any = None) -> Any:
        return await self._parsed("CreateTaskPushNotificationConfig", params, TaskPushNotificationConfig)

    async def on_get_task_push_notification_config(self, params: Any, context: Any = None) -> Any:
        return await self._parsed("GetTaskPushNotificationConfig", params, TaskPushNotificationConfig)

    async def on_list_task_push_notification_configs(self, params: Any, context: Any = None) -> Any:
        return await self._parsed("ListTaskPushNotificationConfigs", params, ListTaskPushNotificationConfigsResponse)

    async def on_delete_task_push_notification_config(self, params: Any, context: Any = None) -> None:
        await self._invoke("DeleteTaskPushNotificationConfig", params)

    async def on_get_extended_agent_card(self, params: Any, context: Any = None) -> Any:
        return _with_legacy_interfaces(await self._parsed("GetExtendedAgentCard", params, AgentCard))


def _with_legacy_interfaces(card: AgentCard) -> AgentCard:
    """``card`` with a 0.3 twin of each JSON-RPC and HTTP+JSON interface (the 0.3 card names them).

    The 1.0 card lists 1.0 interfaces only; the same endpoints serve 0.3
    (``POST /``, ``/v1/...``), which the SDK's 0.3 card conversion needs to see.
    """
    interfaces = card.supported_interfaces
    if any(not i.protocol_version or is_legacy_version(i.protocol_version) for i in interfaces):
        return card
    interfaces.extend(legacy_interfaces(card))
    return card


def _adapter_context() -> ServerCallContext:
    """The context handed to the SDK adapters: no headers, so their version checks read 0.3."""
    return ServerCallContext(state={"headers": {}})


# ------------------------------------------------------------------ JSON-RPC


async def dispatch_jsonrpc(dispatcher: JsonRpcDispatcher, payload: Mapping[str, Any],
                           call: CallInfo) -> Response | AsyncIterator[Response]:
    """Answer one 0.3 JSON-RPC request (the envelope is already valid); never raises for bad input."""
    request_id = payload.get("id")
    method = payload["method"]
    model, handler_method = JSONRPC_METHODS[method]
    document = {**payload, "id": "" if request_id is None else request_id}  # 0.3 models need an id
    if "params" in model.model_fields and payload.get("params") is None:
        document["params"] = {}
    try:
        request = model.model_validate(document)
    except pydantic.ValidationError as exc:
        logger.debug("Invalid 0.3 params for %s (request id %r): %s", method, request_id, exc)
        return _error(request_id, JsonRpcInvalidParams(message=_schema_text(exc)))
    handler = RequestHandler03(CoreHandler(dispatcher, call, request_id))
    call_method = getattr(handler, handler_method)
    if method in STREAMING_METHODS:
        stream = call_method(request, _adapter_context())
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return _no_frames()
        except Exception as exc:  # noqa: BLE001 - mapped like every other failure
            return _error(request_id, _failure(exc, method, request_id))
        return _frames(stream, first, request_id, method,
                       _follows_next_turn(dispatcher, method == "tasks/resubscribe"))
    try:
        result = await call_method(request, _adapter_context())
    except Exception as exc:  # noqa: BLE001 - mapped like every other failure
        return _error(request_id, _failure(exc, method, request_id))
    return {"jsonrpc": "2.0", "id": request_id, "result": _dump(result)}


def _failure(exc: Exception, method: str, request_id: Any) -> A2AError | JSONRPCError:
    """The error a failed 0.3 call reports: the core's, the SDK adapter's, or a plain internal error."""
    if isinstance(exc, CallError):
        return exc.error
    if isinstance(exc, A2AError):
        return exc
    if isinstance(exc, ValueError | TypeError | ParseError):  # a 0.3 value the conversions cannot map
        logger.debug("0.3 conversion failed for %s (request id %r): %s", method, request_id, exc)
        return JsonRpcInvalidParams(message=SCHEMA_ERROR_TEXT)
    logger.exception("Unhandled error in 0.3 %s (request id %r)", method, request_id)
    return JsonRpcInternalError(message="Internal error")


async def _frames(stream: AsyncIterator[Any], first: Any, request_id: Any, method: str,
                  follows_next_turn: bool) -> AsyncIterator[Response]:
    """The stream's 0.3 responses (``SendStreamingMessageSuccessResponse``); a failure is a final error.
    The status update that ends the stream says ``final: true``."""

    def frame(item: Any) -> Response:
        response = {**_dump(item), "id": request_id}
        result = response.get("result")
        if isinstance(result, dict) and result.get("kind") == "status-update" and ends_stream(
                str(result.get("status", {}).get("state")), follows_next_turn=follows_next_turn):
            result["final"] = True
        return response

    try:
        yield frame(first)
        async for item in stream:
            yield frame(item)
    except Exception as exc:  # noqa: BLE001 - the stream ends with the error frame
        yield _error(request_id, _failure(exc, method, request_id))
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _no_frames() -> AsyncIterator[Response]:
    return
    yield  # pragma: no cover - makes this an async generator


# ------------------------------------------------------------------ HTTP+JSON


@dataclass(frozen=True)
class Rest03Route:
    """One 0.3 HTTP+JSON route: ``path`` in ``{name}`` form, the ``REST03Handler`` method it calls.

    ``twin`` is the 1.0 route the same request is when ``A2A-Version`` is not 0.x
    (``/v1/...`` is then a tenant named ``v1``); ``None`` where 1.0 has no such route.
    """

    http_method: str
    path: str
    handler: str
    streaming: bool = False
    twin: RestRoute | None = None


def _twin(http_method: str, path: str) -> RestRoute | None:
    path = path.removeprefix("/v1")
    return next((r for r in REST_ROUTES if r.http_method == http_method and r.path == path), None)


def _route(http_method: str, path: str, handler: str, *, streaming: bool = False) -> Rest03Route:
    return Rest03Route(http_method, path, handler, streaming, _twin(http_method, path))


# a2a-sdk's REST03Adapter routes, in its order, and the 0.3 spec's DELETE of a push config.
REST03_ROUTES: tuple[Rest03Route, ...] = (
    _route("POST", "/v1/message:send", "on_message_send"),
    _route("POST", "/v1/message:stream", "on_message_send_stream", streaming=True),
    _route("POST", "/v1/tasks/{id}:cancel", "on_cancel_task"),
    _route("GET", "/v1/tasks/{id}:subscribe", "on_subscribe_to_task", streaming=True),
    _route("POST", "/v1/tasks/{id}:subscribe", "on_subscribe_to_task", streaming=True),
    _route("GET", "/v1/tasks/{id}", "on_get_task"),
    _route("GET", "/v1/tasks/{id}/pushNotificationConfigs/{push_id}", "get_push_notification"),
    _route("DELETE", "/v1/tasks/{id}/pushNotificationConfigs/{push_id}", "delete_push_notification"),
    _route("POST", "/v1/tasks/{id}/pushNotificationConfigs", "set_push_notification"),
    _route("GET", "/v1/tasks/{id}/pushNotificationConfigs", "list_push_notifications"),
    _route("GET", "/v1/card", "on_get_extended_agent_card"),
)


@dataclass
class _Request:
    """The face of a Starlette request ``REST03Handler`` reads: ``body()``, path and query parameters."""

    content: bytes
    path_params: Mapping[str, str]
    query_params: Mapping[str, str]

    async def body(self) -> bytes:
        return self.content


def _sdk_file_bytes(body: bytes) -> bytes:
    """A 0.3 ``SendMessageRequest`` body with each ``fileWithBytes`` as a2a-sdk's 0.3 REST handler decodes it.

    In 0.3 proto-JSON ``fileWithBytes`` is the file's bytes in base64. a2a-sdk's handler
    parses that (one decoding), then reads the bytes as the base64 text of its 0.3
    model and decodes them again, so text files were refused and binary ones
    corrupted. Encoding the parsed bytes once more makes its second decoding give
    the file back byte for byte.
    """
    request = pb2_v03.SendMessageRequest()
    Parse(body, request, ignore_unknown_fields=True)
    for part in request.request.content:
        if part.HasField("file") and part.file.HasField("file_with_bytes"):
            part.file.file_with_bytes = base64.b64encode(part.file.file_with_bytes)
    return MessageToJson(request).encode("utf-8")


def _single_base64(value: Any) -> Any:
    """A 0.3 proto-JSON result with each ``fileWithBytes`` encoded once (a2a-sdk's handler encodes it twice)."""
    if isinstance(value, list):
        return [_single_base64(item) for item in value]
    if not isinstance(value, dict):
        return value
    fixed: dict[str, Any] = {}
    for key, item in value.items():
        if key == "metadata":
            fixed[key] = item
        elif key == "file" and isinstance(item, dict) and isinstance(item.get("fileWithBytes"), str):
            try:
                text = base64.b64decode(item["fileWithBytes"], validate=True).decode("ascii")
            except (binascii.Error, ValueError):
                text = item["fileWithBytes"]
            fixed[key] = {**item, "fileWithBytes": text}
        else:
            fixed[key] = _single_base64(item)
    return fixed


def _final_rest_event(event: dict[str, Any], follows_next_turn: bool) -> dict[str, Any]:
    """``event`` (0.3 proto-JSON StreamResponse) with ``final: true`` when it is the status update ending the stream."""
    update = event.get("statusUpdate")
    if isinstance(update, dict):
        state = _V03_PROTO_STATES.get(str(update.get("status", {}).get("state")), "")
        if ends_stream(state, follows_next_turn=follows_next_turn):
            return {**event, "statusUpdate": {**update, "final": True}}
    return event


class _Rest03Handler(REST03Handler):
    """a2a-sdk's 0.3 REST handler, with the 0.3 spec's push-config delete it lacks and file bytes decoded once."""

    async def on_message_send(self, request: _Request, context: ServerCallContext) -> dict[str, Any]:
        fixed = dataclasses.replace(request, content=_sdk_file_bytes(request.content))
        return await super().on_message_send(fixed, context)  # type: ignore[arg-type, no-any-return]

    async def on_message_send_stream(self, request: _Request,  # type: ignore[override]
                                     context: ServerCallContext) -> AsyncIterator[dict[str, Any]]:
        fixed = dataclasses.replace(request, content=_sdk_file_bytes(request.content))
        async for event in super().on_message_send_stream(fixed, context):  # type: ignore[arg-type]
            yield event

    async def delete_push_notification(self, request: _Request, context: ServerCallContext) -> dict[str, Any]:
        rpc_request = types_v03.DeleteTaskPushNotificationConfigRequest(
            id="", params=types_v03.DeleteTaskPushNotificationConfigParams(
                id=request.path_params["id"], push_notification_config_id=request.path_params["push_id"]))
        await self.handler03.on_delete_task_push_notification_config(rpc_request, context)
        return {}

    async def on_get_extended_agent_card(self, request: _Request, context: ServerCallContext) -> dict[str, Any]:
        # The SDK dumps pydantic field names here; 0.3 clients read the card's JSON names.
        rpc_request = types_v03.GetAuthenticatedExtendedCardRequest(id=0)
        card = await self.handler03.on_get_extended_agent_card(rpc_request, context)
        return _dump(card)  # type: ignore[no-any-return]


class Rest03Binding:
    """Turns one matched 0.3 REST route into a call on the dispatcher core (through ``REST03Handler``)."""

    def __init__(self, dispatcher: JsonRpcDispatcher) -> None:
        self._dispatcher = dispatcher

    async def handle(self, route: Rest03Route, path_params: Mapping[str, str], body: bytes,
                     call: CallInfo) -> RestReply | RestStream:
        """Answer one request; never raises for bad input."""
        if body:
            try:
                decode_json(body, call)  # our texts for a body that is not JSON
            except CallError as exc:
                return rest03_error_reply(exc.error)
        handler = _Rest03Handler(CoreHandler(self._dispatcher, call, None))
        request = _Request(body or b"{}", path_params, call.query)
        call_method = getattr(handler, route.handler)
        label = f"{route.http_method} {route.path}"
        if route.streaming:
            stream = call_method(request, _adapter_context())
            try:
                first = await anext(stream)
            except StopAsyncIteration:
                return RestStream(sse_events(_no_frames(), rest03_error_body))
            except Exception as exc:  # noqa: BLE001 - mapped like every other failure
                return rest03_error_reply(_failure(exc, label, None))
            follows = _follows_next_turn(self._dispatcher, route.handler == "on_subscribe_to_task")
            return RestStream(sse_events(_rest_events(stream, first, label, follows), rest03_error_body))
        try:
            result = await call_method(request, _adapter_context())
        except Exception as exc:  # noqa: BLE001 - mapped like every other failure
            return rest03_error_reply(_failure(exc, label, None))
        return RestReply(status=200, body=_single_base64(integral_floats_to_int(result)))


async def _rest_events(stream: AsyncIterator[Any], first: Any, label: str,
                       follows_next_turn: bool) -> AsyncIterator[dict[str, Any]]:
    """The stream's 0.3 proto-JSON events, the one ending it ``final``; a failure raises :class:`CallError`
    (an SSE ``error`` event)."""
    try:
        yield _final_rest_event(_single_base64(integral_floats_to_int(first)), follows_next_turn)
        async for item in stream:
            yield _final_rest_event(_single_base64(integral_floats_to_int(item)), follows_next_turn)
    except CallError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported as the stream's error event
        raise CallError(_failure(exc, label, None)) from None
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
