"""Built-in plugins: kernel features registered through the same manager as third-party ones."""

from __future__ import annotations

BUILTIN_PLUGINS: tuple[str, ...] = (
    "iac_code.builtin.text_parts",
    "iac_code.builtin.data_parts",
    "iac_code.builtin.raw_parts",
    "iac_code.builtin.file_url_parts",
    "iac_code.builtin.multimodal_parts",
    "iac_code.builtin.jwks",
    "iac_code.builtin.hmac_signer",
)
