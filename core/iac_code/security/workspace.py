"""Workspace (``metadata.iac_code.cwd``) validation, the allowed roots and the server's own files.

A workspace must be an absolute, existing directory that, with symlinks and
``..`` resolved, lies inside an allowed root: ``IACCODE_A2A_ALLOWED_CWDS`` (an
OS-path-separated list) or, by default, the server's working directory and the
system temp directory. Errors never echo the path.

The server's own files are never input and never a workspace, whatever the
allowed roots and ``IAC_CODE_A2A_TRUST_REQUEST_CWD`` say (:class:`ProtectedPaths`):
the configuration file, the persistence directory (task and context snapshots,
the ListTasks page-token key, everything under it), the artifact directory
(except, for ``file://`` parts, the artifacts of the task the message continues),
the permission audit log and the config directory (``IAC_CODE_CONFIG_DIR``,
default ``~/.iac-code``). Each kernel registers its paths with :func:`protect`
when it is created; the checks resolve every path (``os.path.realpath``) when
they run and compare with :meth:`pathlib.PurePath.is_relative_to`.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_code.language import messages as m
from iac_code.base.config import ServerConfig, default_config_dir
from iac_code.language.messages import INVALID_WORKSPACE  # the catalog id doubles as the English text
from iac_code.base.records import DecodeContext
from iac_code.base.storage import safe_file_name

logger = logging.getLogger(__name__)

TRUTHY = frozenset({"1", "true", "yes", "on"})


# Why a workspace was refused: ``metadata.iac_code.error.reason`` of the failed task, and the
# catalog text that explains it to a person. Neither ever names a path or the allowed roots.
WORKSPACE_REASONS: dict[str, str] = {
    "not_absolute": m.WORKSPACE_NOT_ABSOLUTE,
    "outside_allowed_roots": m.WORKSPACE_OUTSIDE_ROOTS,
    "does_not_exist": m.WORKSPACE_MISSING,
    "not_a_directory": m.WORKSPACE_NOT_DIRECTORY,
    "server_directory": m.WORKSPACE_SERVER_STATE,
}


class WorkspaceError(ValueError):
    """The requested workspace is not acceptable; the message is safe to show.

    ``reason`` is one of :data:`WORKSPACE_REASONS`: it tells the caller what to change
    without echoing the path or the server's allowed roots.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(INVALID_WORKSPACE)
        self.reason = reason

    @property
    def explanation(self) -> str:
        """The catalog id of the text that explains :attr:`reason`."""
        return WORKSPACE_REASONS[self.reason]


def allowed_roots() -> tuple[str, ...]:
    """The resolved allowed roots (configured entries that are existing directories)."""
    configured = [p.strip() for p in os.environ.get("IACCODE_A2A_ALLOWED_CWDS", "").split(os.pathsep) if p.strip()]
    if configured:
        return tuple(os.path.realpath(p) for p in configured if os.path.isdir(p))
    return (os.path.realpath(os.getcwd()), os.path.realpath(tempfile.gettempdir()))


def is_within(path: str, root: str) -> bool:
    """Whether resolved ``path`` is ``root`` or below it."""
    return Path(path).is_relative_to(root)


def inside_allowed_roots(resolved: str, roots: tuple[str, ...] | None = None) -> bool:
    return any(is_within(resolved, root) for root in (roots if roots is not None else allowed_roots()))


# --------------------------------------------------------------------------- the server's own files


def _real(path: str) -> Path:
    return Path(os.path.realpath(path))


