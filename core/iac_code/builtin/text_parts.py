"""Built-in decoder for ``text`` parts (spec §1.3).

A ``text`` part with a text-like media type (see
:mod:`iac_code.builtin.media_types`, extras from
``IACCODE_A2A_TEXT_MIME_TYPES``) is appended to the prompt as it is; empty
text contributes nothing. Any other media type is refused with
``A2A part has unsupported media type.`` (JSON-RPC -32602): this module claims
``("text", "*")`` so a caller gets the same text as from the reference product,
while plugins can still add exact or ``major/*`` types for text parts (the most
specific match wins). Raw and URL parts of unknown types are left unclaimed
instead (A2A -32005), see :mod:`iac_code.builtin.raw_parts`.
"""

from __future__ import annotations

from iac_code.base.hookspecs import hookimpl
from iac_code.base.media_types import UNSUPPORTED_MEDIA_TYPE, text_like_types
from iac_code.base.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec


def decode_text(part: InputPart, context: DecodeContext) -> DecodedPart:
    """Text-like text goes into the prompt unchanged."""
    return DecodedPart(text=part.text or "")


def refuse_text(part: InputPart, context: DecodeContext) -> DecodedPart:
    """Text parts of any non-text-like media type."""
    raise PartDecodeError(UNSUPPORTED_MEDIA_TYPE)


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    return [
        PartDecoderSpec(name="text", kind="text", media_types=text_like_types(), decode=decode_text),
        PartDecoderSpec(name="text-unsupported", kind="text", media_types=("*",), decode=refuse_text),
    ]
