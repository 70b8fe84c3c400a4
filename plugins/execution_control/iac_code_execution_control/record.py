"""One context's execution: its phase, its wire snapshot and its durable file.

The file is ``<persistence root>/execution-control/<contextId stem>.json`` (the stem rule of the task
and context snapshots: the id verbatim when it is a plain file name, else ``a2aid~`` + url-safe base64),
written with ``iac_code.api.atomic_write`` (temporary file, fsync, rename, owner-only). It holds the
snapshot as acknowledged plus what the server needs to keep its promises after a restart: the owner,
the reconnect timeout and the request ids already answered.

With a shared state backend (``task-store: redis``) the same document is a shared record
(:class:`SharedExecutions`, kind ``execution-control``, keyed by context id), so every node reads the
execution any node wrote.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iac_code.api import SharedRecords, atomic_write, private_dir

logger = logging.getLogger(__name__)

RUNNING, PAUSING, PAUSE_COMMITTING, PAUSED = "running", "pausing", "pause_committing", "paused"
RESUMING, TERMINATING, TERMINATED = "resuming", "terminating", "terminated"
PHASES = (RUNNING, PAUSING, PAUSE_COMMITTING, PAUSED, RESUMING, TERMINATING, TERMINATED)
# While the execution is in one of these, a turn that reaches a safe point stays there.
HOLDING = frozenset({PAUSING, PAUSE_COMMITTING, PAUSED, RESUMING, TERMINATING, TERMINATED})
# ... and no new task may start on the context.
REFUSING = frozenset({PAUSING, PAUSE_COMMITTING, PAUSED, RESUMING, TERMINATING})
PAUSE_PHASES = frozenset({PAUSING, PAUSE_COMMITTING, PAUSED})
SCHEMA_VERSION = 1
KEPT_REQUESTS = 64  # request ids remembered per execution (idempotency)
DIRECTORY = "execution-control"

_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                       *(f"LPT{i}" for i in range(1, 10))})


def file_stem(identifier: str) -> str:
    """The id verbatim when it is a safe file name on every system, else ``a2aid~`` + url-safe base64."""
    if _PLAIN.fullmatch(identifier) and not identifier.endswith(".") \
            and identifier.split(".")[0].upper() not in _RESERVED:
        return identifier
    return "a2aid~" + base64.urlsafe_b64encode(identifier.encode("utf-8")).rstrip(b"=").decode("ascii")


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(16)}"


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Execution:
    """The execution of one context: the wire snapshot's fields, and the live state of its turn."""

    context_id: str
    owner: str
    task_id: str
    execution_id: str
    server_instance_id: str
    phase: str = RUNNING
    pause_id: str | None = None
    pause_reason: str | None = None
    connection_epoch: int | None = None
    revision: int = 1
    persisted_revision: int = 0
    execution_status: str = "working"
    expires_at: float | None = None
    termination_reason: str | None = None
    commit_error: str | None = None
    backup: dict[str, Any] = field(default_factory=lambda: {"status": "not_requested"})
    external_operations: list[dict[str, Any]] = field(default_factory=list)
    release_ready: bool = False
    reconnect_timeout: float | None = None
    requests: OrderedDict[str, str] = field(default_factory=OrderedDict)  # requestId -> digest
    resume_request: str | None = None
    # the live turn (not persisted)
    turn_running: bool = False
    parked: int = 0  # turns held at a safe point
    waiting: bool = False  # the turn waits for a permission answer
    in_tool: bool = False
    pending_operations: dict[str, dict[str, Any]] = field(default_factory=dict)  # toolUseId -> operation
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    turn_done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    deadline: asyncio.Task[None] | None = field(default=None, repr=False)
    terminator: asyncio.Task[None] | None = field(default=None, repr=False)
    last_used: float = field(default_factory=time.monotonic, repr=False)
    _cached: tuple[tuple[int, int], dict[str, Any]] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.turn_done.set()

    @property
    def live(self) -> bool:
        """Whether this server is doing something with the execution now: a turn of it runs here, a request
        holds its lock, or its termination is in progress (its in-memory state is then the current one)."""
        return (self.turn_running or self.parked > 0 or self.lock.locked()
                or (self.terminator is not None and not self.terminator.done()))

    # ------------------------------------------------------------------ state

    def touch(self) -> None:
        """Something in the snapshot changed: a new revision, and every waiter looks again."""
        self.revision += 1
        self.last_used = time.monotonic()
        self.notify()

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def idle(self, now: float, after: float) -> bool:
        """Whether nothing refers to the execution any more: running or terminated, no turn, no request, no
        termination in progress, unchanged for ``after`` seconds (it may leave memory; its file stays)."""
        return (self.phase in (RUNNING, TERMINATED) and not self.turn_running and self.parked == 0
                and not self.lock.locked() and (self.terminator is None or self.terminator.done())
                and now - self.last_used >= after)

    @property
    def all_parked(self) -> bool:
        """Nothing of the execution runs: no turn, or its turn holds at a safe point or waits for an answer."""
        return not self.turn_running or self.parked > 0 or self.waiting

    def remember(self, request_id: str, content: str) -> None:
        self.requests[request_id] = content
        self.requests.move_to_end(request_id)
        while len(self.requests) > KEPT_REQUESTS:
            self.requests.popitem(last=False)

    def blockers(self) -> list[dict[str, Any]]:
        if self.all_parked:
            return []
        return [{"kind": "tool_call" if self.in_tool else "turn", "count": 1}]

    def snapshot(self) -> dict[str, Any]:
        """The wire snapshot (§7), also ``metadata.iac_code.executionControl`` on the context's tasks."""
        cached = self._cached
        if cached is not None and cached[0] == (self.revision, self.persisted_revision):
            return cached[1]
        body = {
            "contextId": self.context_id, "taskId": self.task_id, "executionId": self.execution_id,
            "serverInstanceId": self.server_instance_id, "pauseId": self.pause_id, "pauseReason": self.pause_reason,
            "connectionEpoch": self.connection_epoch, "revision": self.revision,
            "persistedRevision": self.persisted_revision, "phase": self.phase, "pauseComplete": self.phase == PAUSED,
            "executionStatus": self.execution_status, "streamAvailable": self.turn_running,
            "blockers": self.blockers(), "expiresAt": iso(self.expires_at),
            "terminationReason": self.termination_reason, "commitError": self.commit_error,
            "backup": dict(self.backup), "externalOperations": [dict(o) for o in self.external_operations],
            "releaseReady": self.release_ready,
        }
        self._cached = ((self.revision, self.persisted_revision), body)
        return body

    # ------------------------------------------------------------------ file

    def document(self, phase: str | None = None) -> dict[str, Any]:
        """What the file holds; ``phase``: the state being committed (written as the next revision)."""
        snapshot = dict(self.snapshot())
        if phase is not None and phase != self.phase:
            snapshot.update(phase=phase, pauseComplete=phase == PAUSED, revision=self.revision + 1)
        snapshot["persistedRevision"] = snapshot["revision"]
        snapshot["streamAvailable"] = False
        snapshot["blockers"] = []
        return {"schemaVersion": SCHEMA_VERSION, "owner": self.owner, "snapshot": snapshot,
                "expiresAtEpoch": self.expires_at, "reconnectTimeoutSeconds": self.reconnect_timeout,
                "requests": dict(self.requests), "resumeRequest": self.resume_request}

    @classmethod
    def from_document(cls, data: Any, server_instance_id: str) -> Execution | None:
        if not isinstance(data, dict) or data.get("schemaVersion") != SCHEMA_VERSION:
            return None
        snap = data.get("snapshot")
        owner = data.get("owner")
        if not isinstance(snap, dict) or not isinstance(owner, str):
            return None
        try:
            execution = cls(
                context_id=str(snap["contextId"]), owner=owner, task_id=str(snap["taskId"]),
                execution_id=str(snap["executionId"]), server_instance_id=server_instance_id,
                phase=snap["phase"] if snap.get("phase") in PHASES else RUNNING,
                pause_id=snap.get("pauseId"), pause_reason=snap.get("pauseReason"),
                connection_epoch=snap.get("connectionEpoch"), revision=int(snap["revision"]),
                persisted_revision=int(snap["revision"]), execution_status=str(snap.get("executionStatus", "working")),
                expires_at=data.get("expiresAtEpoch"), termination_reason=snap.get("terminationReason"),
                backup=dict(snap.get("backup") or {"status": "not_requested"}),
                external_operations=[dict(o) for o in snap.get("externalOperations") or []],
                release_ready=bool(snap.get("releaseReady")), reconnect_timeout=data.get("reconnectTimeoutSeconds"),
                requests=OrderedDict((str(k), str(v)) for k, v in (data.get("requests") or {}).items()),
                resume_request=data.get("resumeRequest"))
        except (KeyError, TypeError, ValueError):
            return None
        return execution


