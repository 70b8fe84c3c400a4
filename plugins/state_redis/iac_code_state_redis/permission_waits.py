"""Durable permission-wait checkpoints in the shared Redis: an answer resumes a suspended wait on any node.

Each task's checkpoints are the fields of one hash ``keys.permission_waits(task_id)`` (boundary id →
the record's JSON); the open ones of a context are also listed in ``keys.open_permission_waits(owner,
context)`` (boundary id → task id), so a new message in that context is refused while one waits.
Every write is a compare-and-set on the record's ``generation`` in one Lua script, so two nodes (or
two answers) never both move a checkpoint on. A task whose checkpoints are all resolved or cancelled
keeps them :data:`RETAIN_SECONDS` (repeated answers get their acknowledgement), then Redis drops them.
Redis unreachable: a2a-sdk's ``InternalError`` with the task store's message.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis.asyncio as aioredis
from a2a.utils.errors import InternalError
from redis.exceptions import RedisError

from iac_code.api import PermissionWaitRecords
from iac_code_state_redis.keys import Keys
from iac_code_state_redis.store import NOT_REACHABLE

logger = logging.getLogger(__name__)

RETAIN_SECONDS = 7 * 24 * 3600
OPEN_PHASES = frozenset({"WAITING", "TIMEOUT_GRACE", "SUSPENDING", "SUSPENDED", "RESTORING"})

# KEYS: the task's hash, the context's open list. ARGV: boundary id, expected generation ('' : new), record JSON,
# '1' when the record is open, task id, seconds a finished task's records are kept.
_WRITE = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  if current then return 0 end
else
  if not current then return 0 end
  local generation = cjson.decode(current)['generation']
  if tostring(generation) ~= ARGV[2] then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[5])
  redis.call('PERSIST', KEYS[1])
else
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[6])
end
return 1
"""


def _unreachable(doing: str, exc: BaseException) -> InternalError:
    logger.error("Could not %s permission checkpoints in Redis: %s", doing, type(exc).__name__)
    return InternalError(message=NOT_REACHABLE)


def _records(values: list[Any]) -> list[dict[str, Any]]:
    records = []
    for value in values:
        try:
            record = json.loads(value)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


class RedisPermissionWaits(PermissionWaitRecords):
    """:class:`iac_code.api.PermissionWaitRecords` on Redis (see the module)."""

    def __init__(self, client: aioredis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._write = client.register_script(_WRITE)

    async def of_task(self, task_id: str) -> list[dict[str, Any]]:
        try:
            return _records(await self.client.hvals(self.keys.permission_waits(task_id)))
        except (RedisError, OSError) as exc:
            raise _unreachable("read", exc) from None

    async def open_in_context(self, owner: str, context_id: str) -> list[dict[str, Any]]:
        try:
            listed = await self.client.hgetall(self.keys.open_permission_waits(owner, context_id))
            found = []
            for task_id in {v.decode() if isinstance(v, bytes) else str(v) for v in listed.values()}:
                found += [r for r in await self.of_task(task_id) if r.get("owner") == owner
                          and r.get("contextId") == context_id and r.get("phase") in OPEN_PHASES]
            return found
        except (RedisError, OSError) as exc:
            raise _unreachable("read", exc) from None

    async def write(self, record: dict[str, Any], expected_generation: int | None) -> bool:
        task_id, owner, context_id = str(record["taskId"]), str(record["owner"]), str(record["contextId"])
        try:
            written = await self._write(
                keys=[self.keys.permission_waits(task_id), self.keys.open_permission_waits(owner, context_id)],
                args=[str(record["boundaryId"]), "" if expected_generation is None else str(expected_generation),
                      json.dumps(record, separators=(",", ":"), ensure_ascii=False),
                      "1" if record.get("phase") in OPEN_PHASES else "0", task_id, RETAIN_SECONDS])
        except (RedisError, OSError) as exc:
            raise _unreachable("store", exc) from None
        return bool(written)
