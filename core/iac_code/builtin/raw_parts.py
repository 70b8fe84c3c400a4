"""Built-in decoder for ``raw`` text parts (spec §1.3).

``raw`` bytes with a text-like media type must be at most 1 MiB
(``A2A raw part content is too large.``) and valid UTF-8
(``A2A raw parts must contain valid UTF-8.``); the decoded text is appended to
the prompt.

``raw`` parts whose media type is neither text-like nor multimodal (e.g.
``application/x-foo``) are deliberately left unclaimed, so the kernel answers
with the standard A2A content-type error (JSON-RPC -32005) that generic A2A
clients understand, as ``docs/plugin-hooks.md`` documents. The reference
product answers -32602 ``A2A part has unsupported media type.`` instead; the
product's own docs allow either ("validation error or standard A2A
content-type error"). Leaving ``("raw", "*")`` free also lets a plugin
provide a catch-all raw decoder. (``text`` parts keep the spec's -32602 text,
see :mod:`iac_code.builtin.text_parts`; ``url`` parts follow this module.)
"""

from __future__ import annotations

from iac_code.builtin.part_limits import INLINE_TEXT_LIMIT, exceeds
from iac_code.base.hookspecs import hookimpl
from iac_code.base.media_types import text_like_types
from iac_code.base.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec

RAW_TOO_LARGE = "A2A raw part content is too large."
RAW_NOT_UTF8 = "A2A raw parts must contain valid UTF-8."


def decode_raw_text(part: InputPart, context: DecodeContext) -> DecodedPart:
    """UTF-8 raw bytes become prompt text."""
    content = part.raw or b""
    if exceeds(len(content), INLINE_TEXT_LIMIT):
        raise PartDecodeError(RAW_TOO_LARGE)
    try:
        return DecodedPart(text=content.decode("utf-8"))
    except UnicodeDecodeError:
        raise PartDecodeError(RAW_NOT_UTF8) from None


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    return [
        PartDecoderSpec(name="raw-text", kind="raw", media_types=text_like_types(), decode=decode_raw_text),
    ]
