"""Several server nodes, one service: what the kernel needs from a shared state backend.

With ``task-store: local`` (the default) one process owns its state. A shared
backend (``task-store: redis``, the ``iac-code-state-redis`` plugin) lets N
nodes behind a load balancer serve one service: every node reads and writes
tasks, contexts and push configs in the backend, and reaches the node that runs
a turn through a :class:`NodeLink`:

* a context's turns run on one node at a time, under a lease with expiry and a
  fencing token (:meth:`NodeLink.lease`); a node that dies loses its leases when
  they expire, and a survivor marks its running turns FAILED "Task interrupted";
* CancelTask and a permission answer arriving at another node are forwarded to
  the node running the turn (:meth:`NodeLink.call`), which answers through
  :class:`ControlHandler`;
* SubscribeToTask on another node follows the task's event log
  (:meth:`NodeLink.follow`), written by the same store write that changes the task;
* a feature's own calls reach the node running a turn the same way: it registers an
  operation name (:meth:`NodeCalls.register`, through ``PluginContext.serve_node_call``)
  and forwards with :meth:`NodeLink.call`; its durable records shared by every node live
  in :class:`SharedRecords` (execution control's executions).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from a2a.server.cluster import VersionedEvent
from a2a.server.tasks import TaskStore

if TYPE_CHECKING:
    from iac_code.base.push_jobs import PushConfigRecords

NODE_UNAVAILABLE = "The server node running this task is not reachable. Retry shortly."
_TASK_SCOPE = " task:"  # a space: never part of a valid context id


def task_scope(task_id: str) -> str:
    """The lease scope of a turn that holds no context (an a2a-sdk executor's): the task alone.

    iac-code runtime turns lease their context; other executors' turns of one context may
    run side by side, so each leases its task under this scope instead.
    """
    return _TASK_SCOPE + task_id


class NodeUnavailableError(Exception):
    """The node a call was forwarded to did not answer in time (it may have died)."""


@dataclass(frozen=True)
class Lease:
    """One context (or one task, :func:`task_scope`) held by this node for one turn; ``token`` grows
    with every grant (fencing).

    ``snapshot`` is the context's stored state, read together with the grant (``None``: a new context).
    """

    owner: str
    context_id: str
    task_id: str
    token: int
    snapshot: dict[str, Any] | None = field(default=None, compare=False, repr=False)


class ControlHandler(Protocol):
    """The node-local side of forwarded calls (the request handler implements it)."""

    async def on_control(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run ``op`` (``cancel``, ``answer``) for a turn running here; errors as ``{"error": {code, message}}``."""
        ...


class NodeLink(ABC):
    """This node's membership of the cluster."""

    node_id: str

    @abstractmethod
    async def start(self) -> None:
        """Join (before any request is served): connect, heartbeat, watch for dead nodes' turns."""

    @abstractmethod
    async def serve(self, control: ControlHandler) -> None:
        """Start answering calls forwarded to this node (once the request handler exists)."""

    @abstractmethod
    async def stop(self) -> None:
        """Leave cleanly (leases this node still holds are released) and close the connection."""

    @abstractmethod
    async def lease(self, owner: str, context_id: str, task_id: str, *, wait: float | None = None) -> Lease:
        """Hold the context (or :func:`task_scope`) for one turn of ``task_id``; the lease carries its stored snapshot.

        Raises ``UnsupportedOperationError`` ("Task is already working.") when another
        turn still holds it after ``wait`` seconds (``None``: the backend's short default,
        for a lease being released right now).
        """

    @abstractmethod
    async def release(self, lease: Lease, snapshot: dict[str, Any] | None) -> None:
        """Store the context's snapshot (only while the lease is still ours) and drop the lease."""

    @abstractmethod
    async def runner(self, owner: str, context_id: str, task_id: str) -> str | None:
        """The live node running a turn of ``task_id`` now (under its context's lease or its task's), or ``None``."""

    @abstractmethod
    async def call(self, node_id: str, op: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Forward ``op`` to ``node_id``'s :class:`ControlHandler`; raises :class:`NodeUnavailableError`."""

    @abstractmethod
    def follow(self, task_id: str, after: int) -> AsyncIterator[VersionedEvent]:
        """The task's logged events after version ``after``, then the live ones (pushed, not polled)."""


class PermissionWaitRecords(ABC):
    """Where durable permission-wait checkpoints live (``<persistence-dir>/permission-waits`` or a shared backend).

    A record is a JSON object with at least ``boundaryId``, ``taskId``, ``owner``, ``contextId``,
    ``phase`` and ``generation`` (an int that grows with every write); the kernel owns its other fields
    (:mod:`iac_code.tasks.permission_waits`). Writes are compare-and-set on the generation, so two
    nodes (or two answers) can never both move one checkpoint on.
    """

    @abstractmethod
    async def of_task(self, task_id: str) -> list[dict[str, Any]]:
        """Every checkpoint of ``task_id`` (any phase)."""

    @abstractmethod
    async def open_in_context(self, owner: str, context_id: str) -> list[dict[str, Any]]:
        """The caller's checkpoints in ``context_id`` that are not ``RESOLVED`` or ``CANCELED``."""

    @abstractmethod
    async def write(self, record: dict[str, Any], expected_generation: int | None) -> bool:
        """Store ``record`` if the stored one still has ``expected_generation`` (``None``: there is none yet);
        ``False`` when it changed meanwhile. Durable when it returns ``True``."""


class SharedRecords(ABC):
    """Small JSON records a feature keeps for the whole cluster, one per ``(kind, key)`` (execution control
    keeps one execution per context): every node reads what any node wrote. ``put`` is durable when it
    returns; an unreachable backend raises ``ConnectionError``."""

    @abstractmethod
    async def get(self, kind: str, key: str) -> dict[str, Any] | None:
        """The record, or ``None`` when there is none (or it does not parse)."""

    @abstractmethod
    async def put(self, kind: str, key: str, record: dict[str, Any]) -> None:
        """Store ``record`` (replacing the one there)."""

    @abstractmethod
    async def all(self, kind: str) -> list[dict[str, Any]]:
        """Every record of ``kind``."""


NodeCall = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""A feature's handler of a forwarded operation: the payload in, the JSON reply out."""


class NodeCalls:
    """What this node answers to :meth:`NodeLink.call`: the request handler's operations (``cancel``, ``answer``)
    and the ones features registered (``PluginContext.serve_node_call``), by operation name."""

    def __init__(self) -> None:
        self.handlers: dict[str, NodeCall] = {}
        self.fallback: ControlHandler | None = None

    def register(self, op: str, handler: NodeCall) -> None:
        if op in self.handlers or op in ("cancel", "answer"):
            raise ValueError(f"Node call {op!r} is already served")
        self.handlers[op] = handler

    async def on_control(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get(op)
        if handler is not None:
            return await handler(payload)
        if self.fallback is None:
            return {"error": {"code": -32603, "message": "Internal error"}}
        return await self.fallback.on_control(op, payload)


@dataclass
class StateBackend:
    """What ``task-store: <name>`` provides: the shared task store, the node link, the push-config records and
    (optionally) the permission-wait checkpoints, so an answer resumes a suspended wait on any node, and the
    features' shared records."""

    task_store: TaskStore
    link: NodeLink
    push_configs: PushConfigRecords | None = None
    permission_waits: PermissionWaitRecords | None = None
    records: SharedRecords | None = None
