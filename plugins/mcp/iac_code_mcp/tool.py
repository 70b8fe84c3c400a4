"""The runtime tools: :class:`McpSource` (registered through ``iac_code_tools``; it offers each turn's MCP tools)
and :class:`McpTool` (one MCP server's tool, public name ``mcp__<server>__<tool>``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from iac_code.api import Permission, Progress, ToolContext, ToolOutcome

from iac_code_mcp.connection import ConnectionFailed

McpManager = Any  # iac_code_mcp.manager.McpManager (which imports this module)

RESULT_LIMIT = 100_000  # characters of a result kept for the model
CONNECTION_CLOSED = -32000


class McpSource:
    """Offers the MCP tools of a turn's context (never offered to a model itself)."""

    name = "mcp"

    def __init__(self, manager: McpManager) -> None:
        self.manager = manager

    def offered(self, context: ToolContext) -> bool:
        return False

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        return ToolOutcome(error="call an MCP tool by its public name (mcp__<server>__<tool>)")

    def offer_tools(self, context: ToolContext) -> AsyncIterator[Any]:
        return self.manager.prepare(context)


class McpTool:
    """One MCP tool: read-only (``readOnlyHint``) calls run without a question, the others ask
    (``effect: external_tool``); its progress notifications become ``mcpProgress``."""

    reports_progress = True

    def __init__(self, manager: McpManager, key: tuple[str, str], server: str, tool: Any, public: str) -> None:
        self.manager = manager
        self.key = key
        self.server = server
        self.tool = tool
        self.name = public
        annotations = getattr(tool, "annotations", None)
        self.read_only = bool(getattr(annotations, "readOnlyHint", False))
        self.destructive = getattr(annotations, "destructiveHint", None)

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        if self.read_only:
            return None
        operation = {"publicName": self.name, "originalServerName": self.server[:160],
                     "originalToolName": str(self.tool.name)[:160], "isReadOnly": False,
                     "isDestructive": self.destructive is not False}
        return Permission(is_read_only=False, operation=operation)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        manager = self.manager
        ctx = manager.contexts.get(self.key)
        server = ctx.servers.get(self.server) if ctx is not None else None
        if ctx is None or server is None or server.connection is None or server.state != "connected":
            return ToolOutcome(error=f"MCP server {self.server} is not connected")
        report = context.report or (lambda event: None)
        redactor = ctx.redactor
        original = str(self.tool.name)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            record: dict[str, Any] = {"status": "progress", "toolUseId": context.tool_use_id,
                                      "publicName": self.name, "originalServerName": self.server,
                                      "originalToolName": original, "progress": value}
            if total is not None:
                record["total"] = total
            if message:
                record["message"] = redactor.text(str(message))[:500]
            trace = {"status": "progress", "toolUseId": context.tool_use_id, "name": self.name,
                     "mcp": {"serverName": self.server, "toolName": original, "progress": value, "total": total,
                             "message": record.get("message")}}
            report(Progress({"tool": trace, "mcpProgress": record}, tool_trace=True))

        timeout = float(getattr(manager.config, "mcp_call_timeout", 120.0))
        ctx.active += 1
        try:
            result = await server.connection.call(original, dict(tool_input), timeout, progress)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            code = getattr(getattr(exc, "error", None), "code", None)
            if isinstance(exc, ConnectionFailed) or code == CONNECTION_CLOSED or server.connection is None \
                    or server.connection.broken:
                manager._failed(ctx, server, "the connection was lost during a call")
                for record in server.warnings:
                    event = manager._warning_event(record)
                    if event is not None:
                        report(event)
                status = manager.status_event(ctx, context.task_id)
                if status is not None:
                    report(status)
                return ToolOutcome(error=f"MCP server {self.server} failed during the call")
            if code == 408:
                return ToolOutcome(error=f"the MCP tool timed out after {timeout:g} s")
            message = redactor.text(str(getattr(getattr(exc, "error", None), "message", "") or type(exc).__name__))
            return ToolOutcome(error=f"the MCP tool failed: {message[:500]}")
        finally:
            ctx.active -= 1
            ctx.last_used = time.monotonic()
        texts: list[str] = []
        for item in result.content or []:
            if getattr(item, "type", "") == "text":
                texts.append(str(item.text))
            else:
                texts.append(f"[{getattr(item, 'type', 'content')}]")
        text = redactor.text("\n".join(texts))
        if result.isError:
            return ToolOutcome(error=f"the MCP tool failed: {text[:500] or 'no message'}")
        out: dict[str, Any] = {"server": self.server, "tool": original, "content": text[:RESULT_LIMIT]}
        if len(text) > RESULT_LIMIT:
            out["truncated"] = True
            out["length"] = len(text)
        structured = getattr(result, "structuredContent", None)
        if structured is not None and len(json.dumps(structured, default=str)) <= RESULT_LIMIT:
            out["structuredContent"] = redactor.value(structured)
        return ToolOutcome(result=out)
