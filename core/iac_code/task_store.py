"""The kernel's task store: owner-scoped, mirrored to disk, with cached JSON views.

Implements a2a-sdk's ``TaskStore`` interface. Tasks live in memory (copied
on save and on get, like the SDK's copying store) and are mirrored to
``<persistence-dir>/tasks`` as one JSON snapshot per task. GetTask and ListTasks
are dominated by protobuf-to-JSON conversion, so each task keeps its converted
form until it changes. ListTasks orders by status timestamp, then task id,
both descending; its page tokens are HMAC-signed cursors, so a client cannot
forge or alter one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Message, Part, Role, Task, TaskState
from a2a.utils.errors import InvalidParamsError

from iac_code.jsonio import message_to_json
from iac_code.storage import JsonDirectory, SnapshotWriter, atomic_write, file_key, private_dir

logger = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 50
SNAPSHOT_FORMAT = "iac-code.task.v1"
INTERRUPTED_TEXT = "Task interrupted: the server stopped while this turn was running. Send the message again."
RUNNING_STATES = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


def _sort_key(task: Task) -> tuple[bool, int, str]:
    has_timestamp = task.status.HasField("timestamp")
    return has_timestamp, task.status.timestamp.ToNanoseconds() if has_timestamp else 0, task.id


@dataclass
class _Entry:
    task: Task
    key: tuple[bool, int, str]
    view: dict[str, Any] | None = None

    def as_view(self) -> dict[str, Any]:
        if self.view is None:
            self.view = message_to_json(self.task)
        return self.view


class PageTokens:
    """Opaque, tamper-evident ListTasks cursors (HMAC-SHA256, key kept on disk)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_dir(cls, directory: Path | None) -> PageTokens:
        if directory is None:
            return cls(secrets.token_bytes(32))
        path = directory / "page-token.key"
        try:
            key = path.read_bytes()
            if len(key) == 32:
                return cls(key)
        except OSError:
            pass
        key = secrets.token_bytes(32)
        atomic_write(path, key)
        return cls(key)

    def encode(self, key: tuple[bool, int, str]) -> str:
        body = base64.urlsafe_b64encode(json.dumps([key[0], key[1], key[2]], separators=(",", ":")).encode())
        mac = hmac.new(self._key, body, hashlib.sha256).digest()[:16]
        return (body + b"." + base64.urlsafe_b64encode(mac)).decode().replace("=", "")

    def decode(self, token: str) -> tuple[bool, int, str]:
        try:
            body_text, _, mac_text = token.partition(".")
            body = (body_text + "=" * (-len(body_text) % 4)).encode()
            mac = base64.urlsafe_b64decode(mac_text + "=" * (-len(mac_text) % 4))
            if not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).digest()[:16]):
                raise ValueError("bad signature")
            has_ts, ts, task_id = json.loads(base64.urlsafe_b64decode(body))
            if not isinstance(has_ts, bool) or not isinstance(ts, int) or not isinstance(task_id, str):
                raise ValueError("bad cursor")
            return has_ts, ts, task_id
        except (ValueError, binascii.Error, TypeError):
            raise InvalidParamsError(message="Invalid page token") from None


