"""Built-in decoder for ``url`` parts naming local text files (spec §1.3, §1.4).

A ``url`` part with a text-like media type must be a local
``file:///absolute/path`` inside the request workspace and the allowed roots,
not one of the server's own files (see :mod:`iac_code.builtin.file_urls`),
naming an existing regular file of at
most 1 MiB (``A2A file URL part content is too large.``, checked with
``fstat`` before reading; at most limit + 1 bytes are ever read) that is
valid UTF-8 (``A2A file URL parts must contain valid UTF-8.``). The text is
appended to the prompt. Remote URLs are never fetched.

``url`` parts whose media type is neither text-like nor multimodal are left
unclaimed: the caller gets the standard A2A content-type error (JSON-RPC
-32005), see :mod:`iac_code.builtin.raw_parts` for why.
Multimodal files belong to :mod:`iac_code.builtin.multimodal_parts`.
"""

from __future__ import annotations

from iac_code.builtin.file_urls import open_file_url, read_at_most
from iac_code.builtin.part_limits import TEXT_FILE_LIMIT, exceeds
from iac_code.base.hookspecs import hookimpl
from iac_code.base.media_types import text_like_types
from iac_code.base.records import DecodeContext, DecodedPart, InputPart, PartDecodeError, PartDecoderSpec

FILE_TOO_LARGE = "A2A file URL part content is too large."
FILE_NOT_UTF8 = "A2A file URL parts must contain valid UTF-8."


def decode_text_file(part: InputPart, context: DecodeContext) -> DecodedPart:
    """A workspace text file becomes prompt text."""
    with open_file_url(part.url or "", context) as opened:
        if exceeds(opened.size, TEXT_FILE_LIMIT):
            raise PartDecodeError(FILE_TOO_LARGE)
        content = read_at_most(opened.stream, TEXT_FILE_LIMIT)
    if exceeds(len(content), TEXT_FILE_LIMIT):  # grew after fstat
        raise PartDecodeError(FILE_TOO_LARGE)
    try:
        return DecodedPart(text=content.decode("utf-8"))
    except UnicodeDecodeError:
        raise PartDecodeError(FILE_NOT_UTF8) from None


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    return [
        PartDecoderSpec(name="file-url-text", kind="url", media_types=text_like_types(), decode=decode_text_file),
    ]
