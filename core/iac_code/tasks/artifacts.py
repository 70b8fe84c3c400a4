"""Artifact payloads (e.g. generated templates) stored as owner-only files.

Each artifact is written to ``<artifact-dir>/<task id>/<artifact id>/<file name>``
(a task's artifacts stay under its own directory, which a ``file://`` part of a
message continuing the task may read) and indexed by artifact id in
``<artifact-dir>/.by-id/<artifact id>.json``, so the HTTP transport can serve it at
``<base URL>iac-code/artifacts/<artifact id>/<file name>``. No path of the server's
file system leaves the process: the task records that URL (or, without an HTTP
transport, ``iac-code-artifact://<artifact id>/<file name>``) plus ``mediaType``,
``byteSize`` and ``sha256``; the content itself is never copied into tool metadata.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import uuid
from pathlib import Path
from urllib.parse import quote

from iac_code.base.records import StoredArtifact
from iac_code.base.storage import atomic_write, private_dir, safe_file_name

_ARTIFACT_ID = re.compile(r"^[0-9a-f]{32}$")
INDEX_DIR = ".by-id"
ROUTE_PREFIX = "iac-code/artifacts/"
LOCAL_SCHEME = "iac-code-artifact://"


class ArtifactStore:
    """Writes artifact payloads under ``<artifact-dir>/<task id>/<artifact id>/`` and finds them by id.

    ``base_url`` is the HTTP transport's public base URL (it sets it when it starts);
    artifact URLs are built on it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base_url = ""

    def url_of(self, artifact_id: str, name: str) -> str:
        """Where a client fetches the artifact: the HTTP route, or the local URI without HTTP."""
        tail = f"{artifact_id}/{quote(name, safe='')}"
        if not self.base_url:
            return LOCAL_SCHEME + tail
        return self.base_url.rstrip("/") + "/" + ROUTE_PREFIX + tail

    async def save(self, task_id: str, name: str, media_type: str, text: str) -> StoredArtifact:
        data = text.encode("utf-8")
        artifact_id = uuid.uuid4().hex
        file_name = safe_file_name(name)
        directory = self.root / safe_file_name(task_id, "task") / artifact_id
        stored = StoredArtifact(artifact_id=artifact_id, task_id=task_id, uri=self.url_of(artifact_id, file_name),
                                name=file_name, media_type=media_type, byte_size=len(data),
                                sha256=hashlib.sha256(data).hexdigest())
        record = json.dumps({"taskId": task_id, "name": file_name, "mediaType": media_type,
                             "byteSize": stored.byte_size, "sha256": stored.sha256}).encode()

        def write() -> None:
            private_dir(directory)
            atomic_write(directory / file_name, data)
            index = private_dir(self.root / INDEX_DIR)
            atomic_write(index / f"{artifact_id}.json", record)

        await asyncio.to_thread(write)
        return stored

    async def find(self, artifact_id: str, name: str) -> tuple[StoredArtifact, bytes] | None:
        """The artifact ``artifact_id`` named ``name`` and its content, or ``None`` when there is none."""
        if not _ARTIFACT_ID.fullmatch(artifact_id):
            return None

        def read() -> tuple[StoredArtifact, bytes] | None:
            try:
                record = json.loads((self.root / INDEX_DIR / f"{artifact_id}.json").read_bytes())
                task_id, file_name = str(record["taskId"]), str(record["name"])
                if file_name != name or file_name != safe_file_name(file_name):
                    return None
                data = (self.root / safe_file_name(task_id, "task") / artifact_id / file_name).read_bytes()
                return StoredArtifact(artifact_id=artifact_id, task_id=task_id,
                                      uri=self.url_of(artifact_id, file_name), name=file_name,
                                      media_type=str(record.get("mediaType") or "application/octet-stream"),
                                      byte_size=len(data), sha256=hashlib.sha256(data).hexdigest()), data
            except (OSError, ValueError, KeyError, TypeError):
                return None

        return await asyncio.to_thread(read)
