"""Plugin registration: the ``http`` and ``websocket`` transports and their configuration keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from iac_code.api import TransportSpec, hookimpl, without_effect

if TYPE_CHECKING:
    from iac_code.api import ClientTarget, PluginContext, TransportServer
    from iac_code_transport_http.websocket_client import WebSocketClient

IAC_CODE_API_VERSION = "1.0"


class HttpTransportConfig(BaseModel):
    """Keys the HTTP transport adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    public_url: str = Field(
        "", description="Base URL advertised on the Agent Card (default http://<host>:<port>/).")
    sse_ping_seconds: float = Field(15.0, gt=0, description="Interval of SSE keep-alive comments.")
    http_header_timeout: float = Field(
        10.0, gt=0, allow_inf_nan=False,
        description="Seconds to receive a request's line and headers, from connection accept or, on a keep-alive "
        "connection, from the request's first byte.")
    http_keepalive_timeout: float = Field(
        75.0, gt=0, allow_inf_nan=False, description="Idle seconds between requests on a keep-alive connection.")
    http_body_timeout: float = Field(
        30.0, gt=0, allow_inf_nan=False,
        description="Seconds to receive a request's whole body once its headers are in (then 408).")
    http_max_connections: int = Field(
        1024, ge=1, description="Open client connections (SSE streams included); past it new ones get 503.")
    idle_shutdown_seconds: Any = Field(
        0, description="Stop the server (as SIGTERM would) after this many seconds without an HTTP request in "
        "flight and without active work (running turns, permission waits, paused or terminating executions); "
        "0 = never. HTTP transport only.")
    ws_path: str = Field("/a2a", pattern=r"^/", description="Path of the WebSocket route (websocket transport).")
    ws_heartbeat_seconds: float = Field(
        30.0, gt=0, allow_inf_nan=False,
        description="Interval of WebSocket pings (websocket transport); a peer that does not answer is closed.")

    @field_validator("http_header_timeout", "http_keepalive_timeout", "http_body_timeout", "http_max_connections",
                     mode="before")
    @classmethod
    def _not_bool(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool):  # pydantic would read true as 1
            raise ValueError(f"'{(info.field_name or '').replace('_', '-')}': must be a positive number, not {value}")
        return value


def create_transport(kernel: PluginContext) -> TransportServer:
    from iac_code_transport_http.server import HttpTransport

    return HttpTransport(kernel)


def create_websocket_transport(kernel: PluginContext) -> TransportServer:
    from iac_code_transport_http.websocket import WebSocketTransport

    return WebSocketTransport(kernel)


async def connect_websocket(target: ClientTarget) -> WebSocketClient:
    """The client side of ``websocket``: the handshake to ``ws://`` / ``wss://`` carries ``target.headers``."""
    from iac_code_transport_http.websocket_client import WebSocketClient

    return await WebSocketClient.connect(target.url, headers=dict(target.headers))


@hookimpl
def iac_code_transports() -> list[TransportSpec]:
    return [TransportSpec(
        name="http",
        aliases=("jsonrpc", "json-rpc", "http+jsonrpc", "http-jsonrpc", "https"),
        create=create_transport,
        description="JSON-RPC 2.0 over HTTP with SSE streaming (aiohttp).",
    ), TransportSpec(
        name="websocket",
        aliases=("ws", "wss"),
        create=create_websocket_transport,
        connect=connect_websocket,
        url_schemes=("ws", "wss"),
        description="JSON-RPC 2.0 over WebSocket text frames, multiplexed (aiohttp).",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return HttpTransportConfig


@hookimpl
def iac_code_check_config(config: Any, transports: list[str]) -> list[str]:
    """``idle-shutdown-seconds`` a finite number ≥ 0, and > 0 only with ``http`` alone; ``ws-*`` refused
    without the ``websocket`` transport; ``http`` and ``websocket`` both bind ``host``/``port``, so together
    they need ``port: 0``."""
    from iac_code_transport_http.idle import problems as idle_problems

    problems: list[str] = idle_problems(getattr(config, "idle_shutdown_seconds", 0), transports)
    if "websocket" not in transports:
        problems += without_effect(config, ("ws_path", "ws_heartbeat_seconds"), "transport: websocket")
    if "http" in transports and "websocket" in transports and config.port:
        problems.append(f"Transports 'http' and 'websocket' would both bind {config.host}:{config.port}: "
                        "set 'port: 0' (each gets a free port) or serve them from two processes.")
    return problems