class ExecutionFiles:
    """The durable executions of one server, one file per context."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / DIRECTORY

    def file(self, context_id: str) -> Path:
        return self.path / f"{file_stem(context_id)}.json"

    async def write(self, execution: Execution, phase: str | None = None) -> bool:
        """Make the execution's current state durable (with ``phase``: the state it is committing to, whose
        revision the caller records); ``False`` (logged) when it could not be."""
        data = json.dumps(execution.document(phase), sort_keys=True, ensure_ascii=False).encode("utf-8")
        target = self.file(execution.context_id)
        revision = execution.revision if phase is None else execution.persisted_revision
        started = time.monotonic()

        def write() -> None:
            private_dir(self.path)
            atomic_write(target, data)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            logger.error("Execution state of a context could not be written: %s", exc.strerror or type(exc).__name__)
            return False
        execution.persisted_revision = max(execution.persisted_revision, revision)
        logger.debug("execution state written in %.1f ms", (time.monotonic() - started) * 1000)
        return True

    def read(self, context_id: str, server_instance_id: str) -> Execution | None:
        """The execution of ``context_id`` from its file, if it has a readable one."""
        try:
            data = json.loads(self.file(context_id).read_bytes())
        except (OSError, ValueError):
            return None
        execution = Execution.from_document(data, server_instance_id)
        return execution if execution is not None and execution.context_id == context_id else None

    async def fetch(self, context_id: str, server_instance_id: str) -> Execution | None:
        """:meth:`read`, off the event loop."""
        return await asyncio.to_thread(self.read, context_id, server_instance_id)

    async def load_all(self, server_instance_id: str) -> list[Execution]:
        """:meth:`load`, off the event loop."""
        return await asyncio.to_thread(self.load, server_instance_id)

    def load(self, server_instance_id: str) -> list[Execution]:
        """Every readable execution file (an unreadable one is logged and left alone)."""
        if not self.path.is_dir():
            return []
        found = []
        for path in sorted(self.path.glob("*.json")):
            try:
                data = json.loads(path.read_bytes())
            except (OSError, ValueError):
                logger.warning("An execution state file is unreadable; it is ignored")
                continue
            execution = Execution.from_document(data, server_instance_id)
            if execution is None:
                logger.warning("An execution state file has an unknown shape; it is ignored")
                continue
            found.append(execution)
        return found


class SharedExecutions:
    """The executions of every node as shared records (``task-store: redis``): one record per context, the
    document :class:`ExecutionFiles` would write. Same interface as :class:`ExecutionFiles`."""

    KIND = DIRECTORY

    def __init__(self, records: SharedRecords) -> None:
        self.records = records

    async def write(self, execution: Execution, phase: str | None = None) -> bool:
        """Make the execution's current state durable in the shared store; ``False`` (logged) when it could not be."""
        document = execution.document(phase)
        revision = execution.revision if phase is None else execution.persisted_revision
        try:
            await self.records.put(self.KIND, execution.context_id, document)
        except (ConnectionError, OSError) as exc:
            logger.error("Execution state of a context could not be written to the shared store: %s",
                         type(exc).__name__)
            return False
        execution.persisted_revision = max(execution.persisted_revision, revision)
        return True

    async def fetch(self, context_id: str, server_instance_id: str) -> Execution | None:
        """The execution of ``context_id`` as the shared store has it (``None``: none); ``ConnectionError`` when
        the store is unreachable."""
        data = await self.records.get(self.KIND, context_id)
        stored = data.get("snapshot") if isinstance(data, dict) else None
        if isinstance(stored, dict) and isinstance(stored.get("serverInstanceId"), str):
            server_instance_id = stored["serverInstanceId"]  # the server that last ran it: the same on every node
        execution = Execution.from_document(data, server_instance_id)
        return execution if execution is not None and execution.context_id == context_id else None

    async def load_all(self, server_instance_id: str) -> list[Execution]:
        """Not used with shared records: every node reads an execution when it needs it."""
        return []
