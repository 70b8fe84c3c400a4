"""Execution control from the client: pause, resume, terminate and read a context's execution.

An agent that supports it advertises the card extension ``urn:iac-code:a2a:execution-control:v1``
(``since-0.13.md`` §7): its ``params`` name the HTTP routes (``pauseEndpoint``, ``stateEndpoint``, ...),
which the client calls on the origin of the agent's HTTP interface. Over a transport that is not HTTP
(``--binding unix``, a ``ws://`` URL, ...) the same operations are JSON-RPC methods named after the paths
(``iac-code/execution/pause``, ...), sent through the transport plugin's :class:`JsonRpcChannel`.

Every refusal of the agent becomes a :class:`ClientError` carrying the agent's own text verbatim, with the
HTTP status (or JSON-RPC code) beside it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from iac_code.api import ClientTarget, JsonRpcChannel
from iac_code_a2a_client.connect import HTTP_SCHEMES, Connector, _replace_wildcard_hosts
from iac_code_a2a_client.errors import ClientError, ExitCode, classify, shown_url

EXTENSION_URI = "urn:iac-code:a2a:execution-control:v1"
OPERATIONS = ("pause", "resume", "terminate", "state")
DEFAULT_ENDPOINTS = {op: f"/iac-code/execution/{op}" for op in OPERATIONS}
METHODS = {op: f"iac-code/execution/{op}" for op in OPERATIONS}
ENDPOINT_PARAMS = {"pause": "pauseEndpoint", "resume": "resumeEndpoint", "terminate": "terminateEndpoint",
                   "state": "stateEndpoint"}
HTTP_BINDINGS = ("JSONRPC", "HTTP+JSON")
SETTLED = {"pause": ("paused", "terminating", "terminated"), "resume": ("running", "terminating", "terminated"),
           "terminate": ("terminated",)}
"""The phases an operation's ``--wait`` stops at (the one it asked for, or a later one that overtook it)."""


def new_request_id(operation: str) -> str:
    """A fresh protocol id (``^[A-Za-z0-9_.:-]+$``) for ``requestId``."""
    return f"cli-{operation}-{uuid.uuid4().hex}"


def find_extension(card: Mapping[str, Any]) -> dict[str, Any] | None:
    """The execution-control entry of a card's ``capabilities.extensions`` (``None``: not advertised)."""
    capabilities = card.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    for extension in extensions if isinstance(extensions, list) else []:
        if isinstance(extension, dict) and extension.get("uri") == EXTENSION_URI:
            return extension
    return None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _refusal(text: str, where: str) -> ClientError:
    return ClientError(f"{text} ({where})" if text else f"The agent refused the request ({where}).",
                       ExitCode.AGENT_ERROR)


