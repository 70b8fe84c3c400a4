"""Push-notification configurations in the shared Redis: owner-scoped, secrets encrypted.

The Redis counterpart of :class:`iac_code.api.EncryptedPushConfigStore`
(same behaviour, ids, normalisation, paging and encryption): each configuration is
one field of the task's hash ``keys.push_configs(task_id)``, named
``<owner digest>:<config id>``, holding the JSON the file store would write
(``token`` and ``authentication.credentials`` Fernet-encrypted with the shared
keyring). Every node and push worker reads the same hash; deleting the task
deletes it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

import redis.asyncio as aioredis
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import PushNotificationConfigStore
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.errors import InternalError
from google.protobuf.json_format import ParseDict
from redis.exceptions import RedisError

from iac_code.api import DELIVERY_CACHE_SIZE, EncryptedPushConfigStore, jsonio, storable_config
from iac_code.api import PUSH_CONFIG_NOT_STORED as NOT_STORED
from iac_code_state_redis.keys import Keys, digest
from iac_code_state_redis.store import NOT_REACHABLE

if TYPE_CHECKING:
    from iac_code.api import PushKeyring

logger = logging.getLogger(__name__)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class RedisPushConfigStore(PushNotificationConfigStore):
    """Owner-scoped push configurations, encrypted, in one Redis hash per task (a2a-sdk's store interface)."""

    def __init__(self, client: aioredis.Redis, keys: Keys, keyring: PushKeyring) -> None:
        self.client = client
        self.keys = keys
        self._keyring = keyring
        self._delivery_cache: OrderedDict[tuple[str, str], tuple[bytes, TaskPushNotificationConfig]] = OrderedDict()

    # The file store's encryption, paging and dispatch list work on ``_keyring`` and ``get_info`` alone.
    _encode = EncryptedPushConfigStore._encode
    list_page = EncryptedPushConfigStore.list_page
    get_info_for_dispatch = EncryptedPushConfigStore.get_info_for_dispatch

    def _decode(self, data: bytes) -> TaskPushNotificationConfig | None:
        try:
            return ParseDict(self._keyring.decrypt_fields(jsonio.loads(data)), TaskPushNotificationConfig(),
                             ignore_unknown_fields=True)
        except Exception as exc:  # corrupt entry or a key no longer in the keyring: skip it, say which kind
            logger.warning("Skipping an unreadable push configuration (%s)", type(exc).__name__)
            return None

    @staticmethod
    def _field(owner_key: str, config_id: str) -> str:
        return f"{owner_key}:{config_id}"

    async def _read_all(self, task_id: str) -> dict[str, bytes]:
        try:
            entries = await self.client.hgetall(self.keys.push_configs(task_id))
        except (RedisError, OSError) as exc:
            logger.error("Could not read push configurations from Redis: %s", type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None
        return {_text(name): value for name, value in entries.items()}

    def _decoded(self, task_id: str, entries: dict[str, bytes],
                 owner_key: str | None = None) -> list[tuple[str, TaskPushNotificationConfig]]:
        """``(owner key, config)`` of the entries (of one owner when given), by owner key then config id."""
        found: list[tuple[str, TaskPushNotificationConfig]] = []
        for name in sorted(entries):
            entry_owner, _, _ = name.partition(":")
            if owner_key is not None and entry_owner != owner_key:
                continue
            config = self._decode(entries[name])
            if config is not None and config.task_id == task_id:
                found.append((entry_owner, config))
        return sorted(found, key=lambda pair: (pair[0], pair[1].id))

    # ------------------------------------------------------------------ a2a-sdk interface

    async def set_info(self, task_id: str, notification_config: TaskPushNotificationConfig,
                       context: ServerCallContext) -> TaskPushNotificationConfig | None:
        config = storable_config(task_id, notification_config)
        if not config.url:  # nothing to deliver to: not stored (the product's behaviour)
            return config
        owner_key = digest(resolve_user_scope(context))
        try:
            await self.client.hset(self.keys.push_configs(config.task_id), self._field(owner_key, config.id),
                                   self._encode(config))
        except (RedisError, OSError) as exc:
            logger.error("Could not store a push configuration in Redis: %s", type(exc).__name__)
            raise InternalError(message=NOT_STORED) from None
        return config

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        owner_key = digest(resolve_user_scope(context))
        return [config for _, config in self._decoded(task_id, await self._read_all(task_id), owner_key)]

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        owner_key = digest(resolve_user_scope(context))
        key = self.keys.push_configs(task_id)
        try:
            if config_id is not None:
                await self.client.hdel(key, self._field(owner_key, config_id))
                return
            names = [n for n in (_text(n) for n in await self.client.hkeys(key)) if n.startswith(f"{owner_key}:")]
            if names:
                await self.client.hdel(key, *names)
        except (RedisError, OSError) as exc:
            logger.error("Could not delete a push configuration in Redis: %s", type(exc).__name__)
            raise InternalError(message=NOT_STORED) from None

    # ------------------------------------------------------------------ kernel use

    async def dispatch_targets(self, task_id: str) -> list[tuple[str, TaskPushNotificationConfig]]:
        """Every configuration of a task across owners, each with its owner key (the owner's digest)."""
        return self._decoded(task_id, await self._read_all(task_id))

    async def read_for_delivery(self, owner_key: str, task_id: str,
                                config_id: str) -> TaskPushNotificationConfig | None:
        """The configuration a job was made for as it is now (``None`` once deleted); do not modify it.

        Decoded configurations are kept in a bounded cache keyed by their stored
        ciphertext, so every attempt sees the current credentials without
        decrypting them again.
        """
        slot = (task_id, self._field(owner_key, config_id))
        try:
            data = await self.client.hget(self.keys.push_configs(task_id), slot[1])
        except (RedisError, OSError) as exc:
            logger.error("Could not read a push configuration from Redis: %s", type(exc).__name__)
            raise InternalError(message=NOT_REACHABLE) from None
        if data is None:
            self._delivery_cache.pop(slot, None)
            return None
        cached = self._delivery_cache.get(slot)
        if cached is not None and cached[0] == data:
            self._delivery_cache.move_to_end(slot)
            return cached[1]
        config = self._decode(data)
        if config is not None and config.task_id == task_id:
            self._delivery_cache[slot] = (data, config)
            while len(self._delivery_cache) > DELIVERY_CACHE_SIZE:
                self._delivery_cache.popitem(last=False)
            return config
        return None
