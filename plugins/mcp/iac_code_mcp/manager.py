"""The server's MCP servers: per context, started lazily, reused across its turns, closed when it goes idle
(``context-idle-timeout``), when ``mcp-max-servers`` needs room, or when the server stops.

A context's servers come from the three scopes (:mod:`iac_code_mcp.definitions`) of its workspace. Project
servers wait for approval (``mcp-project-servers``); the answer holds for the context and that definition and is
durable (:mod:`iac_code_mcp.approvals`). A
server that fails is ``connectionState: failed`` with a warning, and is started again on a later turn once its
backoff (0 s after the first failure, then 1, 2, 4 ... 60 s) has passed.

What it publishes (``mcpStatus``, ``mcpWarning``) is built here, redacted: no env, header, argument, URL
credential or local path ever goes in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_code.api import Progress, ToolCall, ToolContext, ToolOffer, run_tool, safe_mode

from iac_code_mcp.approvals import ApprovalStore, approval_key
from iac_code_mcp.connection import Connection, ConnectionFailed
from iac_code_mcp.definitions import PROJECT_FILE, USER_FILE, McpWarning, ServerDefinition, parse_servers, read_file
from iac_code_mcp.names import public_name
from iac_code_mcp.redaction import Redactor, definition_secrets, local_paths
from iac_code_mcp.tool import McpTool

logger = logging.getLogger(__name__)

PING_TIMEOUT = 5.0
BACKOFF_CAP = 60.0
STATUS_MEMORY = 4096  # tasks whose last published status is remembered (deduplication)


@dataclass
class ServerState:
    """One server of one context: its definition, connection and what its status shows."""

    definition: ServerDefinition
    approval: str = "not_required"  # not_required, pending, approved, denied
    state: str = "pending"  # pending, connected, failed, disabled
    connection: Connection | None = None
    failures: int = 0
    retry_at: float = 0.0
    warnings: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[str, Any] = field(default_factory=dict)  # public name → MCP tool


@dataclass
class ContextServers:
    """The MCP servers of one context (and its workspace)."""

    workspace: str
    servers: dict[str, ServerState] = field(default_factory=dict)
    warnings: list[McpWarning] = field(default_factory=list)
    last_used: float = field(default_factory=time.monotonic)
    active: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    redactor: Redactor = field(default_factory=Redactor)


class McpManager:
    """Every context's MCP servers for one running server (see the module docstring)."""

    def __init__(self, config: Any, config_dir: Path, state_dir: Path | None = None) -> None:
        self.config = config
        self.config_dir = config_dir
        self.contexts: OrderedDict[tuple[str, str], ContextServers] = OrderedDict()
        self._published: set[str] = set()
        self._status: OrderedDict[str, str] = OrderedDict()
        self.approvals = ApprovalStore(state_dir, int(getattr(config, "mcp_max_approvals", 4096)))
        self._sweeper: asyncio.Task[None] | None = None
        self.idle_timeout = float(getattr(config, "context_idle_timeout", 3600.0) or 3600.0)

    # ------------------------------------------------------------------ configuration

    def definitions(self, workspace: str) -> tuple[dict[str, ServerDefinition], list[McpWarning], list[str]]:
        """The servers of a workspace over the three scopes, the warnings, and every secret they hold."""
        found, warnings = parse_servers(getattr(self.config, "mcp_servers", {}) or {}, "server", "mcp-servers")
        secrets: list[str] = []
        for raw in (getattr(self.config, "mcp_servers", {}) or {}).values():
            secrets.extend(definition_secrets(raw))
        sources = [(self.config_dir / USER_FILE, "user", f"[CONFIG]/{USER_FILE}")]
        if workspace:
            sources.append((Path(workspace) / PROJECT_FILE, "project", f"[WORKSPACE]/{PROJECT_FILE}"))
        for path, scope, source in sources:
            more, problems, raws = read_file(path, scope, source)
            for raw in raws:
                secrets.extend(definition_secrets(raw))
            found.update(more)
            warnings.extend(problems)
        return found, warnings, secrets

    # ------------------------------------------------------------------ a turn

    def _context(self, context: ToolContext) -> tuple[tuple[str, str], ContextServers]:
        key = (context.context_id or context.task_id, context.cwd)
        servers = self.contexts.get(key)
        if servers is None:
            servers = self.contexts[key] = ContextServers(workspace=context.cwd)
        self.contexts.move_to_end(key)
        servers.last_used = time.monotonic()
        return key, servers

    async def prepare(self, context: ToolContext) -> AsyncIterator[Any]:
        """This turn's MCP tools (:class:`ToolOffer`) and what to publish first (warnings, status, the approval
        question of project servers)."""
        if safe_mode():
            return
        key, ctx = self._context(context)
        async with ctx.lock:
            definitions, warnings, secrets = self.definitions(ctx.workspace)
            ctx.redactor = Redactor(secrets, local_paths(ctx.workspace, self.config_dir))
            ctx.warnings = [McpWarning(w.server_name, w.code, ctx.redactor.text(w.message), w.source, w.scope)
                            for w in warnings]
            if not definitions and not ctx.warnings and not ctx.servers:
                return  # no MCP server is configured: nothing is published
            await self._reconcile(ctx, definitions)
            for warning in ctx.warnings:
                event = self._warning_event(warning.record())
                if event is not None:
                    yield event
            for name, server in ctx.servers.items():
                if server.definition.scope != "project" or server.approval not in ("pending",):
                    continue
                async for event in self._approve(key, ctx, server, context):
                    yield event
            await self._start_all(key, ctx)
            for server in ctx.servers.values():
                for record in server.warnings:
                    event = self._warning_event(record)
                    if event is not None:
                        yield event
            status = self.status_event(ctx, context.task_id)
            if status is not None:
                yield status
            taken: set[str] = set()
            for server in ctx.servers.values():
                for name, tool in server.tools.items():
                    taken.add(name)
                    description = ctx.redactor.text(str(getattr(tool, "description", "") or name))[:1024]
                    schema = getattr(tool, "inputSchema", None) or {"type": "object", "properties": {}}
                    yield ToolOffer(name=name, tool=McpTool(self, key, server.definition.name, tool, name),
                                    description=f"[MCP {server.definition.name}] {description}",
                                    parameters=schema)

    async def _reconcile(self, ctx: ContextServers, definitions: Mapping[str, ServerDefinition]) -> None:
        for name in [n for n, s in ctx.servers.items()
                     if n not in definitions or definitions[n].fingerprint != s.definition.fingerprint]:
            await self._close_server(ctx.servers.pop(name))
        mode = getattr(self.config, "mcp_project_servers", "ask")
        for name, definition in definitions.items():
            if name in ctx.servers:
                continue
            server = ServerState(definition)
            if definition.scope == "project":
                server.approval = {"deny": "denied", "allow": "approved"}.get(mode, "pending")
                if server.approval == "denied":
                    server.state = "disabled"
            ctx.servers[name] = server

    async def _approve(self, key: tuple[str, str], ctx: ContextServers, server: ServerState,
                       context: ToolContext) -> AsyncIterator[Any]:
        """Ask the caller whether the workspace's server may start (a permission question), once per context."""
        kept = approval_key(key[0], key[1], server.definition.name, server.definition.fingerprint)
        remembered = self.approvals.get(kept)
        if remembered is None:
            d = server.definition
            tool_input: dict[str, Any] = {"server": d.name, "scope": "project", "transport": d.transport}
            if d.transport == "stdio":
                tool_input["command"] = Path(d.command).name
            else:
                tool_input["url"] = ctx.redactor.text(d.url.split("?", 1)[0])
            approval = ApproveProjectServer()
            call = ToolCall(f"{context.task_id or 'mcp'}-mcp-approve-{d.fingerprint}", approval.name, tool_input)
            async for event in run_tool(approval, call, context):
                yield event
            remembered = bool(call.allowed)
            await self.approvals.put(kept, remembered)  # on disk before the server starts or is refused
        server.approval = "approved" if remembered else "denied"
        if not remembered:
            server.state = "disabled"

    def _runnable(self, server: ServerState) -> bool:
        return server.approval in ("not_required", "approved")

    async def _start_all(self, key: tuple[str, str], ctx: ContextServers) -> None:
        timeout = float(getattr(self.config, "mcp_startup_timeout", 30.0))
        starting = []
        for server in ctx.servers.values():
            if not self._runnable(server):
                continue
            if server.state == "connected" and server.connection is not None:
                if await server.connection.ping(PING_TIMEOUT):
                    continue
                self._failed(ctx, server, "the server stopped answering")
            if server.state == "failed" and time.monotonic() < server.retry_at:
                continue
            if not self._room(key):
                server.state = "disabled"
                self._warn(ctx, server, "max_servers", "mcp-max-servers connections are open; not started")
                continue
            server.state = "pending"
            server.connection = Connection(server.definition, ctx.workspace)
            starting.append(self._start(ctx, server, timeout))
        if starting:
            await asyncio.gather(*starting)

    async def _start(self, ctx: ContextServers, server: ServerState, timeout: float) -> None:
        connection = server.connection
        assert connection is not None
        try:
            await connection.start(timeout)
        except ConnectionFailed as exc:
            self._failed(ctx, server, f"failed to start: {exc}")
            return
        server.state = "connected"
        server.warnings = [w for w in server.warnings if w.get("code") not in ("server_failed", "max_servers")]
        taken = {n for s in ctx.servers.values() if s is not server for n in s.tools}
        server.tools = {}
        for tool in connection.tools:
            name = public_name(server.definition.name, str(tool.name), taken)
            taken.add(name)
            server.tools[name] = tool

    def _room(self, key: tuple[str, str]) -> bool:
        """Whether one more connection may open; closes the least recently used idle context's if needed."""
        limit = int(getattr(self.config, "mcp_max_servers", 16))
        while self.open_connections() >= limit:
            victim = next((k for k, c in self.contexts.items() if k != key and c.active == 0
                           and any(s.connection is not None for s in c.servers.values())), None)
            if victim is None:
                return False
            self._close_context_soon(victim)
        return True

    def open_connections(self) -> int:
        return sum(1 for c in self.contexts.values() for s in c.servers.values() if s.connection is not None)

    def _failed(self, ctx: ContextServers, server: ServerState, message: str) -> None:
        """The server failed: reported, its connection dropped, its next start delayed by the backoff."""
        server.failures += 1
        delay = 0.0 if server.failures == 1 else min(BACKOFF_CAP, 2.0 ** (server.failures - 2))
        server.retry_at = time.monotonic() + delay
        server.state = "failed"
        server.tools = {}
        connection, server.connection = server.connection, None
        if connection is not None:
            detail = connection.error
            if detail and detail not in message:
                message = f"{message} ({detail})"
            asyncio.get_running_loop().create_task(connection.close())
        self._warn(ctx, server, "server_failed", message)
        logger.warning("MCP server %s (%s): %s", server.definition.name, server.definition.scope,
                       ctx.redactor.text(message))

    def _warn(self, ctx: ContextServers, server: ServerState, code: str, message: str) -> None:
        record = McpWarning(server.definition.name, code, ctx.redactor.text(message)[:500],
                            "mcp-servers" if server.definition.scope == "server" else
                            f"[CONFIG]/{USER_FILE}" if server.definition.scope == "user" else
                            f"[WORKSPACE]/{PROJECT_FILE}", server.definition.scope).record()
        server.warnings = [w for w in server.warnings if w.get("code") != code] + [record]

    # ------------------------------------------------------------------ what is published

    def _warning_event(self, record: Mapping[str, Any]) -> Progress | None:
        """The ``mcpWarning`` update of a warning not yet published by this runtime (``None``: it was)."""
        key = json.dumps(record, sort_keys=True)
        if key in self._published:
            return None
        self._published.add(key)
        return Progress({"mcpWarning": dict(record)}, text=f"MCP warning: {record['message']}")

    def status(self, ctx: ContextServers) -> dict[str, Any]:
        """The ``mcpStatus`` snapshot of a context (redacted)."""
        servers = []
        for name, server in sorted(ctx.servers.items()):
            d = server.definition
            connection = server.connection
            capabilities = dict(connection.capabilities) if connection is not None and server.state == "connected" \
                else {"tools": 0, "resources": 0, "prompts": 0}
            refresh = [ctx.redactor.text(e)[:300] for e in (connection.refresh_errors if connection else [])]
            servers.append({"name": name, "scope": d.scope, "transport": d.transport,
                            "connectionState": server.state,
                            "authState": "configured" if d.headers or d.env else "none",
                            "approvalState": server.approval, "capabilities": capabilities,
                            "refreshErrors": refresh, "warnings": list(server.warnings)})
        return {"servers": servers, "warnings": [w.record() for w in ctx.warnings]}

    def status_event(self, ctx: ContextServers, task_id: str) -> Progress | None:
        """The ``mcpStatus`` update when the status changed for this task (``None``: it did not)."""
        status = self.status(ctx)
        text = json.dumps(status, sort_keys=True)
        if self._status.get(task_id) == text:
            return None
        self._status[task_id] = text
        self._status.move_to_end(task_id)
        while len(self._status) > STATUS_MEMORY:
            self._status.popitem(last=False)
        return Progress({"mcpStatus": status})

    # ------------------------------------------------------------------ closing

    async def _close_server(self, server: ServerState) -> None:
        connection, server.connection = server.connection, None
        server.tools = {}
        if connection is not None:
            await connection.close()

    def _close_context_soon(self, key: tuple[str, str]) -> None:
        ctx = self.contexts.pop(key, None)
        if ctx is not None:
            for server in ctx.servers.values():
                connection, server.connection = server.connection, None
                if connection is not None:
                    asyncio.get_running_loop().create_task(connection.close())

    async def close_idle(self, now: float | None = None) -> int:
        """Close the servers of contexts idle for ``context-idle-timeout`` (as the kernel evicts them)."""
        now = time.monotonic() if now is None else now
        idle = [k for k, c in self.contexts.items() if c.active == 0 and not c.lock.locked()
                and now - c.last_used >= self.idle_timeout]
        for key in idle:
            ctx = self.contexts.pop(key)
            for server in ctx.servers.values():
                await self._close_server(server)
        return len(idle)

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="mcp-idle-sweeper")

    async def _sweep(self) -> None:
        interval = min(max(self.idle_timeout / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await self.close_idle()

    async def stop(self) -> None:
        """Close every server (the A2A server stops)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        contexts, self.contexts = list(self.contexts.values()), OrderedDict()
        await asyncio.gather(*(self._close_server(s) for c in contexts for s in c.servers.values()),
                             return_exceptions=True)


class ApproveProjectServer:
    """The permission question for a workspace's ``.mcp.json`` server: running it is running the workspace's code."""

    name = "mcp_project_server_approval"

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Any:
        from iac_code.api import Permission

        return Permission(is_read_only=False, operation={"purpose": "start an MCP server from the workspace"})

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> Any:
        from iac_code.api import ToolOutcome

        return ToolOutcome(result={"approved": True, "server": tool_input.get("server")})

