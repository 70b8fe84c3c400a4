"""The execution controller: one :class:`~iac_code_execution_control.record.Execution` per context.

It is the server's turn gate (``iac_code_turn_gates``): it sees each turn start and end, holds a turn at
its safe points while the execution is not running, refuses new tasks on a context whose execution is
paused or terminating, and puts the snapshot on the context's status updates
(``metadata.iac_code.executionControl``). The routes and JSON-RPC methods call :meth:`pause`,
:meth:`resume`, :meth:`terminate` and :meth:`state`, each returning an HTTP status and a JSON body.

Phases: ``running`` → (pause) ``pausing`` → (every piece of work parked at a safe point, or waiting for
a permission answer, or no turn at all) ``pause_committing`` → (written) ``paused``; (resume) ``resuming``
→ (written) ``running``; (terminate, or the reconnect deadline passing while paused) ``terminating`` →
(running turn cancelled like ``CancelTask``) ``terminated``. Every accepted request is durable before it
is answered; a failed write leaves ``commitError: "state_commit_failed"`` and is retried when the same
request is repeated.

Several nodes (``task-store: redis``): the executions are shared records (every node reads what any
node wrote, :class:`~iac_code_execution_control.record.SharedExecutions`); a request for an execution
whose turn runs on another live node is forwarded there (:meth:`runner_of`, :meth:`forward`, the
kernel's node calls), and one whose turn runs nowhere is answered from the shared record by the node
it reached. A record left in a transitional phase by a node that died is settled as after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from iac_code.api import Principal, PluginContext, PrincipalUser, TurnPoint, spawn
from iac_code_execution_control import requests as r
from iac_code_execution_control.record import (
    HOLDING,
    PAUSE_COMMITTING,
    PAUSE_PHASES,
    PAUSED,
    PAUSING,
    REFUSING,
    RESUMING,
    RUNNING,
    TERMINATED,
    TERMINATING,
    Execution,
    ExecutionFiles,
    SharedExecutions,
    new_id,
)

logger = logging.getLogger(__name__)

CANCEL_WAIT_SECONDS = 30.0  # how long a terminate waits for the cancelled turn (as CancelTask does)
ANSWER_WAIT_SECONDS = 5.0  # how long a terminate request waits for "terminated" before it answers 202
FORWARD_SECONDS = 15.0  # how long a request forwarded to the node running the turn may take
DEADLINE_RECHECK_SECONDS = 1.0  # how often a node re-checks a passed deadline another node was to enforce
NODE_CALL = "execution-control"  # the operation name of forwarded requests (the kernel's node calls)
RECOVERED = {PAUSING: PAUSED, PAUSE_COMMITTING: PAUSED, RESUMING: RUNNING, TERMINATING: TERMINATED}
"""A transitional phase nobody finishes any more (restart, or its node died) -> where it settles."""


@dataclass(frozen=True)
class Reply:
    """An answer of the controller: HTTP status and JSON body (the snapshot, or ``{"error": text}``)."""

    status: int
    body: dict[str, Any]


def error(status: int, text: str) -> Reply:
    return Reply(status, {"error": text})


def _operation(point: TurnPoint) -> dict[str, Any] | None:
    """An ``externalOperations`` entry for a cloud call a tool declared (product and action known)."""
    operation = point.operation
    product, action = operation.get("product"), operation.get("action")
    if not (isinstance(product, str) and product and isinstance(action, str) and action):
        return None
    entry: dict[str, Any] = {"product": product, "action": action}
    region = operation.get("region") or operation.get("regionId") or operation.get("region_id")
    if isinstance(region, str) and region:
        entry["regionId"] = region
    stack = operation.get("stackId") or operation.get("stack_id")
    if isinstance(stack, str) and stack:
        entry["resourceType"] = "ALIYUN::ROS::Stack"
        entry["resourceId"] = stack
    entry["toolUseId"] = point.tool_use_id
    return entry


class Controller:
    """The executions of one server, and its turn gate."""

    def __init__(self, kernel: PluginContext) -> None:
        self.kernel = kernel
        self.instance_id = new_id("srv")
        records = getattr(kernel, "shared_records", None)
        self.shared = records is not None  # several nodes: executions are shared records
        self.link: Any = getattr(kernel, "link", None) if self.shared else None
        self.files: ExecutionFiles | SharedExecutions = (
            SharedExecutions(records) if records is not None else ExecutionFiles(kernel.state_dir))
        self._executions: dict[str, Execution] = {}
        self._started = False
        self._stopping = False
        self._idle_after = float(getattr(kernel.config, "context_idle_timeout", 3600.0) or 3600.0)
        self._sweeper: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lookup

    @property
    def available(self) -> bool:
        """Whether requests can be served (the server started, its request handler exists)."""
        return self._started and not self._stopping and self.kernel.request_handler is not None

    def get(self, owner: str, context_id: str) -> Execution | None:
        """The execution of ``context_id`` in memory when it is ``owner``'s (another owner's reads as none).

        Every execution that is paused, resuming or terminating is in memory (loaded at start, never
        evicted); an idle running or terminated one may have left memory: :meth:`_lookup` reads it back.
        """
        execution = self._executions.get(context_id)
        return execution if execution is not None and execution.owner == owner else None

    async def _lookup(self, context_id: str) -> Execution | None:
        """The execution of ``context_id``, read back from its file when it left memory.

        Shared records: unless this server is doing something with it (:attr:`Execution.live`), the
        shared record is the current state (another node may have changed it); ``ConnectionError`` when
        the shared store is unreachable.
        """
        execution = self._executions.get(context_id)
        if not self.shared:
            if execution is None:
                execution = await self.files.fetch(context_id, self.instance_id)
                if execution is not None:
                    self._executions[context_id] = execution
            return execution
        if execution is not None and execution.live:
            return execution
        stored = await self.files.fetch(context_id, self.instance_id)
        if stored is None or (execution is not None and stored.execution_id == execution.execution_id
                              and stored.revision == execution.persisted_revision):
            return execution
        if execution is not None:
            self._disarm_deadline(execution)
        self._executions[context_id] = stored
        await self._settle(stored)
        if stored.phase in PAUSE_PHASES:
            self._arm_deadline(stored)
        return stored

    async def _settle(self, execution: Execution) -> None:
        """A shared record in a transitional phase whose turn no live node runs: settled as after a restart."""
        if execution.phase not in RECOVERED:
            return
        if self.link is not None:
            try:
                if await self.link.runner(execution.owner, execution.context_id, execution.task_id) is not None:
                    return  # the node running the turn finishes it
            except Exception:
                return
        async with execution.lock:
            if self._recover(execution) and not await self.files.write(execution):
                execution.commit_error = "state_commit_failed"

    def _recover(self, execution: Execution) -> bool:
        """A pause in progress is a pause, a resume in progress is running, a termination in progress is over."""
        recovered = RECOVERED.get(execution.phase)
        if recovered is None:
            return False
        execution.phase = recovered
        if recovered == RUNNING:
            self._clear_pause(execution)
        if recovered == TERMINATED:
            execution.release_ready = True
        execution.touch()
        return True

    # ------------------------------------------------------------------ several nodes

    async def runner_of(self, owner: str, context_id: str) -> str | None:
        """The other live node running the turn of ``owner``'s execution of ``context_id``, where a request for it
        must go; ``None``: it is answered here (the turn runs here or nowhere, or there is no such execution)."""
        if self.link is None or not self.available:
            return None
        try:
            execution = await self._lookup(context_id)
            if execution is None or execution.owner != owner or execution.live:
                return None
            node = await self.link.runner(owner, context_id, execution.task_id)
        except Exception:  # the shared store is unreachable: answered here (503)
            return None
        return node if node is not None and node != self.link.node_id else None

    async def forward(self, node: str, path: str, owner: str, fields: dict[str, Any]) -> Reply:
        """Run a request on ``node`` (the node running the execution's turn) and answer what it answered."""
        try:
            reply = await self.link.call(node, NODE_CALL, {"path": path, "owner": owner, "fields": fields},
                                         FORWARD_SECONDS)
            return Reply(int(reply["status"]), dict(reply["body"]))
        except Exception as exc:  # the node died meanwhile, or the shared store is unreachable
            logger.warning("An execution-control request could not be forwarded: %s", type(exc).__name__)
            return error(503, r.UNAVAILABLE)

    def sweep(self, now: float | None = None) -> int:
        """Let idle executions leave memory (as idle contexts do); how many left."""
        now = time.monotonic() if now is None else now
        idle = [c for c, e in self._executions.items() if e.idle(now, self._idle_after)]
        for context_id in idle:
            del self._executions[context_id]
        return len(idle)

    async def _sweep_loop(self) -> None:
        interval = min(max(self._idle_after / 4, 1.0), 60.0)
        while True:
            await asyncio.sleep(interval)
            self.sweep()

    # ------------------------------------------------------------------ the turn gate

    def busy(self) -> bool:
        """Whether an execution is pausing, paused, resuming or terminating (or terminated while its turn still
        runs): work the HTTP transport's idle shutdown waits for (the kernel reads it through the turn gates)."""
        if self.shared:  # a paused record another node may serve is no work of this node's
            return any(e.live for e in self._executions.values())
        return any(e.phase in REFUSING or (e.phase == TERMINATED and not e.release_ready)
                   for e in self._executions.values())

    async def admit(self, owner: str, context_id: str, task_id: str) -> str | None:
        if self.shared:
            try:
                execution = await self._lookup(context_id)
            except ConnectionError:
                return None  # the turn cannot start without the shared store either
            execution = execution if execution is not None and execution.owner == owner else None
        else:
            execution = self.get(owner, context_id)
        if execution is not None and execution.phase in REFUSING:
            return r.RECOVERY_FIRST
        return None

    async def safe_point(self, point: TurnPoint) -> None:
        if point.kind == "turn_started":
            execution = await self._turn_started(point)
        else:
            execution = self.get(point.owner, point.context_id)
        if execution is None or execution.task_id != point.task_id:
            return
        self._track(execution, point)
        if execution.phase in HOLDING:
            await self._hold(execution, point)

    def waiting(self, point: TurnPoint, waiting: bool) -> None:
        execution = self.get(point.owner, point.context_id)
        if execution is None or execution.task_id != point.task_id or execution.waiting == waiting:
            return
        execution.waiting = waiting
        execution.execution_status = "input-required" if waiting else "working"
        execution.touch()
        if waiting and execution.phase == PAUSING:
            spawn(self._commit_if_parked(execution), name="execution-control:commit")

    async def turn_ended(self, point: TurnPoint, status: str) -> None:
        execution = self.get(point.owner, point.context_id)
        if execution is None or execution.task_id != point.task_id:
            return
        execution.turn_running = execution.in_tool = execution.waiting = False
        execution.execution_status = status
        for operation in execution.pending_operations.values():  # started, never reported: outcome unknown
            execution.external_operations.append({**operation, "outcome": "unknown"})
        execution.pending_operations.clear()
        execution.turn_done.set()
        execution.touch()
        if execution.phase == PAUSING:
            await self._commit_if_parked(execution)
        elif self.shared:
            await self.files.write(execution)  # other nodes answer for it now

    def metadata(self, owner: str, context_id: str) -> dict[str, Any] | None:
        execution = self.get(owner, context_id)
        return {"executionControl": execution.snapshot()} if execution is not None else None

    async def start(self) -> None:
        """Read the executions back: a pause in progress is a pause (nothing runs after a restart), a
        resume in progress is running, a termination in progress is over; deadlines are armed again."""
        for execution in await self.files.load_all(self.instance_id):  # shared records: none, read on demand
            self._executions[execution.context_id] = execution
            if self._recover(execution):
                if not await self.files.write(execution):
                    execution.commit_error = "state_commit_failed"
            if execution.phase in PAUSE_PHASES:
                self._arm_deadline(execution)
        self._sweeper = spawn(self._sweep_loop(), name="execution-control:sweep")
        self._started = True

    async def stop(self) -> None:
        self._stopping = True
        tasks = [t for e in self._executions.values() for t in (e.deadline, e.terminator) if t is not None]
        if self._sweeper is not None:
            tasks.append(self._sweeper)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ turns

    async def _turn_started(self, point: TurnPoint) -> Execution | None:
        try:
            execution = await self._lookup(point.context_id)
        except ConnectionError:
            execution = self._executions.get(point.context_id)
        if execution is not None and execution.owner != point.owner and execution.phase != TERMINATED:
            return None  # the same context id of another owner: that context is not controlled
        if execution is None or execution.phase == TERMINATED:
            revision = execution.revision + 1 if execution is not None else 1
            execution = Execution(context_id=point.context_id, owner=point.owner, task_id=point.task_id,
                                  execution_id=new_id("exec"), server_instance_id=self.instance_id, revision=revision)
            self._executions[point.context_id] = execution
        execution.task_id = point.task_id
        execution.turn_running = True
        execution.in_tool = execution.waiting = False
        execution.execution_status = "working"
        execution.turn_done.clear()
        execution.server_instance_id = self.instance_id
        execution.touch()
        if self.shared:
            await self.files.write(execution)  # every node finds it, and forwards its requests here
        return execution

    @staticmethod
    def _track(execution: Execution, point: TurnPoint) -> None:
        """What a safe point says about the turn: a tool call in flight, a cloud operation started or done."""
        if point.kind == "tool_call":
            execution.in_tool = True
        elif point.kind == "permission" and point.read_only is not True:
            operation = _operation(point)
            if operation is not None:
                execution.pending_operations[point.tool_use_id] = operation
        elif point.kind == "tool_result":
            execution.in_tool = False
            operation = execution.pending_operations.pop(point.tool_use_id, None)
            if operation is not None and not point.failed:
                execution.external_operations.append({**operation, "outcome": "accepted"})
        else:
            return
        execution.touch()

    async def _hold(self, execution: Execution, point: TurnPoint) -> None:
        """Keep the turn at this safe point until the execution runs again (a terminate cancels the turn)."""
        execution.parked += 1
        execution.touch()
        announced = False
        try:
            await self._commit_if_parked(execution)
            while True:
                changed = execution.changed
                if execution.phase not in HOLDING:
                    break
                if execution.phase == PAUSED and not announced and point.announce is not None:
                    announced = True  # a client following the task sees the pause
                    await point.announce()
                    continue
                await changed.wait()
        finally:
            execution.parked -= 1
            execution.touch()
        if announced and point.announce is not None:
            await point.announce()  # ... and that it runs again

    async def _commit_if_parked(self, execution: Execution) -> None:
        if execution.phase != PAUSING or not execution.all_parked:
            return
        async with execution.lock:
            await self._commit_pause(execution)

    async def _commit_pause(self, execution: Execution) -> None:
        """(Lock held.) Every piece of work is parked: make the pause durable."""
        if execution.phase != PAUSING or not execution.all_parked:
            return
        await self._transition(execution, PAUSE_COMMITTING, PAUSED)
        if execution.phase == PAUSED and not execution.all_parked:  # new work meanwhile: not paused after all
            execution.phase = PAUSING
            execution.touch()

    async def _transition(self, execution: Execution, during: str, final: str) -> bool:
        """(Lock held.) ``during`` while ``final`` is being written; ``final`` once it is durable."""
        execution.phase = during
        execution.commit_error = None
        execution.touch()
        if not await self.files.write(execution, phase=final):
            execution.commit_error = "state_commit_failed"
            execution.touch()
            return False
        if execution.phase == during:
            execution.phase = final
            execution.touch()
            execution.persisted_revision = execution.revision
        return True

    async def _persist(self, execution: Execution) -> bool:
        """(Lock held.) Write the execution as it is now; a failure is the snapshot's ``commitError``."""
        if await self.files.write(execution):
            execution.commit_error = None
            return True
        execution.commit_error = "state_commit_failed"
        execution.touch()
        return False

    # ------------------------------------------------------------------ deadline and termination

    def _arm_deadline(self, execution: Execution) -> None:
        if execution.deadline is not None and execution.deadline is not asyncio.current_task():
            execution.deadline.cancel()
        execution.deadline = None
        if execution.expires_at is not None and not self._stopping:
            execution.deadline = spawn(self._expire(execution), name="execution-control:deadline")

    def _disarm_deadline(self, execution: Execution) -> None:
        if execution.deadline is not None and execution.deadline is not asyncio.current_task():
            execution.deadline.cancel()
        execution.deadline = None

    async def _expire(self, execution: Execution) -> None:
        """The reconnect deadline: a pause nobody resumed in time is terminated (``disconnect_timeout``).

        With shared records another node may run the turn and enforce the deadline itself; this node
        checks again every :data:`DEADLINE_RECHECK_SECONDS` until that node is gone (it may die before
        the deadline, or after it but before enforcing it) or the record changes under it.
        """
        # (uvloop's timers may fire a millisecond early: sleep until the wall clock has passed the deadline)
        while execution.expires_at is not None and (remaining := execution.expires_at - time.time()) > 0:
            await asyncio.sleep(remaining)
        warned = False
        while self.shared and not execution.live:
            try:
                if await self._lookup(execution.context_id) is not execution:
                    return  # changed meanwhile: the current record has its own deadline
                if await self.link.runner(execution.owner, execution.context_id, execution.task_id) in (
                        None, self.link.node_id):
                    break  # no live node runs the turn: this one enforces the deadline
            except Exception:
                if not warned:
                    warned = True
                    logger.warning("A paused execution's deadline could not be checked; it is checked again")
            await asyncio.sleep(DEADLINE_RECHECK_SECONDS)
        async with execution.lock:
            if execution.phase in PAUSE_PHASES and execution.expires_at is not None \
                    and time.time() >= execution.expires_at:
                await self._begin_termination(execution, r.DISCONNECT_TIMEOUT)

    async def _begin_termination(self, execution: Execution, reason: str) -> None:
        """(Lock held.) ``terminating``, durable; the running turn is cancelled in the background."""
        self._disarm_deadline(execution)
        execution.phase = TERMINATING
        execution.termination_reason = reason
        execution.touch()
        await self._persist(execution)
        execution.terminator = spawn(self._terminate(execution), name="execution-control:terminate")

    async def _terminate(self, execution: Execution) -> None:
        if execution.turn_running:
            await self._cancel_turn(execution)
            try:
                await asyncio.wait_for(execution.turn_done.wait(), CANCEL_WAIT_SECONDS)
            except TimeoutError:
                logger.warning("A terminated execution's turn did not stop within %.0f s", CANCEL_WAIT_SECONDS)
        async with execution.lock:
            for operation in execution.pending_operations.values():
                execution.external_operations.append({**operation, "outcome": "unknown"})
            execution.pending_operations.clear()
            execution.phase = TERMINATED
            execution.expires_at = None
            execution.release_ready = not execution.turn_running
            execution.backup = {"status": "disabled"}  # this server keeps no session backups
            execution.touch()
            await self._persist(execution)

    async def _cancel_turn(self, execution: Execution) -> None:
        """Cancel the execution's running task as ``CancelTask`` would, as its owner."""
        from a2a.server.context import ServerCallContext
        from a2a.types.a2a_pb2 import CancelTaskRequest

        handler = self.kernel.request_handler
        if handler is None:
            return
        principal = Principal(execution.owner, "execution-control" if execution.owner else "")
        context = ServerCallContext(user=PrincipalUser(principal))
        try:
            await handler.on_cancel_task(CancelTaskRequest(id=execution.task_id), context)
        except Exception as exc:  # the turn ended meanwhile: nothing left to cancel
            logger.debug("Cancelling a terminated execution's task: %s", type(exc).__name__)

    # ------------------------------------------------------------------ requests

    @staticmethod
    def _stale(execution: Execution, epoch: int) -> bool:
        return execution.connection_epoch is not None and epoch < execution.connection_epoch

    @staticmethod
    def _accept(execution: Execution, request_id: str, content: str, epoch: int) -> None:
        execution.remember(request_id, content)
        execution.connection_epoch = epoch if execution.connection_epoch is None else max(epoch, execution.connection_epoch)

    @staticmethod
    def _clear_pause(execution: Execution) -> None:
        execution.pause_id = execution.pause_reason = None
        execution.expires_at = execution.reconnect_timeout = None

    @staticmethod
    def _answer(execution: Execution, done: str) -> Reply:
        return Reply(200 if execution.phase == done else 202, execution.snapshot())

    async def _find(self, owner: str, context_id: str) -> Execution | Reply:
        if not self.available:
            return error(503, r.UNAVAILABLE)
        try:
            execution = await self._lookup(context_id)
        except ConnectionError:
            return error(503, r.UNAVAILABLE)
        return execution if execution is not None and execution.owner == owner else error(404, r.NOT_FOUND)

    async def pause(self, owner: str, request: r.PauseRequest) -> Reply:
        found = await self._find(owner, request.context_id)
        if isinstance(found, Reply):
            return found
        execution, content = found, r.digest("pause", request)
        async with execution.lock:
            seen = execution.requests.get(request.request_id)
            if seen is not None:
                if seen != content:
                    return error(409, r.REQUEST_REUSED)
                if execution.commit_error and execution.phase in (PAUSING, PAUSE_COMMITTING):
                    execution.phase = PAUSING  # the same request again: retry the commit
                    if await self._persist(execution):
                        await self._commit_pause(execution)
                return self._answer(execution, PAUSED)
            if request.expected_execution_id != execution.execution_id or request.task_id != execution.task_id:
                return error(409, r.IDENTITY_MISMATCH)
            if self._stale(execution, request.connection_epoch):
                return error(409, r.STALE_EPOCH)
            if not r.MIN_RECONNECT_SECONDS <= request.reconnect_timeout <= r.MAX_RECONNECT_SECONDS:
                return error(409, r.TIMEOUT_RANGE)
            if execution.phase == RESUMING:
                return error(409, r.RESUMING)
            if execution.phase in (TERMINATING, TERMINATED):
                return error(409, r.TERMINATING)
            if execution.phase in PAUSE_PHASES:
                return error(409, r.OTHER_PAUSE)
            self._accept(execution, request.request_id, content, request.connection_epoch)
            execution.phase = PAUSING
            execution.pause_id = new_id("pause")
            execution.pause_reason = request.reason
            execution.reconnect_timeout = request.reconnect_timeout
            execution.expires_at = time.time() + request.reconnect_timeout
            execution.resume_request = None
            execution.touch()
            if await self._persist(execution):
                await self._commit_pause(execution)
            self._arm_deadline(execution)
            return self._answer(execution, PAUSED)

    async def resume(self, owner: str, request: r.ResumeRequest) -> Reply:
        found = await self._find(owner, request.context_id)
        if isinstance(found, Reply):
            return found
        execution, content = found, r.digest("resume", request)
        claimed = False
        async with execution.lock:
            seen = execution.requests.get(request.request_id)
            if seen is not None:
                if seen != content:
                    return error(409, r.REQUEST_REUSED)
                if execution.phase == RESUMING and execution.commit_error:
                    await self._finish_resume(execution)
                return self._answer(execution, RUNNING)
            if request.execution_id != execution.execution_id:
                return error(409, r.NOT_CURRENT_EXECUTION)
            if self._stale(execution, request.connection_epoch):
                return error(409, r.STALE_EPOCH)
            if execution.phase in (TERMINATING, TERMINATED):
                claimed = execution.termination_reason == r.DISCONNECT_TIMEOUT
                return error(409, r.DEADLINE_CLAIMED if claimed else r.TERMINATING)
            if execution.phase == RESUMING:
                return error(409, r.OTHER_RESUME)
            if execution.phase not in PAUSE_PHASES:
                return error(409, r.NOT_PAUSED)
            if request.pause_id != execution.pause_id:
                return error(409, r.NOT_ACTIVE_PAUSE)
            if execution.expires_at is not None and time.time() >= execution.expires_at:
                await self._begin_termination(execution, r.DISCONNECT_TIMEOUT)
                return error(409, r.DEADLINE_CLAIMED)
            self._accept(execution, request.request_id, content, request.connection_epoch)
            execution.resume_request = request.request_id
            self._disarm_deadline(execution)
            await self._finish_resume(execution)
            return self._answer(execution, RUNNING)

    async def _finish_resume(self, execution: Execution) -> None:
        """(Lock held.) ``resuming`` while ``running`` is written; the held turn goes on once it is."""
        pause = (execution.pause_id, execution.pause_reason, execution.expires_at, execution.reconnect_timeout)
        self._clear_pause(execution)
        if not await self._transition(execution, RESUMING, RUNNING):
            (execution.pause_id, execution.pause_reason, execution.expires_at,
             execution.reconnect_timeout) = pause  # still the active pause until the resume is durable

    async def terminate(self, owner: str, request: r.TerminateRequest) -> Reply:
        found = await self._find(owner, request.context_id)
        if isinstance(found, Reply):
            return found
        execution, content = found, r.digest("terminate", request)
        async with execution.lock:
            seen = execution.requests.get(request.request_id)
            if seen is not None:
                if seen != content:
                    return error(409, r.REQUEST_REUSED)
                if execution.commit_error and execution.phase in (TERMINATING, TERMINATED):
                    await self._persist(execution)
                return self._answer(execution, TERMINATED)
            if request.expected_execution_id != execution.execution_id:
                return error(409, r.IDENTITY_MISMATCH)
            if self._stale(execution, request.connection_epoch):
                return error(409, r.STALE_EPOCH)
            if execution.phase in (TERMINATING, TERMINATED):
                return error(409, r.TERMINATING)
            if request.reason == r.DISCONNECT_TIMEOUT and (
                    execution.phase not in PAUSE_PHASES or request.pause_id != execution.pause_id):
                return error(409, r.DISCONNECT_NOT_ACTIVE)
            if request.pause_id is not None and request.pause_id != execution.pause_id:
                return error(409, r.NOT_CURRENT_PAUSE)
            self._accept(execution, request.request_id, content, request.connection_epoch)
            await self._begin_termination(execution, request.reason)
            terminator = execution.terminator
        if terminator is not None:
            await asyncio.wait([terminator], timeout=ANSWER_WAIT_SECONDS)
        return self._answer(execution, TERMINATED)

    async def state(self, owner: str, query: r.StateQuery) -> Reply:
        found = await self._find(owner, query.context_id)
        if isinstance(found, Reply):
            return found
        if query.execution_id is not None and query.execution_id != found.execution_id:
            return error(409, r.NOT_CURRENT_EXECUTION)
        if query.pause_id is not None and query.pause_id != found.pause_id:
            return error(409, r.NOT_CURRENT_PAUSE)
        return Reply(200, found.snapshot())
