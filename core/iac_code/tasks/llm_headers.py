"""A context's LLM-provider request headers: ``metadata.iac_code.llm_headers`` (since-0.13 §11).

A caller may send a string → string object on any message of a context (a turn's message, a
permission answer): it replaces the headers the agent runtime adds to its provider calls for
this and every later turn of that context; ``{}`` clears them; an absent or non-object value
keeps them. They live in memory only (never persisted, never echoed: the key is stripped from
every stored message, and from the metadata a runtime sees; runtimes read
:attr:`~iac_code.agents.runtime.TurnRequest.llm_headers`). Entries that break a limit are
skipped silently.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

LLM_HEADERS_KEY = "llm_headers"
MAX_HEADERS = 64
MAX_NAME_BYTES = 256
MAX_VALUE_CHARS = 8192
CONTEXT_LIMIT = 10_000  # contexts whose headers are remembered (least recently used forgotten first)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 7230 token


def _valid_value(value: str) -> bool:
    """ASCII, at most 8,192 characters, no CR/LF or other control character except tab."""
    return len(value) <= MAX_VALUE_CHARS and value.isascii() and all(
        c == "\t" or (" " <= c <= "~") for c in value)


def parse_llm_headers(value: Any) -> dict[str, str] | None:
    """The headers ``value`` sets (``{}`` clears them), or ``None`` when it keeps the current ones.

    Names are trimmed RFC 7230 tokens of at most 256 bytes, compared case-insensitively (the
    last entry of a name wins); values ASCII, at most 8,192 characters, without control
    characters other than tab; at most 64 headers. Invalid entries are skipped.
    """
    if not isinstance(value, Mapping):
        return None
    chosen: dict[str, tuple[str, str]] = {}
    for raw_name, raw_value in value.items():
        if not isinstance(raw_name, str) or not isinstance(raw_value, str):
            continue
        name = raw_name.strip()
        if not name or len(name.encode("utf-8")) > MAX_NAME_BYTES or not _TOKEN.fullmatch(name):
            continue
        if not _valid_value(raw_value):
            continue
        chosen.pop(name.lower(), None)
        chosen[name.lower()] = (name, raw_value)
    return dict(list(chosen.values())[:MAX_HEADERS])


class LlmHeaderStore:
    """The headers of each (owner, context), in memory: one live mapping per context.

    :meth:`live` hands a turn the context's mapping itself, and :meth:`apply` changes it in
    place, so headers sent on a permission answer reach the rest of the paused turn.
    """

    def __init__(self, limit: int = CONTEXT_LIMIT) -> None:
        self._limit = limit
        self._headers: OrderedDict[tuple[str, str], dict[str, str]] = OrderedDict()

    def live(self, owner: str, context_id: str) -> dict[str, str]:
        """The context's headers (the mapping a turn reads; empty when none were set)."""
        key = (owner, context_id)
        headers = self._headers.get(key)
        if headers is None:
            headers = self._headers[key] = {}
            while len(self._headers) > self._limit:
                self._headers.popitem(last=False)
        self._headers.move_to_end(key)
        return headers

    def apply(self, owner: str, context_id: str, headers: Mapping[str, str] | None) -> None:
        """Replace the context's headers (``None``: keep them)."""
        if headers is None:
            return
        current = self.live(owner, context_id)
        current.clear()
        current.update(headers)


def take_llm_headers(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str] | None]:
    """``metadata`` without ``llm_headers``, and the headers it sets (``None``: keep the current ones)."""
    if LLM_HEADERS_KEY not in metadata:
        return dict(metadata), None
    rest = {k: v for k, v in metadata.items() if k != LLM_HEADERS_KEY}
    return rest, parse_llm_headers(metadata[LLM_HEADERS_KEY])
