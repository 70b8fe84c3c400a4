"""Built-in decoder for JSON ``data`` parts (spec §1.3).

``data`` with ``application/json`` becomes compact JSON text in the prompt:
separators ``,``/``:``, non-ASCII characters unescaped, keys sorted (as the
reference product does, so the prompt is deterministic). Unlike the reference
product, numbers round-trip exactly: the decoder receives the value as the
caller's JSON was parsed, so integers stay integers (however large) and floats
stay floats. Serialised JSON over 1 MiB (UTF-8 bytes) is refused with
``A2A data part content is too large.``; a non-finite number (``NaN``,
``Infinity``, ``1e400``, which a lenient JSON parser may let through) is
refused with ``A2A data parts must contain valid JSON.`` (our text: the spec
has none, and such a value could not be stored with the task).

``data`` with any other non-multimodal media type (other text-like types and
``*``) is refused with ``A2A data parts must use application/json media
type.``; multimodal ``data`` parts belong to
:mod:`iac_code.builtin.multimodal_parts`.
"""

from __future__ import annotations

import json

from iac_code.builtin.part_limits import INLINE_TEXT_LIMIT, exceeds
from iac_code.base.hookspecs import hookimpl
from iac_code.base.media_types import text_like_types
from iac_code.base.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec

JSON_MEDIA_TYPE = "application/json"
DATA_TOO_LARGE = "A2A data part content is too large."
JSON_ONLY = "A2A data parts must use application/json media type."
NOT_JSON = "A2A data parts must contain valid JSON."


def compact_json(value: object) -> str:
    """The compact, key-sorted JSON text of ``value``; ``ValueError`` for NaN or infinities."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, allow_nan=False)


def decode_json_data(part: InputPart, context: DecodeContext) -> DecodedPart:
    """JSON data becomes compact JSON prompt text."""
    try:
        text = compact_json(part.data)
    except ValueError:  # NaN / Infinity / 1e400: not JSON, and the task could not be stored either
        raise PartDecodeError(NOT_JSON) from None
    # surrogatepass: a lone surrogate escaped in the request counts as its 3 bytes instead of failing here.
    if exceeds(len(text.encode("utf-8", "surrogatepass")), INLINE_TEXT_LIMIT):
        raise PartDecodeError(DATA_TOO_LARGE)
    return DecodedPart(text=text)


def refuse_data(part: InputPart, context: DecodeContext) -> DecodedPart:
    """Data parts whose media type is neither JSON nor multimodal."""
    raise PartDecodeError(JSON_ONLY)


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    others = tuple(t for t in text_like_types() if t != JSON_MEDIA_TYPE)
    return [
        PartDecoderSpec(name="json-data", kind="data", media_types=(JSON_MEDIA_TYPE,), decode=decode_json_data),
        PartDecoderSpec(name="data-not-json", kind="data", media_types=(*others, "*"), decode=refuse_data),
    ]