class KernelTaskStore(TaskStore):
    """In-memory, owner-scoped task store mirrored to JSON snapshots."""

    def __init__(self, directory: Path | None = None, writer: SnapshotWriter | None = None) -> None:
        self._tasks: dict[str, dict[str, _Entry]] = {}
        self._dir = JsonDirectory(directory / "tasks") if directory is not None else None
        self._writer = writer if self._dir is not None else None
        self._tokens = PageTokens.from_dir(private_dir(directory) if directory is not None else None)

    # ------------------------------------------------------------------ TaskStore

    async def save(self, task: Task, context: ServerCallContext) -> None:
        self._put(resolve_user_scope(context), task)

    def _put(self, owner: str, task: Task, *, persist: bool = True) -> None:
        stored = Task()
        stored.CopyFrom(task)
        self._tasks.setdefault(owner, {})[stored.id] = _Entry(stored, _sort_key(stored))
        if persist and self._writer is not None and self._dir is not None:
            self._writer.put(self._dir, file_key(owner, stored.id), lambda: _snapshot(owner, stored))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        entry = self._tasks.get(resolve_user_scope(context), {}).get(task_id)
        if entry is None:
            return None
        copy = Task()
        copy.CopyFrom(entry.task)
        return copy

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = resolve_user_scope(context)
        if self._tasks.get(owner, {}).pop(task_id, None) is not None and self._writer and self._dir:
            self._writer.remove(self._dir, file_key(owner, task_id))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page, next_token, total, size = self._page(params, context)
        return ListTasksResponse(tasks=[e.task for e in page], next_page_token=next_token,
                                 total_size=total, page_size=size)

    # ------------------------------------------------------------------ JSON views

    async def get_view(self, task_id: str, context: ServerCallContext) -> dict[str, Any] | None:
        """The task as camelCase JSON (``MessageToDict``), or ``None``. Do not mutate it."""
        entry = self._tasks.get(resolve_user_scope(context), {}).get(task_id)
        return entry.as_view() if entry is not None else None

    async def list_view(self, params: ListTasksRequest, context: ServerCallContext) -> dict[str, Any]:
        """ListTasks as JSON, from the cached views. Task dicts must not be mutated."""
        page, next_token, total, size = self._page(params, context)
        return {"tasks": [e.as_view() for e in page], "nextPageToken": next_token or "",
                "pageSize": size, "totalSize": total}

    def _page(self, params: ListTasksRequest, context: ServerCallContext) -> tuple[list[_Entry], str, int, int]:
        entries = list(self._tasks.get(resolve_user_scope(context), {}).values())
        if params.context_id:
            entries = [e for e in entries if e.task.context_id == params.context_id]
        if params.status:
            entries = [e for e in entries if e.task.status.state == params.status]
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToNanoseconds()
            entries = [e for e in entries if e.key[0] and e.key[1] >= after]
        entries.sort(key=lambda e: e.key, reverse=True)
        total = len(entries)
        start = 0
        if params.page_token:
            cursor = self._tokens.decode(params.page_token)
            start = next((i for i, e in enumerate(entries) if e.key < cursor), total)
        size = params.page_size or DEFAULT_PAGE_SIZE
        page = entries[start:start + size]
        next_token = self._tokens.encode(page[-1].key) if start + size < total and page else ""
        return page, next_token, total, size

    # ------------------------------------------------------------------ restart

    def restore(self) -> int:
        """Load every snapshot; turns that were running (or paused for a permission answer) when the
        process died become FAILED "Task interrupted"."""
        if self._dir is None:
            return 0
        loaded = 0
        for _, document in self._dir.load_all():
            owner, encoded = document.get("owner"), document.get("task")
            if document.get("format") != SNAPSHOT_FORMAT or not isinstance(owner, str) or not isinstance(encoded, str):
                logger.warning("Skipping foreign task snapshot in %s", self._dir.path.name)
                continue
            try:
                task = Task.FromString(base64.b64decode(encoded, validate=True))
            except Exception:
                logger.warning("Skipping unreadable task snapshot in %s", self._dir.path.name)
                continue
            if not task.id:
                continue
            interrupted = task.status.state in RUNNING_STATES or _paused_for_permission(task)
            if interrupted:
                _mark_interrupted(task)
            self._put(owner, task, persist=interrupted)
            loaded += 1
        return loaded

    def count(self) -> int:
        return sum(len(tasks) for tasks in self._tasks.values())


def _snapshot(owner: str, task: Task) -> dict[str, Any]:
    """The on-disk form: readable identity and state, plus the exact task as base64 protobuf.

    Protobuf (not MessageToDict) because converting every task to JSON in the
    writer took CPU from request handling; the fields beside it keep the files
    inspectable with ``jq``.
    """
    return {"format": SNAPSHOT_FORMAT, "owner": owner, "taskId": task.id, "contextId": task.context_id,
            "state": TaskState.Name(task.status.state), "task": base64.b64encode(task.SerializeToString()).decode()}


def _paused_for_permission(task: Task) -> bool:
    """An iac-code turn waiting for a permission answer: it was running, and its wait died with the process."""
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return False
    iac_code = task.metadata.fields.get("iac_code")
    permission = iac_code.struct_value.fields.get("permission") if iac_code is not None else None
    pending = permission.struct_value.fields.get("pending") if permission is not None else None
    return pending is not None and pending.bool_value


def _mark_interrupted(task: Task) -> None:
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    task.status.Clear()
    task.status.state = TaskState.TASK_STATE_FAILED
    task.status.timestamp.GetCurrentTime()
    task.status.message.CopyFrom(Message(
        message_id=f"{task.id}-restored", role=Role.ROLE_AGENT, task_id=task.id, context_id=task.context_id,
        parts=[Part(text=INTERRUPTED_TEXT)]))
    task.metadata.update({"iac_code": {"interrupted": True}})


