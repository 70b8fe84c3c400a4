"""Durable permission waits (since-0.13 §4): the checkpoint a paused permission writes, and its phases.

Before a resumable permission question is published (a runtime with ``resume_turn`` that set
:attr:`~iac_code.agents.runtime.PermissionRequest.continuation`), the executor writes a *boundary*:
``<persistence-dir>/permission-waits/pwb_<32 hex>.json`` (owner-only, atomic), or the shared backend's
record with ``task-store: redis``. It holds the correlation ids, the caller (``owner``, ``principalRef``,
``principalKind``, ``region``), ``permissionClass`` (``normal`` | ``pipeline``), the ``payloadDigest``
of the tool call, the runtime's ``continuationFrame``, what the turn was (prompt, workspace, language,
metadata without credentials, the text said so far, the context's session at the question), ``phase``,
``generation`` (grows with every write, compare-and-set), the deadlines and the ``decision``.

Phases: ``WAITING`` → (resident deadline) ``TIMEOUT_GRACE`` → (grace over) ``SUSPENDING`` →
``SUSPENDED`` (grace 0: straight to ``SUSPENDING``); a live answer moves it to ``RESOLVED``; an answer
to a suspended boundary claims it ``RESTORING`` and the resumed turn makes it ``RESOLVED``;
``CANCELED`` when the task is cancelled. A boundary whose owner is gone (a restart, a dead node) is
reconciled to ``SUSPENDED``.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.utils.errors import InvalidParamsError

from iac_code.agents.runtime import PermissionRequest, TurnRequest
from iac_code.agents.tool_metadata import SECRET_NAME
from iac_code.base.cluster import PermissionWaitRecords
from iac_code.base.storage import atomic_write, private_dir, read_private_file
from iac_code.tasks.inputs import REGION_KEY, TURN_SECRET_KEYS

logger = logging.getLogger(__name__)

WAITING = "WAITING"
TIMEOUT_GRACE = "TIMEOUT_GRACE"
SUSPENDING = "SUSPENDING"
SUSPENDED = "SUSPENDED"
RESTORING = "RESTORING"
RESOLVED = "RESOLVED"
CANCELED = "CANCELED"
LIVE_PHASES = frozenset({WAITING, TIMEOUT_GRACE, SUSPENDING})
OPEN_PHASES = LIVE_PHASES | {SUSPENDED, RESTORING}
SCHEMA_VERSION = 1
IDENTITY_SCHEMA = 1
DIRECTORY = "permission-waits"
RETAIN_SECONDS = 7 * 24 * 3600  # resolved and cancelled boundaries answer repeated answers this long

SUSPENDED_WAIT = {"status": "suspended", "resumable": True}
WAITING_WAIT = {"status": "waiting", "resumable": True}

_INVALID = "permission_resume_invalid: "
UNAVAILABLE = _INVALID + "suspended permission is unavailable."
CONFLICTS_CHECKPOINT = _INVALID + "permission response conflicts with checkpoint."
CONFLICTS_RECEIPT = _INVALID + "permission decision conflicts with receipt."
CONFLICTS_RECOVERY = _INVALID + "permission decision conflicts with active recovery."
REQUEST_CHANGED = _INVALID + "canonical permission request changed."
CONTEXT_CHANGED = _INVALID + "permission_task_context_changed"
OWNER_CHANGED = _INVALID + "permission_task_owner_changed"
LEGACY_IDENTITY = _INVALID + "legacy_permission_identity"
TASK_CONTEXT_MISMATCH = "input_response_mismatch: permission task context changed."


def invalid(message: str) -> InvalidParamsError:
    """The ``-32602`` of a refused recovery (its text is one of this module's constants)."""
    return InvalidParamsError(message=message)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the form digests are taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def payload_digest(tool_name: str, tool_use_id: str, tool_input: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical JSON of the tool call (name, tool use id, input)."""
    text = canonical_json({"toolName": tool_name, "toolUseId": tool_use_id, "input": dict(tool_input)})
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_digest(request: PermissionRequest) -> str:
    return payload_digest(request.tool_name, request.tool_use_id, request.input)


def public_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's ``metadata.iac_code`` without credentials or per-turn keys: what a checkpoint may keep."""
    return {k: v for k, v in metadata.items() if k not in TURN_SECRET_KEYS and not SECRET_NAME.search(str(k))}


def is_open(record: Mapping[str, Any]) -> bool:
    return record.get("phase") in OPEN_PHASES


class WaitSuspended(Exception):  # noqa: N818 - control flow inside the executor, never leaves it
    """Raised out of a permission wait that was suspended: the live turn ends (the task stays INPUT_REQUIRED)."""


@dataclass
class Resumption:
    """A claimed (``RESTORING``) boundary ready to resume: the rebuilt turn, the runtime's first event (the
    permission request of the paused call, already checked against the checkpoint) and the rest of its events."""

    record: dict[str, Any]
    turn: TurnRequest
    request: PermissionRequest
    events: AsyncIterator[Any]


# --------------------------------------------------------------------------- the records


class LocalPermissionWaits(PermissionWaitRecords):
    """Boundaries as files ``<persistence-dir>/permission-waits/pwb_<32 hex>.json`` (read once at start-up)."""

    def __init__(self, directory: Path | None) -> None:
        self._dir = directory
        self._records: dict[str, dict[str, Any]] = {}
        self._by_task: dict[str, set[str]] = {}
        self._open: dict[tuple[str, str], set[str]] = {}  # (owner, context) -> open boundary ids
        self._lock = asyncio.Lock()

    def _index(self, record: dict[str, Any]) -> None:
        boundary = str(record["boundaryId"])
        self._records[boundary] = record
        self._by_task.setdefault(str(record.get("taskId")), set()).add(boundary)
        key = (str(record.get("owner")), str(record.get("contextId")))
        if is_open(record):
            self._open.setdefault(key, set()).add(boundary)
        elif boundary in self._open.get(key, ()):
            self._open[key].discard(boundary)
            if not self._open[key]:
                del self._open[key]

    def open(self, now: float | None = None) -> int:
        """Load every boundary; forget resolved and cancelled ones older than :data:`RETAIN_SECONDS`."""
        if self._dir is None or not self._dir.is_dir():
            return 0
        now = time.time() if now is None else now
        for path in sorted(self._dir.glob("pwb_*.json")):
            try:
                data = read_private_file(path)
                record = json.loads(data) if data is not None else None
            except (OSError, ValueError):
                logger.warning("Skipping an unreadable permission checkpoint in %s", DIRECTORY)
                continue
            if not isinstance(record, dict) or record.get("boundaryId") != path.stem:
                logger.warning("Skipping a foreign permission checkpoint in %s", DIRECTORY)
                continue
            if not is_open(record) and now - float(record.get("updatedAt") or 0) > RETAIN_SECONDS:
                path.unlink(missing_ok=True)
                continue
            self._index(record)
        return len(self._records)

    def all(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(r) for r in self._records.values()]

    async def of_task(self, task_id: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(self._records[b]) for b in sorted(self._by_task.get(task_id, ()))]

    async def open_in_context(self, owner: str, context_id: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(self._records[b]) for b in sorted(self._open.get((owner, context_id), ()))]

    async def write(self, record: dict[str, Any], expected_generation: int | None) -> bool:
        async with self._lock:
            boundary = str(record["boundaryId"])
            current = self._records.get(boundary)
            if (current is None) != (expected_generation is None) or (
                    current is not None and current.get("generation") != expected_generation):
                return False
            stored = copy.deepcopy(record)
            if self._dir is not None:
                data = json.dumps(stored, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
                directory = self._dir

                def put() -> None:
                    private_dir(directory)
                    atomic_write(directory / f"{boundary}.json", data)

                await asyncio.to_thread(put)
            self._index(stored)
            return True


# --------------------------------------------------------------------------- the kernel's side


class PermissionWaits:
    """The kernel's durable permission waits: the records, the timeouts and the phase moves."""

    def __init__(self, records: PermissionWaitRecords, *, resident: float | None, grace: float,
                 node_id: str = "") -> None:
        self.records = records
        self.resident = resident
        self.grace = grace
        self.node_id = node_id

    @property
    def local(self) -> LocalPermissionWaits | None:
        return self.records if isinstance(self.records, LocalPermissionWaits) else None

    async def checkpoint(self, request: PermissionRequest, turn: TurnRequest, *, input_id: str, owner: str,
                         text: str, runtime: str) -> dict[str, Any]:
        """Write the ``WAITING`` boundary of ``request`` (durable when this returns)."""
        now = time.time()
        region = turn.metadata.get(REGION_KEY)
        record: dict[str, Any] = {
            "schemaVersion": SCHEMA_VERSION, "boundaryId": f"pwb_{uuid.uuid4().hex}",
            "taskId": turn.task_id, "contextId": turn.context_id, "inputId": input_id,
            "toolUseId": request.tool_use_id, "toolName": request.tool_name,
            "identitySchema": IDENTITY_SCHEMA, "owner": owner,
            "principalRef": "caller:" + hashlib.sha256(owner.encode("utf-8")).hexdigest(),
            "principalKind": "caller", "region": region if isinstance(region, str) else "",
            "permissionClass": "pipeline" if turn.run_mode == "pipeline" else "normal",
            "payloadDigest": request_digest(request), "continuationFrame": request.continuation,
            "runtime": runtime, "node": self.node_id,
            "turn": {"prompt": turn.prompt, "cwd": turn.cwd, "language": turn.language, "channel": turn.channel,
                     "manifest": [dict(e) for e in turn.manifest], "metadata": public_metadata(turn.metadata),
                     "runMode": turn.run_mode, "pipelineName": turn.pipeline_name, "text": text},
            "session": copy.deepcopy(turn.session),
            "phase": WAITING, "generation": 1, "decision": None, "recovered": False,
            "createdAt": now, "updatedAt": now,
            "residentDeadline": now + self.resident if self.resident is not None else None,
            "graceDeadline": now + self.resident + self.grace if self.resident is not None else None,
        }
        if not await self.records.write(record, None):  # a fresh id: never happens
            raise RuntimeError("permission checkpoint id collision")
        return record

    async def move(self, record: Mapping[str, Any], phase: str, **changes: Any) -> dict[str, Any] | None:
        """The boundary moved to ``phase`` (with ``changes``), or ``None`` when it changed meanwhile."""
        moved = {**copy.deepcopy(dict(record)), **changes, "phase": phase,
                 "generation": int(record["generation"]) + 1, "updatedAt": time.time()}
        if not await self.records.write(moved, int(record["generation"])):
            return None
        return moved

    async def find(self, task_id: str, input_id: str) -> dict[str, Any] | None:
        return next((r for r in await self.records.of_task(task_id) if r.get("inputId") == input_id), None)

    async def open_in_context(self, owner: str, context_id: str) -> list[dict[str, Any]]:
        return await self.records.open_in_context(owner, context_id)

    async def cancel_task(self, task_id: str) -> None:
        """Every open boundary of a cancelled task becomes ``CANCELED``."""
        for record in await self.records.of_task(task_id):
            while record is not None and is_open(record):
                if await self.move(record, CANCELED) is not None:
                    break
                record = next((r for r in await self.records.of_task(task_id)
                               if r["boundaryId"] == record["boundaryId"]), None)

    async def reconcile(self) -> int:
        """Start-up (this process owns its directory): every open boundary has lost its owner → ``SUSPENDED``."""
        local = self.local
        if local is None:
            return 0
        moved = 0
        for record in local.all():
            if record.get("phase") in LIVE_PHASES | {RESTORING}:
                if await self.move(record, SUSPENDED, decision=None) is not None:
                    moved += 1
        return moved


def restored_turn(record: Mapping[str, Any], *, history: tuple[Mapping[str, str], ...], session: dict[str, Any],
                  metadata: Mapping[str, Any], llm_headers: Mapping[str, str]) -> TurnRequest:
    """The turn a boundary was taken in, for ``resume_turn``: its own fields, the context's ``history`` and
    ``session`` (already restored to the boundary's), its metadata with the answer's ``metadata`` over it
    (credentials are never checkpointed: an answer that needs them brings them)."""
    turn = record["turn"]
    return TurnRequest(
        context_id=str(record["contextId"]), task_id=str(record["taskId"]), prompt=str(turn.get("prompt", "")),
        cwd=str(turn.get("cwd", "")), language=str(turn.get("language") or "en"),
        channel=str(turn.get("channel") or "unknown"),
        manifest=tuple(e for e in turn.get("manifest") or () if isinstance(e, Mapping)),
        history=history, session=session, metadata={**dict(turn.get("metadata") or {}), **dict(metadata)},
        run_mode=str(turn.get("runMode") or "normal"), pipeline_name=str(turn.get("pipelineName") or ""),
        llm_headers=llm_headers)


def restore_session(session: dict[str, Any], record: Mapping[str, Any]) -> None:
    """Put the context's session back as it was at the question (``session`` is the context's own dict)."""
    session.clear()
    session.update(copy.deepcopy(dict(record.get("session") or {})))


def default_directory(state_dir: Path | None) -> Path | None:
    return state_dir / DIRECTORY if state_dir is not None else None
