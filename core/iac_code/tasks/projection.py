"""Safe mode's wire projection for the running server: the public roots of one response.

:class:`WireProjection` knows where a task's or context's workspace is (the context registry,
the task store) and the roots every response shares; :meth:`WireProjection.scope` gives the
projection of one call, whose roots are found from the ids its request and responses name.
The dispatcher applies it to every result and stream event (so every JSON-RPC and HTTP+JSON
framing gets it once); the gRPC binding, the push sender and the HTTP transport (plugin
routes) reach it as ``PluginContext.projection``. With safe mode off it changes nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope

from iac_code.security.auth import ANONYMOUS_PRINCIPAL, Principal, PrincipalUser
from iac_code.security.safe_mode import PathProjection, mentioned_ids, request_cwd, safe_mode

logger = logging.getLogger(__name__)


class ProjectionScope:
    """The projection of one call (or one push delivery): roots found once per id, reused per event."""

    def __init__(self, owner: WireProjection, principal: Principal | None, request: Any) -> None:
        self._owner = owner
        # None: no caller (a push delivery): the contexts named, whoever owns them
        self._context = ServerCallContext(user=PrincipalUser(principal)) if principal is not None else None
        self._scope = resolve_user_scope(self._context) if self._context is not None else None
        self._request = request
        self._seen: set[str] = set()
        self._workspaces: set[str] = set()
        self._projection: PathProjection | None = None

    async def _roots_for(self, value: Any) -> PathProjection:
        contexts, tasks = mentioned_ids(self._request, value)
        new_contexts = contexts - self._seen
        new_tasks = tasks - self._seen
        if self._projection is not None and not new_contexts and not new_tasks:
            return self._projection
        self._seen |= new_contexts | new_tasks
        if self._context is not None:
            for task_id in new_tasks:
                context_id = await self._owner.context_of_task(task_id, self._context)
                if context_id:
                    new_contexts.add(context_id)
        for context_id in new_contexts:
            if self._scope is None:
                self._workspaces.update(self._owner.cwds_of_context(context_id))
                continue
            cwd = self._owner.cwd_of(self._scope, context_id)
            if cwd:
                self._workspaces.add(cwd)
        roots = list(self._owner.static_roots)
        if self._workspaces:
            roots += self._workspaces
        else:  # no known task or context: the request's cwd, else the process's
            roots.append(request_cwd(self._request) or os.getcwd())
        self._projection = PathProjection(roots)
        return self._projection

    async def project(self, value: Any) -> Any:
        """``value`` (JSON) with proven paths projected."""
        if value is None:
            return value
        return (await self._roots_for(value)).value(value)

    async def stream(self, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Each event of ``events`` projected (the source is closed when the stream ends)."""
        try:
            async for event in events:
                yield await self.project(event)
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


class WireProjection:
    """The server's safe-mode projection: ``scope(principal, request)`` per call, ``None`` work when off."""

    def __init__(self, static_roots: Sequence[str], cwd_of: Callable[[str, str], str | None],
                 task_store: Any, cwds_of_context: Callable[[str], list[str]] | None = None) -> None:
        self.static_roots = tuple(static_roots)
        self.cwd_of = cwd_of
        self.cwds_of_context = cwds_of_context or (lambda context_id: [])
        self._task_store = task_store

    @staticmethod
    def enabled() -> bool:
        """Whether safe mode is on now (``IAC_CODE_A2A_SAFE_MODE``, read per use)."""
        return safe_mode()

    def scope(self, principal: Principal | None = ANONYMOUS_PRINCIPAL, request: Any = None) -> ProjectionScope:
        """The projection of one call by ``principal`` whose params (or other request JSON) are ``request``;
        ``principal=None`` for output no caller asked for (push deliveries): roots from the contexts named."""
        return ProjectionScope(self, principal, request)

    async def project(self, value: Any, principal: Principal | None = ANONYMOUS_PRINCIPAL,
                      request: Any = None) -> Any:
        """``value`` projected when safe mode is on, else ``value`` itself."""
        if not safe_mode():
            return value
        return await self.scope(principal, request).project(value)

    async def context_of_task(self, task_id: str, context: ServerCallContext) -> str | None:
        try:
            task = await self._task_store.get(task_id, context)
        except Exception:  # an id that is not a task id (a message id, say): no root from it
            logger.debug("No task %r for the projection", task_id, exc_info=True)
            return None
        return getattr(task, "context_id", None) or None
