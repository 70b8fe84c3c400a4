"""One connection to one MCP server, held open by its own task (the SDK's transports are anyio task groups that
must be entered and left in the same task): started, used for calls by any task, closed on request.

A stdio server is started with only the environment the SDK deems safe plus its configured ``env``; its stderr
goes nowhere (it may print its secrets). A call that is cancelled sends the MCP ``notifications/cancelled`` for its
request before it gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

from iac_code_mcp.definitions import ServerDefinition

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


class _MaskUrls(logging.Filter):
    """Masks URL credentials in the HTTP client's log lines (httpx logs each request's URL at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from iac_code_mcp.redaction import Redactor

        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001
            return True
        masked = Redactor().text(text)
        if masked != text:
            record.msg, record.args = masked, ()
        return True


_MASK = _MaskUrls()


def _mask_http_logs() -> None:
    for name in ("httpx", "httpcore", "mcp.client.streamable_http", "mcp.client.sse"):
        target = logging.getLogger(name)
        if _MASK not in target.filters:
            target.addFilter(_MASK)


class ConnectionFailed(Exception):
    """The server could not be started, or its connection broke (the message is not yet redacted)."""


class Connection:
    """A live session with one server (see the module docstring)."""

    def __init__(self, definition: ServerDefinition, workspace: str) -> None:
        self.definition = definition
        self.workspace = workspace
        self.session: Any = None
        self.tools: list[Any] = []
        self.capabilities: dict[str, int] = {"tools": 0, "resources": 0, "prompts": 0}
        self.refresh_errors: list[str] = []
        self.error: str | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.broken = False

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and self.session is not None and not self.broken

    async def start(self, timeout: float) -> None:
        """Start the server and list its tools; :class:`ConnectionFailed` when it does not come up in time."""
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.definition.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            await self.close()
            raise ConnectionFailed(f"the server did not start within {timeout:g} s") from None
        if self.session is None:
            await self.close()
            raise ConnectionFailed(self.error or "the server closed its connection")

    async def _run(self) -> None:
        d = self.definition
        try:
            async with AsyncExitStack() as stack:
                from mcp import ClientSession

                if d.transport == "stdio":
                    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

                    cwd = d.cwd or self.workspace or None
                    if cwd and self.workspace and not os.path.isabs(cwd):
                        cwd = os.path.join(self.workspace, cwd)
                    params = StdioServerParameters(command=d.command, args=list(d.args),
                                                   env={**get_default_environment(), **d.env}, cwd=cwd)
                    errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
                    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                elif d.transport == "sse":
                    _mask_http_logs()
                    from mcp.client.sse import sse_client

                    read, write = await stack.enter_async_context(sse_client(d.url, headers=dict(d.headers)))
                else:
                    from mcp.client.streamable_http import streamablehttp_client

                    _mask_http_logs()
                    read, write, _ = await stack.enter_async_context(
                        streamablehttp_client(d.url, headers=dict(d.headers)))
                session = await stack.enter_async_context(ClientSession(read, write))
                init = await session.initialize()
                await self._refresh(session, init)
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - any failure of the server is its state, never ours
            self.error = _describe(exc)
            logger.debug("MCP server %s: connection ended: %s", d.name, type(exc).__name__)
        finally:
            self.session = None
            self.broken = True
            self._ready.set()

    async def _refresh(self, session: Any, init: Any) -> None:
        caps = getattr(init, "capabilities", None)
        tools: list[Any] = []
        cursor = None
        while True:
            page = await session.list_tools(cursor) if cursor else await session.list_tools()
            tools.extend(page.tools)
            cursor = getattr(page, "nextCursor", None)
            if not cursor or len(tools) > 1000:
                break
        self.tools = tools
        self.capabilities["tools"] = len(tools)
        for kind, method in (("resources", "list_resources"), ("prompts", "list_prompts")):
            if caps is None or getattr(caps, kind, None) is None:
                continue
            try:
                listed = await getattr(session, method)()
                self.capabilities[kind] = len(getattr(listed, kind, []) or [])
            except Exception as exc:  # noqa: BLE001
                self.refresh_errors.append(f"{kind}: {_describe(exc)}")

    async def ping(self, timeout: float) -> bool:
        """Whether the server still answers."""
        session = self.session
        if session is None or self.broken:
            return False
        try:
            await asyncio.wait_for(session.send_ping(), timeout)
            return True
        except Exception:  # noqa: BLE001
            self.broken = True
            return False

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float,
                   progress: ProgressCallback | None) -> Any:
        """``tools/call``; cancelled, it tells the server (``notifications/cancelled``) before it gives up."""
        session = self.session
        if session is None or self.broken:
            raise ConnectionFailed("the server is not connected")
        request_id = session._request_id  # the id call_tool's request takes (read before its first await)
        try:
            return await session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=timeout),
                                           progress_callback=progress)
        except asyncio.CancelledError:
            await self._cancel(session, request_id, "the task was cancelled")
            raise
        except Exception as exc:
            if getattr(getattr(exc, "error", None), "code", None) == 408:  # mcp-call-timeout: the server stops too
                await self._cancel(session, request_id, "the call timed out")
            raise

    @staticmethod
    async def _cancel(session: Any, request_id: Any, reason: str) -> None:
        """Send ``notifications/cancelled`` for a request (best effort, at most 5 s)."""
        from mcp import types

        with contextlib.suppress(Exception):
            note = types.CancelledNotification(params=types.CancelledNotificationParams(requestId=request_id,
                                                                                        reason=reason))
            await asyncio.shield(asyncio.wait_for(session.send_notification(types.ClientNotification(note)), 5))

    async def close(self) -> None:
        """Close the session and stop the server (idempotent)."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 10)
            except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


def _describe(exc: BaseException) -> str:
    """A short description of a failure (raw: the caller redacts it)."""
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _describe(inner)
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
