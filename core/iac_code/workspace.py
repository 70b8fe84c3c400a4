"""Workspace (``metadata.iac_code.cwd``) validation and the allowed roots.

A workspace must be an absolute, existing directory that, with symlinks and
``..`` resolved, lies inside an allowed root: ``IACCODE_A2A_ALLOWED_CWDS`` (an
OS-path-separated list) or, by default, the server's working directory and the
system temp directory. Errors never echo the path.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from iac_code.messages import INVALID_WORKSPACE  # the catalog id doubles as the English text

TRUTHY = frozenset({"1", "true", "yes", "on"})


class WorkspaceError(ValueError):
    """The requested workspace is not acceptable; the message is safe to show."""

    def __init__(self) -> None:
        super().__init__(INVALID_WORKSPACE)


def allowed_roots() -> tuple[str, ...]:
    """The resolved allowed roots (configured entries that are existing directories)."""
    configured = [p.strip() for p in os.environ.get("IACCODE_A2A_ALLOWED_CWDS", "").split(os.pathsep) if p.strip()]
    if configured:
        return tuple(os.path.realpath(p) for p in configured if os.path.isdir(p))
    return (os.path.realpath(os.getcwd()), os.path.realpath(tempfile.gettempdir()))


def is_within(path: str, root: str) -> bool:
    """Whether resolved ``path`` is ``root`` or below it."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def inside_allowed_roots(resolved: str, roots: tuple[str, ...] | None = None) -> bool:
    return any(is_within(resolved, root) for root in (roots if roots is not None else allowed_roots()))


def resolve_workspace(value: Any) -> str:
    """The resolved workspace directory for a message's ``cwd`` metadata value."""
    if not isinstance(value, str):
        return os.path.realpath(os.getcwd())
    if not value or "\x00" in value or not os.path.isabs(value):
        raise WorkspaceError
    resolved = os.path.realpath(os.path.normpath(value))
    trusted = os.environ.get("IAC_CODE_A2A_TRUST_REQUEST_CWD", "").strip().lower() in TRUTHY
    if not trusted and not inside_allowed_roots(resolved):
        raise WorkspaceError
    if not os.path.isdir(resolved):
        raise WorkspaceError
    return resolved
