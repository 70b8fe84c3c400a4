"""The kernel's task store: owner-scoped, durable, with a bounded cache of JSON views.

Implements a2a-sdk's ``TaskStore`` interface. Every change is mirrored to disk
twice: appended to the group-commit journal (:mod:`iac_code.tasks.journal`), which
acknowledgements wait for, and written as one JSON snapshot per task under
``<persistence-dir>/tasks`` (lazily, coalesced). Memory holds a small index
row per task (owner, id, context, state, status timestamp) for ListTasks and
at most ``task-cache-size`` whole tasks, least recently used first out; an
evicted task is read back from its snapshot. A task whose snapshot is not yet
written stays cached until it is. GetTask and ListTasks are dominated by
protobuf-to-JSON conversion, so cached tasks keep their converted form until
they change. ListTasks orders by status timestamp, then task id, both
descending; its page tokens are HMAC-signed cursors, so a client cannot forge
or alter one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask, TaskVersion, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InternalError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.tasks.journal import Journal, JournalError
from iac_code.base.jsonio import message_to_json
from iac_code.base.storage import (
    JsonDirectory,
    SnapshotWriter,
    atomic_write,
    file_key,
    fsync_dir,
    private_dir,
    sync_filesystem,
)
from iac_code.tasks.task_events import Event, LocalEventLog, version_number
from iac_code.tasks.task_index import Query, Row, TaskIndex

logger = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 50
DEFAULT_CACHE_SIZE = 1000
SNAPSHOT_FORMAT = "iac-code.task.v1"
INTERRUPTED_TEXT = "Task interrupted: the server stopped while this turn was running. Send the message again."
NOT_STORED = "The task could not be stored durably; its state is not guaranteed to survive a restart."
RUNNING_STATES = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})

SortKey = tuple[bool, int, str]


def sort_key(task: Task) -> SortKey:
    """ListTasks order (descending): has a status timestamp, the timestamp in ns, the task id."""
    has_timestamp = task.status.HasField("timestamp")
    return has_timestamp, task.status.timestamp.ToNanoseconds() if has_timestamp else 0, task.id


def _row(owner: str, task: Task) -> Row:
    has_timestamp, timestamp, _ = sort_key(task)
    return Row(owner, task.id, task.context_id, task.status.state, has_timestamp, timestamp)


@dataclass(slots=True)
class _Entry:
    task: Task
    seq: int  # the journal's (store-wide) sequence number of this state
    version: int = 0  # the task's own write counter: the seq of its stream events (iac_code.tasks.task_events)
    view: dict[str, Any] | None = None

    def as_view(self) -> dict[str, Any]:
        if self.view is None:
            self.view = message_to_json(self.task)
        return self.view


class _Document:
    """A task's on-disk document, built once (in a writer thread) for the journal and the snapshot."""

    __slots__ = ("owner", "task", "seq", "version", "_document")

    def __init__(self, owner: str, task: Task, seq: int, version: int) -> None:
        self.owner, self.task, self.seq, self.version = owner, task, seq, version
        self._document: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self._document is None:
            self._document = _snapshot(self.owner, self.task, self.seq, self.version)
        return self._document


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
    """Owner-scoped task store: journal + snapshots on disk, an index and a bounded cache in memory."""

    def __init__(self, directory: Path | None = None, writer: SnapshotWriter | None = None, *,
                 cache_size: int = DEFAULT_CACHE_SIZE, events: LocalEventLog | None = None,
                 instrumentation: Any = None) -> None:
        self.events = events if events is not None else LocalEventLog()
        self._index = TaskIndex(private_dir(directory) if directory is not None else None)
        # Tasks whose snapshot is written (evictable, least recently used first) and tasks whose
        # snapshot is not yet written (kept until it is: their file would be stale).
        self._cache: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._dirty: dict[tuple[str, str], _Entry] = {}
        self._dirty_keys: dict[str, tuple[str, str]] = {}
        self._cache_size = cache_size
        # Snapshots are written without fsync: the journal holds every change durably and
        # syncs the file system before it forgets one (segment retirement, start-up).
        self._dir = JsonDirectory(directory / "tasks", synced=writer is None) if directory is not None else None
        self._writer = writer if self._dir is not None else None
        self._journal = (Journal(directory / "journal", checkpoint=writer.barrier, instrumentation=instrumentation)
                         if directory is not None and writer is not None else None)
        if self._writer is not None:
            self._writer.on_batch.append(self._written)
        self._rewrote = False
        self._tokens = PageTokens.from_dir(private_dir(directory) if directory is not None else None)

    # ------------------------------------------------------------------ TaskStore

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self.save_event(task, None, context)

    async def save_event(self, task: Task, event: Event | None, context: ServerCallContext,
                   prev_version: TaskVersion | None = None) -> TaskVersion:
        """Store ``task`` as its next version and log ``event`` (``None``: a write with no event) under it.

        With ``prev_version`` the write is refused (``ConcurrentTaskModificationError``) unless the
        stored task is still at that version, as a2a-sdk's ``VersionedTaskStore`` does.
        """
        owner = resolve_user_scope(context)
        if self._writer is not None and self._cached((owner, task.id)) is None:
            await self._writer.room()  # a task not in memory yet: wait while too many snapshots are queued
        if prev_version is not None:
            # The writer read the task (so it is cached) or is creating it: no look-up on disk.
            cached = self._cached((owner, task.id))
            version = version_number(prev_version)
            if cached is not None and cached.version != version:
                raise ConcurrentTaskModificationError(task.id)
        else:
            current = self._entry(owner, task.id)
            version = current.version if current is not None else 0
        self._put(owner, task, version=version + 1)
        if isinstance(event, Task):  # the TaskManager goes on changing the task it was given
            logged = Task()
            logged.CopyFrom(event)
            event = logged
        self.events.append(owner, task.id, version + 1, event)
        return TaskVersion(version + 1)

    async def get_versioned(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task with its version (the seq of its latest stream event), or ``None``."""
        entry = self._entry(resolve_user_scope(context), task_id)
        if entry is None:
            return None
        copy = Task()
        copy.CopyFrom(entry.task)
        return StoredTask(copy, TaskVersion(entry.version))

    async def events_after(self, task_id: str, after: int, context: ServerCallContext) -> list[VersionedEvent] | None:
        """The logged events of the task after version ``after``; ``None`` when not all are retained."""
        owner = resolve_user_scope(context)
        entry = self._entry(owner, task_id)
        return self.events.since(owner, task_id, after, entry.version if entry is not None else 0)

    def _put(self, owner: str, task: Task, *, persist: bool = True, seq: int | None = None,
             version: int = 0) -> None:
        stored = Task()
        stored.CopyFrom(task)
        self._index.put(_row(owner, stored))
        slot = (owner, stored.id)
        if seq is None:
            seq = self._journal.next_seq() if self._journal is not None else 0
        entry = _Entry(stored, seq, version)
        if not persist or self._writer is None or self._dir is None:
            self._cache[slot] = entry  # without a disk the cache is the store
            self._cache.move_to_end(slot)
            return
        key = file_key(owner, stored.id)
        self._cache.pop(slot, None)
        self._dirty[slot] = entry
        self._dirty_keys[key] = slot
        document = _Document(owner, stored, seq, version)
        if self._journal is not None:
            self._journal.record(slot, document)
        self._writer.put(self._dir, key, document)

    def _cached(self, slot: tuple[str, str]) -> _Entry | None:
        entry = self._dirty.get(slot)
        if entry is None:
            entry = self._cache.get(slot)
            if entry is not None:
                self._cache.move_to_end(slot)
        return entry

    def _entry(self, owner: str, task_id: str) -> _Entry | None:
        """The cached task, or the task read back from its snapshot."""
        slot = (owner, task_id)
        entry = self._cached(slot)
        if entry is not None:
            return entry
        if self._dir is None or not self._index.contains(owner, task_id):
            return None
        loaded = _load(self._dir, owner, task_id)
        if loaded is None:
            return None
        entry = _Entry(*loaded)
        self._evict(room=1)
        self._cache[slot] = entry
        return entry

    def _written(self, slots: list[tuple[JsonDirectory, str]]) -> None:
        """Snapshots of these tasks are on disk: they become evictable (unless changed again since)."""
        assert self._writer is not None and self._dir is not None
        for directory, key in slots:
            if directory is not self._dir or self._writer.is_pending(directory, key):
                continue
            slot = self._dirty_keys.pop(key, None)
            entry = self._dirty.pop(slot, None) if slot is not None else None
            if slot is not None and entry is not None:
                self._cache[slot] = entry
                self._cache.move_to_end(slot)
        self._evict()

    def _evict(self, room: int = 0) -> None:
        """Unload the least recently used written tasks beyond ``cache_size`` (minus ``room``)."""
        if self._dir is None:
            return
        while self._cache and len(self._cache) + room > self._cache_size:
            self._cache.popitem(last=False)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        entry = self._entry(resolve_user_scope(context), task_id)
        if entry is None:
            return None
        copy = Task()
        copy.CopyFrom(entry.task)
        return copy

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = resolve_user_scope(context)
        if not self._index.contains(owner, task_id):
            return
        self._index.remove(owner, task_id)
        self._cache.pop((owner, task_id), None)
        self._dirty.pop((owner, task_id), None)
        self.events.drop(owner, task_id)
        if self._writer is not None and self._dir is not None:
            if self._journal is not None:
                seq = self._journal.next_seq()
                self._journal.record((owner, task_id), lambda: {
                    "format": SNAPSHOT_FORMAT, "seq": seq, "owner": owner, "taskId": task_id, "deleted": True})
            self._writer.remove(self._dir, file_key(owner, task_id))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page, next_token, total, size = self._page(params, context)
        return ListTasksResponse(tasks=[e.task for e in page], next_page_token=next_token,
                                 total_size=total, page_size=size)

    # ------------------------------------------------------------------ durability

    async def settle(self, task_ids: Iterable[str], context: ServerCallContext) -> None:
        """Wait until the current state of each task is durable: call before telling a client."""
        if self._journal is None:
            return
        owner = resolve_user_scope(context)
        seq = max((entry.seq for task_id in task_ids
                   if (entry := self._dirty.get((owner, task_id)) or self._cache.get((owner, task_id))) is not None),
                  default=0)
        try:
            await self._journal.reach(seq)
        except JournalError:
            raise InternalError(message=NOT_STORED) from None

    async def sync(self) -> None:
        """Wait until every change made so far is durable."""
        if self._journal is not None:
            try:
                await self._journal.reach(self._journal.last_seq)
            except JournalError:
                raise InternalError(message=NOT_STORED) from None

    async def get_shared(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task once durable, or ``None``: the store's own proto, not a copy (the gRPC GetTask path
        serialises it at once). Do not mutate it."""
        entry = self._entry(resolve_user_scope(context), task_id)
        if entry is None:
            return None
        if self._journal is not None and self._journal.durable < self._journal.last_seq:
            await self.settle((task_id,), context)  # something is still on its way to disk: maybe this task
        return entry.task

    def peek_shared(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task from memory when nothing is on its way to disk, else ``None`` (then ask
        :meth:`get_shared`); the store's own proto: do not mutate it."""
        journal = self._journal
        if journal is not None and journal.durable < journal.last_seq:
            return None
        entry = self._cached((resolve_user_scope(context), task_id))
        return None if entry is None else entry.task

    # ------------------------------------------------------------------ JSON views

    async def get_view(self, task_id: str, context: ServerCallContext) -> dict[str, Any] | None:
        """The task as camelCase JSON (``MessageToDict``), once durable, or ``None``. Do not mutate it."""
        entry = self._entry(resolve_user_scope(context), task_id)
        if entry is None:
            return None
        await self.settle((task_id,), context)
        return entry.as_view()

    async def list_view(self, params: ListTasksRequest, context: ServerCallContext) -> dict[str, Any]:
        """ListTasks as JSON, from the cached views, once durable. Task dicts must not be mutated."""
        page, next_token, total, size = self._page(params, context)
        await self.settle((e.task.id for e in page), context)
        return {"tasks": [e.as_view() for e in page], "nextPageToken": next_token or "",
                "pageSize": size, "totalSize": total}

    def _page(self, params: ListTasksRequest, context: ServerCallContext) -> tuple[list[_Entry], str, int, int]:
        owner = resolve_user_scope(context)
        size = params.page_size or DEFAULT_PAGE_SIZE
        query = Query(owner=owner, context_id=params.context_id, state=params.status, limit=size,
                      timestamp_after=params.status_timestamp_after.ToNanoseconds()
                      if params.HasField("status_timestamp_after") else None,
                      before=self._tokens.decode(params.page_token) if params.page_token else None)
        keys, total = self._index.page(query)
        chosen = keys[:size]
        page = [entry for key in chosen if (entry := self._entry(owner, key[2])) is not None]
        next_token = self._tokens.encode(chosen[-1]) if len(keys) > size else ""
        return page, next_token, total, size

    # ------------------------------------------------------------------ restart

    def restore(self) -> int:
        """Rebuild the index from the snapshots and the journal (the higher ``seq`` wins).

        Turns that were running (or paused for a permission answer) when the
        process died become FAILED "Task interrupted". Snapshots the journal
        changed are rewritten before the journal is emptied, so the restored
        state is durable before the first request is served.
        """
        self._index.open()
        if self._dir is None:
            return 0
        journaled: dict[tuple[str, str], dict[str, Any]] = {}
        if self._journal is not None:
            for document in self._journal.replay():
                slot = _slot_of(document, allow_deleted=True)
                if slot is not None and document["seq"] > _seq_of(journaled.get(slot, {})):
                    journaled[slot] = document
        highest = max((d["seq"] for d in journaled.values()), default=0)
        loaded = 0
        touched = False
        # One snapshot at a time, so start-up memory does not grow with the number of tasks.
        for _, document in self._dir.load_all():
            slot = _slot_of(document)
            if slot is None:
                logger.warning("Skipping foreign task snapshot in %s", self._dir.path.name)
                continue
            seq = _seq_of(document)
            highest = max(highest, seq)
            newer = journaled.get(slot)
            if newer is not None and newer["seq"] > seq:
                continue
            journaled.pop(slot, None)
            loaded += self._restore_one(slot, document, rewrite=False)
        if self._journal is not None:
            self._journal.start_after(highest)
        for slot, document in journaled.items():
            if document.get("deleted"):
                self._dir.delete(file_key(*slot))
            else:
                loaded += self._restore_one(slot, document, rewrite=True)
            touched = True
        self._index.flush()
        if touched or self._rewrote:
            fsync_dir(self._dir.path)
        if self._journal is not None:
            sync_filesystem(self._dir.path)  # the snapshots hold what the journal held
            self._journal.clear()
        return loaded

    def _restore_one(self, slot: tuple[str, str], document: dict[str, Any], *, rewrite: bool) -> int:
        """Index one restored task; a task cut by the crash is marked interrupted and rewritten."""
        assert self._dir is not None
        owner, task_id = slot
        task = _decode(document)
        if task is None or task.id != task_id:
            logger.warning("Skipping unreadable task snapshot in %s", self._dir.path.name)
            return 0
        interrupted = is_interrupted(task)
        version = _version_of(document) + (1 if interrupted else 0)
        if interrupted:
            mark_interrupted(task)
        if interrupted or rewrite:  # keeps its seq: later changes are numbered above every restored one
            self._dir.write(file_key(owner, task_id), _snapshot(owner, task, _seq_of(document), version),
                            sync_dir=False)
            self._rewrote = True
        self._index.put(_row(owner, task))
        return 1

    async def close(self) -> None:
        """Make every change durable (server shutdown)."""
        if self._journal is not None:
            await self._journal.close()
        self._index.close()

    def count(self) -> int:
        return self._index.count()

    def cached(self) -> int:
        """Whole tasks in memory (at most ``cache_size`` plus those whose snapshot is being written)."""
        return len(self._cache) + len(self._dirty)


def _slot_of(document: dict[str, Any], *, allow_deleted: bool = False) -> tuple[str, str] | None:
    owner, task_id = document.get("owner"), document.get("taskId")
    if document.get("format") != SNAPSHOT_FORMAT or not isinstance(owner, str) or not isinstance(task_id, str):
        return None
    if document.get("deleted"):
        return (owner, task_id) if allow_deleted else None
    return (owner, task_id) if isinstance(document.get("task"), str) else None


def _seq_of(document: dict[str, Any]) -> int:
    seq = document.get("seq")
    return seq if isinstance(seq, int) else 0


def _version_of(document: dict[str, Any]) -> int:
    version = document.get("version")
    return version if isinstance(version, int) else 0


def _decode(document: dict[str, Any]) -> Task | None:
    try:
        return Task.FromString(base64.b64decode(document["task"], validate=True))
    except Exception:
        return None


def _load(directory: JsonDirectory, owner: str, task_id: str) -> tuple[Task, int, int] | None:
    document = directory.read(file_key(owner, task_id))
    if document is None or _slot_of(document) != (owner, task_id):
        return None
    task = _decode(document)
    if task is None or task.id != task_id:
        logger.warning("Skipping unreadable task snapshot in %s", directory.path.name)
        return None
    return task, _seq_of(document), _version_of(document)


def _snapshot(owner: str, task: Task, seq: int, version: int) -> dict[str, Any]:
    """The on-disk form: readable identity and state, plus the exact task as base64 protobuf.

    Protobuf (not MessageToDict) because converting every task to JSON in the
    writer took CPU from request handling; the fields beside it keep the files
    inspectable with ``jq``.
    """
    return {"format": SNAPSHOT_FORMAT, "seq": seq, "version": version, "owner": owner, "taskId": task.id,
            "contextId": task.context_id,
            "state": TaskState.Name(task.status.state), "task": base64.b64encode(task.SerializeToString()).decode()}


def is_interrupted(task: Task) -> bool:
    """Whether ``task`` was cut mid-turn when its server stopped: running, or paused for an answer (a durable
    permission wait that is already suspended was not cut: its turn had ended)."""
    return task.status.state in RUNNING_STATES or (_paused_for_permission(task) and not is_suspended(task))


def _iac_code(task: Task) -> Any:
    iac_code = task.metadata.fields.get("iac_code")
    return iac_code.struct_value.fields if iac_code is not None else {}


def _paused_for_permission(task: Task) -> bool:
    """An iac-code turn waiting for a permission answer: it was running, and its wait died with the process."""
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return False
    permission = _iac_code(task).get("permission")
    pending = permission.struct_value.fields.get("pending") if permission is not None else None
    return pending is not None and pending.bool_value


def _permission_wait(task: Task) -> tuple[str, bool]:
    """``metadata.iac_code.permissionWait`` of a task paused for permission: its status and whether it resumes."""
    if not _paused_for_permission(task):
        return "", False
    wait = _iac_code(task).get("permissionWait")
    fields = wait.struct_value.fields if wait is not None else {}
    status = fields["status"].string_value if "status" in fields else ""
    return status, "resumable" in fields and fields["resumable"].bool_value


def is_suspended(task: Task) -> bool:
    """A task whose permission wait is suspended: INPUT_REQUIRED with ``permissionWait.status: suspended``;
    the answer resumes it (since-0.13 §4)."""
    status, resumable = _permission_wait(task)
    return status == "suspended" and resumable


def interruption(task: Task) -> tuple[Task, TaskStatusUpdateEvent]:
    """A copy of ``task`` as its cut turn leaves it, and the status update that says so (for its event log):
    FAILED "Task interrupted", or, for a durable permission wait, INPUT_REQUIRED with the wait suspended."""
    marked = Task()
    marked.CopyFrom(task)
    mark_interrupted(marked)
    event = TaskStatusUpdateEvent(task_id=marked.id, context_id=marked.context_id, status=marked.status)
    if marked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        event.metadata.update({"iac_code": MessageToDict(marked.metadata)["iac_code"]})
    else:
        event.metadata.update({"iac_code": {"interrupted": True}})
    return marked, event


def mark_interrupted(task: Task) -> None:
    """Make ``task`` FAILED "Task interrupted" (its turn died with its server); a turn paused on a durable
    permission wait (``permissionWait.resumable``) stays INPUT_REQUIRED, its wait ``suspended``."""
    if _permission_wait(task)[1]:
        task.status.timestamp.GetCurrentTime()
        iac_code = MessageToDict(task.metadata).get("iac_code", {})
        iac_code["permissionWait"] = {"status": "suspended", "resumable": True}
        task.metadata.update({"iac_code": iac_code})
        return
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    task.status.Clear()
    task.status.state = TaskState.TASK_STATE_FAILED
    task.status.timestamp.GetCurrentTime()
    task.status.message.CopyFrom(Message(
        message_id=f"{task.id}-restored", role=Role.ROLE_AGENT, task_id=task.id, context_id=task.context_id,
        parts=[Part(text=INTERRUPTED_TEXT)]))
    task.metadata.update({"iac_code": {"interrupted": True}})
