"""Fast JSON for the wire (orjson), with the standard library as fallback.

orjson refuses integers beyond 64 bits; those inputs take the slower path
instead of failing, so any valid JSON round-trips.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes | str) -> Any:
    """Parse JSON; raises ``ValueError`` for invalid input."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # big integers, lone surrogates: let the stdlib decide


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON bytes."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
