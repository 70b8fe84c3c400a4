"""Fast JSON for the wire (orjson), with the standard library as fallback.

orjson turns integers beyond 64 bits into floats and refuses some inputs; those
documents take the standard library's slower path, so any valid JSON
round-trips exactly.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

# orjson reads integers beyond 64 bits as floats; such documents go to the stdlib.
_LONG_NUMBER = re.compile(rb"\d{20}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("JSON number out of range")
    return value


def loads(data: bytes | str) -> Any:
    """Parse strict JSON (no NaN/Infinity, finite numbers); raises ``ValueError`` for invalid input."""
    if _LONG_NUMBER.search(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")) is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON bytes."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
