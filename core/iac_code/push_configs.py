"""Push-notification configurations that survive a restart.

a2a-sdk's ``InMemoryPushNotificationConfigStore`` keeps the configurations;
this subclass also writes each task's list to
``<persistence-dir>/push-configs/<key>.json`` (atomic, ``0600``) and returns
only once it is on disk, because a stored configuration is acknowledged to the
client. The files hold the webhook credentials a client gave, readable by the
server's user only.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryPushNotificationConfigStore
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.errors import InternalError
from google.protobuf.json_format import ParseDict

from iac_code.jsonio import message_to_json
from iac_code.storage import JsonDirectory, file_key

logger = logging.getLogger(__name__)

FORMAT = "iac-code.push-configs.v1"
NOT_STORED = "The push notification configuration could not be stored."


class DurablePushConfigStore(InMemoryPushNotificationConfigStore):
    """The SDK's push-config store, written through to owner-only JSON files."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self._dir = JsonDirectory(directory)
        self._write_lock = asyncio.Lock()
        self._load()

    def _load(self) -> None:
        loaded = 0
        for _, document in self._dir.load_all():
            owner, task_id, configs = document.get("owner"), document.get("taskId"), document.get("configs")
            if document.get("format") != FORMAT or not isinstance(owner, str) or not isinstance(task_id, str) \
                    or not isinstance(configs, list):
                logger.warning("Skipping foreign push configuration file in %s", self._dir.path.name)
                continue
            parsed = []
            for config in configs:
                try:
                    parsed.append(ParseDict(config, TaskPushNotificationConfig()))
                except Exception:
                    logger.warning("Skipping unreadable push configuration of a task")
            if parsed:
                self._push_notification_infos.setdefault(owner, {})[task_id] = parsed
                loaded += 1
        if loaded:
            logger.info("Restored the push configurations of %d task(s)", loaded)

    async def set_info(self, task_id: str, notification_config: TaskPushNotificationConfig,
                       context: ServerCallContext) -> TaskPushNotificationConfig:
        stored = await super().set_info(task_id, notification_config, context)
        await self._persist(self.owner_resolver(context), task_id)
        return stored

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        await super().delete_info(task_id, context, config_id)
        await self._persist(self.owner_resolver(context), task_id)

    async def _persist(self, owner: str, task_id: str) -> None:
        async with self._write_lock:  # one write at a time, each of the state at that moment
            with self.lock:
                configs = list(self._push_notification_infos.get(owner, {}).get(task_id, []))
            key = file_key(owner, task_id)
            document: dict[str, Any] = {"format": FORMAT, "owner": owner, "taskId": task_id,
                                        "configs": [message_to_json(c) for c in configs]}
            try:
                if configs:
                    await asyncio.to_thread(self._dir.write, key, document)
                else:
                    await asyncio.to_thread(self._dir.delete, key)
            except OSError as exc:
                logger.error("Could not store a push configuration: %s", type(exc).__name__)
                raise InternalError(message=NOT_STORED) from None
