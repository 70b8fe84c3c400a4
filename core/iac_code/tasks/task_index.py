"""The ListTasks index: one row per task, on disk, so memory does not grow with history.

A row holds what ListTasks filters and sorts on (owner, id, context, state,
status timestamp). Rows live in an SQLite file, ``<persistence-dir>/
task-index.sqlite3``, with a bounded page cache. The file is derived data: it
is rebuilt from the task snapshots and the journal at every start-up, so it is
written without fsync. Changes are buffered in memory and written in one
transaction before the next query (or once the buffer is full), which keeps
SQLite off the per-event path.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "task-index.sqlite3"
FLUSH_AT = 2048  # buffered changes that force a write
CACHE_KIB = 2048  # SQLite page cache

SortKey = tuple[bool, int, str]


@dataclass(frozen=True, slots=True)
class Row:
    """One task's index entry."""

    owner: str
    task_id: str
    context_id: str
    state: int
    has_timestamp: bool
    timestamp: int

    @property
    def key(self) -> SortKey:
        return self.has_timestamp, self.timestamp, self.task_id


@dataclass(frozen=True)
class Query:
    """ListTasks filters; ``before`` is the cursor (exclusive), ``limit`` the page size."""

    owner: str
    context_id: str = ""
    state: int = 0
    timestamp_after: int | None = None
    before: SortKey | None = None
    limit: int = 50


class TaskIndex:
    """Rows in SQLite (a file under the state directory, or memory for a store without one)."""

    def __init__(self, directory: Path | None) -> None:
        self._path = ":memory:" if directory is None else str(directory / FILE_NAME)
        self._conn: sqlite3.Connection | None = None
        self._pending: dict[tuple[str, str], Row | None] = {}
        if directory is None:
            self.open()

    def open(self) -> None:
        """Start the index afresh; a file of an earlier run is derived data and is removed first.

        The store opens a file-backed index when it restores (not when it is built), so a server
        that stops before its start-up reached the state directory leaves that file as it was.
        """
        if self._conn is not None:
            return
        if self._path != ":memory:":
            for suffix in ("", "-journal", "-wal", "-shm"):  # derived data: rebuilt at every start-up
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._path + suffix)
        self._conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        if self._path != ":memory:":
            with contextlib.suppress(OSError):
                os.chmod(self._path, 0o600)
        self._conn.executescript(f"""
            PRAGMA journal_mode=OFF;
            PRAGMA synchronous=OFF;
            PRAGMA cache_size=-{CACHE_KIB};
            CREATE TABLE tasks (owner TEXT NOT NULL, id TEXT NOT NULL, context TEXT NOT NULL,
                                state INTEGER NOT NULL, has_ts INTEGER NOT NULL, ts INTEGER NOT NULL,
                                PRIMARY KEY (owner, id)) WITHOUT ROWID;
            CREATE INDEX by_time ON tasks (owner, has_ts, ts, id);
            CREATE INDEX by_context ON tasks (owner, context, has_ts, ts, id);
        """)

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.open()
        assert self._conn is not None
        return self._conn

    def put(self, row: Row) -> None:
        self._pending[(row.owner, row.task_id)] = row
        if len(self._pending) >= FLUSH_AT:
            self.flush()

    def remove(self, owner: str, task_id: str) -> None:
        self._pending[(owner, task_id)] = None
        if len(self._pending) >= FLUSH_AT:
            self.flush()

    def load(self, rows: Iterable[Row]) -> None:
        """Bulk insert (start-up)."""
        self._write((r.owner, r.task_id, r.context_id, r.state, r.has_timestamp, r.timestamp) for r in rows)

    def flush(self) -> None:
        """Write the buffered changes in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        upserts = [(r.owner, r.task_id, r.context_id, r.state, r.has_timestamp, r.timestamp)
                   for r in pending.values() if r is not None]
        removals = [key for key, r in pending.items() if r is None]
        self._db.execute("BEGIN")
        try:
            if upserts:
                self._db.executemany("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?)", upserts)
            if removals:
                self._db.executemany("DELETE FROM tasks WHERE owner = ? AND id = ?", removals)
        finally:
            self._db.execute("COMMIT")

    def _write(self, values: Iterable[tuple[object, ...]]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?)", values)
        finally:
            self._db.execute("COMMIT")

    def contains(self, owner: str, task_id: str) -> bool:
        pending = self._pending.get((owner, task_id), False)
        if pending is not False:
            return pending is not None
        return self._db.execute("SELECT 1 FROM tasks WHERE owner = ? AND id = ?",
                                (owner, task_id)).fetchone() is not None

    def page(self, query: Query) -> tuple[list[SortKey], int]:
        """Up to ``limit + 1`` keys after the cursor, newest first, and the filtered total."""
        self.flush()
        where, args = ["owner = ?"], [query.owner]
        if query.context_id:
            where.append("context = ?")
            args.append(query.context_id)
        if query.state:
            where.append("state = ?")
            args.append(query.state)
        if query.timestamp_after is not None:
            where.append("has_ts = 1 AND ts >= ?")
            args.append(query.timestamp_after)
        condition = " AND ".join(where)
        total = self._db.execute(f"SELECT COUNT(*) FROM tasks WHERE {condition}", args).fetchone()[0]
        page_args = list(args)
        if query.before is not None:
            condition += " AND (has_ts, ts, id) < (?, ?, ?)"
            page_args += [int(query.before[0]), query.before[1], query.before[2]]
        rows = self._db.execute(
            f"SELECT has_ts, ts, id FROM tasks WHERE {condition} ORDER BY has_ts DESC, ts DESC, id DESC LIMIT ?",
            [*page_args, query.limit + 1]).fetchall()
        return [(bool(h), t, i) for h, t, i in rows], total

    def count(self) -> int:
        self.flush()
        return int(self._db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])

    def close(self) -> None:
        if self._conn is None:  # never opened: the file of an earlier run stays as it was
            return
        self.flush()
        self._conn.close()