@dataclass(frozen=True)
class ProtectedPaths:
    """One server's own files: never read through a part, never (inside) a workspace.

    ``files`` are single files (the configuration file, the permission audit log);
    ``dirs`` are protected with everything below them (the persistence directory,
    the config directory); ``artifact_dir`` too, except that a ``file://`` part of
    a message continuing task *T* may read ``<artifact-dir>/<T>/`` (the task's own
    artifacts, see :class:`iac_code.tasks.artifacts.ArtifactStore`). Paths are stored
    absolute and resolved at every check, so a directory created later, or reached
    through a symlink or ``..``, is still recognised.
    """

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    artifact_dir: str = ""

    @classmethod
    def of(cls, config: ServerConfig) -> ProtectedPaths:
        """The paths a server with ``config`` writes or reads secrets from."""
        files = [config.resolved_audit_log()]
        if config.config_file is not None:
            files.append(config.config_file)
        dirs = [config.resolved_persistence_dir()]
        try:
            dirs.append(default_config_dir())
        except (RuntimeError, KeyError):  # no home directory: nothing to protect there
            pass
        return cls(files=tuple(os.path.abspath(p) for p in files), dirs=tuple(os.path.abspath(p) for p in dirs),
                   artifact_dir=os.path.abspath(config.resolved_artifact_dir()))

    def _dirs(self) -> list[Path]:
        return [_real(d) for d in (*self.dirs, self.artifact_dir) if d]

    def refuses_workspace(self, resolved: Path) -> bool:
        """Whether the resolved directory is, or lies inside, one of the protected directories."""
        return any(resolved.is_relative_to(d) for d in self._dirs())

    def refuses_file(self, resolved: Path, task_id: str = "") -> bool:
        """Whether the resolved file is protected from a message continuing ``task_id`` ('' for a new task)."""
        if any(resolved.is_relative_to(_real(f)) for f in self.files):
            return True
        own = self._own_artifacts(task_id)
        if own is not None and resolved.is_relative_to(own):
            return False
        return any(resolved.is_relative_to(d) for d in self._dirs())

    def refuses_descriptor(self, info: os.stat_result) -> bool:
        """Whether an opened file is one of the server's files, whatever path reached it (a hard link,
        a swap): one of the protected files, or any file under a protected directory (state, keyrings,
        journal and index, signing keys, artifacts, the config directory)."""
        for path in self.files:
            try:
                known = os.stat(path)
            except OSError:
                continue
            if (known.st_dev, known.st_ino) == (info.st_dev, info.st_ino):
                return True
        if info.st_nlink < 2:  # the server's own path is one link: a second path needs a second link
            return False
        return any(_tree_holds(d, info) for d in self._dirs())

    def _own_artifacts(self, task_id: str) -> Path | None:
        """``<artifact-dir>/<task id>`` when that directory can only hold that task's artifacts."""
        if not task_id or not self.artifact_dir or safe_file_name(task_id, "") != task_id:
            return None
        artifacts = _real(self.artifact_dir)
        if any(_real(d).is_relative_to(artifacts) for d in self.dirs):  # artifacts share the state directory
            return None
        return artifacts / task_id  # not resolved: a symlink there leads elsewhere and is checked as such


def _tree_holds(root: Path, info: os.stat_result) -> bool:
    """Whether a regular file under ``root`` (symlinks not followed) is the file ``info`` describes."""
    try:
        if os.stat(root).st_dev != info.st_dev:
            return False
    except OSError:
        return False
    pending = [str(root)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif entry.inode() == info.st_ino and entry.is_file(follow_symlinks=False):
                        return True
        except OSError:
            continue
    return False


_registry: weakref.WeakKeyDictionary[object, ProtectedPaths] = weakref.WeakKeyDictionary()


def protect(owner: object, paths: ProtectedPaths) -> None:
    """Protect ``paths`` for as long as ``owner`` (the kernel that uses them) exists."""
    _registry[owner] = paths
    if paths.refuses_workspace(_real(os.getcwd())):
        logger.warning("The server's working directory is inside its own state directories: "
                       "messages without metadata.iac_code.cwd will fail with an invalid workspace")


def protected_paths() -> tuple[ProtectedPaths, ...]:
    """Every live server's protected paths (a process running several kernels protects them all)."""
    return tuple(_registry.values())


def is_protected_file(resolved: str, task_id: str = "") -> bool:
    """Whether a resolved file path belongs to a live server (``task_id``: the task the message continues),
    by its path or, for an existing file, by its identity (:func:`is_protected_descriptor`)."""
    path = Path(resolved)
    paths = protected_paths()
    if any(p.refuses_file(path, task_id) for p in paths):
        return True
    try:
        info = os.stat(resolved)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and any(p.refuses_descriptor(info) for p in paths)


def is_protected_descriptor(info: os.stat_result) -> bool:
    """Whether an opened regular file is one of a live server's protected files."""
    return stat.S_ISREG(info.st_mode) and any(p.refuses_descriptor(info) for p in protected_paths())


def is_protected_workspace(resolved: str) -> bool:
    """Whether a resolved directory is, or lies inside, a live server's state."""
    path = Path(resolved)
    return any(p.refuses_workspace(path) for p in protected_paths())


@dataclass(frozen=True)
class TaskDecodeContext(DecodeContext):
    """The decode context of one message; ``task_id`` is the task it continues ('' for a new task).

    The request handler resolves the task (it must exist and belong to the caller)
    before the parts are decoded; :mod:`iac_code.builtin.file_urls` lets that task
    read its own artifacts.
    """

    task_id: str = ""


def resolve_workspace(value: Any) -> str:
    """The resolved workspace directory for a message's ``cwd`` metadata value."""
    if not isinstance(value, str):
        resolved = os.path.realpath(os.getcwd())
    else:
        if not value or "\x00" in value or not os.path.isabs(value):
            raise WorkspaceError("not_absolute")
        resolved = os.path.realpath(value)
        trusted = os.environ.get("IAC_CODE_A2A_TRUST_REQUEST_CWD", "").strip().lower() in TRUTHY
        if not trusted and not inside_allowed_roots(resolved):
            raise WorkspaceError("outside_allowed_roots")
        if not os.path.isdir(resolved):
            raise WorkspaceError("not_a_directory" if os.path.lexists(resolved) else "does_not_exist")
    if is_protected_workspace(resolved):
        raise WorkspaceError("server_directory")
    return resolved
