"""Built-in plugin: the ``hmac`` Agent Card signer (HS256, a2a-sdk's signing utility).

``signing-secret`` signs with kid ``default``; ``signing-secrets`` maps kids to
secrets and ``signing-kid`` names the one that signs (a verifier holding the map
checks cards signed with any of them). The protected header is
``{"alg": "HS256", "jku": null, "kid": ..., "typ": "JOSE"}``, as the product this
server matches writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iac_code.base.errors import StartupError
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import CardSignerSpec

if TYPE_CHECKING:
    from iac_code.base.records import PluginContext

DEFAULT_KID = "default"
MISSING_SECRET = "card-signer: hmac needs signing-secret (or signing-secrets)."


def hmac_secret(config: Any) -> tuple[str, str]:
    """(kid, secret) that signs, from ``signing-secret`` or ``signing-secrets`` + ``signing-kid``."""
    secrets: dict[str, str] = dict(config.signing_secrets or {})
    if config.signing_secret and not secrets:
        return DEFAULT_KID, str(config.signing_secret)
    if config.signing_secret:
        secrets.setdefault(DEFAULT_KID, str(config.signing_secret))
    kid = config.signing_kid or (next(iter(secrets)) if len(secrets) == 1 else "")
    if not kid:
        raise StartupError("signing-secrets holds several keys: set signing-kid to the one that signs.")
    if kid not in secrets or not secrets[kid]:
        raise StartupError(f"signing-kid {kid!r} is not a key of signing-secrets.")
    return kid, secrets[kid]


def create_signer(kernel: PluginContext) -> Callable[[Any], Any] | None:
    if kernel.config.effective_card_signer != "hmac":
        return None
    from a2a.utils.signing import create_agent_card_signer

    if not (kernel.config.signing_secret or kernel.config.signing_secrets):
        raise StartupError(MISSING_SECRET)
    kid, secret = hmac_secret(kernel.config)
    return create_agent_card_signer(secret, {"alg": "HS256", "jku": None, "kid": kid, "typ": "JOSE"})


@hookimpl
def iac_code_card_signers() -> list[CardSignerSpec]:
    return [CardSignerSpec(name="hmac", create_signer=create_signer,
                           description="HS256 with a shared secret (signing-secret / signing-secrets).")]


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """``card-signer: hmac`` needs a secret, and ``signing-kid`` must name one of ``signing-secrets``."""
    if config.effective_card_signer != "hmac":
        return []
    if not (config.signing_secret or config.signing_secrets):
        return [MISSING_SECRET]
    try:
        hmac_secret(config)
    except StartupError as exc:
        return [str(exc)]
    return []
