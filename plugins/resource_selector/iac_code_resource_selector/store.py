"""The selection checkpoints: ``<persistence-dir>/resource-selections/<inputId>.json``, one per question.

A record is written (atomically, owner-only) before the question is published (``pending``), when an answer is
taken (``claimed``, with the answer and its digest) and when the model has it (``resolved``); ``abandoned`` when
the user sent a new request instead. Records never expire: a repeated answer is recognised as a replay.

A record names the tool that asked (``tool``) and carries the digest of what was asked (``payloadDigest``: the
task, context, tool-use id, prompt and selector); a record whose tool or payload no longer agree is refused on
resume (``selector tool changed``, ``selector payload changed``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

from iac_code.api import atomic_write, private_dir, read_private_file
from iac_code_resource_selector.backup import BackupFailed, SelectionBackup
from iac_code_resource_selector.profiles import canonical

logger = logging.getLogger(__name__)

INPUT_ID = re.compile(r"resource-[0-9a-f]{32}")
REQUIRED = ("inputId", "taskId", "contextId", "toolUseId", "state", "selector", "prompt", "tool", "payloadDigest")
TOOL = "select_cloud_resource"
STATES = ("pending", "claimed", "resolved", "abandoned")


class Unreadable(Exception):
    """The record is there but cannot be used; its text is the §9 reason."""


def payload_digest(record: dict[str, Any]) -> str:
    """The digest of what a record asked: task, owner, context, tool-use id, prompt and selector."""
    payload = {k: record.get(k) for k in ("taskId", "ownerRef", "contextId", "toolUseId", "prompt", "selector")}
    return "sha256:" + hashlib.sha256(canonical(payload)).hexdigest()


class SelectionStore:
    """The checkpoints under one persistence directory."""

    def __init__(self, state_dir: Path, backup: SelectionBackup | None = None) -> None:
        self.root = Path(state_dir) / "resource-selections"
        self.backup = backup

    def _path(self, input_id: str) -> Path:
        if not INPUT_ID.fullmatch(input_id):
            raise ValueError("inputId is invalid")
        return self.root / f"{input_id}.json"

    def write(self, record: dict[str, Any], *, critical: bool = False) -> None:
        """Write ``record`` and its backup copy (when backups are configured). ``critical``: the copy must be
        written first (:class:`~iac_code_resource_selector.backup.BackupFailed` otherwise, and nothing is
        written); else a failed copy is logged and the checkpoint is written all the same."""
        if self.backup is not None:
            try:
                self.backup.write(record)
            except BackupFailed as exc:
                if critical:
                    raise
                logger.warning("Backup of selection %s failed: %s", record.get("inputId"), exc)
        private_dir(self.root)
        atomic_write(self._path(record["inputId"]), json.dumps(record, sort_keys=True).encode())

    def read(self, input_id: str) -> dict[str, Any] | None:
        """The record, ``None`` when there is none; :class:`Unreadable` (``checkpoint is unreadable|incomplete``,
        ``checkpoint contract is invalid``) when it cannot be used."""
        try:
            data = read_private_file(self._path(input_id))
        except OSError:
            raise Unreadable("checkpoint is unreadable") from None
        if data is None:
            return None
        try:
            record = json.loads(data)
        except ValueError:
            raise Unreadable("checkpoint is unreadable") from None
        if not isinstance(record, dict) or any(k not in record for k in REQUIRED):
            raise Unreadable("checkpoint is incomplete")
        if record["state"] not in STATES or not isinstance(record["selector"], dict) or record["inputId"] != input_id:
            raise Unreadable("checkpoint contract is invalid")
        if record["tool"] != TOOL:
            raise Unreadable("selector tool changed")
        if record["payloadDigest"] != payload_digest(record):
            raise Unreadable("selector payload changed")
        return record

    def pending_in(self, context_id: str) -> str | None:
        """The ``inputId`` of a question still waiting (``pending``) in ``context_id``, if any."""
        try:
            paths = sorted(self.root.glob("resource-*.json"))
        except OSError:
            return None
        for path in paths:
            try:
                record = self.read(path.stem)
            except (Unreadable, ValueError):
                continue
            if record is not None and record["contextId"] == context_id and record["state"] == "pending":
                return str(record["inputId"])
        return None
