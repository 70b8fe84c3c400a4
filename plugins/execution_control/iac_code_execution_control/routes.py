"""The execution-control and session operations on the wire: HTTP routes and JSON-RPC methods.

HTTP (§7, §8), behind the server's authentication, scoped to the caller's owner like the tasks:

* ``POST /iac-code/execution/pause``, ``/resume``, ``/terminate``; ``GET /iac-code/execution/state``;
* ``POST /iac-code/session/ensure-restored``; ``GET /iac-code/session/recovery``.

The same operations are JSON-RPC methods named after their paths (``iac-code/execution/pause``, ...,
``iac-code/session/recovery``) on every transport that carries JSON-RPC (stdio, Unix socket,
WebSocket, Redis Streams, and HTTP's own JSON-RPC endpoint): ``params`` is the route's body (or its
query fields for the two ``GET`` routes), ``result`` the route's success body. An error is the
route's text with ``data: {"httpStatus": <the route's status>}`` and code ``-32602`` (400 and 409),
``-32001`` (404) or ``-32603`` (503).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from iac_code.api import ANONYMOUS_PRINCIPAL, PluginContext
from iac_code_execution_control import requests as r
from iac_code_execution_control.controller import Controller, Reply, error
from iac_code_execution_control.sessions import ensure_restored, recovery

logger = logging.getLogger(__name__)

PAUSE_PATH = "/iac-code/execution/pause"
RESUME_PATH = "/iac-code/execution/resume"
TERMINATE_PATH = "/iac-code/execution/terminate"
STATE_PATH = "/iac-code/execution/state"
ENSURE_RESTORED_PATH = "/iac-code/session/ensure-restored"
RECOVERY_PATH = "/iac-code/session/recovery"

Operation = Callable[[PluginContext, Controller, str, Mapping[str, Any]], Awaitable[Reply]]


async def _pause(kernel: PluginContext, controller: Controller, owner: str, fields: Mapping[str, Any]) -> Reply:
    return await controller.pause(owner, r.PauseRequest.read(fields))


async def _resume(kernel: PluginContext, controller: Controller, owner: str, fields: Mapping[str, Any]) -> Reply:
    return await controller.resume(owner, r.ResumeRequest.read(fields))


async def _terminate(kernel: PluginContext, controller: Controller, owner: str, fields: Mapping[str, Any]) -> Reply:
    return await controller.terminate(owner, r.TerminateRequest.read(fields))


async def _state(kernel: PluginContext, controller: Controller, owner: str, fields: Mapping[str, Any]) -> Reply:
    return await controller.state(owner, r.StateQuery.read(fields))


async def _ensure_restored(kernel: PluginContext, controller: Controller, owner: str,
                           fields: Mapping[str, Any]) -> Reply:
    try:
        request = r.RestoreRequest.read(fields)
    except r.BadRequest:
        return error(400, r.INVALID_RESTORE)
    return await ensure_restored(kernel, owner, request)


async def _recovery(kernel: PluginContext, controller: Controller, owner: str, fields: Mapping[str, Any]) -> Reply:
    return await recovery(kernel, controller, owner, r.RecoveryQuery.read(fields))


# path -> (HTTP method, operation)
OPERATIONS: dict[str, tuple[str, Operation]] = {
    PAUSE_PATH: ("POST", _pause),
    RESUME_PATH: ("POST", _resume),
    TERMINATE_PATH: ("POST", _terminate),
    STATE_PATH: ("GET", _state),
    ENSURE_RESTORED_PATH: ("POST", _ensure_restored),
    RECOVERY_PATH: ("GET", _recovery),
}
METHODS = {path.lstrip("/"): path for path in OPERATIONS}
"""JSON-RPC method name -> route path: ``iac-code/execution/pause`` ... ``iac-code/session/recovery``."""


FORWARDED = frozenset({PAUSE_PATH, RESUME_PATH, TERMINATE_PATH, STATE_PATH})
"""With several nodes, these go to the node running the execution's turn (when another node runs it)."""


async def run(kernel: PluginContext, controller: Controller, path: str, owner: str, fields: Any, *,
              forwarded: bool = False) -> Reply:
    """One operation; bad input is a 400 answer, never an exception. With several nodes, an execution operation
    whose turn runs on another live node is forwarded there (``forwarded``: it came from another node)."""
    _, operation = OPERATIONS[path]
    if not isinstance(fields, Mapping):
        return error(400, r.INVALID_RESTORE if path == ENSURE_RESTORED_PATH else r.INVALID)
    try:
        if not forwarded and path in FORWARDED and controller.link is not None:
            context_id = r.StateQuery.read({"contextId": fields.get("contextId")}).context_id
            node = await controller.runner_of(owner, context_id)
            if node is not None:
                return await controller.forward(node, path, owner, {str(k): v for k, v in fields.items()})
        return await operation(kernel, controller, owner, fields)
    except r.BadRequest:
        return error(400, r.INVALID)


def node_call(kernel: PluginContext, controller: Controller) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """The handler of requests other nodes forward here (the kernel's node call ``execution-control``)."""

    async def handle(payload: dict[str, Any]) -> dict[str, Any]:
        path, owner, fields = payload.get("path"), payload.get("owner"), payload.get("fields")
        if path not in FORWARDED or not isinstance(owner, str):
            reply = error(400, r.INVALID)
        else:
            reply = await run(kernel, controller, str(path), owner, fields, forwarded=True)
        return {"status": reply.status, "body": reply.body}

    return handle


def _owner(kernel: PluginContext, request: web.Request) -> str:
    authenticator = kernel.authenticator
    principal = authenticator.authenticate(request.headers) if authenticator is not None else None
    return (principal or ANONYMOUS_PRINCIPAL).name


def http_handler(kernel: PluginContext, controller: Any, path: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler of one route; ``controller()`` is the server's controller (``None``: unavailable)."""
    method, _ = OPERATIONS[path]

    async def handle(request: web.Request) -> web.Response:
        current = controller()
        if current is None:
            return web.json_response({"error": r.UNAVAILABLE}, status=503)
        if method == "GET":
            fields: Any = request.query
        else:
            try:
                fields = json.loads(await request.read() or b"null")
            except ValueError:
                fields = None
        reply = await run(kernel, current, path, _owner(kernel, request), fields)
        return web.json_response(reply.body, status=reply.status)

    return handle


def rpc_error_code(status: int) -> int:
    return {404: -32001, 503: -32603}.get(status, -32602)


def rpc_method(path: str, controller_for: Callable[[Any], Any]) -> Callable[[Any, Mapping[str, Any], Any],
                                                                         Awaitable[dict[str, Any]]]:
    """The JSON-RPC method of one route (a ``ProtocolAdapterSpec`` method: ``(dispatcher, request, call)``)."""

    async def dispatch(dispatcher: Any, request: Mapping[str, Any], call: Any) -> dict[str, Any]:
        request_id = request.get("id")
        found = controller_for(dispatcher)
        if found is None:
            reply = error(503, r.UNAVAILABLE)
        else:
            kernel, controller = found
            params = request.get("params")
            principal = getattr(call, "principal", None) or ANONYMOUS_PRINCIPAL
            reply = await run(kernel, controller, path, principal.name, {} if params is None else params)
        if reply.status < 300 or (path == ENSURE_RESTORED_PATH and reply.status == 404):
            return {"jsonrpc": "2.0", "id": request_id, "result": reply.body}
        return {"jsonrpc": "2.0", "id": request_id, "error": {
            "code": rpc_error_code(reply.status), "message": reply.body.get("error", ""),
            "data": {"httpStatus": reply.status}}}

    return dispatch
