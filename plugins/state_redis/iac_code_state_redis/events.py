"""Task events across nodes: a2a-sdk's ``TaskEventStream`` over the task store's Redis streams.

:class:`iac_code_state_redis.store.RedisTaskStore` appends every write of a task
to ``keys.events(task_id)`` in the same script that stores the task (entry id
``<version>-1``), so publishing has nothing to do; subscribers block on that
stream with ``XREAD`` and get every event after a version, on any node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator

import redis.asyncio as aioredis
from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent
from redis.exceptions import RedisError

from iac_code.api import version_number
from iac_code_state_redis.keys import Keys
from iac_code_state_redis.store import entry_version, event_from_bytes

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_MS = 5000
RETRY_DELAY_S = 0.5
BATCH = 256


def _raise_if_cancelled() -> None:
    """Honour a cancellation redis-py swallowed (a cancel while it takes a connection ends the read normally)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class RedisTaskEventStream(TaskEventStream):
    """Live task events from the shared event log (the store writes it; this only reads).

    The client's ``socket_timeout`` must exceed ``block_ms`` (or be ``None``), or each
    idle ``XREAD`` would end in a timeout that is then retried.
    """

    def __init__(self, client: aioredis.Redis, keys: Keys, *, block_ms: int = DEFAULT_BLOCK_MS) -> None:
        self.client = client
        self.keys = keys
        self.block_ms = block_ms

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing to do: the store logs each event in the same script that stores the task."""
        del task_id, event

    async def subscribe(  # type: ignore[override]
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """Yield the task's events after ``after``, then the live ones, until the caller closes the generator.

        Placeholders (writes without an event) are skipped. A lost connection is
        retried after a short delay from the last version seen, so nothing is
        delivered twice.
        """
        cursor = version_number(after)
        stream = self.keys.events(task_id)
        while True:
            try:
                reply = await self.client.xread({stream: f"{cursor}-1"}, count=BATCH, block=self.block_ms)
            except (RedisError, OSError) as exc:
                _raise_if_cancelled()
                logger.warning("Reading the events of task %s from Redis failed (%s); retrying",
                               task_id, type(exc).__name__)
                await asyncio.sleep(RETRY_DELAY_S)
                continue
            _raise_if_cancelled()
            for _, entries in reply or ():
                for entry_id, fields in entries:
                    version = entry_version(entry_id)
                    if version <= cursor:
                        continue
                    if version != cursor + 1:
                        logger.warning("Events %d to %d of task %s are no longer retained",
                                       cursor + 1, version - 1, task_id)
                    cursor = version
                    event = event_from_bytes(fields.get(b"e", b""))
                    if event is not None:
                        yield VersionedEvent(event=event, version=TaskVersion(version))

    async def destroy(self, task_id: str) -> None:
        """Nothing to release: the log is deleted with the task, subscribers stop when their caller does."""
        del task_id
