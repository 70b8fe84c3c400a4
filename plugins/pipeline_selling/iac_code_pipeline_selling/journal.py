"""The pipeline event envelope (§2.4) and the per-context journal every event is written to before it is published.

One journal per context: JSON lines under ``<state_dir>/pipeline/<key>.jsonl``, owner-only, each line appended
and fsynced before the event is yielded; in memory only when the server persists nothing. ``sequence`` is per
context, strictly increasing and gapless across turns and restarts (the last one is read back from the file).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iac_code.api import SESSION_ID_FIELD, fsync_dir, private_dir, session_id_of

SCHEMA_VERSION = "1.0"
JOURNALS_IN_MEMORY = 256  # contexts whose journals stay read in; others are read back from disk when asked
EXTENSION_URI = "urn:iac-code:a2a:pipeline-events:v1"
SCOPES = ("pipeline", "step", "candidate", "candidate_step", "stack", "interrupt")
STATUSES = ("working", "input_required", "completed", "failed", "canceled")


def camel(key: str) -> str:
    """``step_id`` → ``stepId`` (keys already camel-cased stay as they are)."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _error_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {("errorId" if k == "error_id" else k): _error_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_error_ids(v) for v in value]
    return value


def camel_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The §2.4 rule for ``data``: top-level keys camel-cased, ``error_id`` → ``errorId`` at any depth."""
    return {camel(k): _error_ids(v) for k, v in data.items()}


# Lifecycle events a run publishes at most once per identity (:func:`once_key`): a step or candidate step redone
# after a crash (kill -9 between journaling its event and recording it in the run's state) publishes nothing twice.
ONCE_TYPES = frozenset({
    "pipeline_started", "step_started", "step_completed", "step_failed", "candidate_started", "candidate_completed",
    "candidate_failed", "candidate_step_started", "candidate_step_completed", "candidate_step_failed",
    "artifact_created", "pipeline_warning", "pipeline_completed", "pipeline_canceled", "pipeline_failed",
    "pipeline_handoff_ready", "rollback_completed", "candidate_restart_requested", "stack_current_changed",
    "cleanup_started", "cleanup_completed", "cleanup_failed",
})


def once_key(event: Mapping[str, Any]) -> tuple[str, ...] | None:
    """What makes a lifecycle event the same one again: its run, type and the run ids of its step, candidate and
    candidate step (attempts are in those ids; a retried step is a new event). ``None`` for other events."""
    if event.get("eventType") not in ONCE_TYPES:
        return None
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    return (str(event.get("pipelineRunId", "")), str(event["eventType"]),
            str((event.get("step") or {}).get("runId", "")), str((event.get("candidate") or {}).get("runId", "")),
            str((event.get("candidateStep") or {}).get("runId", "")), str(data.get("stepId", "")),
            str(data.get("code", "")), str(data.get("backupGeneration", "")), str(data.get("interruptId", "")),
            str(data.get("cleanupId", "")), str(data.get("action", "")), str(data.get("stackId", "")))


def torn_pair(event: Mapping[str, Any]) -> bool:
    """Whether ``event``, the journal's last, is a ``backup_committed`` whose committed publication (journaled with
    it in one write, right after it) is missing: what a write torn between the two leaves."""
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    return (event.get("eventType") == "backup_committed"
            and data.get("committedSequence") == event.get("sequence", 0) + 1)


def now_iso() -> str:
    """Now, ISO-8601 UTC with milliseconds and a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_event_id() -> str:
    """``evt-<32 hex>``."""
    return f"evt-{uuid.uuid4().hex}"


class Journal:
    """One context's events: appended durably (when ``path`` is set) and kept in memory for the state endpoint."""

    def __init__(self, context_id: str, path: Path | None) -> None:
        self.context_id = context_id
        self.path = path
        self.events: list[dict[str, Any]] = []
        self.lock = asyncio.Lock()
        self.users = 0  # publishers holding or waiting for the lock: the journal is not evicted meanwhile
        if path is not None and path.exists():
            self.events = self._read(path)
        self.published: dict[tuple[str, ...], dict[str, Any]] = {}  # once_key → the event journaled for it
        for event in self.events:
            self._remember(event)

    def _remember(self, event: dict[str, Any]) -> None:
        key = once_key(event)
        if key is not None:
            self.published.setdefault(key, event)

    @staticmethod
    def _read(path: Path) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        valid = before_last = 0
        with path.open("rb") as handle:
            data = handle.read()
        offset = 0
        for line in data.split(b"\n"):
            end = offset + len(line) + 1
            if line.strip():
                try:
                    event = json.loads(line)
                except ValueError:
                    break  # a torn last line (kill -9 mid-append): everything before it stands
                if not isinstance(event, dict) or not isinstance(event.get("sequence"), int):
                    break
                events.append(event)
                before_last, valid = valid, min(end, len(data))
            offset = end
        if events and torn_pair(events[-1]):  # the first half of a pair whose second half was lost: torn too
            events.pop()
            valid = before_last
        if valid < len(data):  # drop the torn tail so the next append starts on a fresh line
            with contextlib.suppress(OSError), path.open("r+b") as handle:
                handle.truncate(valid)
        return events

    @property
    def last_sequence(self) -> int:
        """The sequence of the last journaled event (0 before the first)."""
        return self.events[-1]["sequence"] if self.events else 0

    def append(self, event: dict[str, Any]) -> None:
        """Write ``event`` durably (one fsynced JSON line), then remember it. Runs in a worker thread."""
        self.append_many([event])

    def append_many(self, events: list[dict[str, Any]]) -> None:
        """Write ``events`` durably in one write and one fsync (a kill -9 keeps all or, torn, the ones before the
        torn line), then remember them. Runs in a worker thread."""
        if self.path is not None:
            line = b"".join(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
                            for event in events)
            created = not self.path.exists()
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                fsync_dir(self.path.parent)
        for event in events:
            self.events.append(event)
            self._remember(event)

    def after(self, sequence: int) -> list[dict[str, Any]]:
        """The events with a sequence greater than ``sequence``."""
        return [e for e in self.events if e["sequence"] > sequence]


