"""The signing algorithms the jwks signer offers (no crypto imports: the plugin's config model reads these)."""

from __future__ import annotations

DEFAULT_ALGORITHM = "ES256"
# The algorithms this signer generates and accepts for its own keys (a2a-sdk's signer signs with any of them).
ALGORITHMS = ("ES256", "ES384", "RS256", "PS256", "EdDSA")


def canonical_algorithm(name: str) -> str:
    """``name`` spelled as :data:`ALGORITHMS` spells it (case-insensitive); ``ValueError`` when it is not one of them."""
    wanted = name.strip().lower() if isinstance(name, str) else ""
    for algorithm in ALGORITHMS:
        if algorithm.lower() == wanted:
            return algorithm
    raise ValueError(f"'signing-algorithm': must be one of {', '.join(ALGORITHMS)} (not {name!r})")
