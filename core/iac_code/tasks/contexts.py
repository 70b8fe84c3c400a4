"""Conversation contexts: one per A2A ``contextId`` and caller.

A context binds a workspace, a telemetry channel and the conversation state of
an iac-code runtime. Turns of one context never overlap; different contexts run
in parallel. Contexts are mirrored to ``<persistence-dir>/contexts``; an idle
one is dropped from memory after ``context-idle-timeout`` seconds, or when more
than ``context-cache-size`` contexts are loaded (least recently used first), and
restored from its snapshot by the next message.

With a shared state backend (:mod:`iac_code.base.cluster`) the context lives in the
backend instead: a turn takes the context's lease, loads its snapshot, and at
the end stores it and drops the lease, so the next turn may run on any node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from iac_code.base.background import spawn
from iac_code.base.cluster import Lease, NodeLink
from iac_code.base.storage import JsonDirectory, SnapshotWriter, file_key
from iac_code.tasks.turns import ALREADY_WORKING

logger = logging.getLogger(__name__)

OTHER_WORKSPACE = "A2A context belongs to a different workspace."
HISTORY_LIMIT = 100  # conversation entries kept per context


@dataclass
class ContextState:
    """One live context. ``session`` is runtime-owned JSON state, persisted with it."""

    context_id: str
    owner: str
    cwd: str
    channel: str | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    session: dict[str, Any] = field(default_factory=dict)
    running_task: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    lease: Lease | None = None  # held while a turn runs, with a shared backend
    # Set while the running turn is ending after it told the caller so (its permission wait was suspended):
    # a reservation meanwhile waits for the release instead of finding the context busy.
    ending: asyncio.Event | None = field(default=None, repr=False, compare=False)

    def snapshot(self) -> dict[str, Any]:
        return {"owner": self.owner, "contextId": self.context_id, "cwd": self.cwd, "channel": self.channel,
                "history": list(self.history), "session": dict(self.session)}

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> ContextState | None:
        owner, context_id, cwd = data.get("owner"), data.get("contextId"), data.get("cwd")
        if not (isinstance(owner, str) and isinstance(context_id, str) and isinstance(cwd, str)):
            return None
        history = data.get("history")
        session = data.get("session")
        channel = data.get("channel")
        return cls(context_id=context_id, owner=owner, cwd=cwd,
                   channel=channel if isinstance(channel, str) else None,
                   history=[h for h in history if isinstance(h, dict)] if isinstance(history, list) else [],
                   session=session if isinstance(session, dict) else {})


class ContextRegistry:
    """Reserves contexts for turns, persists them and evicts idle ones."""

    def __init__(self, directory: Path | None, writer: SnapshotWriter | None, idle_timeout: float,
                 cache_size: int = 0, link: NodeLink | None = None) -> None:
        self._link = link
        self._dir = JsonDirectory(directory / "contexts") if directory is not None else None
        self._writer = writer
        self.idle_timeout = idle_timeout
        self.cache_size = cache_size
        self._live: OrderedDict[tuple[str, str], ContextState] = OrderedDict()
        if writer is not None and self._dir is not None and cache_size:
            writer.on_batch.append(lambda _: self.trim())
        self._evictor: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._live)

    def loaded(self, owner: str, context_id: str) -> bool:
        """Whether the context is in memory (not evicted)."""
        return (owner, context_id) in self._live

    def running_task(self, owner: str, context_id: str) -> str | None:
        """The task whose turn holds the context on this node (``None``: no turn runs here)."""
        state = self._live.get((owner, context_id))
        return state.running_task if state is not None else None

    def session_of(self, owner: str, context_id: str) -> dict[str, Any] | None:
        """A copy of the context's session as it stands (in memory, else its snapshot), without loading it;
        ``None`` for a context this node does not know (with a shared backend: one not held here)."""
        state = self._live.get((owner, context_id))
        if state is None and self._link is None:
            state = self._restore(owner, context_id)
        return dict(state.session) if state is not None else None

    def cwd_of(self, owner: str, context_id: str) -> str | None:
        """The workspace of ``owner``'s context (in memory, else its snapshot), without loading it; ``None``
        for a context this node does not know (safe mode's projection roots)."""
        state = self._live.get((owner, context_id))
        if state is None and self._link is None:
            state = self._restore(owner, context_id)
        return state.cwd if state is not None else None

    def cwds_of_context(self, context_id: str) -> list[str]:
        """The workspaces of the contexts in memory named ``context_id``, whoever owns them: where no caller
        is known (a push delivery, whose job holds only a hashed owner key), safe mode's projection roots."""
        return [state.cwd for (_, cid), state in list(self._live.items()) if cid == context_id]

    async def reserve(self, owner: str, context_id: str, cwd: str, channel: str | None,
                      task_id: str) -> ContextState:
        """Claim the context for one turn; refuse a busy context or a different workspace."""
        if self._link is not None:
            return await self._reserve_shared(self._link, owner, context_id, cwd, channel, task_id)
        key = (owner, context_id)
        if self._writer is not None and key not in self._live:
            await self._writer.room()  # a context not in memory yet: wait while too many snapshots are queued
        state = self._live.get(key) or self._restore(owner, context_id)
        if state is None:
            state = ContextState(context_id=context_id, owner=owner, cwd=cwd)
        if state.cwd != cwd:
            raise InvalidParamsError(message=OTHER_WORKSPACE)
        await _until_ended(state)
        if state.running_task is not None:
            raise UnsupportedOperationError(message=ALREADY_WORKING)
        self._live[key] = state
        self._live.move_to_end(key)
        state.running_task = task_id
        state.last_used = time.monotonic()
        if channel is not None and channel != state.channel:
            state.channel = channel
        self.save(state)
        return state

    async def _reserve_shared(self, link: NodeLink, owner: str, context_id: str, cwd: str, channel: str | None,
                              task_id: str) -> ContextState:
        busy = self._live.get((owner, context_id))
        if busy is not None:
            await _until_ended(busy)
        if busy is not None and busy.running_task is not None:  # its turn runs here: no need to ask Redis
            raise UnsupportedOperationError(message=ALREADY_WORKING)
        lease = await link.lease(owner, context_id, task_id)
        try:
            state = ContextState.from_snapshot(lease.snapshot) if lease.snapshot is not None else None
            if state is None or (state.owner, state.context_id) != (owner, context_id):
                state = ContextState(context_id=context_id, owner=owner, cwd=cwd)
            if state.cwd != cwd:
                raise InvalidParamsError(message=OTHER_WORKSPACE)
        except BaseException:
            await link.release(lease, None)
            raise
        if channel is not None:
            state.channel = channel
        state.running_task = task_id
        state.lease = lease
        self._live[(owner, context_id)] = state
        return state

    def ending(self, owner: str, context_id: str, task_id: str) -> None:
        """The turn of ``task_id`` holding the context is ending (it has published its last state): until its
        release, a reservation of the context waits for it rather than being refused as busy."""
        state = self._live.get((owner, context_id))
        if state is not None and state.running_task == task_id and state.ending is None:
            state.ending = asyncio.Event()

    async def settled(self, owner: str, context_id: str) -> None:
        """Wait (bounded) until a turn of the context that is ending has let go of it: what a new message is
        checked against (a suspended permission wait, say) is then what that turn left."""
        state = self._live.get((owner, context_id))
        if state is not None:
            await _until_ended(state)

    async def release(self, state: ContextState) -> None:
        """End the turn holding the context and persist its state."""
        state.running_task = None
        if state.ending is not None:
            ending, state.ending = state.ending, None
            ending.set()
        state.last_used = time.monotonic()
        if self._link is not None and state.lease is not None:
            lease, state.lease = state.lease, None
            del state.history[:-HISTORY_LIMIT]
            self._live.pop((state.owner, state.context_id), None)
            await self._link.release(lease, state.snapshot())
            return
        self.save(state)

    async def persist(self, state: ContextState) -> None:
        """Write the context's snapshot and wait until it is on disk: a pipeline turn's session holds what the next
        request is checked against (its handoff, the task it waits on), so it is durable before the turn's end is
        acknowledged. Nothing to wait for without persistence or with a shared backend (written at release)."""
        if self._link is not None or self._dir is None or self._writer is None:
            return
        self.save(state)
        await self._writer.barrier()

    def save(self, state: ContextState) -> None:
        del state.history[:-HISTORY_LIMIT]
        if self._dir is not None and self._writer is not None:
            snapshot = state.snapshot()
            self._writer.put(self._dir, file_key(state.owner, state.context_id), lambda: snapshot)

    def ensure_loaded(self, owner: str, context_id: str) -> tuple[ContextState, bool] | None:
        """The context in memory, read back from its snapshot when it is not (``True``: it was read back);
        ``None`` when it has no snapshot either. Contexts that live in a shared backend: ``NotImplementedError``."""
        if self._link is not None:
            raise NotImplementedError("contexts live in the shared state backend")
        key = (owner, context_id)
        state = self._live.get(key)
        if state is not None:
            state.last_used = time.monotonic()
            return state, False
        state = self._restore(owner, context_id)
        if state is None:
            return None
        self._live[key] = state
        return state, True

    def _restore(self, owner: str, context_id: str) -> ContextState | None:
        if self._dir is None:
            return None
        data = self._dir.read(file_key(owner, context_id))
        state = ContextState.from_snapshot(data) if data is not None else None
        if state is not None and (state.owner, state.context_id) != (owner, context_id):
            return None
        return state

    def trim(self) -> int:
        """Unload the least recently used idle contexts beyond ``cache_size`` whose snapshots are written."""
        excess = len(self._live) - self.cache_size
        if excess <= 0 or self._writer is None or self._dir is None:
            return 0
        victims = []
        for key, state in self._live.items():
            if excess <= 0:
                break
            if state.running_task is None and not self._writer.is_pending(self._dir, file_key(*key)):
                victims.append(key)
                excess -= 1
        for key in victims:
            del self._live[key]
        return len(victims)

    def evict_idle(self, now: float | None = None) -> int:
        """Drop idle contexts from memory; a running turn (also one waiting for an answer) keeps its context."""
        now = time.monotonic() if now is None else now
        idle = [key for key, s in self._live.items()
                if s.running_task is None and now - s.last_used >= self.idle_timeout]
        for key in idle:
            del self._live[key]
        if idle:
            logger.debug("Evicted %d idle context(s)", len(idle))
        return len(idle)

    def start(self) -> None:
        if self._evictor is None:
            self._evictor = spawn(self._evict_loop(), name="context-evictor")

    async def _evict_loop(self) -> None:
        interval = min(max(self.idle_timeout / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            self.evict_idle()

    async def stop(self) -> None:
        if self._evictor is not None:
            self._evictor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._evictor
            self._evictor = None


def channel_fallback(bound: str | None) -> str:
    """The context's channel, else ``IAC_CODE_CHANNEL``, else ``unknown``."""
    return bound or os.environ.get("IAC_CODE_CHANNEL", "").strip()[:128] or "unknown"


ENDING_WAIT = 10.0
"""Seconds a reservation waits for an ending turn's release (it only persists and lets go by then)."""


async def _until_ended(state: ContextState) -> None:
    ending = state.ending
    if ending is not None and state.running_task is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ending.wait(), ENDING_WAIT)
