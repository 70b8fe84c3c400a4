"""Safe mode (``IAC_CODE_A2A_SAFE_MODE`` ∈ ``1, true, yes, on``, read at each use): path-only projection.

At every wire boundary (the dispatcher's call core, which every JSON-RPC and HTTP+JSON framing
shares, gRPC messages, push payloads at send time, JSON bodies of plugin routes) an absolute
path (POSIX, Windows drive or UNC, ``file://`` URI) *proven* to lie under a public root becomes
the literal ``[PATH]``; an object key that is such a path becomes ``[PATH]``, ``[PATH#2]``, ...
A path under no root is left as it is, and secrets are not touched (other mechanisms redact
those). The roots: the task's or context's workspace (``cwd``), the configuration directory,
the system temporary directory, the application root, the server's state directory; with no
known task or context, the request's ``metadata.iac_code.cwd`` or the process's working directory.

Safe mode also reduces what the agent runtime may use (read-only tools, no MCP servers): runtimes
and tools ask :func:`safe_mode`.
"""

from __future__ import annotations

import ntpath
import os
import posixpath
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

SAFE_MODE_ENV = "IAC_CODE_A2A_SAFE_MODE"
PLACEHOLDER = "[PATH]"
_T = TypeVar("_T")
_TRUTHY = frozenset({"1", "true", "yes", "on"})
_METADATA_DEPTH = 16  # how deep a request's metadata is searched for iac_code.cwd

# Candidate absolute paths inside a string: a file:// URI, a Windows UNC or drive path, a POSIX path
# (not the path part of a URL: no word character, ':' or '/' right before its first '/').
_CANDIDATE = re.compile(
    r"file://[^\s\"'<>`]+"
    r"|\\\\[^\s\\/\"'<>|`]+[\\/][^\s\"'<>|`]*"
    r"|(?<![\w])[A-Za-z]:[\\/][^\s\"'<>|`*?]*"
    r"|(?<![\w:/.~\\-])/[^\s\"'<>`|]*")
_TRAILING = ".,;:!?)]}'\""


def safe_mode(environ: Mapping[str, str] | None = None) -> bool:
    """Whether safe mode is on (``IAC_CODE_A2A_SAFE_MODE`` is ``1``, ``true``, ``yes`` or ``on``), read now.

    Runtimes and tools consult it per use: in safe mode only read-only tools are offered and MCP
    servers are not loaded (the MCP plugin asks it)."""
    value = (os.environ if environ is None else environ).get(SAFE_MODE_ENV, "")
    return value.strip().lower() in _TRUTHY


# The tools a turn may use in safe mode: the product's list plus the offline engine's own names for the same
# work: generate_template and convert_terraform (ros_template / ros_template_scratch: a template in memory,
# nothing written), review_template (ros_diagnostic). write_file is not in it: in safe mode nothing is saved to
# the workspace. An MCP server's tools are not in it either (no MCP server is loaded).
SAFE_MODE_TOOLS = frozenset({
    "read_file", "list_files", "glob", "grep", "aliyun_api", "aliyun_doc_search", "aliyun_api_doc", "ros_stack",
    "ros_stack_instances", "ros_stack_group", "ros_template", "ros_template_scratch", "ros_diagnostic",
    "ros_resource_type_registration", "ros_tag", "skill", "read_memory", "write_memory",
    "generate_template", "convert_terraform", "review_template",
})


def safe_mode_tools(tools: Mapping[str, _T]) -> Mapping[str, _T]:
    """``tools`` (by name), or in safe mode only those named in :data:`SAFE_MODE_TOOLS`: what a runtime offers
    and runs this turn."""
    if not safe_mode():
        return tools
    return {name: tool for name, tool in tools.items() if name in SAFE_MODE_TOOLS}


def application_root() -> str:
    """The directory the kernel's package is installed in (site-packages, or the source tree's ``core``)."""
    return str(Path(__file__).resolve().parents[2])


def _windows(path: str) -> bool:
    return path.startswith("\\\\") or (len(path) > 2 and path[1] == ":" and path[2] in "\\/")


def _normalised(path: str) -> str:
    if _windows(path):
        return ntpath.normcase(ntpath.normpath(path))
    return posixpath.normpath(path)


def _under(path: str, root: str) -> bool:
    if path == root:
        return True
    separator = "\\" if _windows(root) else "/"
    return path.startswith(root if root.endswith(separator) else root + separator)


