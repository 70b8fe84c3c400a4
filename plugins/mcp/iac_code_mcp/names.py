"""Public tool names: ``mcp__<server>__<tool>``, sanitised to what a model API accepts, unique."""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def sanitise(part: str) -> str:
    """A server or tool name as a name part: letters, digits, ``_`` and ``-`` (others become ``_``)."""
    return re.sub(r"_{2,}", "_", _UNSAFE.sub("_", part)).strip("_") or "x"


def public_name(server: str, tool: str, taken: set[str]) -> str:
    """``mcp__<server>__<tool>``: at most 64 characters, unique among ``taken`` (a short hash makes it so)."""
    name = f"mcp__{sanitise(server)}__{sanitise(tool)}"
    if len(name) > MAX_NAME or name in taken:
        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAME - 9]}_{digest}"
    n = 2
    base = name
    while name in taken:
        name = f"{base[:MAX_NAME - 4]}_{n}"
        n += 1
    return name
