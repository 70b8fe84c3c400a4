"""Push-notification configurations: owner-scoped, secrets encrypted, on disk or in a shared backend.

Two implementations of a2a-sdk's ``PushNotificationConfigStore`` with one behaviour (ids,
normalisation, paging, encryption):

* :class:`EncryptedPushConfigStore` (``task-store: local``): every configuration is one
  owner-only file (spec: push.md §4)::

      <persistence-dir>/push_configs/<sha256 of owner>/<task id stem>/<config id stem>.json

  written atomically before the call returns (a stored configuration is
  acknowledged to the client). Nothing is cached but decoded configurations for
  delivery: the files are small and a separate ``push-worker`` process reads the
  same directory.
* :class:`SharedPushConfigStore` (a shared state backend, e.g. ``task-store: redis``):
  the same documents as the backend's opaque records (:class:`iac_code.api.PushConfigRecords`),
  one per ``<owner key>:<config id>`` of the task, read by every node and push worker.

``token`` and ``authentication.credentials`` are Fernet-encrypted in what is stored
(``iacCodeEncryptedFields``); Get and List return them decrypted, as the product this
server matches does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import logging
import os
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import PushNotificationConfigStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.errors import InternalError, InvalidParamsError
from google.protobuf.json_format import ParseDict

from iac_code.api import PushConfigRecords, atomic_write, fsync_dir, jsonio, message_to_json, private_dir

if TYPE_CHECKING:
    from iac_code_push.crypto import PushKeyring

logger = logging.getLogger(__name__)

DIRECTORY = "push_configs"
LEGACY_DIRECTORY = "push-configs"
DEFAULT_PAGE_SIZE = 50
DELIVERY_CACHE_SIZE = 4096
NOT_STORED = "The push notification configuration could not be stored."
INVALID_ID = "Invalid A2A id"
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_PLAIN_STEM = re.compile(r"^[A-Za-z0-9_.-]+$")
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


def owner_dir_name(owner: str) -> str:
    """The directory of one owner's configurations: the SHA-256 of the owner string."""
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()


def id_stem(value: str) -> str:
    """A file-name stem for a protocol id: the id itself when safe everywhere, else ``a2aid~`` + base64url."""
    base = unicodedata.normalize("NFKC", value).split(".", 1)[0].upper()
    if _PLAIN_STEM.fullmatch(value) and not value.endswith(".") and base not in _RESERVED:
        return value
    return "a2aid~" + base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")


def check_config_id(value: str) -> None:
    """Push-config and task ids follow the A2A id rule (``-32602`` otherwise)."""
    if not _ID.fullmatch(value):
        raise InvalidParamsError(message=INVALID_ID)


