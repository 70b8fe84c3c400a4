"""The selection checkpoints: ``<persistence-dir>/resource-selections/<inputId>.json``, one per question.

A record is written (atomically, owner-only) before the question is published (``pending``), when an answer is
taken (``claimed``, with the answer and its digest) and when the model has it (``resolved``); ``abandoned`` when
the user sent a new request instead. Records never expire: a repeated answer is recognised as a replay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from iac_code.api import atomic_write, private_dir, read_private_file

INPUT_ID = re.compile(r"resource-[0-9a-f]{32}")
REQUIRED = ("inputId", "taskId", "contextId", "toolUseId", "state", "selector")
STATES = ("pending", "claimed", "resolved", "abandoned")


class Unreadable(Exception):
    """The record is there but cannot be used; its text is the §9 reason."""


class SelectionStore:
    """The checkpoints under one persistence directory."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "resource-selections"

    def _path(self, input_id: str) -> Path:
        if not INPUT_ID.fullmatch(input_id):
            raise ValueError("inputId is invalid")
        return self.root / f"{input_id}.json"

    def write(self, record: dict[str, Any]) -> None:
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
        return record
