"""Turn gates: how a feature holds a running turn at its safe points, and refuses new turns.

A turn of an iac-code runtime is a stream of runtime events the kernel's executor consumes one at
a time; while the executor does not ask for the next event, the runtime does not go on. Between
some events nothing is half done: a tool call has not started yet, or has finished, or a
permission question has not been asked yet. Those are the turn's *safe points*. At each one the
executor awaits every installed :class:`TurnGate` (``iac_code_turn_gates``); a gate that does not
return holds the turn there (execution control's pause), a cancelled task cancels the wait.

A gate also sees each turn start and end, may refuse a new turn on a context
(:meth:`TurnGate.admit`: a request error, no task), and may put entries into
``metadata.iac_code`` of the status updates the executor publishes (:meth:`TurnGate.metadata`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from iac_code.base.records import PluginContext

TURN_STARTED = "turn_started"
"""The turn begins; the runtime has not run yet."""
TOOL_CALL = "tool_call"
"""A tool call's input is complete; the tool has not run, nor has its permission been asked."""
PERMISSION = "permission"
"""A tool call needs a permission decision; the question has not been asked yet."""
PERMISSION_ANSWERED = "permission_answered"
"""The caller answered a permission question (the answer is acknowledged); the tool has not run."""
TOOL_RESULT = "tool_result"
"""A tool call finished (completed or failed); the runtime has not gone on."""
SAFE_POINTS = (TURN_STARTED, TOOL_CALL, PERMISSION, PERMISSION_ANSWERED, TOOL_RESULT)

TURN_END_STATUSES = ("normal-turn-ended", "input-required", "failed", "canceled")
"""How a turn ended, as :meth:`TurnGate.turn_ended` hears it: the turn finished normally (its task
rests in INPUT_REQUIRED for follow-ups), stopped in INPUT_REQUIRED on a retryable failure, failed,
or was cancelled."""


@dataclass(frozen=True)
class TurnPoint:
    """Where a running turn stands when the kernel consults the turn gates.

    ``owner`` is the caller's owner scope (as tasks are scoped), ``kind`` one of :data:`SAFE_POINTS`
    (``"turn_ended"`` for :meth:`TurnGate.turn_ended`, ``"waiting"`` for :meth:`TurnGate.waiting`).
    The tool fields are set at the tool and permission points; ``operation`` is what the tool
    declared about a cloud call (``product``, ``action``, ``region``...) and ``read_only`` whether
    it only reads (``None``: unknown), both at the permission points; ``failed`` at ``tool_result``
    says the call failed (a denied permission included). ``announce()`` publishes a
    WORKING status update on the turn's task whose ``metadata.iac_code`` carries the gates'
    :meth:`TurnGate.metadata`, so a client following the task sees a change (e.g. "paused") at
    once; it is ``None`` where publishing would change what the task waits for.
    """

    owner: str
    context_id: str
    task_id: str
    kind: str
    tool_use_id: str = ""
    tool_name: str = ""
    operation: Mapping[str, Any] = field(default_factory=dict)
    read_only: bool | None = None
    failed: bool = False
    announce: Callable[[], Awaitable[None]] | None = field(default=None, compare=False, repr=False)


class TurnGate(Protocol):
    """A feature that watches and may hold the turns of iac-code runtimes (not brought-in SDK executors).

    Every method is called on the server's event loop. A method that raises (other than a
    cancellation) is logged and treated as "go on": a broken gate never fails a turn.
    """

    def admit(self, owner: str, context_id: str, task_id: str) -> str | None:
        """Before a new turn reserves its context (a new task, or a follow-up on a resting one): the text of
        the invalid-params error (``-32602``) that refuses it, or ``None`` to let it start. May be a coroutine
        (``async def``) when the answer needs shared state (several nodes)."""
        ...

    # Optional: ``admit_message(owner, context_id, task_id, metadata) -> str | None``. Like :meth:`admit`, with
    # the message's ``metadata.iac_code``: a feature whose answers come in it (the resource selector's
    # ``inputResponse``) refuses a bad one (``-32602`` with that text) before any turn or task change.
    # It may be ``async`` (awaited before the turn starts), e.g. to check the answer against a remote service.

    # Optional: ``busy() -> bool``. Whether the gate holds work the server must not walk away from although
    # no turn may be running (execution control pausing, paused, resuming or terminating): the HTTP
    # transport's idle shutdown (``idle-shutdown-seconds``) waits while any gate says so.

    async def safe_point(self, point: TurnPoint) -> None:
        """Awaited at each safe point of a turn; the turn goes on when it returns. Holding it is the pause;
        cancelling the task cancels this await (``asyncio.CancelledError``: let it propagate)."""
        ...

    def waiting(self, point: TurnPoint, waiting: bool) -> None:
        """The turn starts (``True``) or stops (``False``) waiting for the caller's answer to a permission
        question: while it waits it is parked, as at a safe point, and runs nothing."""
        ...

    async def turn_ended(self, point: TurnPoint, status: str) -> None:
        """The turn is over (its last status published, its context released); ``status`` is one of
        :data:`TURN_END_STATUSES`."""
        ...

    def metadata(self, owner: str, context_id: str) -> Mapping[str, Any] | None:
        """Entries to merge into ``metadata.iac_code`` of the status updates the executor publishes on a task
        of this context (each one that carries metadata or changes the state; not each text delta)."""
        ...

    async def start(self) -> None:
        """The server has started (its transports bound, its state restored): start timers, recover state."""
        ...

    async def stop(self) -> None:
        """The server is stopping (its turns already cancelled): stop timers, release resources."""
        ...


@dataclass(frozen=True)
class TurnGateSpec:
    """A turn gate (``iac_code_turn_gates``): ``create(context)`` builds the server's :class:`TurnGate`.

    Every installed gate is active; the executor awaits them in plugin order.
    """

    name: str
    create: Callable[[PluginContext], TurnGate]
    description: str = ""
