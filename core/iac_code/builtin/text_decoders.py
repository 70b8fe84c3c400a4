"""Built-in decoders for text-like parts and JSON data parts."""

from __future__ import annotations

import json

from iac_code.hookspecs import hookimpl
from iac_code.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec

INLINE_LIMIT = 1024 * 1024  # 1 MiB

TEXT_MEDIA_TYPES = (
    "text/plain", "text/markdown", "application/json", "text/yaml", "application/yaml", "application/x-yaml",
)


def decode_text(part: InputPart, context: DecodeContext) -> DecodedPart:
    """Text-like parts go into the prompt as they are."""
    text = part.text or ""
    if len(text.encode("utf-8")) > INLINE_LIMIT:
        raise PartDecodeError("Text part exceeds the 1 MiB inline limit.")
    return DecodedPart(text=text)


def decode_json_data(part: InputPart, context: DecodeContext) -> DecodedPart:
    """JSON data parts become compact JSON text (integers stay integers)."""
    text = json.dumps(part.data, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8")) > INLINE_LIMIT:
        raise PartDecodeError("JSON data part exceeds the 1 MiB inline limit.")
    return DecodedPart(text=text)


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    return [
        PartDecoderSpec(name="text", kind="text", media_types=TEXT_MEDIA_TYPES, decode=decode_text),
        PartDecoderSpec(name="json-data", kind="data", media_types=("application/json",), decode=decode_json_data),
    ]
