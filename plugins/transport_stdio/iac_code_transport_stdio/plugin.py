"""Plugin registration: the ``stdio`` transport (server and client side) and its one configuration check."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from iac_code.api import NdjsonClient, TransportSpec, hookimpl
from iac_code_transport_stdio.server import LOG_TO_STDOUT_ERROR, StdioTransport

if TYPE_CHECKING:
    from iac_code.api import ClientTarget, PluginContext, TransportServer

IAC_CODE_API_VERSION = "1.0"

DEFAULT_COMMAND = (sys.executable, "-m", "iac_code.server.cli", "a2a", "--transport", "stdio")


def create_transport(context: PluginContext) -> TransportServer:
    """The stdio transport of the running server."""
    return StdioTransport(context)


def server_command(options: Mapping[str, Any]) -> list[str]:
    """The argv of the server a client spawns: ``stdio_command`` (a shell-like string or a list), else this Python's."""
    command = options.get("stdio_command")
    if isinstance(command, str) and command.strip():
        return shlex.split(command)
    if isinstance(command, list | tuple) and command:
        return [str(arg) for arg in command]
    return list(DEFAULT_COMMAND)


async def connect(target: ClientTarget) -> NdjsonClient:
    """The client side: spawn a stdio server (it inherits our environment and working directory) and talk NDJSON.

    The interface URL (``stdio://iac-code``) names no address: every client gets its own server process,
    which stops when the client closes its stdin.
    """
    return await NdjsonClient.spawn(server_command(target.options))


@hookimpl
def iac_code_transports() -> list[TransportSpec]:
    return [TransportSpec(name="stdio", create=create_transport, connect=connect, url_schemes=("stdio",),
                          description="Newline-delimited JSON-RPC on stdin/stdout (concurrent requests).")]


@hookimpl
def iac_code_check_config(config: Any, transports: list[str]) -> list[str]:
    """stdout carries the frames of ``stdio``: ``log-to-stdout`` cannot be used with it."""
    return [LOG_TO_STDOUT_ERROR] if "stdio" in transports and config.log_to_stdout else []
