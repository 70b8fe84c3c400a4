"""The critical backup of a selection checkpoint (§9 "plus a critical backup").

With a backup directory configured (the server's ``backup-dir`` key when the pipeline plugin provides it, else
``IAC_CODE_CONFIG_BACKUP_DIR``; off when neither is set) every checkpoint write is also written, atomically and
owner-only, to ``<backup dir>/resource-selections/<inputId>.json`` (the same JSON). The ``pending`` copy is written
before the question is published: when it fails, the question is not asked and the call fails with a sanitised
reason (never a path). The kernel has no seam for critical backups and plugins do not import each other, so this is
the selector's own copy under the same directory the pipelines use.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iac_code.api import atomic_write, private_dir

BACKUP_DIR_ENV = "IAC_CODE_CONFIG_BACKUP_DIR"
_REASONS = {
    errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "the backup location is not a directory", errno.EEXIST: "the backup location is not a directory",
    errno.EISDIR: "the backup location is not writable", errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system", errno.EDQUOT: "disk quota exceeded",
    errno.ENOENT: "the backup location does not exist", errno.EIO: "input/output error",
}


class BackupFailed(Exception):
    """The backup copy could not be written; ``str()`` is a sanitised reason (no path)."""


def backup_dir(config: Any, environ: Mapping[str, str] | None = None) -> Path | None:
    """The configured backup directory (``None``: backups are off)."""
    env = os.environ if environ is None else environ
    value = str(getattr(config, "backup_dir", "") or "").strip() or str(env.get(BACKUP_DIR_ENV, "") or "").strip()
    return Path(value) if value else None


class SelectionBackup:
    """Writes the backup copies of selection checkpoints under one backup directory."""

    def __init__(self, directory: Path) -> None:
        self.root = directory / "resource-selections"

    def write(self, record: Mapping[str, Any]) -> None:
        """Write the copy of ``record``; :class:`BackupFailed` with a sanitised reason when it cannot be written."""
        try:
            private_dir(self.root)
            atomic_write(self.root / f"{record['inputId']}.json", json.dumps(dict(record), sort_keys=True).encode())
        except OSError as exc:
            raise BackupFailed(_REASONS.get(exc.errno or 0, "the backup could not be written")) from None
