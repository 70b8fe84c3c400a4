"""Media-type classes shared by the built-in part decoders (spec §1.1).

*Text-like* types become prompt text; *multimodal* types become prompt
manifest entries. Both classes take extras from the environment
(``IACCODE_A2A_TEXT_MIME_TYPES``, ``IACCODE_A2A_MULTIMODAL_MIME_TYPES``:
comma- or semicolon-separated, trimmed, lower-cased, empty items dropped),
read whenever the decoder hook runs, i.e. when a kernel builds its decoder
table.

The built-in decoders must never claim the same ``(kind, media type)`` twice
(that is a start-up error), so extras are normalised here:

* only exact ``type/subtype`` entries are kept; wildcards (``image/*``, ``*``)
  and malformed entries are dropped;
* a type configured in both classes is text-like (the multimodal class
  excludes every text-like type).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

TEXT_MIME_ENV = "IACCODE_A2A_TEXT_MIME_TYPES"
MULTIMODAL_MIME_ENV = "IACCODE_A2A_MULTIMODAL_MIME_TYPES"

BASE_TEXT_TYPES: tuple[str, ...] = (
    "text/plain", "application/json", "text/markdown", "text/yaml", "application/yaml", "application/x-yaml",
)
BASE_MULTIMODAL_TYPES: tuple[str, ...] = (
    "image/png", "image/jpeg", "image/webp", "image/gif", "audio/mpeg", "audio/wav", "audio/ogg",
    "application/octet-stream",
)
MULTIMODAL_WILDCARDS: tuple[str, ...] = ("image/*", "audio/*")
"""Every image and audio type is multimodal, configured or not."""

UNSUPPORTED_MEDIA_TYPE = "A2A part has unsupported media type."

# RFC 6838 restricted names (lower-cased): no spaces, quotes, separators or line breaks.
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")


def is_media_type(value: str) -> bool:
    """Whether ``value`` is an exact, well-formed ``type/subtype`` (lower-case, no parameters)."""
    return _MEDIA_TYPE.fullmatch(value) is not None


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def env_media_types(name: str, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The well-formed exact media types listed in environment variable ``name``."""
    raw = (environ if environ is not None else os.environ).get(name, "")
    items = (item.strip().lower() for item in re.split(r"[,;]", raw))
    return _unique(item for item in items if is_media_type(item))


def text_like_types(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The built-in text-like types followed by the configured extras."""
    return _unique((*BASE_TEXT_TYPES, *env_media_types(TEXT_MIME_ENV, environ)))


def multimodal_types(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The exact multimodal types (built-in plus extras), minus every text-like type."""
    text_like = set(text_like_types(environ))
    candidates = (*BASE_MULTIMODAL_TYPES, *env_media_types(MULTIMODAL_MIME_ENV, environ))
    return _unique(t for t in candidates if t not in text_like)
