"""The kernel's task store: a2a-sdk's in-memory store plus cached JSON views.

GetTask is dominated by protobuf-to-JSON conversion of the task (its
history grows with every status message). The store keeps the converted form
of each task until the task changes, so repeated reads cost a dict lookup.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import Task
from google.protobuf.json_format import MessageToDict

DEFAULT_VIEW_CACHE_SIZE = 4096


class KernelTaskStore(InMemoryTaskStore):
    """Owner-scoped in-memory task store with an LRU cache of JSON task views."""

    def __init__(self, view_cache_size: int = DEFAULT_VIEW_CACHE_SIZE) -> None:
        super().__init__()
        self._views: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._view_cache_size = view_cache_size

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        self._views.pop((resolve_user_scope(context), task.id), None)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await super().delete(task_id, context)
        self._views.pop((resolve_user_scope(context), task_id), None)

    async def get_view(self, task_id: str, context: ServerCallContext) -> dict[str, Any] | None:
        """The task as camelCase JSON (``MessageToDict``), or ``None``. Do not mutate it."""
        key = (resolve_user_scope(context), task_id)
        view = self._views.get(key)
        if view is not None:
            self._views.move_to_end(key)
            return view
        task = await super().get(task_id, context)
        if task is None:
            return None
        view = MessageToDict(task)
        self._views[key] = view
        if len(self._views) > self._view_cache_size:
            self._views.popitem(last=False)
        return view