@dataclass
class ControlTarget:
    """Where one agent's execution-control operations go: HTTP routes under ``base``, or JSON-RPC methods
    over ``channel``. ``via`` names it for people (``HTTP`` or the binding)."""

    url: str
    headers: Mapping[str, str]
    timeout: float | None
    via: str
    base: str = ""
    endpoints: Mapping[str, str] | None = None
    http: httpx.AsyncClient | None = None
    channel: JsonRpcChannel | None = None

    async def call(self, operation: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Run one operation; its success body (the execution snapshot), or a :class:`ClientError`."""
        try:
            if self.channel is not None:
                return await self._rpc(operation, fields)
            return await self._http(operation, fields)
        except ClientError:
            raise
        except Exception as exc:
            raise classify(exc, url=self.url) from None

    async def _http(self, operation: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        assert self.http is not None
        path = (self.endpoints or DEFAULT_ENDPOINTS).get(operation) or DEFAULT_ENDPOINTS[operation]
        address = self.base + path if path.startswith("/") else path
        if operation == "state":
            response = await self.http.get(address, params={k: str(v) for k, v in fields.items()})
        else:
            response = await self.http.post(address, json=dict(fields))
        if response.status_code in (401, 403):
            raise classify(httpx.HTTPStatusError("", request=response.request, response=response))
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ClientError(f"The agent at {shown_url(self.url)} answered HTTP {response.status_code} "
                              f"to {path}.", ExitCode.UNREACHABLE if response.status_code >= 400 else ExitCode.ERROR)
        if response.status_code >= 400:
            error = body.get("error")
            text = str(error.get("message", "")) if isinstance(error, dict) else str(error or "")
            raise _refusal(text, f"HTTP {response.status_code}")
        return body

    async def _rpc(self, operation: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        assert self.channel is not None
        method = METHODS[operation]
        payload = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": dict(fields)}
        reply = await asyncio.wait_for(self.channel.request(payload, headers=dict(self.headers)), self.timeout)
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict):
            code = error.get("code")
            if code == -32601:
                raise ClientError(f"The agent does not support execution control: it has no JSON-RPC method "
                                  f"{method}.", ExitCode.NO_INTERFACE)
            if code == -32000:
                raise ClientError("The agent refused the credentials (unauthorized). Check --token, "
                                  "--basic-username/--basic-password or --api-key.", ExitCode.AUTH)
            raise _refusal(str(error.get("message", "")), f"JSON-RPC {code}")
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, dict):
            raise ClientError(f"The agent answered {method} without a result object.", ExitCode.AGENT_ERROR)
        return result

    async def aclose(self) -> None:
        if self.channel is not None:
            channel, self.channel = self.channel, None
            try:
                await channel.aclose()
            except Exception:  # closing a broken channel: nothing left to do
                pass
        if self.http is not None:
            await self.http.aclose()


async def open_target(connector: Connector, url: str) -> ControlTarget:
    """Find how to reach ``url``'s execution control: its card's extension and HTTP routes, or, for a
    transport that is not HTTP (``--binding`` or the URL's scheme), its JSON-RPC methods."""
    if not url:
        raise ClientError("url is required. Provide the agent's URL (or --url, or url in --config).")
    headers = {"A2A-Version": "1.0", **connector.auth.headers()}
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    wanted = connector._wanted()
    http = connector._http()
    try:
        if scheme in HTTP_SCHEMES:
            data, card, _ = await connector.discover(url, http)
            if find_extension(data) is None:
                raise ClientError(f"The agent's card does not advertise execution control (extension "
                                  f"{EXTENSION_URI}): it cannot pause, resume or terminate executions.",
                                  ExitCode.NO_INTERFACE)
            _replace_wildcard_hosts(card, url)
            if wanted and wanted in connector._channel_specs():
                interface = next((i.url for i in card.supported_interfaces if i.protocol_binding == wanted), "")
                if not interface:
                    offered = ", ".join(i.protocol_binding for i in card.supported_interfaces) or "none"
                    raise ClientError(f"The agent advertises no '{wanted}' interface (it offers {offered}).",
                                      ExitCode.NO_INTERFACE)
                return await _channel_target(connector, interface, wanted, headers, http)
            extension = find_extension(data) or {}
            params = extension.get("params") if isinstance(extension.get("params"), dict) else {}
            endpoints = {op: str(params.get(key) or DEFAULT_ENDPOINTS[op]) for op, key in ENDPOINT_PARAMS.items()}
            interface = next((i.url for i in card.supported_interfaces
                              if i.protocol_binding in HTTP_BINDINGS and urlsplit(i.url).scheme in HTTP_SCHEMES), url)
            return ControlTarget(url=url, headers=headers, timeout=connector.timeout, via="HTTP",
                                 base=_origin(interface), endpoints=endpoints, http=http)
        card = connector._direct_card(url, scheme, wanted)
        binding = card.supported_interfaces[0].protocol_binding
        if binding not in connector._channel_specs():
            raise ClientError(f"Execution control is not available over {binding}: use the agent's HTTP URL "
                              "or a JSON-RPC transport (websocket, unix, stdio, grpc-jsonrpc, redis-streams).",
                              ExitCode.NO_INTERFACE)
        return await _channel_target(connector, url, binding, headers, http)
    except BaseException:
        await http.aclose()
        raise


async def _channel_target(connector: Connector, url: str, binding: str, headers: Mapping[str, str],
                          http: httpx.AsyncClient) -> ControlTarget:
    spec = connector._channel_specs()[binding]
    assert spec.connect is not None
    target = ClientTarget(url=url, headers=headers, timeout=connector.timeout, options=dict(connector.options))
    try:
        channel = await asyncio.wait_for(spec.connect(target), connector.timeout)
    except Exception as exc:
        raise classify(exc, url=url) from None
    return ControlTarget(url=url, headers=headers, timeout=connector.timeout, via=binding, http=http,
                         channel=channel)


@dataclass(frozen=True)
class Identity:
    """What the user gave to name the execution (anything empty is read from the current snapshot)."""

    context_id: str
    task_id: str = ""
    execution_id: str = ""
    pause_id: str = ""
    request_id: str = ""
    connection_epoch: int | None = None


def _epoch(identity: Identity, snapshot: Mapping[str, Any]) -> int:
    if identity.connection_epoch is not None:
        return identity.connection_epoch
    seen = snapshot.get("connectionEpoch")
    return seen if isinstance(seen, int) and not isinstance(seen, bool) and seen >= 0 else 0


def state_query(identity: Identity) -> dict[str, Any]:
    query: dict[str, Any] = {"contextId": identity.context_id}
    if identity.execution_id:
        query["executionId"] = identity.execution_id
    if identity.pause_id:
        query["pauseId"] = identity.pause_id
    return query


def pause_body(identity: Identity, snapshot: Mapping[str, Any], reason: str,
               reconnect_timeout: float | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "contextId": identity.context_id, "taskId": identity.task_id or snapshot.get("taskId"),
        "expectedExecutionId": identity.execution_id or snapshot.get("executionId"),
        "requestId": identity.request_id or new_request_id("pause"), "connectionEpoch": _epoch(identity, snapshot),
        "reason": reason}
    if reconnect_timeout is not None:
        body["reconnectTimeoutSeconds"] = reconnect_timeout
    return body


def resume_body(identity: Identity, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    pause_id = identity.pause_id or snapshot.get("pauseId")
    if not pause_id:
        raise ClientError(f"Execution is not paused (phase {snapshot.get('phase', 'unknown')}).",
                          ExitCode.AGENT_ERROR)
    return {"contextId": identity.context_id, "executionId": identity.execution_id or snapshot.get("executionId"),
            "pauseId": pause_id, "requestId": identity.request_id or new_request_id("resume"),
            "connectionEpoch": _epoch(identity, snapshot)}


def terminate_body(identity: Identity, snapshot: Mapping[str, Any], reason: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "contextId": identity.context_id, "expectedExecutionId": identity.execution_id or snapshot.get("executionId"),
        "requestId": identity.request_id or new_request_id("terminate"),
        "connectionEpoch": _epoch(identity, snapshot), "reason": reason}
    pause_id = identity.pause_id or (snapshot.get("pauseId") if reason == "disconnect_timeout" else "")
    if pause_id:
        body["pauseId"] = pause_id
    return body


async def run_operation(target: ControlTarget, operation: str, identity: Identity, *, reason: str = "",
                        reconnect_timeout: float | None = None, wait: float | None = None) -> dict[str, Any]:
    """``operation`` on the execution ``identity`` names: the current snapshot first (for the ids the user
    left out), then the request; with ``wait`` (seconds), the state is read again until the phase settles."""
    current = await target.call("state", state_query(identity))
    if operation == "state":
        return current
    if operation == "pause":
        body = pause_body(identity, current, reason or "client_request", reconnect_timeout)
    elif operation == "resume":
        body = resume_body(identity, current)
    else:
        body = terminate_body(identity, current, reason or "explicit_terminate")
    snapshot = await target.call(operation, body)
    if wait is None or snapshot.get("phase") in SETTLED[operation]:
        return snapshot
    query = {"contextId": identity.context_id}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while snapshot.get("phase") not in SETTLED[operation]:
        if loop.time() >= deadline:
            raise ClientError(f"The execution did not reach {SETTLED[operation][0]} within {wait:g} s "
                              f"(phase {snapshot.get('phase', 'unknown')}).", ExitCode.TIMEOUT)
        await asyncio.sleep(0.1)  # polling the agent's state, bounded by the deadline
        snapshot = await target.call("state", query)
    return snapshot
