"""A2A 0.3 HTTP+JSON: the ``/v1/...`` routes of a2a-sdk's ``REST03Adapter``, through its ``REST03Handler``.

The HTTP transport serves :data:`ADAPTER_ROUTES` beside its own HTTP+JSON routes and
frames them the same way (authentication, body limits and decoding, JSON and SSE
answers). A route answers only a 0.3 call (``A2A-Version`` absent or 0.x,
:func:`~iac_code_compat_v03.calls.is_legacy_call`); with any other version the
transport serves the request as if the route were not there: the 1.0 route of a
tenant named ``v1``, or 404 (``/v1/card``). Bodies and results are 0.3 proto-JSON;
errors are a2a-sdk 0.3's ``{"message": ...}`` bodies with its HTTP statuses.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.rest_handler import REST03Handler
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
from google.protobuf.json_format import MessageToJson, Parse

from iac_code.api import AdapterRoute, CallError, HttpReply, HttpStream, decode_json, jsonio
from iac_code_compat_v03.calls import (
    CoreHandler,
    adapter_context,
    dump,
    ends_stream,
    failure,
    follows_next_turn,
    is_legacy_call,
    no_frames,
)

if TYPE_CHECKING:
    from iac_code.api import CallInfo, JsonRpcDispatcher

# a2a-sdk 0.3's REST handler (``A2AErrorToHttpStatus``): the HTTP status per error, body ``{"message": ...}``.
# Errors 0.3 does not define (extension required, version) are the caller's: 400, never a 500.
REST03_HTTP_STATUS: dict[int, int] = {
    -32700: 400, -32600: 400, -32601: 404, -32602: 422, -32603: 500, -32001: 404, -32002: 409,
    -32003: 501, -32004: 501, -32005: 415, -32006: 502, -32007: 404,
}
# 0.3 proto-JSON state names of the states after which a stream ends (:func:`ends_stream` reads the JSON-RPC ones).
_V03_PROTO_STATES = {
    "TASK_STATE_INPUT_REQUIRED": "input-required", "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_COMPLETED": "completed", "TASK_STATE_CANCELLED": "canceled", "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
}


@dataclass(frozen=True)
class Rest03Route:
    """One 0.3 HTTP+JSON route: ``path`` in ``{name}`` form, the ``REST03Handler`` method it calls."""

    http_method: str
    path: str
    handler: str
    streaming: bool = False


# a2a-sdk's REST03Adapter routes, in its order, and the 0.3 spec's DELETE of a push config.
REST03_ROUTES: tuple[Rest03Route, ...] = (
    Rest03Route("POST", "/v1/message:send", "on_message_send"),
    Rest03Route("POST", "/v1/message:stream", "on_message_send_stream", streaming=True),
    Rest03Route("POST", "/v1/tasks/{id}:cancel", "on_cancel_task"),
    Rest03Route("GET", "/v1/tasks/{id}:subscribe", "on_subscribe_to_task", streaming=True),
    Rest03Route("POST", "/v1/tasks/{id}:subscribe", "on_subscribe_to_task", streaming=True),
    Rest03Route("GET", "/v1/tasks/{id}", "on_get_task"),
    Rest03Route("GET", "/v1/tasks/{id}/pushNotificationConfigs/{push_id}", "get_push_notification"),
    Rest03Route("DELETE", "/v1/tasks/{id}/pushNotificationConfigs/{push_id}", "delete_push_notification"),
    Rest03Route("POST", "/v1/tasks/{id}/pushNotificationConfigs", "set_push_notification"),
    Rest03Route("GET", "/v1/tasks/{id}/pushNotificationConfigs", "list_push_notifications"),
    Rest03Route("GET", "/v1/card", "on_get_extended_agent_card"),
)


def rest03_error_body(error: A2AError | JSONRPCError) -> dict[str, Any]:
    """The body a2a-sdk 0.3's REST handler answered an error with: ``{"message": ...}``."""
    return {"message": error.message}


