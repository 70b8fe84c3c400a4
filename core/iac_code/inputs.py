"""Turns an A2A message's parts into prompt input through the decoder plugins.

Decoding runs before a2a-sdk creates or resumes the task, so a refused part is
a JSON-RPC invalid-params error and no task is left behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import Message, Part
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.plugins import Provided
from iac_code.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec

DEFAULT_MEDIA_TYPE = {"text": "text/plain", "data": "application/json", "raw": "application/octet-stream",
                      "url": "application/octet-stream"}


@dataclass(frozen=True)
class DecodedInput:
    """The prompt text and manifest entries decoded from one message."""

    prompt: str
    manifest: tuple[Mapping[str, Any], ...] = ()


def allowed_roots() -> tuple[str, ...]:
    """Workspace roots: ``IACCODE_A2A_ALLOWED_CWDS`` or the server cwd and temp dir."""
    configured = [p for p in os.environ.get("IACCODE_A2A_ALLOWED_CWDS", "").split(os.pathsep) if p.strip()]
    roots = configured or [os.getcwd(), tempfile.gettempdir()]
    return tuple(os.path.realpath(r) for r in roots)


def to_input_part(part: Part, raw: Mapping[str, Any] | None = None) -> InputPart:
    """The SDK-neutral view of one protobuf part.

    ``raw`` is the part as the caller sent it in JSON, when known; data parts
    take their value from it so numbers keep their exact JSON form.
    """
    kind = part.WhichOneof("content") or "text"
    media_type = (part.media_type or DEFAULT_MEDIA_TYPE[kind]).split(";", 1)[0].strip().lower()
    metadata = MessageToDict(part.metadata) if part.HasField("metadata") else {}
    if kind == "text":
        return InputPart("text", media_type, text=part.text, filename=part.filename, metadata=metadata)
    if kind == "data":
        data = raw["data"] if raw is not None and "data" in raw else MessageToDict(part.data)
        return InputPart("data", media_type, data=data, filename=part.filename, metadata=metadata)
    if kind == "raw":
        return InputPart("raw", media_type, raw=part.raw, filename=part.filename, metadata=metadata)
    return InputPart("url", media_type, url=part.url, filename=part.filename, metadata=metadata)


class InputDecoder:
    """Looks up the most specific decoder for each part and joins the results."""

    def __init__(self, table: dict[tuple[str, str], Provided[PartDecoderSpec]]) -> None:
        self._table = {key: p.record for key, p in table.items()}

    def lookup(self, kind: str, media_type: str) -> PartDecoderSpec | None:
        major = media_type.split("/", 1)[0]
        for key in ((kind, media_type), (kind, f"{major}/*"), (kind, "*")):
            spec = self._table.get(key)
            if spec is not None:
                return spec
        return None

    def decode(self, message: Message, cwd: str, raw_parts: Any = None) -> DecodedInput:
        """Decode every part; ``raw_parts`` is the message's JSON ``parts`` list, if known."""
        context = DecodeContext(cwd=cwd, allowed_roots=allowed_roots())
        texts: list[str] = []
        manifest: list[Mapping[str, Any]] = []
        if not isinstance(raw_parts, list) or len(raw_parts) != len(message.parts):
            raw_parts = [None] * len(message.parts)
        for index, part in enumerate(message.parts):
            raw = raw_parts[index] if isinstance(raw_parts[index], dict) else None
            view = to_input_part(part, raw)
            spec = self.lookup(view.kind, view.media_type)
            if spec is None:
                raise ContentTypeNotSupportedError(
                    message=f"Unsupported media type {view.media_type[:100]!r} for {view.kind} part {index}")
            try:
                decoded: DecodedPart = spec.decode(view, context)
            except PartDecodeError as exc:
                raise InvalidParamsError(message=str(exc)) from None
            if decoded.text:
                texts.append(decoded.text)
            if decoded.manifest_entry is not None:
                manifest.append(decoded.manifest_entry)
        return DecodedInput(prompt="\n".join(texts), manifest=tuple(manifest))
