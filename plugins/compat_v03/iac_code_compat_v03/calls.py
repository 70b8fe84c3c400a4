"""What every A2A 0.3 call shares, over the kernel's one call core (A2A 1.0 §3.6: a missing
``A2A-Version`` means 0.3).

Every official SDK still answers 0.3 clients; so does this server, with
a2a-sdk's own 0.3 compatibility layer (:mod:`a2a.compat.v0_3`): its pydantic
0.3 models validate requests and shape results, its conversions map 0.3 to 1.0
and back, and its protocol-agnostic :class:`~a2a.compat.v0_3.request_handler.RequestHandler03`
(JSON-RPC, :mod:`iac_code_compat_v03.jsonrpc`) and
:class:`~a2a.compat.v0_3.rest_handler.REST03Handler` (HTTP+JSON, :mod:`iac_code_compat_v03.rest`)
do the per-method work. Nothing here writes a 0.3 model by hand.

Those SDK adapters wrap a 1.0 ``RequestHandler``. They get :class:`CoreHandler`,
a 1.0 handler whose every method is the kernel dispatcher's ``invoke`` with the
converted 1.0 request, so a 0.3 call runs exactly the path a 1.0 call does
(required extensions, validation, auth scoping, permission answers, limits, our
error texts); only the version check is settled here.

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
  bodies a2a-sdk's 0.3 REST handler answers.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, get_args

import pydantic
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.extension_headers import LEGACY_HTTP_EXTENSION_HEADER
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
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage

from iac_code.api import CallError, CallInfo, jsonio, message_to_json, requested_version
from iac_code_compat_v03.card import with_legacy_interfaces

if TYPE_CHECKING:
    from iac_code.api import JsonRpcDispatcher

logger = logging.getLogger(__name__)

SCHEMA_ERROR_TEXT = "Invalid params: request does not match the A2A 0.3 schema"
# Codes the 0.3 error models define (a2a-sdk's 0.3 adapter derives them the same way).
V03_ERROR_CODES = frozenset(
    cls.model_fields["code"].default for cls in get_args(types_v03.A2AError.model_fields["root"].annotation))
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII)
JSON_MEDIA_TYPE = "application/json"
# 0.3 states after which a stream ends (interrupted or terminal): its last event says ``final: true``.
_V03_STOP_STATES = frozenset({"input-required", "auth-required", "completed", "canceled", "failed", "rejected"})
_V03_TERMINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})



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


def ends_stream(state: str, *, follows_next_turn: bool) -> bool:
    """Whether a 0.3 status update in ``state`` is its stream's last event (``final: true``).

    Streams end at an interrupted or terminal state; a subscription to an a2a-sdk
    executor's task follows it into its next turn and ends only at a terminal state.
    """
    return state in (_V03_TERMINAL_STATES if follows_next_turn else _V03_STOP_STATES)


def follows_next_turn(dispatcher: JsonRpcDispatcher, subscribe: bool) -> bool:
    """Whether a subscription's stream follows its task into the next turn (an a2a-sdk executor's task)."""
    return subscribe and not getattr(dispatcher.handler, "turn_ends_in_input_required", False)


def dump(value: Any) -> Any:
    """A 0.3 model (or list of them) as its JSON (conversions leave Struct integers as floats)."""
    if value is None:
        return None
    if isinstance(value, list):
        return [dump(item) for item in value]
    return jsonio.integral_floats_to_int(value.model_dump(mode="json", by_alias=True, exclude_none=True))


def schema_text(exc: pydantic.ValidationError) -> str:
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
    call this; it sends the request's JSON through the dispatcher's ``invoke``
    (``legacy=True``: the version is settled) and parses the JSON result back.
    The ``context`` the adapters pass is ignored: ``invoke`` builds the real one.
    Failures raise ``CallError``, as ``invoke`` does.
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
        return with_legacy_interfaces(await self._parsed("GetExtendedAgentCard", params, AgentCard))


def adapter_context() -> ServerCallContext:
    """The context handed to the SDK adapters: no headers, so their version checks read 0.3."""
    return ServerCallContext(state={"headers": {}})


def failure(exc: Exception, method: str, request_id: Any) -> A2AError | JSONRPCError:
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


async def no_frames() -> AsyncIterator[Any]:
    """An empty stream (an SDK adapter whose stream ended before its first event)."""
    return
    yield  # pragma: no cover - makes this an async generator
