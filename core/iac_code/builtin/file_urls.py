"""Safe access to the local files named by ``file://`` URL parts (spec §1.4).

Only ``file:///absolute/path`` is accepted: a host (even ``localhost``), any
other scheme (``http(s)://`` is never fetched) or a relative path is refused.
The percent-decoded path is resolved with symlinks followed and must lie
inside the request's workspace (``DecodeContext.cwd``) *and* inside one of the
allowed roots; the trust-cwd setting does not relax this. It must not be one of
the server's own files (:class:`iac_code.security.workspace.ProtectedPaths`: the config
file, anything under the persistence or config directory, the audit log,
another task's artifact), which is refused exactly like a file outside the
workspace. The target must be an existing regular file; it is opened without
following a final symlink and without blocking, and checked again on the open
descriptor, so a FIFO, a file swapped after resolution or a hard link to a
protected file is refused rather than read.

Decoders that read local files should go through :func:`open_file_url`: it is
where these rules are enforced.

Error messages are fixed texts: they never contain the URL or the path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from iac_code.base.records import DecodeContext, PartDecodeError
from iac_code.security.workspace import inside_allowed_roots, is_protected_descriptor, is_protected_file, is_within

LOCAL_FILE_URLS_ONLY = "A2A file URL parts must use local file:// URLs."
OUTSIDE_WORKSPACE = "A2A file URL part is outside the allowed workspace."
NOT_AN_EXISTING_FILE = "A2A file URL part must reference an existing file."

CHUNK_SIZE = 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class OpenedFile:
    """A workspace file opened for reading; ``size`` comes from ``fstat`` before any read."""

    path: str
    size: int
    stream: BinaryIO

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def uri(self) -> str:
        """The ``file://`` URI of the resolved file (for the local runtime only, never for errors)."""
        return Path(self.path).as_uri()


def url_path(url: str) -> str:
    """The OS path of a local ``file:///...`` URL, percent-decoded but not yet resolved."""
    # urlsplit silently drops tabs and line breaks; a URL containing any control character is refused.
    if url[:8].lower() != "file:///" or any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise PartDecodeError(LOCAL_FILE_URLS_ONLY)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        raise PartDecodeError(LOCAL_FILE_URLS_ONLY) from None
    if parts.netloc or not parts.path.startswith("/"):
        raise PartDecodeError(LOCAL_FILE_URLS_ONLY)
    # Bytes first, so any percent-encoded file name (even non-UTF-8) maps to the OS name.
    return os.fsdecode(urllib.parse.unquote_to_bytes(parts.path))


def resolve_file_url(url: str, context: DecodeContext) -> str:
    """The fully resolved path of ``url``, checked against the workspace, allowed roots and protected files.

    A context with a ``task_id`` (:class:`iac_code.security.workspace.TaskDecodeContext`) lets
    that task read its own artifacts.
    """
    path = url_path(url)
    if "\x00" in path:
        raise PartDecodeError(NOT_AN_EXISTING_FILE)
    resolved = os.path.realpath(path)
    workspace = os.path.realpath(context.cwd)
    if not is_within(resolved, workspace) or not inside_allowed_roots(resolved, context.allowed_roots):
        raise PartDecodeError(OUTSIDE_WORKSPACE)
    if is_protected_file(resolved, getattr(context, "task_id", "")):
        raise PartDecodeError(OUTSIDE_WORKSPACE)
    return resolved


@contextlib.contextmanager
def open_file_url(url: str, context: DecodeContext) -> Iterator[OpenedFile]:
    """Resolve, check and open the regular file named by ``url``."""
    resolved = resolve_file_url(url, context)
    try:
        if not stat.S_ISREG(os.stat(resolved).st_mode):
            raise PartDecodeError(NOT_AN_EXISTING_FILE)
        fd = os.open(resolved, _OPEN_FLAGS)
    except OSError:
        raise PartDecodeError(NOT_AN_EXISTING_FILE) from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PartDecodeError(NOT_AN_EXISTING_FILE)
        if is_protected_descriptor(info):
            raise PartDecodeError(OUTSIDE_WORKSPACE)
        yield OpenedFile(path=resolved, size=info.st_size, stream=stream)


def read_at_most(stream: BinaryIO, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes, so a file that grew past the limit is still noticed."""
    return stream.read(limit + 1)


def sha256_at_most(stream: BinaryIO, limit: int) -> tuple[int, str]:
    """Hash up to ``limit + 1`` bytes in chunks; return (bytes read, hex SHA-256).

    The file is never held in memory whole; a count over ``limit`` means the
    file is (or grew) too large.
    """
    digest = hashlib.sha256()
    total = 0
    while total <= limit:
        chunk = stream.read(min(CHUNK_SIZE, limit + 1 - total))
        if not chunk:
            break
        digest.update(chunk)
        total += len(chunk)
    return total, digest.hexdigest()
