"""Features' shared records in Redis (:class:`iac_code.api.SharedRecords`): one hash per kind.

``keys.records(kind)`` maps each record's key to its JSON (execution control: context id → execution).
A write is one ``HSET``: durable as the server's AOF makes it (see docs/cluster.md). Redis unreachable:
``ConnectionError``, never a Redis error text.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from iac_code.api import SharedRecords
from iac_code_state_redis.keys import Keys

logger = logging.getLogger(__name__)


def _parse(value: Any) -> dict[str, Any] | None:
    try:
        record = json.loads(value)
    except (TypeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


class RedisSharedRecords(SharedRecords):
    """:class:`iac_code.api.SharedRecords` on Redis (see the module)."""

    def __init__(self, client: aioredis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def get(self, kind: str, key: str) -> dict[str, Any] | None:
        try:
            return _parse(await self.client.hget(self.keys.records(kind), key))
        except (RedisError, OSError) as exc:
            raise ConnectionError(f"shared records unreachable ({type(exc).__name__})") from None

    async def put(self, kind: str, key: str, record: dict[str, Any]) -> None:
        data = json.dumps(record, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        try:
            await self.client.hset(self.keys.records(kind), key, data)
        except (RedisError, OSError) as exc:
            raise ConnectionError(f"shared records unreachable ({type(exc).__name__})") from None

    async def all(self, kind: str) -> list[dict[str, Any]]:
        try:
            values = await self.client.hvals(self.keys.records(kind))
        except (RedisError, OSError) as exc:
            raise ConnectionError(f"shared records unreachable ({type(exc).__name__})") from None
        return [record for record in map(_parse, values) if record is not None]
