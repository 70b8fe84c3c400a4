"""Built-in decoder for multimodal parts: attachments as prompt manifest entries.

Multimodal media types are ``image/*``, ``audio/*``, ``application/octet-stream``
and the extras from ``IACCODE_A2A_MULTIMODAL_MIME_TYPES`` (see
:mod:`iac_code.builtin.media_types`). Where the reference product rejects
audio, octet-stream and configured types although its card advertises them,
every multimodal part within the limits is accepted (spec README) and becomes:

* a manifest entry ``{"filename", "mediaType", "byteSize", "sha256", "source"}``
  for the runtime (``TurnRequest.manifest``), and
* the spec §1.5 text block in the prompt::

    A2A multimodal attachment:
    - filename=<basename | inline | attachment>
    - mediaType=<media type>
    - byteSize=<bytes>
    - sha256=<hex>
    - source=<inline | data | file:///... URI of the resolved file>

Per kind:

* ``raw``: the bytes; at most 5 MiB (``A2A binary raw part content is too large.``);
  source ``inline``.
* ``data``: an object (``A2A binary data parts must contain an object.``) holding
  a base64 string in ``bytes`` or else ``base64`` (``A2A binary data parts must
  include base64 bytes.``), strictly valid (``A2A binary data part bytes must
  be valid base64.``), at most 5 MiB decoded (``A2A binary data part content
  is too large.``); source ``data``.
* ``url``: a workspace ``file://`` URL as for text files (never one of the
  server's own files, :mod:`iac_code.builtin.file_urls`), at most 25 MiB
  (``A2A binary file URL part content is too large.``), hashed in chunks and
  never loaded whole; source the resolved file's ``file://`` URI. That URI is
  a local path: it goes only to the local runtime, never into an error.

File names: raw parts use the part's ``filename``; data parts the object's
``filename``, else the part's; files their own name. No name gives
``inline``; a value that is not a bare basename (path separators, ``.``/``..``,
non-printable characters such as line breaks, over 255 characters, not a
string) gives ``attachment``,
so a name can never add lines to the manifest block. A media type that is not
a well-formed ``type/subtype`` (only reachable through the ``image/*`` and
``audio/*`` wildcards) is refused with ``A2A part has unsupported media type.``
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any

from iac_code.builtin.file_urls import open_file_url, sha256_at_most
from iac_code.builtin.part_limits import BINARY_FILE_LIMIT, INLINE_BINARY_LIMIT, exceeds
from iac_code.base.hookspecs import hookimpl
from iac_code.base.media_types import MULTIMODAL_WILDCARDS, UNSUPPORTED_MEDIA_TYPE, is_media_type, multimodal_types
from iac_code.base.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec

RAW_TOO_LARGE = "A2A binary raw part content is too large."
DATA_NOT_OBJECT = "A2A binary data parts must contain an object."
DATA_NO_BASE64 = "A2A binary data parts must include base64 bytes."
DATA_BAD_BASE64 = "A2A binary data part bytes must be valid base64."
DATA_TOO_LARGE = "A2A binary data part content is too large."
FILE_TOO_LARGE = "A2A binary file URL part content is too large."

INLINE_NAME = "inline"
UNSAFE_NAME = "attachment"
MAX_NAME_LENGTH = 255


def safe_filename(value: Any) -> str:
    """``value`` if it is a bare basename; ``inline`` when absent, else ``attachment``."""
    if value is None or value == "":
        return INLINE_NAME
    # isprintable() is false for control, format and line/paragraph separator characters.
    if (not isinstance(value, str) or value in {".", ".."} or len(value) > MAX_NAME_LENGTH
            or not value.isprintable() or "/" in value or "\\" in value):
        return UNSAFE_NAME
    return value


def attachment(filename: str, media_type: str, size: int, sha256: str, source: str) -> DecodedPart:
    """The manifest entry and its prompt text block."""
    entry: Mapping[str, Any] = {"filename": filename, "mediaType": media_type, "byteSize": size,
                                "sha256": sha256, "source": source}
    text = "\n".join(["A2A multimodal attachment:", *(f"- {key}={value}" for key, value in entry.items())])
    return DecodedPart(text=text, manifest_entry=entry)


def _check_media_type(part: InputPart) -> None:
    if not is_media_type(part.media_type):
        raise PartDecodeError(UNSUPPORTED_MEDIA_TYPE)


def decode_raw(part: InputPart, context: DecodeContext) -> DecodedPart:
    """Inline bytes (≤ 5 MiB)."""
    _check_media_type(part)
    content = part.raw or b""
    if exceeds(len(content), INLINE_BINARY_LIMIT):
        raise PartDecodeError(RAW_TOO_LARGE)
    return attachment(safe_filename(part.filename), part.media_type, len(content),
                      hashlib.sha256(content).hexdigest(), "inline")


def _base64_payload(value: Mapping[str, Any]) -> str:
    for key in ("bytes", "base64"):
        payload = value.get(key)
        if isinstance(payload, str) and payload:
            return payload
    raise PartDecodeError(DATA_NO_BASE64)


def decode_data(part: InputPart, context: DecodeContext) -> DecodedPart:
    """A ``{"bytes"|"base64": ..., "filename"?: ...}`` object (≤ 5 MiB decoded)."""
    _check_media_type(part)
    if not isinstance(part.data, Mapping):
        raise PartDecodeError(DATA_NOT_OBJECT)
    payload = _base64_payload(part.data)
    try:
        content = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise PartDecodeError(DATA_BAD_BASE64) from None
    if exceeds(len(content), INLINE_BINARY_LIMIT):
        raise PartDecodeError(DATA_TOO_LARGE)
    name = part.data.get("filename")
    if name is None or name == "":
        name = part.filename
    return attachment(safe_filename(name), part.media_type, len(content),
                      hashlib.sha256(content).hexdigest(), "data")


def decode_file(part: InputPart, context: DecodeContext) -> DecodedPart:
    """A workspace file (≤ 25 MiB), hashed in chunks."""
    _check_media_type(part)
    with open_file_url(part.url or "", context) as opened:
        if exceeds(opened.size, BINARY_FILE_LIMIT):
            raise PartDecodeError(FILE_TOO_LARGE)
        size, digest = sha256_at_most(opened.stream, BINARY_FILE_LIMIT)
        name, uri = opened.name, opened.uri
    if exceeds(size, BINARY_FILE_LIMIT):  # grew after fstat
        raise PartDecodeError(FILE_TOO_LARGE)
    return attachment(safe_filename(name), part.media_type, size, digest, uri)


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    media_types = (*multimodal_types(), *MULTIMODAL_WILDCARDS)
    return [
        PartDecoderSpec(name="multimodal-raw", kind="raw", media_types=media_types, decode=decode_raw),
        PartDecoderSpec(name="multimodal-data", kind="data", media_types=media_types, decode=decode_data),
        PartDecoderSpec(name="multimodal-file", kind="url", media_types=media_types, decode=decode_file),
    ]
