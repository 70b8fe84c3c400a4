"""Push-notification delivery jobs and the interfaces push plugins share: the queue, the shared config records.

A :class:`PushJob` is one notification for one push configuration: the
StreamResponse payload, where to send it and its delivery state. The push
service's sender builds jobs, a queue plugin (``push-queue``: ``local-file``,
``redis-streams``) keeps them durably, and the push service's delivery worker
claims, sends, retries and dead-letters them. Jobs carry no credentials: headers are
rebuilt from the stored configuration at each attempt. Queues store jobs only as
:class:`JobCodec` output, which is encrypted (spec: push.md §3.1, §5.3).

Ordering: jobs for one (owner, task, config) share an :attr:`PushJob.order_key`;
``seq`` grows along it and ``prev_seq`` names the job before (found, when the sender did
not queue it itself, through :meth:`PushQueue.queued_through`). The worker
delivers a job only once its predecessor is done (delivered or dead-lettered),
as recorded by the queue's :meth:`PushQueue.mark_done`.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

JOB_VERSION = 1
REDACTED = "[redacted]"
SECRET_HEADERS = frozenset({"authorization", "x-a2a-notification-token", "x-api-key", "api-key"})

_last_seq = 0


def next_seq() -> int:
    """A process-wide strictly increasing sequence number that also grows across restarts (ns clock)."""
    global _last_seq
    _last_seq = max(_last_seq + 1, time.time_ns())
    return _last_seq


def order_key(owner: str, task_id: str, config_id: str) -> str:
    """The ordering key of one configuration's notifications: a hash, so no id leaks into a key name."""
    return hashlib.sha256(f"{owner}\0{task_id}\0{config_id}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class PushJob:
    """One notification for one push configuration, with its delivery state.

    ``job_id`` is stable across retries and redeliveries: it is the idempotency id
    a receiver uses to drop duplicates (``Idempotency-Key`` header, JWT ``jti``).
    """

    job_id: str
    task_id: str
    config_id: str
    owner: str
    url: str
    payload: Mapping[str, Any]
    seq: int
    prev_seq: int = 0
    attempt: int = 0
    next_attempt_at: float = 0.0
    last_error: str = ""
    created_at: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    # W3C trace context of the turn that queued the job (``traceparent``/``tracestate``); empty untraced.
    trace: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def new(cls, *, task_id: str, config_id: str, owner: str, url: str, payload: Mapping[str, Any],
            prev_seq: int = 0, trace: Mapping[str, str] | None = None) -> PushJob:
        """A fresh job, due now."""
        return cls(job_id=uuid.uuid4().hex, task_id=task_id, config_id=config_id or task_id, owner=owner, url=url,
                   payload=payload, seq=next_seq(), prev_seq=prev_seq, created_at=time.time(), trace=trace or {})

    @property
    def order_key(self) -> str:
        return order_key(self.owner, self.task_id, self.config_id)

    def rescheduled(self, *, at: float, attempt: int | None = None, last_error: str | None = None) -> PushJob:
        """The same job due at ``at`` (epoch seconds), optionally with a new attempt count and error."""
        return replace(self, next_attempt_at=at, attempt=self.attempt if attempt is None else attempt,
                       last_error=self.last_error if last_error is None else last_error)

    def to_record(self) -> dict[str, Any]:
        """The job as JSON (spec push.md §5.3 names, plus our ordering and owner fields)."""
        record = {
            "version": JOB_VERSION, "jobId": self.job_id, "taskId": self.task_id, "configId": self.config_id,
            "owner": self.owner, "url": self.url, "payload": dict(self.payload),
            "headers": {k: (REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()},
            "attempt": self.attempt, "nextAttemptAt": self.next_attempt_at, "lastError": self.last_error,
            "seq": self.seq, "prevSeq": self.prev_seq, "createdAt": self.created_at,
        }
        if self.trace:
            record["trace"] = dict(self.trace)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PushJob:
        """Read :meth:`to_record` output; ``KeyError``/``TypeError``/``ValueError`` when malformed."""
        return cls(job_id=str(record["jobId"]), task_id=str(record["taskId"]), config_id=str(record["configId"]),
                   owner=str(record.get("owner", "")), url=str(record["url"]), payload=dict(record["payload"]),
                   seq=int(record.get("seq", 0)), prev_seq=int(record.get("prevSeq", 0)),
                   attempt=int(record.get("attempt", 0)), next_attempt_at=float(record.get("nextAttemptAt", 0.0)),
                   last_error=str(record.get("lastError", "")), created_at=float(record.get("createdAt", 0.0)),
                   headers=dict(record.get("headers") or {}),
                   trace={str(k): str(v) for k, v in (record.get("trace") or {}).items()})


class JobCodec(Protocol):
    """Turns jobs into the (encrypted) bytes a queue stores, and back."""

    def encode(self, job: PushJob) -> bytes:
        """The job as compact, encrypted JSON (``{"iacCodeEncryptedPushJob": {...}}``)."""
        ...

    def decode(self, data: bytes | str) -> PushJob:
        """The job ``encode`` wrote; :class:`ValueError` when it cannot be read or decrypted."""
        ...


@dataclass(frozen=True)
class ClaimedJob:
    """A job leased to one worker; ``receipt`` is the queue's handle (a file name, a stream entry id)."""

    job: PushJob
    receipt: Any


@runtime_checkable
class PushQueue(Protocol):
    """A durable, at-least-once queue of push jobs, shared by every worker on it.

    Every method that changes the queue returns only once the change is durable
    (on disk, or acknowledged by the server). ``claim`` leases jobs; a lease not
    settled by ``ack``, ``retry`` or ``dead_letter`` within the lease time makes
    the job claimable again (another worker may have died holding it).
    """

    async def start(self) -> None:
        """Connect and prepare (directories, consumer group); called once before any other method."""
        ...

    async def enqueue(self, jobs: Sequence[PushJob]) -> None:
        """Store jobs, due at their ``next_attempt_at``."""
        ...

    async def claim(self, limit: int, wait: float) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs (new, due retries, expired leases).

        Waits at most ``wait`` seconds when none is due and returns ``[]`` then:
        due retries and expired leases are found on this schedule whatever the traffic.
        """
        ...

    async def ack(self, claimed: ClaimedJob) -> None:
        """The job is done (delivered): remove it."""
        ...

    async def retry(self, claimed: ClaimedJob, job: PushJob) -> None:
        """Release the lease and keep ``job`` (its new attempt, error and due time) for later."""
        ...

    async def dead_letter(self, claimed: ClaimedJob, job: PushJob) -> None:
        """Move ``job`` to the dead letters (kept, never retried) and release the lease."""
        ...

    async def mark_done(self, key: str, seq: int) -> None:
        """Record that the job ``seq`` of ordering key ``key`` is done (kept at least a day)."""
        ...

    async def done_through(self, key: str) -> int:
        """The highest ``seq`` recorded done for ``key`` (0 when none is known)."""
        ...

    async def queued_through(self, key: str) -> int:
        """The highest ``seq`` enqueued for ``key`` (0 when none is known); ``enqueue`` records it
        with the jobs, kept at least a day. A sender that did not queue ``key``'s last job itself
        (it restarted, or the task's previous turn ran on another node) chains the next job to it.
        Optional: a queue without it orders only the jobs one sender process queued."""
        ...

    async def depth(self) -> dict[str, int]:
        """Job counts: ``pending`` (due or scheduled), ``inflight`` (leased), ``dead``."""
        ...

    async def dead_letters(self, limit: int = 100) -> list[PushJob]:
        """Up to ``limit`` dead-lettered jobs, oldest first (for inspection)."""
        ...

    async def close(self) -> None:
        """Release connections and background work."""
        ...


@dataclass(frozen=True)
class QueueContext:
    """What a push-queue plugin's ``create`` receives: the settings (kernel and plugin keys),
    the codec its stored jobs go through, and the persistence directory."""

    config: Any
    codec: JobCodec
    state_dir: Path


@runtime_checkable
class PushConfigRecords(Protocol):
    """A shared state backend's push configurations, as opaque records (``task-store: redis``).

    The push service encrypts and decodes them; the backend only keeps bytes: per task,
    a set of named records (the names the push service chooses), every node and push
    worker reading the same ones, deleted with the task. A method that cannot reach the
    backend raises a2a-sdk's ``InternalError`` with a message fit for the client.
    """

    async def put(self, task_id: str, name: str, data: bytes) -> None:
        """Store (or replace) record ``name`` of the task, durably before returning."""
        ...

    async def get(self, task_id: str, name: str) -> bytes | None:
        """Record ``name`` of the task (``None`` when absent)."""
        ...

    async def read_all(self, task_id: str) -> dict[str, bytes]:
        """Every record of the task by name."""
        ...

    async def names(self, task_id: str) -> list[str]:
        """The names of the task's records."""
        ...

    async def delete(self, task_id: str, names: Sequence[str]) -> None:
        """Remove these records of the task (absent ones are ignored)."""
        ...
