"""A2A 0.3 JSON-RPC: the 0.3 method names, answered through a2a-sdk's ``RequestHandler03``.

The kernel's dispatcher hands this module every request whose method is one of
:data:`JSONRPC_METHODS` (on every transport, whatever ``A2A-Version`` says); the
request is validated against the SDK's 0.3 model, converted and run as its 1.0
method on the call core (:class:`~iac_code_compat_v03.calls.CoreHandler`), and the
result or error goes back 0.3-shaped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import pydantic
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.request_handler import RequestHandler03
from a2a.server.jsonrpc_models import InvalidParamsError as JsonRpcInvalidParams
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.utils.errors import A2AError

from iac_code_compat_v03.calls import (
    CoreHandler,
    adapter_context,
    dump,
    ends_stream,
    failure,
    follows_next_turn,
    no_frames,
    schema_text,
    v03_error,
)

if TYPE_CHECKING:
    from iac_code.api import CallInfo, JsonRpcDispatcher

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
        return _error(request_id, JsonRpcInvalidParams(message=schema_text(exc)))
    handler = RequestHandler03(CoreHandler(dispatcher, call, request_id))
    call_method = getattr(handler, handler_method)
    if method in STREAMING_METHODS:
        stream = call_method(request, adapter_context())
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return no_frames()
        except Exception as exc:  # noqa: BLE001 - mapped like every other failure
            return _error(request_id, failure(exc, method, request_id))
        return _frames(stream, first, request_id, method,
                       follows_next_turn(dispatcher, method == "tasks/resubscribe"))
    try:
        result = await call_method(request, adapter_context())
    except Exception as exc:  # noqa: BLE001 - mapped like every other failure
        return _error(request_id, failure(exc, method, request_id))
    return {"jsonrpc": "2.0", "id": request_id, "result": dump(result)}


async def _frames(stream: AsyncIterator[Any], first: Any, request_id: Any, method: str,
                  follows: bool) -> AsyncIterator[Response]:
    """The stream's 0.3 responses (``SendStreamingMessageSuccessResponse``); a failure is a final error.
    The status update that ends the stream says ``final: true``."""

    def frame(item: Any) -> Response:
        response = {**dump(item), "id": request_id}
        result = response.get("result")
        if isinstance(result, dict) and result.get("kind") == "status-update" and ends_stream(
                str(result.get("status", {}).get("state")), follows_next_turn=follows):
            result["final"] = True
        return response

    try:
        yield frame(first)
        async for item in stream:
            yield frame(item)
    except Exception as exc:  # noqa: BLE001 - the stream ends with the error frame
        yield _error(request_id, failure(exc, method, request_id))
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def _error(request_id: Any, error: A2AError | JSONRPCError) -> Response:
    return {"jsonrpc": "2.0", "id": request_id, "error": v03_error(error)}