class JournalStore:
    """Every context's journal, under ``<state_dir>/pipeline`` (memory only when ``state_dir`` is ``None``).

    At most :data:`JOURNALS_IN_MEMORY` journals stay read in (least recently used go first, never one being
    written); a journal on disk is read back when its context comes again. Without a state directory
    nothing is evicted: the journals are all there is.
    """

    def __init__(self, state_dir: Path | None, limit: int = JOURNALS_IN_MEMORY) -> None:
        self.directory = private_dir(state_dir / "pipeline") if state_dir is not None else None
        self._journals: OrderedDict[str, Journal] = OrderedDict()
        self._limit = limit

    def _path(self, context_id: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(context_id.encode("utf-8")).hexdigest()[:40] + ".jsonl")

    def journal(self, context_id: str) -> Journal:
        """The context's journal, read back from disk on first use."""
        journal = self._journals.get(context_id)
        if journal is None:
            journal = self._journals[context_id] = Journal(context_id, self._path(context_id))
            self._evict()
        else:
            self._journals.move_to_end(context_id)
        return journal

    def _evict(self) -> None:
        if self.directory is None:
            return
        for context_id in list(self._journals):
            if len(self._journals) <= self._limit:
                return
            if not self._journals[context_id].users and context_id != next(reversed(self._journals)):
                del self._journals[context_id]

    def existing(self, context_id: str) -> Journal | None:
        """The context's journal when it has any event, else ``None``."""
        if context_id not in self._journals:
            path = self._path(context_id)
            if path is None or not path.exists():
                return None
        journal = self.journal(context_id)
        return journal if journal.events else None

    @contextlib.asynccontextmanager
    async def locked(self, context_id: str) -> AsyncIterator[Journal]:
        """The context's journal with its lock held: nothing else is journaled meanwhile (for a publication that
        must know its sequence before it is journaled, e.g. one gated by a critical backup)."""
        journal = self.journal(context_id)
        journal.users += 1
        try:
            async with journal.lock:
                yield journal
        finally:
            journal.users -= 1

    async def publish(self, context_id: str, build: Callable[[int], dict[str, Any]],
                      on_event: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Number, journal, hand on and return one event, all under the journal's lock (so ``on_event`` sees the
        events in sequence order): ``build(sequence)`` makes the envelope, ``on_event`` publishes it.

        A lifecycle event the journal already holds (same :func:`once_key`: a step redone after a crash) is
        neither journaled nor published again; the journaled one is returned."""
        async with self.locked(context_id) as journal:
            event = build(journal.last_sequence + 1)
            key = once_key(event)
            if key is not None and key in journal.published:
                return journal.published[key]
            await asyncio.to_thread(journal.append, event)
            on_event(event)
            return event


def envelope(sequence: int, *, event_type: str, scope: str, status: str | None, data: Mapping[str, Any],
             run_id: str, task_id: str, context_id: str, pipeline_name: str,
             extra: Mapping[str, Any] | None = None, verbatim: bool = False) -> dict[str, Any]:
    """One §2.4 envelope; ``extra`` adds ``step``, ``candidate``, ``candidateStep``, ``input``, ``artifact``.

    ``verbatim``: ``data`` goes as given (a shape the spec spells key by key, e.g. ``deployment_confirmation``)
    instead of having its top-level keys camel-cased."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    event: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION, "extensionUri": EXTENSION_URI, "eventId": new_event_id(),
        "sequence": sequence, "createdAt": now_iso(), "eventType": event_type, "scope": scope,
        "pipelineRunId": run_id, "taskId": task_id, "contextId": context_id, "pipelineName": pipeline_name,
    }
    if context_id:  # "when known"
        event[SESSION_ID_FIELD] = session_id_of(context_id)
    if status is not None:
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        event["status"] = status
    event["data"] = dict(data) if verbatim else camel_data(data)
    if extra:
        event.update(extra)
    return event