def rest03_error_reply(error: A2AError | JSONRPCError, status: int | None = None) -> HttpReply:
    """A 0.3 REST error: a2a-sdk 0.3's body and HTTP status (``status`` overrides the mapping's)."""
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603) if isinstance(error, A2AError) else error.code
    return HttpReply(status=status or REST03_HTTP_STATUS.get(code, 400), body=rest03_error_body(error))


def transport_error(code: int, message: str, status: int) -> HttpReply:
    """A request that failed in the transport (body too large, server starting), 0.3-shaped."""
    return rest03_error_reply(JSONRPCError(code=code, message=message), status)


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


def _final_rest_event(event: dict[str, Any], follows: bool) -> dict[str, Any]:
    """``event`` (0.3 proto-JSON StreamResponse) with ``final: true`` when it is the status update ending the stream."""
    update = event.get("statusUpdate")
    if isinstance(update, dict):
        state = _V03_PROTO_STATES.get(str(update.get("status", {}).get("state")), "")
        if ends_stream(state, follows_next_turn=follows):
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
        return dump(card)  # type: ignore[no-any-return]


async def handle(route: Rest03Route, dispatcher: JsonRpcDispatcher, path_params: Mapping[str, str], body: bytes,
                 call: CallInfo) -> HttpReply | HttpStream:
    """Answer one request on ``route`` through ``REST03Handler`` over the call core; never raises for bad input."""
    if body:
        try:
            decode_json(body, call)  # our texts for a body that is not JSON
        except CallError as exc:
            return rest03_error_reply(exc.error)
    handler = _Rest03Handler(CoreHandler(dispatcher, call, None))
    request = _Request(body or b"{}", path_params, call.query)
    call_method = getattr(handler, route.handler)
    label = f"{route.http_method} {route.path}"
    if route.streaming:
        stream = call_method(request, adapter_context())
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return HttpStream(_sse_events(no_frames()))
        except Exception as exc:  # noqa: BLE001 - mapped like every other failure
            return rest03_error_reply(failure(exc, label, None))
        follows = follows_next_turn(dispatcher, route.handler == "on_subscribe_to_task")
        return HttpStream(_sse_events(_rest_events(stream, first, label, follows)))
    try:
        result = await call_method(request, adapter_context())
    except Exception as exc:  # noqa: BLE001 - mapped like every other failure
        return rest03_error_reply(failure(exc, label, None))
    return HttpReply(status=200, body=_single_base64(jsonio.integral_floats_to_int(result)))


async def _rest_events(stream: AsyncIterator[Any], first: Any, label: str,
                       follows: bool) -> AsyncIterator[dict[str, Any]]:
    """The stream's 0.3 proto-JSON events, the one ending it ``final``; a failure raises :class:`CallError`
    (an SSE ``error`` event)."""
    try:
        yield _final_rest_event(_single_base64(jsonio.integral_floats_to_int(first)), follows)
        async for item in stream:
            yield _final_rest_event(_single_base64(jsonio.integral_floats_to_int(item)), follows)
    except CallError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported as the stream's error event
        raise CallError(failure(exc, label, None)) from None
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _sse_events(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """SSE ``(event name, data)`` pairs of a stream of JSON events; a :class:`CallError` is one ``error`` event
    with a2a-sdk 0.3's error body."""
    try:
        async for event in events:
            yield "", event
    except CallError as exc:
        yield "error", rest03_error_body(exc.error)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _route(route: Rest03Route) -> AdapterRoute:
    async def answer(dispatcher: Any, path_params: Mapping[str, str], body: bytes,
                     call: Any) -> HttpReply | HttpStream:
        return await handle(route, dispatcher, path_params, body, call)

    return AdapterRoute(route.http_method, route.path, answer, transport_error, accepts=is_legacy_call)


ADAPTER_ROUTES: tuple[AdapterRoute, ...] = tuple(_route(route) for route in REST03_ROUTES)
"""The 0.3 routes as the HTTP transport serves them (``ProtocolAdapterSpec.http_routes``)."""
