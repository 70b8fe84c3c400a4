"""Plugin registration: the NDJSON stream transports ``stdio`` and ``unix`` (server and client sides), their key, their checks."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import TransportSpec, hookimpl, without_effect
from iac_code_transport_stdio.ndjson_client import NdjsonClient
from iac_code_transport_stdio.server import LOG_TO_STDOUT_ERROR, StdioTransport

if TYPE_CHECKING:
    from iac_code.api import ClientTarget, PluginContext, TransportServer

IAC_CODE_API_VERSION = "1.0"

DEFAULT_COMMAND = (sys.executable, "-m", "iac_code.server.cli", "a2a", "--transport", "stdio")
MISSING_SOCKET_PATH = "socket-path is required in --config for --transport unix."


class NdjsonTransportConfig(BaseModel):
    """Keys the NDJSON stream transports add to the configuration (``stdio`` has none of its own)."""

    model_config = ConfigDict(extra="forbid")

    socket_path: str = Field("", description="Path of the Unix domain socket (required for --transport unix).")


def create_transport(context: PluginContext) -> TransportServer:
    """The stdio transport of the running server."""
    return StdioTransport(context)


def create_unix_transport(context: PluginContext) -> TransportServer:
    """The unix transport of the running server."""
    from iac_code_transport_stdio.unix import UnixTransport

    return UnixTransport(context)


def server_command(options: Mapping[str, Any]) -> list[str]:
    """The argv of the server a client spawns: ``stdio_command`` (a shell-like string or a list), else this Python's."""
    command = options.get("stdio_command")
    if isinstance(command, str) and command.strip():
        return shlex.split(command)
    if isinstance(command, list | tuple) and command:
        return [str(arg) for arg in command]
    return list(DEFAULT_COMMAND)


async def connect(target: ClientTarget) -> NdjsonClient:
    """The client side of ``stdio``: spawn a stdio server (it inherits our environment and working directory) and talk NDJSON.

    The interface URL (``stdio://iac-code``) names no address: every client gets its own server process,
    which stops when the client closes its stdin.
    """
    return await NdjsonClient.spawn(server_command(target.options))


def socket_path(url: str) -> str:
    """The socket path of a ``unix:///path/to.sock`` interface URL (as the unix transport advertises it)."""
    if not url.startswith("unix://") or not url.removeprefix("unix://"):
        raise ValueError("a unix interface URL is unix:///path/to.sock")
    return url.removeprefix("unix://")


async def connect_unix(target: ClientTarget) -> NdjsonClient:
    """The client side of ``unix``: NDJSON JSON-RPC on the socket the URL names."""
    return await NdjsonClient.connect_unix(socket_path(target.url))


@hookimpl
def iac_code_transports() -> list[TransportSpec]:
    return [TransportSpec(
        name="stdio",
        create=create_transport,
        connect=connect,
        url_schemes=("stdio",),
        description="Newline-delimited JSON-RPC on stdin/stdout (concurrent requests).",
    ), TransportSpec(
        name="unix",
        create=create_unix_transport,
        connect=connect_unix,
        url_schemes=("unix",),
        description="Newline-delimited JSON-RPC on a Unix domain socket (concurrent requests).",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return NdjsonTransportConfig


@hookimpl
def iac_code_check_config(config: Any, transports: list[str]) -> list[str]:
    """stdout carries the frames of ``stdio``: ``log-to-stdout`` cannot be used with it; ``socket-path`` is
    required for ``unix`` and refused without it."""
    problems: list[str] = []
    if "stdio" in transports and config.log_to_stdout:
        problems.append(LOG_TO_STDOUT_ERROR)
    if "unix" not in transports:
        problems += without_effect(config, ("socket_path",), "transport: unix")
    elif not str(config.socket_path or "").strip():
        problems.append(MISSING_SOCKET_PATH)
    return problems
