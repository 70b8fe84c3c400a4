"""JWK helpers for everything that signs with asymmetric keys (the card signer's key set, signed pushes).

A signing key is a ``jwcrypto.jwk.JWK``; receivers find its public half in a JWK
set by ``kid``. These three functions agree on what a key's ``kid`` and JWS
algorithm are, so a signer and the JWKS it publishes always match.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jwcrypto import jwk

EC_CURVE_ALGS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
RSA_ALGS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})


def key_id(key: jwk.JWK) -> str:
    """The key's ``kid``, or its RFC 7638 SHA-256 thumbprint when it has none."""
    kid = key.get("kid")
    return kid if isinstance(kid, str) and kid else key.thumbprint()


def key_alg(key: jwk.JWK) -> str:
    """The JWS algorithm ``key`` signs with: its ``alg``, else the default for its type (``ES256`` for P-256).

    Raises ``ValueError`` for a symmetric key or an algorithm that does not fit the key.
    """
    kty, alg = key.get("kty"), key.get("alg")
    if kty == "EC":
        curve = key.get("crv")
        if curve not in EC_CURVE_ALGS or alg not in (None, EC_CURVE_ALGS[curve]):
            raise ValueError(f"Unsupported push signing key: EC {curve} with alg {alg}")
        return EC_CURVE_ALGS[curve]
    if kty == "OKP":
        if key.get("crv") != "Ed25519" or alg not in (None, "EdDSA"):
            raise ValueError(f"Unsupported push signing key: OKP {key.get('crv')} with alg {alg}")
        return "EdDSA"
    if kty == "RSA":
        if alg is None:
            return "RS256"
        if alg not in RSA_ALGS:
            raise ValueError(f"Unsupported push signing key: RSA with alg {alg}")
        return str(alg)
    raise ValueError(f"Unsupported push signing key type: {kty}")


def public_jwks(keys: jwk.JWK | Iterable[jwk.JWK]) -> dict[str, Any]:
    """``{"keys": [...]}``: the public halves of ``keys`` with ``kid``, ``alg`` and ``use: sig``, for receivers.

    Publish every key a token may still be signed with (the current one and,
    during a key change, the previous one for at least the token lifetime).
    """
    items = [keys] if isinstance(keys, jwk.JWK) else list(keys)
    published = []
    for key in items:
        public = key.export_public(as_dict=True)
        public.update(kid=key_id(key), alg=key_alg(key), use="sig")
        published.append(public)
    return {"keys": published}
