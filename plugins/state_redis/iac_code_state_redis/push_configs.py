"""Push-notification configurations in the shared Redis, as the push service's opaque records.

The push service (another plugin) encodes, encrypts and names each configuration; this
store only keeps the bytes: one field of the task's hash ``keys.push_configs(task_id)``
per record. Every node and push worker reads the same hash; deleting the task deletes
it. Redis unreachable: a2a-sdk's ``InternalError`` with the task store's message (no
address, no password).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis.asyncio as aioredis
from a2a.utils.errors import InternalError
from redis.exceptions import RedisError

from iac_code.api import PushConfigRecords
from iac_code_state_redis.keys import Keys
from iac_code_state_redis.store import NOT_REACHABLE

logger = logging.getLogger(__name__)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _unreachable(doing: str, exc: BaseException) -> InternalError:
    logger.error("Could not %s push configurations in Redis: %s", doing, type(exc).__name__)
    return InternalError(message=NOT_REACHABLE)


class RedisPushConfigRecords(PushConfigRecords):
    """The push service's configuration records of each task: the fields of one Redis hash per task."""

    def __init__(self, client: aioredis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def put(self, task_id: str, name: str, data: bytes) -> None:
        try:
            await self.client.hset(self.keys.push_configs(task_id), name, data)
        except (RedisError, OSError) as exc:
            raise _unreachable("store", exc) from None

    async def get(self, task_id: str, name: str) -> bytes | None:
        try:
            data = await self.client.hget(self.keys.push_configs(task_id), name)
        except (RedisError, OSError) as exc:
            raise _unreachable("read", exc) from None
        return bytes(data) if data is not None else None

    async def read_all(self, task_id: str) -> dict[str, bytes]:
        try:
            entries = await self.client.hgetall(self.keys.push_configs(task_id))
        except (RedisError, OSError) as exc:
            raise _unreachable("read", exc) from None
        return {_text(name): value for name, value in entries.items()}

    async def names(self, task_id: str) -> list[str]:
        try:
            return [_text(name) for name in await self.client.hkeys(self.keys.push_configs(task_id))]
        except (RedisError, OSError) as exc:
            raise _unreachable("read", exc) from None

    async def delete(self, task_id: str, names: Sequence[str]) -> None:
        if not names:
            return
        try:
            await self.client.hdel(self.keys.push_configs(task_id), *names)
        except (RedisError, OSError) as exc:
            raise _unreachable("delete", exc) from None
