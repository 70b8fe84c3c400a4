"""Per-task event sequence numbers and the bounded logs that make streams resumable.

Every write of a task gets the next version of that task (1, 2, 3, ... for its
whole life, across turns and restarts). A write caused by an event (a status or
artifact update, the task itself) is recorded in the task's event log under that
version; a write without one (the next turn's user message added to the history)
records a placeholder, so a log always holds a contiguous run of versions and a
reader can tell whether it still holds everything after a given one.

Each streamed event carries its version: in ``metadata.iac_code.seq`` (every
transport) and as the SSE ``id:``. A client that lost its stream calls
SubscribeToTask with ``Last-Event-ID: <seq>`` (or ``metadata.iac_code.resumeAfter``)
and gets exactly the events after it, then the live ones. This module holds the
shared pieces: the in-memory log of one node (the local store's), stamping, and
reading the resume position from a call.

a2a-sdk's cluster types (``TaskVersion``, ``VersionedEvent``) carry the versions,
so a shared store can implement its ``TaskEventStream`` with the same numbers.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from typing import Any

from a2a.server.cluster import TaskVersion, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError

from iac_code.protocol.dispatcher import RAW_PARAMS_KEY

Event = Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent

DEFAULT_RETAINED_EVENTS = 512
DEFAULT_RETAINED_TASKS = 256
SEQ_FIELD = "seq"
RESUME_FIELD = "resumeAfter"
LAST_EVENT_ID = "last-event-id"
INVALID_RESUME = "Invalid resume position: Last-Event-ID and metadata.iac_code.resumeAfter take an event seq (>= 0)."


def version_number(version: TaskVersion) -> int:
    """The integer a kernel store wraps in a ``TaskVersion`` (0 for ``MISSING``)."""
    value = version._value  # noqa: SLF001 - a2a-sdk leaves the value to the store that made it
    return value if isinstance(value, int) else 0


def stamp(event: Event, seq: int) -> None:
    """Put ``seq`` into ``event.metadata.iac_code.seq`` (in place: call on the published object)."""
    event.metadata.fields["iac_code"].struct_value.fields[SEQ_FIELD].number_value = seq


def replayed(entry: VersionedEvent) -> Event:
    """A logged event as it is streamed again: a copy carrying its seq."""
    event = type(entry.event)()
    event.CopyFrom(entry.event)
    stamp(event, version_number(entry.version))
    return event


def stamped_copy(task: Task, seq: int) -> Task:
    """A copy of ``task`` carrying ``seq`` (a snapshot that opens a stream)."""
    copy = Task()
    copy.CopyFrom(task)
    if seq:
        stamp(copy, seq)
    return copy


def seq_of(event_json: Mapping[str, Any]) -> str | None:
    """The ``seq`` of one StreamResponse JSON object, as the SSE ``id:`` (``None`` when it has none)."""
    for payload in event_json.values():
        if isinstance(payload, Mapping):
            metadata = payload.get("metadata")
            iac_code = metadata.get("iac_code") if isinstance(metadata, Mapping) else None
            value = iac_code.get(SEQ_FIELD) if isinstance(iac_code, Mapping) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                return str(int(value))
    return None


def resume_after(context: ServerCallContext) -> int | None:
    """The seq a SubscribeToTask resumes after: ``metadata.iac_code.resumeAfter``, else ``Last-Event-ID``."""
    raw = context.state.get(RAW_PARAMS_KEY)
    metadata = raw.get("metadata") if isinstance(raw, Mapping) else None
    iac_code = metadata.get("iac_code") if isinstance(metadata, Mapping) else None
    value: Any = iac_code.get(RESUME_FIELD) if isinstance(iac_code, Mapping) else None
    if value is None:
        headers = context.state.get("headers")
        value = headers.get(LAST_EVENT_ID) if headers is not None else None
        if value is None:
            return None
    if isinstance(value, bool):
        raise InvalidParamsError(message=INVALID_RESUME)
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise InvalidParamsError(message=INVALID_RESUME) from None
    if number < 0:
        raise InvalidParamsError(message=INVALID_RESUME)
    return number


def missed(entries: Iterable[tuple[int, Event | None]], after: int, current: int) -> list[VersionedEvent] | None:
    """The events after ``after`` from a contiguous run of log entries, or ``None`` if some were dropped."""
    if after >= current:
        return []
    found: list[VersionedEvent] = []
    expected = after + 1
    for version, event in entries:
        if version <= after:
            continue
        if version != expected:
            return None  # the entry right after ``after`` is no longer retained
        expected += 1
        if event is not None:
            found.append(VersionedEvent(event=event, version=TaskVersion(version)))
    return found if expected > current else None


class LocalEventLog:
    """The last ``events_per_task`` writes of the ``tasks`` most recently written tasks, in memory.

    The local store's log: memory is bounded by the two settings, never by
    traffic. A restart empties it (a resume then starts from the task snapshot).
    """

    def __init__(self, events_per_task: int = DEFAULT_RETAINED_EVENTS, tasks: int = DEFAULT_RETAINED_TASKS) -> None:
        self._per_task = events_per_task
        self._tasks = tasks
        self._logs: OrderedDict[tuple[str, str], deque[tuple[int, Event | None]]] = OrderedDict()

    def append(self, owner: str, task_id: str, version: int, event: Event | None) -> None:
        key = (owner, task_id)
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = deque(maxlen=self._per_task)
            while len(self._logs) > self._tasks:
                self._logs.popitem(last=False)
        else:
            self._logs.move_to_end(key)
            if log and log[-1][0] != version - 1:
                log.clear()  # a write this log did not see (a restart in between): start a new run
        log.append((version, event))

    def since(self, owner: str, task_id: str, after: int, current: int) -> list[VersionedEvent] | None:
        """The events after ``after`` up to ``current``; ``None`` when they are no longer all retained."""
        return missed(self._logs.get((owner, task_id), ()), after, current)

    def drop(self, owner: str, task_id: str) -> None:
        self._logs.pop((owner, task_id), None)
