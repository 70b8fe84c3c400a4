"""Built-in plugins: kernel features registered through the same manager as third-party ones."""

from __future__ import annotations

BUILTIN_PLUGINS: tuple[str, ...] = (
    "iac_code.builtin.text_decoders",
    "iac_code.builtin.offline_runtime",
)
