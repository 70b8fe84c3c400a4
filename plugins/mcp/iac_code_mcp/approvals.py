"""Durable answers to the project-server question (``mcp-project-servers: ask``).

An answer holds for one context, its workspace, the server's name and the exact definition (its fingerprint):
it is kept in ``<persistence-dir>/mcp-approvals.json`` (written atomically: temporary file, fsync, rename;
owner-only) before the server is started or refused, so a denied server stays denied and an approved one
starts without a question after a restart, even after ``kill -9``.

The file holds no name, path or definition: each decision is keyed by a SHA-256 of (context id, workspace,
server name, fingerprint). It is bounded by ``mcp-max-approvals``: the least recently used decisions are
dropped first (in memory and on disk), and a dropped decision only means the question is asked again. A file
that cannot be read is ignored (logged) and replaced at the next decision; its questions are asked again: an
unreadable decision never allows anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from pathlib import Path

from iac_code.api import atomic_write, private_dir, read_private_file

logger = logging.getLogger(__name__)

FILE_NAME = "mcp-approvals.json"
SCHEMA_VERSION = 1
DECISIONS = {"approved": True, "denied": False}


def approval_key(context_id: str, workspace: str, server: str, fingerprint: str) -> str:
    """What one decision is kept under: a digest, so that no id, path or name is written."""
    text = json.dumps([context_id, workspace, server, fingerprint], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ApprovalStore:
    """The remembered decisions, least recently used first; ``state_dir`` ``None`` keeps them in memory only."""

    def __init__(self, state_dir: Path | None, limit: int) -> None:
        self.path = Path(state_dir) / FILE_NAME if state_dir is not None else None
        self.limit = max(1, int(limit))
        self._decisions: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._loaded = False
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        self._load()
        return len(self._decisions)

    def get(self, key: str) -> bool | None:
        """The decision kept for ``key`` (``None``: none, the question is asked)."""
        self._load()
        found = self._decisions.get(key)
        if found is None:
            return None
        self._decisions.move_to_end(key)
        return found[0]

    async def put(self, key: str, allowed: bool) -> None:
        """Keep a decision; on disk before this returns (when a persistence directory is given)."""
        async with self._lock:
            self._load()
            self._decisions[key] = (bool(allowed), time.time())
            self._decisions.move_to_end(key)
            while len(self._decisions) > self.limit:
                self._decisions.popitem(last=False)
            if self.path is not None:
                data = self._encode()
                try:
                    await asyncio.to_thread(self._write, self.path, data)
                except OSError as exc:
                    logger.warning("MCP approvals could not be saved (%s); they hold until the server stops",
                                   type(exc).__name__)

    def _encode(self) -> bytes:
        decisions = [{"key": k, "decision": "approved" if allowed else "denied", "at": round(at, 3)}
                     for k, (allowed, at) in self._decisions.items()]
        return json.dumps({"version": SCHEMA_VERSION, "decisions": decisions}, separators=(",", ":")).encode()

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        private_dir(path.parent)
        atomic_write(path, data)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.path is None:
            return
        try:
            data = read_private_file(self.path)
            if data is None:
                return
            document = json.loads(data)
            rows = document["decisions"] if isinstance(document, dict) and document.get("version") == 1 else None
            if not isinstance(rows, list):
                raise ValueError("not a decisions file")
            for row in rows:
                key, decision, at = row.get("key"), row.get("decision"), row.get("at", 0.0)
                if not (isinstance(key, str) and len(key) == 64 and decision in DECISIONS
                        and isinstance(at, (int, float))):
                    raise ValueError("a malformed decision")
                self._decisions[key] = (DECISIONS[decision], float(at))
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
            self._decisions.clear()
            logger.warning("MCP approvals file is unreadable (%s); project servers are asked about again",
                           type(exc).__name__)
            return
        while len(self._decisions) > self.limit:  # a lower mcp-max-approvals than when it was written
            self._decisions.popitem(last=False)
