"""Artifact payloads (e.g. generated templates) stored as owner-only files.

The task records a ``file://`` URL plus ``mediaType``, ``byteSize`` and
``sha256``; the content itself is never copied into tool metadata.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from iac_code.storage import atomic_write, private_dir

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_file_name(name: str, fallback: str = "artifact.txt") -> str:
    """A bare, portable file name: path parts dropped, odd characters replaced."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("-", base).strip(".-")[:120]
    return cleaned or fallback


@dataclass(frozen=True)
class StoredArtifact:
    uri: str
    name: str
    media_type: str
    byte_size: int
    sha256: str


class ArtifactStore:
    """Writes artifact payloads under ``<artifact-dir>/<task id>/``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def save(self, task_id: str, name: str, media_type: str, text: str) -> StoredArtifact:
        data = text.encode("utf-8")
        file_name = safe_file_name(name)
        directory = self.root / safe_file_name(task_id, "task")
        path = directory / file_name

        def write() -> None:
            private_dir(directory)
            atomic_write(path, data)

        await asyncio.to_thread(write)
        return StoredArtifact(uri=path.resolve().as_uri(), name=file_name, media_type=media_type,
                              byte_size=len(data), sha256=hashlib.sha256(data).hexdigest())