class PathProjection:
    """The projection for one response: ``roots`` are the public roots (absolute paths)."""

    def __init__(self, roots: Iterable[str]) -> None:
        normalised: set[str] = set()
        for root in roots:
            if not isinstance(root, str) or not root or "\x00" in root:
                continue
            if not (root.startswith("/") or _windows(root)):
                continue
            normalised.add(_normalised(root))
            if not _windows(root):
                try:
                    normalised.add(posixpath.normpath(os.path.realpath(root)))
                except (OSError, ValueError):
                    pass
        self.roots = tuple(sorted(normalised, key=len, reverse=True))

    def proven(self, candidate: str) -> bool:
        """Whether ``candidate`` (an absolute path or ``file://`` URI) lies under one of the roots."""
        path = candidate
        if path.lower().startswith("file://"):
            parts = urlsplit(path)
            if parts.netloc not in ("", "localhost"):
                return False
            path = unquote(parts.path)
            if len(path) > 3 and path[0] == "/" and path[2] == ":":  # file:///C:/...
                path = path[1:]
        if not (path.startswith("/") or _windows(path)):
            return False
        path = _normalised(path)
        return any(_under(path, _normalised(root)) if _windows(root) == _windows(path) else False
                   for root in self.roots)

    def text(self, value: str) -> str:
        """``value`` with every proven path replaced by ``[PATH]``."""
        if "/" not in value and "\\" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            kept = found.rstrip(_TRAILING)
            tail = found[len(kept):]
            while kept:
                if self.proven(kept):
                    return PLACEHOLDER + tail
                # a path followed by prose punctuation, or by a quote-less suffix: try without the last character run
                shorter = kept.rstrip(_TRAILING)
                if shorter == kept:
                    break
                tail = kept[len(shorter):] + tail
                kept = shorter
            return found

        return _CANDIDATE.sub(replace, value)

    def value(self, value: Any) -> Any:
        """A copy of the JSON ``value`` with proven paths (strings and object keys) projected."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is list:
            return [self.value(item) for item in value]
        if kind is dict:
            paths = {key for key in value if isinstance(key, str) and self._is_path(key)}
            taken = {key for key in value if key not in paths}
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if key in paths:  # collision-free: [PATH], [PATH#2], ...
                    n, key = 1, PLACEHOLDER
                    while key in taken:
                        n += 1
                        key = f"[PATH#{n}]"
                    taken.add(key)
                out[key] = self.value(item)
            return out
        return value

    def _is_path(self, key: str) -> bool:
        stripped = key.strip()
        match = _CANDIDATE.fullmatch(stripped)
        return match is not None and self.proven(stripped)


def request_cwd(params: Any) -> str | None:
    """The ``metadata.iac_code.cwd`` of a request's params (searched up to 16 levels deep), if any."""
    stack: list[tuple[Any, int]] = [(params, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _METADATA_DEPTH:
            continue
        if isinstance(node, dict):
            metadata = node.get("metadata")
            if isinstance(metadata, dict):
                iac = metadata.get("iac_code")
                if isinstance(iac, dict) and isinstance(iac.get("cwd"), str):
                    return str(iac["cwd"])
            stack.extend((item, depth + 1) for item in node.values() if isinstance(item, dict | list))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node if isinstance(item, dict | list))
    return None


_ID_KEYS = ("contextId", "context_id")
_TASK_KEYS = ("taskId", "task_id", "id")


def mentioned_ids(*documents: Any, depth: int = 6) -> tuple[set[str], set[str]]:
    """The context ids and task ids a request's params or a response names (``contextId``; ``taskId``, a
    task's ``id``), looked for a few levels deep."""
    contexts: set[str] = set()
    tasks: set[str] = set()
    stack: list[tuple[Any, int]] = [(d, 0) for d in documents]
    while stack:
        node, level = stack.pop()
        if level > depth:
            continue
        if isinstance(node, dict):
            for key in _ID_KEYS:
                if isinstance(node.get(key), str):
                    contexts.add(node[key])
            for key in _TASK_KEYS:
                if isinstance(node.get(key), str):
                    tasks.add(node[key])
            stack.extend((item, level + 1) for item in node.values() if isinstance(item, dict | list))
        elif isinstance(node, list):
            stack.extend((item, level + 1) for item in node[:1024] if isinstance(item, dict | list))
    return contexts, tasks


def static_roots(config_dir: str | None, state_dir: str | None, config_file: str | None = None) -> list[str]:
    """The roots every response shares: configuration directory (and the config file's), the system
    temporary directory, the application root, the state directory."""
    roots = [tempfile.gettempdir(), application_root()]
    for directory in (config_dir, state_dir, os.path.dirname(config_file) if config_file else None):
        if directory:
            roots.append(str(directory))
    return roots
