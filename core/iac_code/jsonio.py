"""Fast JSON for the wire (orjson), with the standard library as fallback.

orjson refuses integers beyond 64 bits; those inputs take the slower path
instead of failing, so any valid JSON round-trips.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson


def _no_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("JSON number out of range")
    return value


def loads(data: bytes | str) -> Any:
    """Parse strict JSON (no NaN/Infinity, finite numbers); raises ``ValueError`` for invalid input."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # big integers, lone surrogates: let the stdlib decide, just as strictly
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite_float)


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON bytes."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
