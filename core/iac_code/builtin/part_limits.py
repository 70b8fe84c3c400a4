"""Size limits of the built-in part decoders, in one place (spec §1.2).

Every check is ``size > limit``: content of exactly the limit is accepted.
Sizes are bytes: UTF-8 bytes for text, decoded bytes for base64 payloads and
the file size for ``file://`` URLs.
"""

from __future__ import annotations

MIB = 1024 * 1024

INLINE_TEXT_LIMIT = 1 * MIB
"""``raw`` text parts and the serialised JSON of ``data`` parts (1,048,576 bytes)."""

TEXT_FILE_LIMIT = 1 * MIB
"""Text-like files referenced by ``file://`` URL parts."""

INLINE_BINARY_LIMIT = 5 * MIB
"""Multimodal ``raw`` parts and decoded base64 of multimodal ``data`` parts (5,242,880 bytes)."""

BINARY_FILE_LIMIT = 25 * MIB
"""Multimodal files referenced by ``file://`` URL parts (26,214,400 bytes)."""


def exceeds(size: int, limit: int) -> bool:
    """Whether ``size`` is over ``limit`` (exactly the limit passes)."""
    return size > limit
