"""The MCP plugin's hooks: its settings (``mcp-*``), the tool source every runtime asks for MCP tools, and the turn
gate that closes the servers when the A2A server stops. See docs/mcp.md."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from iac_code.api import PluginContext, ToolSpec, TurnGateSpec, hookimpl

from iac_code_mcp.settings import McpConfig

IAC_CODE_API_VERSION = "1.0"

_managers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_by_id: dict[int, Any] = {}


def config_dir() -> Path:
    """The kernel's configuration directory: ``IAC_CODE_CONFIG_DIR``, else ``~/.iac-code``."""
    return Path(os.environ.get("IAC_CODE_CONFIG_DIR") or Path.home() / ".iac-code")


def manager_for(kernel: PluginContext) -> Any:
    """The one :class:`~iac_code_mcp.manager.McpManager` of a running server."""
    from iac_code_mcp.manager import McpManager

    try:
        found = _managers.get(kernel)
        if found is None:
            found = _managers[kernel] = McpManager(kernel.config, config_dir(), _state_dir(kernel))
    except TypeError:  # a kernel that cannot be weakly referenced
        found = _by_id.get(id(kernel))
        if found is None:
            found = _by_id[id(kernel)] = McpManager(kernel.config, config_dir(), _state_dir(kernel))
    return found


def _state_dir(kernel: PluginContext) -> Path | None:
    """The persistence directory the approvals are kept in (``None``: a kernel without one keeps them in memory)."""
    found = getattr(kernel, "state_dir", None)
    return Path(found) if found is not None else None


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return McpConfig


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """Each ``mcp-servers`` entry must be a stdio or HTTP server (the message names the server, never its values)."""
    from iac_code_mcp.definitions import parse_servers

    _, warnings = parse_servers(getattr(config, "mcp_servers", {}) or {}, "server", "mcp-servers")
    return [f"'mcp-servers': {w.message}" for w in warnings]


@hookimpl
def iac_code_tools() -> list[ToolSpec]:
    def create(kernel: PluginContext) -> Any:
        from iac_code_mcp.tool import McpSource

        return McpSource(manager_for(kernel))

    return [ToolSpec(name="mcp", create=create,
                     description="The tools of the configured MCP servers (offered as mcp__<server>__<tool>).")]


class _Gate:
    """Starts the idle sweep with the server and closes every MCP server when it stops."""

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel

    def admit(self, owner: str, context_id: str, task_id: str) -> None:
        return None

    async def safe_point(self, point: Any) -> None:
        return None

    def waiting(self, point: Any, waiting: bool) -> None:
        return None

    async def turn_ended(self, point: Any, status: str) -> None:
        return None

    def metadata(self, owner: str, context_id: str) -> None:
        return None

    async def start(self) -> None:
        manager_for(self.kernel).start()

    async def stop(self) -> None:
        await manager_for(self.kernel).stop()


@hookimpl
def iac_code_turn_gates() -> list[TurnGateSpec]:
    return [TurnGateSpec(name="mcp", create=_Gate, description="closes idle and stopped MCP servers")]
