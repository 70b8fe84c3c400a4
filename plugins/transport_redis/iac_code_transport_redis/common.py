"""What the Redis Streams server and client share: URL handling without credentials, entry decoding, errors."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import redis.exceptions as redis_errors

from iac_code.api import redact

FINAL_VALUES = frozenset({"true", "1"})
FATAL_CONNECTION_ERRORS = (redis_errors.AuthenticationError, redis_errors.AuthorizationError)
TRANSIENT_ERRORS = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError, redis_errors.ReadOnlyError,
                    redis_errors.TryAgainError, redis_errors.BusyLoadingError)
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 1.0



def redis_db(url: str) -> int:
    """The database number a Redis URL selects (path ``/<n>`` or ``?db=<n>``; 0 when none)."""
    try:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query).get("db", [])
        text = query[0] if query else (parts.path.lstrip("/") if parts.scheme != "unix" else "")
        return int(text) if text.strip().isdigit() else 0
    except ValueError:
        return 0


def describe(exc: BaseException, secrets: Iterable[str]) -> str:
    """``Type: message`` of an exception, credentials redacted."""
    return redact(f"{type(exc).__name__}: {exc}", secrets)


def is_transient(exc: BaseException) -> bool:
    """Whether a Redis error is an outage worth retrying (not wrong credentials, not a bad command)."""
    return isinstance(exc, TRANSIENT_ERRORS) and not isinstance(exc, FATAL_CONNECTION_ERRORS)


def text(value: Any) -> str:
    """A Redis reply value as text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else str(value)


def field(fields: Mapping[Any, Any] | None, name: str) -> bytes | None:
    """Field ``name`` of a stream entry (keys as str or bytes), as bytes; ``None`` when absent."""
    if not fields:
        return None
    value = fields.get(name.encode())
    if value is None:
        value = fields.get(name)
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode()


def is_final(value: bytes | None) -> bool:
    """Whether a ``final`` field says the answer is complete (``true`` or ``1``)."""
    return value is not None and value.decode("utf-8", "replace").strip().lower() in FINAL_VALUES


def stream_entries(reply: Any) -> list[tuple[Any, Any]]:
    """The ``(id, fields)`` entries of an ``XREAD``/``XREADGROUP`` reply (RESP2 list or RESP3 dict shape)."""
    if not reply:
        return []
    groups: Iterable[Any] = reply.values() if isinstance(reply, dict) else (item[1] for item in reply)
    entries: list[tuple[Any, Any]] = []
    for group in groups:
        if isinstance(group, list) and group and isinstance(group[0], list):  # RESP3 wraps once more
            group = group[0]
        entries.extend(tuple(entry[:2]) for entry in group or [])
    return entries
