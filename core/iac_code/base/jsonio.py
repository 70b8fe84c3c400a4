"""Fast JSON for the wire (orjson), with the standard library as fallback.

orjson turns integers beyond 64 bits into floats and refuses some inputs; those
documents take the standard library's slower path, so any valid JSON
round-trips exactly. A document holding an unpaired surrogate escape
(``"\\ud800"``) is not valid UTF-8 text and is refused on both paths.

:func:`message_to_json` is the one protobuf-to-JSON conversion for anything
the server sends: protobuf ``Struct`` values hold only doubles, so it turns
integral floats back into integers (``"schemaVersion": 1``, not ``1.0``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

# orjson reads integers beyond 64 bits as floats; such documents go to the stdlib.
_LONG_NUMBER = re.compile(rb"\d{20}")
# A surrogate escape (\uD800-\uDFFF), or a surrogate character a ``str`` input carried
# (encoded with "surrogatepass"); only documents matching this need the full check.
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
# Integers a double holds exactly; larger integral floats stay floats.
_MAX_EXACT = float(2**53)


class UnpairedSurrogateError(ValueError):
    """The document is JSON, but a string in it holds an unpaired UTF-16 surrogate."""

    def __init__(self) -> None:
        super().__init__("JSON string holds an unpaired surrogate escape")


def _no_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("JSON number out of range")
    return value


def _has_surrogate(value: Any) -> bool:
    """Whether any key or string inside ``value`` cannot be encoded as UTF-8."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str:
            if not node.isascii():
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif kind is dict:
            stack.extend(node.keys())
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
    return False


def loads(data: bytes | str) -> Any:
    """Parse strict JSON (no NaN/Infinity, finite numbers, no lone surrogates).

    Raises ``ValueError`` for invalid input (:class:`UnpairedSurrogateError` for a
    lone surrogate) and ``UnicodeDecodeError`` for bytes that are not UTF-8.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        value = json.loads(data, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if _MAYBE_SURROGATE.search(raw) is not None and _has_surrogate(value):
        raise UnpairedSurrogateError
    return value


def dumps(payload: Any, *, sort_keys: bool = False) -> bytes:
    """Compact UTF-8 JSON bytes (object keys sorted with ``sort_keys``: a stable form for files)."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys).encode(
            "utf-8", "surrogatepass")


def integral_floats_to_int(value: Any) -> Any:
    """Turn every integral float (``|v| <= 2**53``) in dicts and lists into an ``int``, in place.

    Returns ``value`` (converted itself when it is such a float).
    """
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() and -_MAX_EXACT <= value <= _MAX_EXACT else value
    if kind is not dict and kind is not list:
        return value
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        items = node.items() if type(node) is dict else enumerate(node)
        for key, item in items:
            kind = type(item)
            if kind is float:
                if item.is_integer() and -_MAX_EXACT <= item <= _MAX_EXACT:
                    node[key] = int(item)
            elif kind is dict or kind is list:
                stack.append(item)
    return value


def message_to_json(message: Message, **options: Any) -> dict[str, Any]:
    """``MessageToDict(message, **options)`` with integral floats as integers: the wire form of a proto."""
    result: dict[str, Any] = integral_floats_to_int(MessageToDict(message, **options))
    return result
