"""What may leave the process of an MCP server's configuration and errors: secrets and local paths redacted.

Every text the plugin publishes, logs or keeps (warnings, status, progress messages, tool results) goes
through :class:`Redactor`: header values, environment values, arguments, URL credentials of every configured
server are replaced by ``[redacted]``, and the home, workspace and configuration directories by ``~``,
``[WORKSPACE]`` and ``[CONFIG]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from iac_code.api import mask_url, redact, url_secrets

REDACTED = "[redacted]"
_MIN_SECRET = 4  # shorter values (a flag, "-y") are not secrets and would mangle ordinary words
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>]+")  # a bounded scheme: linear on long texts
_BEARER = re.compile(r"(?i)\b(bearer|token|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


class Redactor:
    """Replaces known secrets and local paths in texts and JSON-like values."""

    def __init__(self, secrets: Iterable[str] = (), paths: Iterable[tuple[str, str]] = ()) -> None:
        self.secrets: set[str] = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET}
        self.paths: list[tuple[str, str]] = sorted({(p, label) for p, label in paths if p and len(p) > 1},
                                                   key=lambda item: len(item[0]), reverse=True)

    def add_secrets(self, values: Iterable[str]) -> None:
        self.secrets.update(s for s in values if isinstance(s, str) and len(s) >= _MIN_SECRET)

    def text(self, value: str) -> str:
        out = redact(_URL.sub(lambda m: mask_url(m.group(0)), value), self.secrets, REDACTED)
        for path, label in self.paths:
            out = out.replace(path, label)
        return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", out)

    def value(self, value: Any, depth: int = 0) -> Any:
        if depth > 32:
            return "[truncated-depth]"
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v, depth + 1) for v in value]
        return value


def local_paths(workspace: str | None, config_dir: Path) -> list[tuple[str, str]]:
    """The local paths to hide and what replaces them (longest first when applied)."""
    pairs = [(str(config_dir), "[CONFIG]"), (str(Path.home()), "~")]
    if workspace:
        pairs.append((os.path.abspath(workspace), "[WORKSPACE]"))
    return pairs


def definition_secrets(raw: Any) -> list[str]:
    """Every value of a server definition that may be a secret: env and header values, arguments, URL credentials."""
    found: list[str] = []
    if not isinstance(raw, dict):
        return found
    for key in ("env", "headers"):
        mapping = raw.get(key)
        if isinstance(mapping, dict):
            for value in mapping.values():
                if isinstance(value, str):
                    found.append(value)
                    found.extend(value.split()[1:])  # "Bearer <token>": the token alone too
    args = raw.get("args")
    if isinstance(args, list):
        for arg in args:
            if isinstance(arg, str) and not arg.startswith("-"):
                found.append(arg)
            if isinstance(arg, str) and "=" in arg:
                    found.append(arg.split("=", 1)[1])
    url = raw.get("url")
    if isinstance(url, str):
        found.extend(url_secrets(url))
    return found
