"""Signed push notifications: a short-lived JWT per delivery, and the JWKS receivers verify it with.

A webhook receiver must be able to tell the server's notifications from anyone
else's POSTs to the same URL, without sharing a secret with the server. Each
delivery therefore carries a compact JWS JWT signed with the server's private
key (EC P-256, ``ES256`` by default), bound to its callback URL (``aud``), short
lived (``exp``), and naming the job (``jti`` = job id, stable across retries, so
it doubles as the idempotency key) and the task (``taskId``). The receiver
fetches the public keys (:func:`public_jwks`, published by the server) and checks
a token the way :func:`verify_notification` does.

Signing is on every delivery, so it avoids jwcrypto's generic JWS machinery: the
header is encoded once per key and the signature made directly with the
``cryptography`` key (about the cost of the ECDSA operation itself).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from jwcrypto import jwk, jws
from jwcrypto.common import JWException

from iac_code.api import key_alg, key_id, public_jwks, read_private_file, write_new_private_file

__all__ = ["NotificationSigner", "NotificationVerificationError", "generate_signing_key", "key_id",
           "load_or_create_signing_key", "public_jwks", "verify_notification"]

logger = logging.getLogger(__name__)

SIGNING_KEY_FILE = "push_signing_key.json"
DEFAULT_ALG = "ES256"
DEFAULT_TTL = 300

# How each algorithm a signing key may use signs (asymmetric only: receivers hold no secret).
_EC_HASHES = {"ES256": (hashes.SHA256, 32), "ES384": (hashes.SHA384, 48), "ES512": (hashes.SHA512, 66)}
_RSA_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "RS256": hashes.SHA256, "RS384": hashes.SHA384, "RS512": hashes.SHA512,
    "PS256": hashes.SHA256, "PS384": hashes.SHA384, "PS512": hashes.SHA512}
ALLOWED_ALGS = frozenset({*_EC_HASHES, "EdDSA", *_RSA_HASHES})


class NotificationVerificationError(ValueError):
    """A notification token that does not verify: bad form, unknown key, bad signature, expired, wrong audience."""


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signer(key: jwk.JWK, alg: str) -> Callable[[bytes], bytes]:
    """A function ``signing input → JWS signature bytes`` for a private ``key``."""
    private = key.get_op_key("sign")
    if isinstance(private, ec.EllipticCurvePrivateKey):
        hash_type, size = _EC_HASHES[alg]
        algorithm = ec.ECDSA(hash_type())

        def sign_ec(data: bytes) -> bytes:
            r, s = decode_dss_signature(private.sign(data, algorithm))
            return r.to_bytes(size, "big") + s.to_bytes(size, "big")

        return sign_ec
    if isinstance(private, ed25519.Ed25519PrivateKey):
        return private.sign
    if isinstance(private, rsa.RSAPrivateKey):
        hash_type = _RSA_HASHES[alg]
        pad: padding.AsymmetricPadding = padding.PKCS1v15() if alg.startswith("RS") else padding.PSS(
            mgf=padding.MGF1(hash_type()), salt_length=padding.PSS.DIGEST_LENGTH)

        def sign_rsa(data: bytes) -> bytes:
            return private.sign(data, pad, hash_type())

        return sign_rsa
    raise ValueError("Unsupported push signing key")


class NotificationSigner:
    """Signs push notifications: one compact JWS JWT per delivery attempt (``Authorization``-style header value).

    Header ``{"alg", "kid", "typ": "JWT"}``; claims ``iss`` (the server), ``aud``
    (the callback URL), ``iat``, ``exp`` (``iat + ttl``), ``jti`` (the job id) and
    ``taskId``. ``key`` must be a private asymmetric JWK (EC, OKP Ed25519 or RSA).
    """

    def __init__(self, key: jwk.JWK) -> None:
        if not key.has_private:
            raise ValueError("A push signing key must be a private key")
        self.key = key
        self.alg = key_alg(key)
        self.kid = key_id(key)
        header = {"alg": self.alg, "kid": self.kid, "typ": "JWT"}
        self._header = _b64(orjson.dumps(header, option=orjson.OPT_SORT_KEYS)) + b"."
        self._sign = _signer(key, self.alg)

    def sign(self, *, issuer: str, audience: str, job_id: str, task_id: str, now: float | None = None,
             ttl: int = DEFAULT_TTL) -> str:
        """The JWT for one notification of job ``job_id`` to ``audience`` (the callback URL)."""
        issued = int(time.time() if now is None else now)
        claims = {"aud": audience, "exp": issued + ttl, "iat": issued, "iss": issuer, "jti": job_id, "taskId": task_id}
        signing_input = self._header + _b64(orjson.dumps(claims))
        return (signing_input + b"." + _b64(self._sign(signing_input))).decode("ascii")


def _with_metadata(key: jwk.JWK) -> jwk.JWK:
    """``key`` with ``kid`` (thumbprint), ``alg`` and ``use: sig`` set."""
    document = json.loads(key.export_private())
    document.setdefault("kid", key_id(key))
    document.setdefault("alg", key_alg(key))
    document.setdefault("use", "sig")
    return jwk.JWK(**document)


def generate_signing_key() -> jwk.JWK:
    """A new EC P-256 private key with ``kid`` = its RFC 7638 thumbprint, ``alg: ES256``, ``use: sig``."""
    return _with_metadata(jwk.JWK.generate(kty="EC", crv="P-256"))


def load_or_create_signing_key(state_dir: Path) -> jwk.JWK:
    """The server's notification signing key, ``<state_dir>/push_signing_key.json``; generated on first use.

    The file holds the private JWK, owner-only (``0600`` in a ``0700`` directory,
    written whole; a group/other-readable file is restricted with a warning). It
    is generated once and never replaced: two processes starting together both
    use the first one written. ``ValueError`` when the file is not a private
    signing key.
    """
    path = Path(state_dir) / SIGNING_KEY_FILE
    data = read_private_file(path)
    if data is None:
        key = generate_signing_key()
        if write_new_private_file(path, key.export_private().encode("utf-8")):
            logger.info("Generated the A2A push signing key %s (kid %s)", path.name, key_id(key))
            return key
        data = read_private_file(path) or b""
    try:
        key = jwk.JWK.from_json(data.decode("utf-8"))
    except (JWException, ValueError, UnicodeDecodeError, TypeError) as exc:
        raise ValueError(f"{path.name} is not a valid JWK") from exc
    if not key.has_private:
        raise ValueError(f"{path.name} does not hold a private key")
    return _with_metadata(key)


def verify_notification(token: str, jwks: Mapping[str, Any], audience: str, *, issuer: str | None = None,
                        now: float | None = None, leeway: int = 30) -> dict[str, Any]:
    """The claims of a notification JWT, after the checks a receiver must make; otherwise
    :class:`NotificationVerificationError`.

    The key is chosen by the header's ``kid`` from ``jwks``; the header's ``alg``
    must be an asymmetric algorithm and the key's own; the signature must verify;
    ``exp`` must not be past (``leeway`` seconds of clock skew), ``iat`` not in the
    future; ``aud`` must be ``audience`` (the receiver's own callback URL) and,
    when given, ``iss`` must be ``issuer``. The receiver should also drop a
    ``jti`` it has already processed (retries reuse it).
    """
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise NotificationVerificationError("Push notification token is not a compact JWS")
    try:
        header = json.loads(_b64decode(parts[0]))
    except ValueError:
        raise NotificationVerificationError("Push notification token header is malformed") from None
    if not isinstance(header, dict):
        raise NotificationVerificationError("Push notification token header is malformed")
    kid, alg = header.get("kid"), header.get("alg")
    if alg not in ALLOWED_ALGS:
        raise NotificationVerificationError(f"Push notification token algorithm is not allowed: {alg}")
    entries = [entry for entry in jwks.get("keys") or [] if isinstance(entry, Mapping) and entry.get("kid") == kid]
    if not entries:
        raise NotificationVerificationError(f"Push notification signing key is unknown: {kid}")
    try:
        key = jwk.JWK(**entries[0])
        expected_alg = key_alg(key)
    except (JWException, ValueError, TypeError):
        raise NotificationVerificationError(f"Push notification signing key is unusable: {kid}") from None
    if alg != expected_alg:
        raise NotificationVerificationError(f"Push notification token algorithm does not match its key: {alg}")
    signed = jws.JWS()
    try:
        signed.deserialize(token)
        signed.verify(key, alg=expected_alg)
        claims = json.loads(signed.payload)
    except (JWException, ValueError, TypeError):
        raise NotificationVerificationError("Push notification token signature is invalid") from None
    if not isinstance(claims, dict):
        raise NotificationVerificationError("Push notification token claims are malformed")
    current = time.time() if now is None else now
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or isinstance(exp, bool) or current > exp + leeway:
        raise NotificationVerificationError("Push notification token has expired")
    if isinstance(iat, int | float) and not isinstance(iat, bool) and iat > current + leeway:
        raise NotificationVerificationError("Push notification token is not yet valid")
    aud = claims.get("aud")
    if not (aud == audience or (isinstance(aud, list) and audience in aud)):
        raise NotificationVerificationError("Push notification token audience does not match")
    if issuer is not None and claims.get("iss") != issuer:
        raise NotificationVerificationError("Push notification token issuer does not match")
    return claims
