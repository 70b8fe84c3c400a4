"""The A2A 1.0 HTTP+JSON (REST) binding, as framing over the dispatcher's one call core.

Routes, path parameters and request building follow a2a-sdk's REST routes
(``a2a.server.routes.rest_routes`` / ``rest_dispatcher``): bodies are the
method's proto-JSON, path parameters set request fields last, ``GET`` query
parameters are parsed by ``a2a.utils.proto_utils.parse_params``, and every route
is also served under a ``/{tenant}`` prefix. The call itself is the kernel's
``JsonRpcDispatcher.invoke`` (:mod:`iac_code.api`), the same core JSON-RPC
uses (version and extension checks, validation, the handler call, our error
texts); only the framing differs: results are ``application/json`` (§11.1), errors are
``google.rpc.Status``-shaped bodies built by a2a-sdk's
:func:`~a2a.utils.error_handlers.build_rest_error_payload` with the HTTP status
it maps each error to. Nothing here knows HTTP servers: the transport matches a
:class:`RestRoute` and writes the ``HttpReply`` or ``HttpStream`` (the answers a protocol
adapter's routes give too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.server.jsonrpc_models import JSONRPCError
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
)

from iac_code.api import STREAMING_METHODS, CallError, CallInfo, HttpReply, HttpStream, decode_json

if TYPE_CHECKING:
    from iac_code.api import JsonRpcDispatcher

# A2A 1.0 §11.1: "Content-Type: application/json for requests and responses" (a2a-sdk's REST
# routes answer application/a2a+json; requests may use either).
MEDIA_TYPE = "application/json"
ERROR_MEDIA_TYPE = MEDIA_TYPE
BINDING = "HTTP+JSON"
TENANT_PREFIX = "/{tenant}"

# JSON-RPC-only error models, as the A2A errors the REST binding reports. A body that is
# not JSON is INVALID_REQUEST (400), as a2a-sdk answers a protobuf ParseError.
_JSONRPC_TO_A2A: dict[int, type[A2AError]] = {
    -32700: InvalidRequestError,
    -32600: InvalidRequestError,
    -32601: MethodNotFoundError,
    -32602: InvalidParamsError,
    -32603: InternalError,
}


@dataclass(frozen=True)
class RestRoute:
    """One HTTP+JSON route: ``path`` in ``{name}`` template form, the A2A method it calls.

    ``body``: the body is the method's params; ``query``: query parameters are parsed
    into the request; ``fields``: (path parameter, request field) pairs set last.
    """

    http_method: str
    path: str
    method: str
    body: bool = False
    query: bool = False
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def streaming(self) -> bool:
        return self.method in STREAMING_METHODS


_TASK_ID = (("id", "id"),)
_CONFIG_TASK = (("id", "task_id"),)
_CONFIG_ID = (("id", "task_id"), ("push_id", "id"))

# a2a-sdk's REST routes, in its order (more specific paths before ``/tasks/{id}``).
REST_ROUTES: tuple[RestRoute, ...] = (
    RestRoute("POST", "/message:send", "SendMessage", body=True),
    RestRoute("POST", "/message:stream", "SendStreamingMessage", body=True),
    RestRoute("POST", "/tasks/{id}:cancel", "CancelTask", fields=_TASK_ID),
    RestRoute("GET", "/tasks/{id}:subscribe", "SubscribeToTask", fields=_TASK_ID),
    RestRoute("POST", "/tasks/{id}:subscribe", "SubscribeToTask", fields=_TASK_ID),
    RestRoute("GET", "/tasks/{id}", "GetTask", query=True, fields=_TASK_ID),
    RestRoute("GET", "/tasks/{id}/pushNotificationConfigs/{push_id}", "GetTaskPushNotificationConfig",
              fields=_CONFIG_ID),
    RestRoute("DELETE", "/tasks/{id}/pushNotificationConfigs/{push_id}", "DeleteTaskPushNotificationConfig",
              fields=_CONFIG_ID),
    RestRoute("POST", "/tasks/{id}/pushNotificationConfigs", "CreateTaskPushNotificationConfig", body=True,
              fields=_CONFIG_TASK),
    RestRoute("GET", "/tasks/{id}/pushNotificationConfigs", "ListTaskPushNotificationConfigs", query=True,
              fields=_CONFIG_TASK),
    RestRoute("GET", "/tasks", "ListTasks", query=True),
    RestRoute("GET", "/extendedAgentCard", "GetExtendedAgentCard"),
)


def as_a2a_error(error: A2AError | JSONRPCError) -> A2AError:
    """``error`` as the A2A error the REST binding reports (our message kept)."""
    if isinstance(error, A2AError):
        return error
    return _JSONRPC_TO_A2A.get(error.code, InternalError)(message=error.message)


def error_reply(error: A2AError | JSONRPCError, status: int | None = None) -> HttpReply:
    """The ``google.rpc.Status``-shaped error body and its HTTP status (``status`` overrides the mapping's)."""
    payload = build_rest_error_payload(as_a2a_error(error))
    if status is not None:
        payload["error"]["code"] = status
    return HttpReply(status=payload["error"]["code"], body=payload, media_type=ERROR_MEDIA_TYPE)


def _multi(query: Mapping[str, str]) -> dict[str, Sequence[str]]:
    """Every value of each query key (aiohttp's and Starlette's multi-dicts both have ``getall``/``getlist``)."""
    getall = getattr(query, "getall", None) or getattr(query, "getlist", None)
    if getall is None:
        return {key: [value] for key, value in query.items()}
    return {key: list(getall(key)) for key in dict.fromkeys(query.keys())}


class RestBinding:
    """Turns one matched REST route into a call on the dispatcher core."""

    def __init__(self, dispatcher: JsonRpcDispatcher) -> None:
        self._dispatcher = dispatcher

    async def handle(self, route: RestRoute, path_params: Mapping[str, str], body: bytes,
                     call: CallInfo) -> HttpReply | HttpStream:
        """Answer one request; never raises for bad input."""
        try:
            params: Any = {}
            if route.body:
                params = decode_json(body, call)
                if not isinstance(params, dict):
                    raise CallError(InvalidRequestError(message="Invalid request: expected a JSON object"))
            result = await self._dispatcher.invoke(
                route.method, params, call,
                query=_multi(call.query) if route.query else None,
                fields={name: path_params[param] for param, name in route.fields},
                tenant=path_params.get("tenant"),
            )
        except CallError as exc:
            return error_reply(exc.error)
        if route.streaming:
            return HttpStream(sse_events(result))
        return HttpReply(status=200, body={} if result is None else result)


async def sse_events(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """SSE ``(event name, data)`` pairs of a stream of JSON events; a :class:`CallError` is one ``error`` event
    (its data the ``google.rpc.Status`` body)."""
    try:
        async for event in events:
            yield "", event
    except CallError as exc:
        yield "error", build_rest_error_payload(as_a2a_error(exc.error))
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
