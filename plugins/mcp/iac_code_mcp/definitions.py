"""MCP server definitions from the three scopes, and the warnings of what could not be read.

``server``: the configuration's ``mcp-servers``; ``user``: ``<config dir>/mcp.json`` (``IAC_CODE_CONFIG_DIR``,
else ``~/.iac-code``); ``project``: the workspace's ``.mcp.json``. Each file is ``{"mcpServers": {name: {...}}}``.
A narrower scope's server replaces a wider one's of the same name (project over user over server). A file that is
not JSON gives a ``parse_error`` warning, a bad shape or entry an ``invalid_config`` one (both ``fatal``); the rest
is used.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

USER_FILE = "mcp.json"
PROJECT_FILE = ".mcp.json"
FATAL_CODES = frozenset({"invalid_config", "parse_error", "fatal"})
HTTP_TRANSPORTS = {"http": "http", "streamable-http": "http", "streamable_http": "http", "streamablehttp": "http",
                   "sse": "sse"}
MAX_FILE_BYTES = 1_048_576


@dataclass(frozen=True)
class ServerDefinition:
    """One configured MCP server (never published: it holds env, headers and arguments)."""

    name: str
    scope: str
    transport: str  # stdio, http or sse
    raw: dict[str, Any] = field(repr=False)
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str = field(default="", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def fingerprint(self) -> str:
        """What identifies this definition (an approval holds for it only)."""
        text = json.dumps({"scope": self.scope, **self.raw}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class McpWarning:
    """A configuration or runtime warning, in the seeds' ``mcpWarning`` shape (texts already redacted)."""

    server_name: str
    code: str
    message: str
    source: str
    scope: str = ""

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"serverName": self.server_name, "code": self.code or "warning",
                               "message": self.message,
                               "severity": "fatal" if self.code in FATAL_CODES else "warning",
                               "source": self.source}
        if "/" in self.source or os.sep in self.source:
            out["sourcePath"] = self.source
        else:
            out["scope"] = self.scope
        return out


def parse_entry(name: str, raw: Any, scope: str) -> tuple[ServerDefinition | None, str | None]:
    """One entry of ``mcpServers``: its definition, or why it is invalid."""
    if not isinstance(name, str) or not name.strip():
        return None, "a server needs a non-empty name"
    if not isinstance(raw, dict):
        return None, f"server '{name}': must be an object"
    kind = str(raw.get("transport") or raw.get("type") or "").strip().lower()
    if "url" in raw:
        url = raw.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return None, f"server '{name}': 'url' must be an http(s) URL"
        transport = HTTP_TRANSPORTS.get(kind or "http")
        if transport is None:
            return None, f"server '{name}': 'transport' must be http (Streamable HTTP) or sse"
        headers = raw.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in headers.items()):
            return None, f"server '{name}': 'headers' must be an object of strings"
        return ServerDefinition(name, scope, transport, dict(raw), url=url, headers=dict(headers)), None
    command = raw.get("command")
    if kind not in ("", "stdio"):
        return None, f"server '{name}': a '{kind}' server needs a 'url'"
    if not isinstance(command, str) or not command.strip():
        return None, f"server '{name}': needs 'command' (stdio) or 'url' (HTTP)"
    args = raw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None, f"server '{name}': 'args' must be a list of strings"
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return None, f"server '{name}': 'env' must be an object of strings"
    cwd = raw.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        return None, f"server '{name}': 'cwd' must be a string"
    return ServerDefinition(name, scope, "stdio", dict(raw), command=command, args=tuple(args), env=dict(env),
                            cwd=cwd), None


def parse_servers(servers: Any, scope: str, source: str) -> tuple[dict[str, ServerDefinition], list[McpWarning]]:
    """The ``mcpServers`` object of one scope."""
    found: dict[str, ServerDefinition] = {}
    warnings: list[McpWarning] = []
    if not isinstance(servers, dict):
        return found, [McpWarning("", "invalid_config", "'mcpServers' must be an object", source, scope)]
    for name, raw in servers.items():
        definition, problem = parse_entry(name, raw, scope)
        if definition is None:
            warnings.append(McpWarning(str(name)[:128], "invalid_config", problem or "invalid server", source, scope))
        else:
            found[name] = definition
    return found, warnings


def read_file(path: Path, scope: str, source: str) -> tuple[dict[str, ServerDefinition], list[McpWarning], list[Any]]:
    """One ``mcp.json`` / ``.mcp.json``: its servers, its warnings and its raw entries (for the secrets they hold)."""
    try:
        if not path.is_file():
            return {}, [], []
        if path.stat().st_size > MAX_FILE_BYTES:
            return {}, [McpWarning("", "invalid_config", "the file is larger than 1 MiB", source, scope)], []
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}, [McpWarning("", "parse_error", "the file cannot be read", source, scope)], []
    except json.JSONDecodeError as exc:
        return {}, [McpWarning("", "parse_error", f"not valid JSON (line {exc.lineno}, column {exc.colno})",
                            source, scope)], []
    if not isinstance(data, dict) or "mcpServers" not in data:
        return {}, [McpWarning("", "invalid_config", "expected an object with 'mcpServers'", source, scope)], []
    servers = data["mcpServers"]
    found, warnings = parse_servers(servers, scope, source)
    return found, warnings, list(servers.values()) if isinstance(servers, dict) else []