def storable_config(task_id: str, config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """A config as every store keeps it: a2a-sdk's normalisation (default id), both ids checked."""
    normalised = normalize_push_notification_config(task_id, config)
    check_config_id(normalised.task_id)
    check_config_id(normalised.id)
    return normalised


def encode_page_token(config_id: str) -> str:
    return base64.b64encode(config_id.encode("utf-8")).decode("ascii")


def decode_page_token(token: str) -> str:
    """The config id a page token starts at; ``InvalidParamsError`` when it is not base64 text."""
    try:
        return base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise InvalidParamsError(message="Token is not a valid base64-encoded cursor.") from None


class PushConfigStore(PushNotificationConfigStore):
    """What both stores add to a2a-sdk's interface: encryption, paging, the delivery-side reads."""

    def __init__(self, keyring: PushKeyring) -> None:
        self._keyring = keyring

    def _encode(self, config: TaskPushNotificationConfig) -> bytes:
        document = self._keyring.encrypt_fields(message_to_json(config))
        return jsonio.dumps(document, sort_keys=True)

    def _parse(self, data: bytes) -> TaskPushNotificationConfig:
        """A stored document read back (its secrets decrypted); raises when corrupt or its key is gone."""
        return ParseDict(self._keyring.decrypt_fields(jsonio.loads(data)), TaskPushNotificationConfig(),
                         ignore_unknown_fields=True)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return [config for _, config in await self.dispatch_targets(task_id)]

    async def list_page(self, task_id: str, context: ServerCallContext, page_size: int,
                        page_token: str) -> tuple[list[TaskPushNotificationConfig], str]:
        """One page of the caller's configurations of a task, by config id; the next page's token or ``""``."""
        configs = await self.get_info(task_id, context)
        start = 0
        if page_token:
            first = decode_page_token(page_token)
            ids = [c.id for c in configs]
            if first not in ids:
                raise InvalidParamsError(message=f"Invalid page token: {page_token}")
            start = ids.index(first)
        size = page_size or DEFAULT_PAGE_SIZE
        page = configs[start:start + size]
        rest = configs[start + size:]
        return page, encode_page_token(rest[0].id) if rest else ""

    async def dispatch_targets(self, task_id: str) -> list[tuple[str, TaskPushNotificationConfig]]:
        """Every configuration of a task across owners, each with its owner key (what a job's ``owner`` holds)."""
        raise NotImplementedError

    def read_for_delivery(self, owner_key: str, task_id: str,
                          config_id: str) -> TaskPushNotificationConfig | None | Awaitable[TaskPushNotificationConfig | None]:
        """The configuration a job was made for as it is now (``None`` once deleted); do not modify it."""
        raise NotImplementedError


class EncryptedPushConfigStore(PushConfigStore):
    """Owner-scoped push configurations, one encrypted file each (a2a-sdk's store interface)."""

    def __init__(self, state_dir: Path, keyring: PushKeyring) -> None:
        super().__init__(keyring)
        self.root = state_dir / DIRECTORY
        self._write_lock = asyncio.Lock()
        self._delivery_cache: OrderedDict[Path, tuple[tuple[int, int, int], TaskPushNotificationConfig]] = OrderedDict()
        private_dir(self.root)

    # ------------------------------------------------------------------ files

    def _task_dir(self, owner: str, task_id: str) -> Path:
        return self.root / owner_dir_name(owner) / id_stem(task_id)

    def _decode(self, path: Path) -> TaskPushNotificationConfig | None:
        try:
            return self._parse(path.read_bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:  # corrupt file or a key no longer in the keyring: skip it, say which kind
            logger.warning("Skipping an unreadable push configuration (%s)", type(exc).__name__)
            return None

    def _read_task(self, owner: str, task_id: str) -> list[TaskPushNotificationConfig]:
        directory = self._task_dir(owner, task_id)
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
        except FileNotFoundError:
            return []
        configs = [c for c in (self._decode(directory / n) for n in names) if c is not None and c.task_id == task_id]
        return sorted(configs, key=lambda c: c.id)

    def _write(self, owner: str, config: TaskPushNotificationConfig) -> None:
        directory = self._task_dir(owner, config.task_id)
        if not directory.is_dir():
            private_dir(directory)
            fsync_dir(directory.parent)
            fsync_dir(directory.parent.parent)
        atomic_write(directory / f"{id_stem(config.id)}.json", self._encode(config))

    def _delete(self, owner: str, task_id: str, config_id: str | None) -> None:
        directory = self._task_dir(owner, task_id)
        if config_id is None:
            targets = [directory / n for n in self._names(directory)]
        else:
            targets = [directory / f"{id_stem(config_id)}.json"]
        for path in targets:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if targets:
            fsync_dir(directory)
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty

    @staticmethod
    def _names(directory: Path) -> list[str]:
        try:
            return [n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith(".")]
        except FileNotFoundError:
            return []

    # ------------------------------------------------------------------ a2a-sdk interface

    async def set_info(self, task_id: str, notification_config: TaskPushNotificationConfig,
                       context: ServerCallContext) -> TaskPushNotificationConfig | None:
        config = storable_config(task_id, notification_config)
        if not config.url:  # nothing to deliver to: not stored (the product's behaviour)
            return config
        owner = resolve_user_scope(context)
        async with self._write_lock:
            try:
                await asyncio.to_thread(self._write, owner, config)
            except OSError as exc:
                logger.error("Could not store a push configuration: %s", type(exc).__name__)
                raise InternalError(message=NOT_STORED) from None
        return config

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        return await asyncio.to_thread(self._read_task, resolve_user_scope(context), task_id)

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        owner = resolve_user_scope(context)
        async with self._write_lock:
            try:
                await asyncio.to_thread(self._delete, owner, task_id, config_id)
            except OSError as exc:
                logger.error("Could not delete a push configuration: %s", type(exc).__name__)
                raise InternalError(message=NOT_STORED) from None

    # ------------------------------------------------------------------ delivery side

    def _dispatch_targets(self, task_id: str) -> list[tuple[str, TaskPushNotificationConfig]]:
        stem = id_stem(task_id)
        try:
            owners = os.listdir(self.root)
        except FileNotFoundError:
            return []
        found: list[tuple[str, TaskPushNotificationConfig]] = []
        for owner_dir in sorted(owners):
            directory = self.root / owner_dir / stem
            for name in sorted(self._names(directory)):
                config = self._decode(directory / name)
                if config is not None and config.task_id == task_id:
                    found.append((owner_dir, config))
        return found

    async def dispatch_targets(self, task_id: str) -> list[tuple[str, TaskPushNotificationConfig]]:
        """Every configuration of a task across owners, each with its owner key (the owner directory name)."""
        return await asyncio.to_thread(self._dispatch_targets, task_id)

    def read_for_delivery(self, owner_key: str, task_id: str, config_id: str) -> TaskPushNotificationConfig | None:
        """The configuration a job was made for as it is now (``None`` once deleted); do not modify it.

        Decoded configurations are kept in a bounded cache and checked against the
        file (``stat``: an atomic replace changes the inode), so every attempt sees
        the current credentials without decrypting them again.
        """
        path = self.root / owner_key / id_stem(task_id) / f"{id_stem(config_id)}.json"
        try:
            info = os.stat(path)
        except FileNotFoundError:
            self._delivery_cache.pop(path, None)
            return None
        signature = (info.st_ino, info.st_mtime_ns, info.st_size)
        cached = self._delivery_cache.get(path)
        if cached is not None and cached[0] == signature:
            self._delivery_cache.move_to_end(path)
            return cached[1]
        config = self._decode(path)
        if config is not None:
            self._delivery_cache[path] = (signature, config)
            while len(self._delivery_cache) > DELIVERY_CACHE_SIZE:
                self._delivery_cache.popitem(last=False)
        return config

    def import_legacy(self, state_dir: Path) -> int:
        """Move configurations of the earlier clear-text layout (``push-configs/``) into this store; delete them."""
        legacy = state_dir / LEGACY_DIRECTORY
        if not legacy.is_dir():
            return 0
        moved = 0
        for path in sorted(legacy.glob("*.json")):
            try:
                document = jsonio.loads(path.read_bytes())
                owner = str(document["owner"])
                for raw in document.get("configs") or []:
                    config = ParseDict(raw, TaskPushNotificationConfig(), ignore_unknown_fields=True)
                    self._write(owner, config)
                    moved += 1
            except Exception as exc:
                logger.warning("Could not import an earlier push configuration file (%s)", type(exc).__name__)
                continue
            path.unlink()
        with contextlib.suppress(OSError):
            legacy.rmdir()
        return moved


def record_owner_key(owner: str) -> str:
    """The owner part of a shared record's name: 32 hex digits of the owner's SHA-256."""
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]


def _record_name(owner_key: str, config_id: str) -> str:
    return f"{owner_key}:{config_id}"


class SharedPushConfigStore(PushConfigStore):
    """Owner-scoped push configurations, encrypted, as a shared state backend's opaque records.

    Each configuration is the record ``<owner key>:<config id>`` of its task, holding the
    document the file store would write. The backend answers an outage with a2a-sdk's
    ``InternalError`` (its own message); a write that fails says the configuration could
    not be stored.
    """

    def __init__(self, records: PushConfigRecords, keyring: PushKeyring) -> None:
        super().__init__(keyring)
        self.records = records
        self._delivery_cache: OrderedDict[tuple[str, str], tuple[bytes, TaskPushNotificationConfig]] = OrderedDict()

    def _decode(self, data: bytes) -> TaskPushNotificationConfig | None:
        try:
            return self._parse(data)
        except Exception as exc:  # corrupt entry or a key no longer in the keyring: skip it, say which kind
            logger.warning("Skipping an unreadable push configuration (%s)", type(exc).__name__)
            return None

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
        name = _record_name(record_owner_key(resolve_user_scope(context)), config.id)
        try:
            await self.records.put(config.task_id, name, self._encode(config))
        except InternalError:
            raise InternalError(message=NOT_STORED) from None
        return config

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        owner_key = record_owner_key(resolve_user_scope(context))
        return [config for _, config in self._decoded(task_id, await self.records.read_all(task_id), owner_key)]

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        owner_key = record_owner_key(resolve_user_scope(context))
        try:
            if config_id is not None:
                await self.records.delete(task_id, [_record_name(owner_key, config_id)])
                return
            names = [n for n in await self.records.names(task_id) if n.startswith(f"{owner_key}:")]
            if names:
                await self.records.delete(task_id, names)
        except InternalError:
            raise InternalError(message=NOT_STORED) from None

    # ------------------------------------------------------------------ delivery side

    async def dispatch_targets(self, task_id: str) -> list[tuple[str, TaskPushNotificationConfig]]:
        """Every configuration of a task across owners, each with its owner key."""
        return self._decoded(task_id, await self.records.read_all(task_id))

    async def read_for_delivery(self, owner_key: str, task_id: str,
                                config_id: str) -> TaskPushNotificationConfig | None:
        """The configuration a job was made for as it is now (``None`` once deleted); do not modify it.

        Decoded configurations are kept in a bounded cache keyed by their stored
        ciphertext, so every attempt sees the current credentials without
        decrypting them again.
        """
        slot = (task_id, _record_name(owner_key, config_id))
        data = await self.records.get(task_id, slot[1])
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
