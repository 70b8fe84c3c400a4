"""The ``mcp-*`` settings: servers of scope ``server``, how project servers are approved, the limits."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class McpConfig(BaseModel):
    """The MCP plugin's configuration keys (``mcp-servers``, ``mcp-project-servers``, ``mcp-max-servers``, ...)."""

    model_config = ConfigDict(extra="forbid")

    mcp_servers: dict[str, Any] = Field(default_factory=dict, description=(
        "MCP servers of scope 'server', by name: {command, args, env, cwd} (stdio) or {url, headers, transport} "
        "(Streamable HTTP; transport: sse for old servers). ~/.iac-code/mcp.json (scope user) and the "
        "workspace's .mcp.json (scope project) add more."))
    mcp_project_servers: str = Field("ask", description=(
        "Servers of a workspace's .mcp.json: deny (never started), ask (a permission question per context, "
        "the default) or allow."))
    mcp_max_servers: int = Field(16, ge=1, le=1024, description="MCP server connections open at most, over all "
                                 "contexts (the least recently used idle context's are closed first).")
    mcp_max_approvals: int = Field(4096, ge=1, le=1_000_000, description=(
        "Answers to the project-server question kept (in memory and in <persistence-dir>/mcp-approvals.json); "
        "the least recently used are dropped first, and their question is asked again."))
    mcp_call_timeout: float = Field(120.0, gt=0, description="Seconds an MCP tool call may take.")
    mcp_startup_timeout: float = Field(30.0, gt=0, description="Seconds an MCP server may take to start and list "
                                       "its tools.")

    @field_validator("mcp_project_servers")
    @classmethod
    def _project(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in ("deny", "ask", "allow"):
            raise ValueError("'mcp-project-servers': must be deny, ask or allow")
        return value

