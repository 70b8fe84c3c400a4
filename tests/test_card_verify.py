"""Agent Card signature verification (``iac_code_a2a_client.card_verify``) against cards signed by a2a-sdk's own signer.

Every signed card here comes from ``a2a.utils.signing.create_agent_card_signer``, so a
pass means our key selection plus a2a-sdk's verifier accept exactly what the SDK signs.
Forged cards (``alg: none``, HMAC keyed with a public key) are built by hand from the
SDK's canonical payload. Remote JWKS come from a real aiohttp server on 127.0.0.1 that
counts its hits, serves ``ETag``/``Cache-Control`` and answers ``If-None-Match``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.signing import _canonicalize_agent_card, create_agent_card_signer
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from google.protobuf.json_format import MessageToDict
from iac_code_a2a_client.card_verify import (
    JWKS_NOT_OBJECT,
    SUPPORTED_ALGORITHMS,
    CardVerificationError,
    CardVerificationResult,
    CardVerifier,
)
from jwcrypto import jwk

SECRET = "a-shared-card-signing-secret-of-32+bytes"
OTHER_SECRET = "another-card-signing-secret-of-32+bytes"


# ---------------------------------------------------------------- keys and cards


@dataclass(frozen=True)
class KeyPair:
    """A signing key as a2a-sdk's signer takes it (PEM bytes) and its public JWK (with kid and alg)."""

    alg: str
    kid: str
    pem: bytes
    public_jwk: dict[str, Any]


def _pem(private_key: Any) -> bytes:
    return private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())


def make_key(alg: str, kid: str, *, with_alg: bool = True) -> KeyPair:
    """A fresh asymmetric key pair for ``alg``, generated with cryptography and exported with jwcrypto."""
    if alg in ("RS256", "PS256"):
        private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif alg == "ES256":
        private = ec.generate_private_key(ec.SECP256R1())
    elif alg == "ES384":
        private = ec.generate_private_key(ec.SECP384R1())
    elif alg == "EdDSA":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        raise AssertionError(alg)
    pem = _pem(private)
    public = jwk.JWK.from_pem(pem).export_public(as_dict=True)
    public["kid"] = kid
    if with_alg:
        public["alg"] = alg
    return KeyPair(alg=alg, kid=kid, pem=pem, public_jwk=public)


def oct_jwk(secret: str, kid: str, **extra: Any) -> dict[str, Any]:
    k = base64.urlsafe_b64encode(secret.encode()).rstrip(b"=").decode()
    return {"kty": "oct", "kid": kid, "k": k, **extra}


def make_card(**interfaces: str) -> AgentCard:
    """A minimal valid A2A 1.0 card: one JSONRPC interface (plus ``protocol_version=url`` extras), one skill."""
    card = AgentCard(
        name="iac-code",
        description="AI-powered Infrastructure as Code assistant.",
        version="0.1.0",
        supported_interfaces=[AgentInterface(url="http://127.0.0.1:8765/", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="iac_generation", name="IaC Generation", description="Generate ROS templates.",
                           tags=["iac", "ros"], examples=["Create a VPC."])],
    )
    for binding, url in interfaces.items():
        card.supported_interfaces.append(AgentInterface(url=url, protocol_binding=binding.replace("_", "+"),
                                                        protocol_version="0.3"))
    return card


def sign(card: AgentCard, key: bytes | str, **header: Any) -> AgentCard:
    """``card`` (copied) with one more signature made by a2a-sdk's ``create_agent_card_signer``."""
    signed = AgentCard()
    signed.CopyFrom(card)
    return create_agent_card_signer(key, header)(signed)  # type: ignore[arg-type]


def sign_with(pair: KeyPair, card: AgentCard | None = None, **header: Any) -> AgentCard:
    return sign(card or make_card(), pair.pem, alg=pair.alg, kid=pair.kid, **header)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(card: AgentCard, header: dict[str, Any], hmac_key: bytes | None = None, signature: str = "") -> AgentCard:
    """A hand-made JWS over a2a-sdk's canonical payload: HMAC-SHA256 with ``hmac_key``, else ``signature`` verbatim."""
    forged = AgentCard()
    forged.CopyFrom(card)
    del forged.signatures[:]
    protected = b64url(json.dumps(header, separators=(",", ":")).encode())
    payload = b64url(_canonicalize_agent_card(forged).encode())
    if hmac_key is not None:
        signature = b64url(hmac.new(hmac_key, f"{protected}.{payload}".encode(), hashlib.sha256).digest())
    forged.signatures.add(protected=protected, signature=signature)
    return forged


def as_dict(card: AgentCard) -> dict[str, Any]:
    return json.loads(json.dumps(MessageToDict(card)))


# ---------------------------------------------------------------- the JWKS server


@dataclass
class JwksServer:
    """A real HTTP server serving JWKS documents by path, counting hits and answering conditional GETs."""

    base: str = ""
    documents: dict[str, Any] = field(default_factory=dict)
    cache_control: dict[str, str] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    not_modified: Counter[str] = field(default_factory=Counter)
    request_headers: list[dict[str, str]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[path] += 1
        self.request_headers.append(dict(request.headers))
        if path == "/redirect":
            raise web.HTTPFound("/jwks.json")
        if path == "/broken":
            return web.Response(status=500, text="boom")
        if path not in self.documents:
            return web.Response(status=404)
        body = json.dumps(self.documents[path]).encode()
        etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
        headers = {"ETag": etag}
        if path in self.cache_control:
            headers["Cache-Control"] = self.cache_control[path]
        if request.headers.get("If-None-Match") == etag:
            self.not_modified[path] += 1
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)


@pytest.fixture
async def jwks_server() -> AsyncIterator[JwksServer]:
    server = JwksServer()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.base = f"http://{host}:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------- signed cards verify, per algorithm


@pytest.mark.parametrize("alg", [alg for alg in SUPPORTED_ALGORITHMS if alg != "HS256"])
async def test_asymmetric_card_signed_by_a2a_sdk_verifies_with_local_jwks(alg: str) -> None:
    pair = make_key(alg, f"{alg.lower()}-1")
    verifier = CardVerifier(jwks={"keys": [pair.public_jwk]})
    card = sign_with(pair)
    assert await verifier.verify(card) == CardVerificationResult(True, "signed", kid=pair.kid)
    assert (await verifier.verify(as_dict(card))).reason == "signed"


@pytest.mark.parametrize("alg", ["ES256", "RS256", "EdDSA"])
async def test_public_jwk_without_alg_is_matched_by_type(alg: str) -> None:
    pair = make_key(alg, "k1", with_alg=False)
    result = await CardVerifier(jwks={"keys": [pair.public_jwk]}).verify(sign_with(pair))
    assert result.reason == "signed"


@pytest.mark.parametrize("config", ["secret", "secret-without-kid", "secrets-map", "oct-jwk"])
async def test_hs256_card_signed_by_a2a_sdk_verifies(config: str) -> None:
    header = {"alg": "HS256"} if config == "secret-without-kid" else {"alg": "HS256", "kid": "hmac-1"}
    card = sign(make_card(), SECRET, **header)
    verifier = {
        "secret": CardVerifier(secret=SECRET),
        "secret-without-kid": CardVerifier(secret=SECRET),
        "secrets-map": CardVerifier(secrets={"hmac-1": SECRET, "hmac-2": OTHER_SECRET}),
        "oct-jwk": CardVerifier(jwks={"keys": [oct_jwk(SECRET, "hmac-1", alg="HS256")]}),
    }[config]
    result = await verifier.verify(as_dict(card))
    assert result.valid and result.reason == "signed"
    assert result.kid == header.get("kid", "")


async def test_verify_or_raise_returns_valid_results_and_raises_with_the_result() -> None:
    verifier = CardVerifier(secret=SECRET)
    assert (await verifier.verify_or_raise(sign(make_card(), SECRET, alg="HS256"))).reason == "signed"
    assert (await verifier.verify_or_raise(make_card())).reason == "unsigned"
    with pytest.raises(CardVerificationError) as caught:
        await verifier.verify_or_raise(sign(make_card(), OTHER_SECRET, alg="HS256", kid="x"))
    assert isinstance(caught.value, ValueError)
    assert caught.value.result.reason == "signature-mismatch"
    assert str(caught.value) == "A2A Agent Card verification failed: signature-mismatch: kid=x"


# ---------------------------------------------------------------- tampering


TAMPERS: dict[str, Callable[[AgentCard], None]] = {
    "name": lambda c: setattr(c, "name", "impostor"),
    "description": lambda c: setattr(c, "description", c.description + " "),
    "version": lambda c: setattr(c, "version", "9.9.9"),
    "interface-url": lambda c: setattr(c.supported_interfaces[0], "url", "http://evil.example/"),
    "interface-binding": lambda c: setattr(c.supported_interfaces[0], "protocol_binding", "HTTP+JSON"),
    "capabilities": lambda c: setattr(c.capabilities, "streaming", False),
    "input-modes": lambda c: c.default_input_modes.append("image/png"),
    "output-modes": lambda c: c.default_output_modes.append("text/markdown"),
    "skill": lambda c: setattr(c.skills[0], "description", "Delete everything."),
    "skill-tags": lambda c: c.skills[0].tags.append("admin"),
    "added-field": lambda c: setattr(c, "documentation_url", "https://evil.example/docs"),
    "added-skill": lambda c: c.skills.add(id="exfiltrate", name="Exfiltrate", description="x", tags=["x"]),
    "signature-bytes": lambda c: setattr(c.signatures[0], "signature",
                                         ("A" if c.signatures[0].signature[0] != "A" else "B") + c.signatures[0].signature[1:]),
}


@pytest.mark.parametrize("alg", ["HS256", "ES256", "RS256", "EdDSA"])
@pytest.mark.parametrize("tamper", sorted(TAMPERS))
async def test_tampering_with_any_field_is_a_signature_mismatch(alg: str, tamper: str) -> None:
    if alg == "HS256":
        card, verifier, kid = sign(make_card(), SECRET, alg="HS256", kid="h"), CardVerifier(secret=SECRET), "h"
    else:
        pair = make_key(alg, "k")
        card, verifier, kid = sign_with(pair), CardVerifier(jwks={"keys": [pair.public_jwk]}), "k"
    assert (await verifier.verify(card)).valid
    TAMPERS[tamper](card)
    result = await verifier.verify(as_dict(card))
    assert result == CardVerificationResult(False, "signature-mismatch", kid=kid)
    assert result.message == f"A2A Agent Card verification failed: signature-mismatch: kid={kid}"


async def test_tampering_the_served_dict_is_a_signature_mismatch() -> None:
    card = as_dict(sign(make_card(), SECRET, alg="HS256"))
    card["skills"][0]["name"] = "Other"
    assert (await CardVerifier(secret=SECRET).verify(card)).reason == "signature-mismatch"


# ---------------------------------------------------------------- algorithm and key confusion


@pytest.mark.parametrize("material", ["pem", "jwk-json", "jwk-x"])
async def test_hs256_with_the_kid_of_a_public_key_is_rejected(material: str) -> None:
    """HMAC keyed with public key bytes must not verify: the public key is never an HMAC secret."""
    pair = make_key("ES256", "ec-1")
    public_pem = jwk.JWK(**pair.public_jwk).export_to_pem()
    hmac_key = {
        "pem": public_pem,
        "jwk-json": json.dumps(pair.public_jwk).encode(),
        "jwk-x": base64.urlsafe_b64decode(pair.public_jwk["x"] + "=="),
    }[material]
    forged = forge(make_card(), {"alg": "HS256", "kid": "ec-1"}, hmac_key=hmac_key)

    only_public = await CardVerifier(jwks={"keys": [pair.public_jwk]}).verify(forged)
    assert only_public == CardVerificationResult(False, "missing-key", kid="ec-1")
    with_hmac_keys = CardVerifier(jwks={"keys": [pair.public_jwk, oct_jwk(SECRET, "hmac-1")]},
                                  secrets={"hmac-2": OTHER_SECRET})
    result = await with_hmac_keys.verify(forged)
    assert result == CardVerificationResult(False, "unknown-key", kid="ec-1")
    assert result.message == "A2A Agent Card verification failed: unknown-key: kid=ec-1"
    # A plain secret is a different HMAC key altogether: still no match.
    assert (await CardVerifier(secret=SECRET, jwks={"keys": [pair.public_jwk]}).verify(forged)).reason == "signature-mismatch"


async def test_asymmetric_signature_naming_an_hmac_kid_never_uses_the_secret() -> None:
    pair = make_key("RS256", "shared-kid")
    card = sign_with(pair)
    verifier = CardVerifier(secret=SECRET, secrets={"shared-kid": SECRET}, jwks={"keys": [oct_jwk(SECRET, "shared-kid")]})
    assert await verifier.verify(card) == CardVerificationResult(False, "missing-key", kid="shared-kid")
    with_rsa = CardVerifier(secrets={"shared-kid": SECRET}, jwks={"keys": [make_key("RS256", "rsa-2").public_jwk]})
    assert await with_rsa.verify(card) == CardVerificationResult(False, "unknown-key", kid="shared-kid")


async def test_a_jwk_alg_must_match_the_signature_alg() -> None:
    rsa_pair = make_key("RS256", "rsa-1")  # the JWK says RS256
    ps_card = sign(make_card(), rsa_pair.pem, alg="PS256", kid="rsa-1")
    other = make_key("PS256", "rsa-2")
    verifier = CardVerifier(jwks={"keys": [rsa_pair.public_jwk, other.public_jwk]})
    assert (await verifier.verify(ps_card)) == CardVerificationResult(False, "unknown-key", kid="rsa-1")
    assert (await verifier.verify(sign_with(rsa_pair))).reason == "signed"


async def test_a_curve_must_match_the_signature_alg() -> None:
    p384 = make_key("ES384", "ec", with_alg=False)
    forged_alg = forge(make_card(), {"alg": "ES256", "kid": "ec"}, signature="AAAA")
    assert (await CardVerifier(jwks={"keys": [p384.public_jwk]}).verify(forged_alg)).reason == "missing-key"


async def test_private_jwks_entries_are_not_verification_keys() -> None:
    pair = make_key("ES256", "ec-1")
    private = jwk.JWK.from_pem(pair.pem).export_private(as_dict=True) | {"kid": "ec-1"}
    assert (await CardVerifier(jwks={"keys": [private]}).verify(sign_with(pair))).reason == "missing-key"


@pytest.mark.parametrize("header, detail", [
    ({"alg": "none"}, "alg=none"),
    ({"alg": "none", "kid": "hmac-1"}, "alg=none"),
    ({"alg": "None"}, "alg=None"),
    ({"kid": "hmac-1"}, "alg=<missing>"),
    ({"alg": "HS512"}, "alg=HS512"),
    ({"alg": 256}, "alg=256"),
])
async def test_unsupported_algorithms_are_rejected(header: dict[str, Any], detail: str) -> None:
    forged = forge(make_card(), header, signature="")
    verifier = CardVerifier(secret=SECRET, secrets={"hmac-1": SECRET})
    result = await verifier.verify(forged)
    assert result.valid is False and result.reason == "unsupported-algorithm" and result.detail == detail
    assert result.message == f"A2A Agent Card verification failed: unsupported-algorithm: {detail}"
    assert (await verifier.verify(as_dict(forged))).reason == "unsupported-algorithm"


async def test_algorithms_can_be_restricted_and_none_cannot_be_enabled() -> None:
    card = sign(make_card(), SECRET, alg="HS256")
    result = await CardVerifier(secret=SECRET, algorithms=["ES256"]).verify(card)
    assert (result.reason, result.detail) == ("unsupported-algorithm", "alg=HS256")
    with pytest.raises(ValueError):
        CardVerifier(algorithms=["none"])
    with pytest.raises(ValueError):
        CardVerifier(algorithms=["HS256", "HS384"])


# ---------------------------------------------------------------- key selection


async def test_without_kid_exactly_one_key_is_required() -> None:
    card = sign(make_card(), SECRET, alg="HS256")  # no kid
    ambiguous = await CardVerifier(secrets={"a": SECRET, "b": OTHER_SECRET}).verify(card)
    assert ambiguous == CardVerificationResult(False, "ambiguous-key")
    assert ambiguous.message == "A2A Agent Card verification failed: ambiguous-key"
    assert (await CardVerifier(secrets={"a": SECRET}).verify(card)).reason == "signed"

    a, b = make_key("ES256", "a"), make_key("ES256", "b")
    unkeyed = sign(make_card(), a.pem, alg="ES256")
    assert (await CardVerifier(jwks={"keys": [a.public_jwk, b.public_jwk]}).verify(unkeyed)).reason == "ambiguous-key"
    # Keys for other algorithms do not make it ambiguous: only keys that fit ES256 count.
    only_a = CardVerifier(jwks={"keys": [a.public_jwk, oct_jwk(SECRET, "h")]}, secrets={"h2": SECRET})
    assert (await only_a.verify(unkeyed)).reason == "signed"


async def test_plain_secret_is_ignored_once_a_key_map_exists() -> None:
    with_kid = sign(make_card(), SECRET, alg="HS256", kid="k1")
    without_kid = sign(make_card(), SECRET, alg="HS256")
    verifier = CardVerifier(secret=SECRET, secrets={"k2": OTHER_SECRET})
    assert await verifier.verify(with_kid) == CardVerificationResult(False, "unknown-key", kid="k1")
    assert (await verifier.verify(without_kid)).reason == "signature-mismatch"
    assert (await CardVerifier(secret=SECRET).verify(with_kid)).reason == "signed"


async def test_missing_key_when_nothing_can_verify() -> None:
    pair = make_key("ES256", "ec-1")
    assert await CardVerifier(require_signature=True).verify(sign_with(pair)) == CardVerificationResult(
        False, "missing-key", kid="ec-1")
    # A plain secret is an HMAC secret: it never stands in for a public key.
    assert (await CardVerifier(secret=SECRET).verify(sign_with(pair))).reason == "missing-key"
    assert (await CardVerifier().verify(sign(make_card(), SECRET, alg="HS256"))).message == (
        "A2A Agent Card verification failed: missing-key")


async def test_any_signature_may_match_and_failures_report_the_first() -> None:
    good = make_key("ES256", "good")
    verifier = CardVerifier(jwks={"keys": [good.public_jwk]})
    first_unknown = sign(make_card(), make_key("ES256", "stranger").pem, alg="ES256", kid="stranger")
    both = sign(first_unknown, good.pem, alg="ES256", kid="good")
    assert len(both.signatures) == 2
    assert await verifier.verify(both) == CardVerificationResult(True, "signed", kid="good")
    assert (await verifier.verify(as_dict(both))).reason == "signed"

    both_bad = sign(first_unknown, SECRET, alg="HS256", kid="h")
    assert await verifier.verify(both_bad) == CardVerificationResult(False, "unknown-key", kid="stranger")

    malformed_first = as_dict(both)
    malformed_first["signatures"][0]["protected"] = b64url(b'{"alg":"ES256"')
    assert (await verifier.verify(malformed_first)).reason == "malformed-signature"


# ---------------------------------------------------------------- unsigned and malformed cards


@pytest.mark.parametrize("shape", ["proto", "dict", "empty-list", "not-a-list", "not-an-object"])
async def test_unsigned_cards_pass_unless_a_signature_is_required(shape: str) -> None:
    card: Any = make_card() if shape == "proto" else as_dict(make_card())
    if shape == "empty-list":
        card["signatures"] = []
    elif shape == "not-a-list":
        card["signatures"] = "signed, honestly"
    elif shape == "not-an-object":
        card["signatures"] = ["eyJhbGciOiJIUzI1NiJ9"]
    assert await CardVerifier(secret=SECRET).verify(card) == CardVerificationResult(True, "unsigned")
    required = await CardVerifier(secret=SECRET, require_signature=True).verify(card)
    assert required == CardVerificationResult(False, "missing-signature")
    assert required.message == "A2A Agent Card verification failed: missing-signature"
    assert CardVerifier(require_signature=True).enabled and not CardVerifier().enabled


@pytest.mark.parametrize("protected", [
    "", "!!not-base64!!", b64url(b"not json"), b64url(b"[1, 2]"), b64url(b'"HS256"'), b64url(b"\xff\xfe"),
])
async def test_malformed_protected_headers(protected: str) -> None:
    card = as_dict(sign(make_card(), SECRET, alg="HS256"))
    card["signatures"][0]["protected"] = protected
    result = await CardVerifier(secret=SECRET).verify(card)
    assert result == CardVerificationResult(False, "malformed-signature")
    assert result.message == "A2A Agent Card verification failed: malformed-signature"
    proto = sign(make_card(), SECRET, alg="HS256")
    proto.signatures[0].protected = protected
    assert (await CardVerifier(secret=SECRET).verify(proto)).reason == "malformed-signature"


async def test_malformed_signature_value_and_unparseable_card() -> None:
    card = as_dict(sign(make_card(), SECRET, alg="HS256", kid="h"))
    non_string = copy.deepcopy(card)
    non_string["signatures"][0]["signature"] = 12345
    assert (await CardVerifier(secret=SECRET).verify(non_string)).reason == "malformed-signature"
    not_a_card = copy.deepcopy(card)
    not_a_card["name"] = ["not", "a", "string"]
    assert (await CardVerifier(secret=SECRET).verify(not_a_card)).reason == "malformed-signature"
    protected_not_string = copy.deepcopy(card)
    protected_not_string["signatures"][0]["protected"] = {"alg": "HS256"}
    assert (await CardVerifier(secret=SECRET).verify(protected_not_string)).reason == "malformed-signature"
    with pytest.raises(TypeError):
        await CardVerifier(secret=SECRET).verify(json.dumps(card))  # type: ignore[arg-type]


async def test_served_card_with_legacy_fields_verifies() -> None:
    pair = make_key("ES256", "ec-1")
    signed = sign_with(pair, make_card(JSONRPC="http://127.0.0.1:8765/", HTTP_JSON="http://127.0.0.1:8765/rest"))
    served = json.loads(json.dumps(agent_card_to_dict(signed)))  # what the server puts on the wire
    assert {"url", "preferredTransport", "additionalInterfaces", "protocolVersion"} <= served.keys()
    served.setdefault("supportsAuthenticatedExtendedCard", True)
    served["someFutureField"] = {"nested": [1, 2, 3]}
    verifier = CardVerifier(jwks={"keys": [pair.public_jwk]})
    assert await verifier.verify(served) == CardVerificationResult(True, "signed", kid="ec-1")
    # The legacy fields are outside the signed payload, but the 1.0 fields are not.
    served["supportedInterfaces"][0]["url"] = "http://evil.example/"
    assert (await verifier.verify(served)).reason == "signature-mismatch"


# ---------------------------------------------------------------- remote JWKS


async def test_remote_jwks_rotation_refetches_exactly_once(jwks_server: JwksServer) -> None:
    old, new = make_key("ES256", "ec-1"), make_key("ES256", "ec-2")
    jwks_server.documents["/jwks.json"] = {"keys": [old.public_jwk]}
    verifier = CardVerifier(jwks_url=jwks_server.url("/jwks.json"))

    assert (await verifier.verify(sign_with(old))).reason == "signed"
    assert jwks_server.hits["/jwks.json"] == 1

    # Not (yet) published: the cached JWKS misses, one refetch misses too.
    unknown = await verifier.verify(sign_with(new))
    assert unknown == CardVerificationResult(False, "unknown-key", kid="ec-2")
    assert unknown.message == "A2A Agent Card verification failed: unknown-key: kid=ec-2"
    assert jwks_server.hits["/jwks.json"] == 2

    # Rotated: the cached copy misses, exactly one refetch finds the key.
    jwks_server.documents["/jwks.json"] = {"keys": [old.public_jwk, new.public_jwk]}
    assert (await verifier.verify(sign_with(new))).reason == "signed"
    assert jwks_server.hits["/jwks.json"] == 3
    # ... and the refetched document is cached again.
    assert (await verifier.verify(sign_with(new))).reason == "signed"
    assert (await verifier.verify(sign_with(old))).reason == "signed"
    assert jwks_server.hits["/jwks.json"] == 3
    assert all("Authorization" not in headers for headers in jwks_server.request_headers)


async def test_remote_key_replaced_under_the_same_kid_refetches_on_mismatch(jwks_server: JwksServer) -> None:
    old, new = make_key("RS256", "rsa"), make_key("RS256", "rsa")
    jwks_server.documents["/jwks.json"] = {"keys": [old.public_jwk]}
    verifier = CardVerifier(jwks_url=jwks_server.url("/jwks.json"))
    assert (await verifier.verify(sign_with(old))).reason == "signed"
    jwks_server.documents["/jwks.json"] = {"keys": [new.public_jwk]}
    assert (await verifier.verify(sign_with(new))).reason == "signed"
    assert jwks_server.hits["/jwks.json"] == 2


async def test_a_fresh_fetch_is_not_refetched(jwks_server: JwksServer) -> None:
    """A JWKS fetched from the network during this verification is current: no second request."""
    jwks_server.documents["/jwks.json"] = {"keys": [make_key("ES256", "ec-1").public_jwk]}
    verifier = CardVerifier(jwks_url=jwks_server.url("/jwks.json"))
    assert (await verifier.verify(sign_with(make_key("ES256", "ec-9")))).reason == "unknown-key"
    assert jwks_server.hits["/jwks.json"] == 1


async def test_remote_and_local_keys_are_merged(jwks_server: JwksServer) -> None:
    local, remote = make_key("ES256", "local"), make_key("EdDSA", "remote")
    jwks_server.documents["/jwks.json"] = {"keys": [remote.public_jwk]}
    verifier = CardVerifier(jwks={"keys": [local.public_jwk]}, jwks_url=jwks_server.url("/jwks.json"))
    assert (await verifier.verify(sign_with(local))).reason == "signed"
    assert jwks_server.hits["/jwks.json"] == 0  # the kid was found locally
    assert (await verifier.verify(sign_with(remote))).reason == "signed"
    assert jwks_server.hits["/jwks.json"] == 1


async def test_remote_jwks_must_be_a_json_object(jwks_server: JwksServer) -> None:
    pair = make_key("ES256", "ec-1")
    jwks_server.documents["/array.json"] = [pair.public_jwk]
    result = await CardVerifier(jwks_url=jwks_server.url("/array.json")).verify(sign_with(pair))
    assert result == CardVerificationResult(False, "jwks-fetch-failed", detail=JWKS_NOT_OBJECT, kid="ec-1")
    assert result.message == f"A2A Agent Card verification failed: jwks-fetch-failed: {JWKS_NOT_OBJECT}"
    assert JWKS_NOT_OBJECT == "A2A JWKS response must be a JSON object"


@pytest.mark.parametrize("path", ["/broken", "/missing.json"])
async def test_remote_jwks_http_errors_fail_the_fetch(jwks_server: JwksServer, path: str) -> None:
    result = await CardVerifier(jwks_url=jwks_server.url(path)).verify(sign_with(make_key("ES256", "ec-1")))
    assert (result.valid, result.reason) == (False, "jwks-fetch-failed")
    assert "HTTP 500" in result.detail or "HTTP 404" in result.detail


async def test_unreachable_jwks_fails_the_fetch() -> None:
    dead = CardVerifier(jwks_url="http://127.0.0.1:9/jwks.json", timeout=2.0)
    result = await dead.verify(sign_with(make_key("ES256", "ec-1")))
    assert result.reason == "jwks-fetch-failed" and result.detail.startswith("A2A JWKS request to http://127.0.0.1:9/")


async def test_remote_jwks_cache_honours_max_age(jwks_server: JwksServer) -> None:
    pair = make_key("ES256", "ec-1")
    for path, cache_control in {"/default.json": None, "/long.json": "public, max-age=600",
                                "/zero.json": "max-age=0", "/nocache.json": "no-cache",
                                "/nostore.json": "no-store"}.items():
        jwks_server.documents[path] = {"keys": [pair.public_jwk]}
        if cache_control:
            jwks_server.cache_control[path] = cache_control
    for path in ("/default.json", "/long.json"):
        verifier = CardVerifier(jwks_url=jwks_server.url(path))
        for _ in range(3):
            assert (await verifier.verify(sign_with(pair))).reason == "signed"
        assert jwks_server.hits[path] == 1, path
    for path in ("/zero.json", "/nocache.json"):
        verifier = CardVerifier(jwks_url=jwks_server.url(path))
        for _ in range(3):
            assert (await verifier.verify(sign_with(pair))).reason == "signed"
        # Every verification revalidates; the server answers 304 from the second on.
        assert (jwks_server.hits[path], jwks_server.not_modified[path]) == (3, 2), path
    verifier = CardVerifier(jwks_url=jwks_server.url("/nostore.json"))
    for _ in range(2):
        assert (await verifier.verify(sign_with(pair))).reason == "signed"
    assert (jwks_server.hits["/nostore.json"], jwks_server.not_modified["/nostore.json"]) == (2, 0)


async def test_the_cache_is_bounded(jwks_server: JwksServer) -> None:
    a, b = make_key("ES256", "a"), make_key("ES256", "b")
    jwks_server.documents["/keys/a.json"] = {"keys": [a.public_jwk]}
    jwks_server.documents["/keys/b.json"] = {"keys": [b.public_jwk]}
    verifier = CardVerifier(jku_allowlist=[jwks_server.url("/keys/")], cache_size=1)
    card_a = sign_with(a, jku=jwks_server.url("/keys/a.json"))
    card_b = sign_with(b, jku=jwks_server.url("/keys/b.json"))
    for card in (card_a, card_a, card_b, card_a):
        assert (await verifier.verify(card)).reason == "signed"
    assert (jwks_server.hits["/keys/a.json"], jwks_server.hits["/keys/b.json"]) == (2, 1)


# ---------------------------------------------------------------- jku and its allow-list


async def test_jku_not_on_the_allow_list_is_not_fetched(jwks_server: JwksServer) -> None:
    pair = make_key("ES256", "ec-1")
    jwks_server.documents["/jwks.json"] = {"keys": [pair.public_jwk]}
    card = sign_with(pair, jku=jwks_server.url("/jwks.json"))

    assert await CardVerifier(require_signature=True).verify(card) == CardVerificationResult(False, "missing-key", kid="ec-1")
    with_other_key = CardVerifier(jwks={"keys": [make_key("ES256", "other").public_jwk]})
    assert await with_other_key.verify(card) == CardVerificationResult(False, "unknown-key", kid="ec-1")
    elsewhere = CardVerifier(jku_allowlist=["https://keys.example/", jwks_server.url("/jwks")])  # exact: no prefix
    assert (await elsewhere.verify(card)).reason == "missing-key"
    assert jwks_server.hits["/jwks.json"] == 0


async def test_jku_dot_segments_cannot_escape_an_allowed_prefix(jwks_server: JwksServer) -> None:
    pair = make_key("ES256", "ec-1")
    jwks_server.documents["/jwks.json"] = {"keys": [pair.public_jwk]}
    card = sign_with(pair, jku=jwks_server.url("/keys/../jwks.json"))
    assert (await CardVerifier(jku_allowlist=[jwks_server.url("/keys/")]).verify(card)).reason == "missing-key"
    assert jwks_server.hits["/jwks.json"] == 0


@pytest.mark.parametrize("entry", ["/jwks.json", "/"])
async def test_allow_listed_jku_is_fetched(jwks_server: JwksServer, entry: str) -> None:
    pair = make_key("EdDSA", "ed-1")
    jwks_server.documents["/jwks.json"] = {"keys": [pair.public_jwk]}
    verifier = CardVerifier(jku_allowlist=[jwks_server.url(entry)])
    assert verifier.enabled
    card = sign_with(pair, jku=jwks_server.url("/jwks.json"))
    assert await verifier.verify(card) == CardVerificationResult(True, "signed", kid="ed-1")
    assert jwks_server.hits["/jwks.json"] == 1


async def test_allow_listed_jku_may_not_redirect(jwks_server: JwksServer) -> None:
    pair = make_key("ES256", "ec-1")
    jwks_server.documents["/jwks.json"] = {"keys": [pair.public_jwk]}
    verifier = CardVerifier(jku_allowlist=[jwks_server.url("/redirect")])
    result = await verifier.verify(sign_with(pair, jku=jwks_server.url("/redirect")))
    assert result.reason == "jwks-fetch-failed" and "HTTP 302" in result.detail
    assert jwks_server.hits["/jwks.json"] == 0
    # A configured jwks_url is trusted to redirect.
    assert (await CardVerifier(jwks_url=jwks_server.url("/redirect")).verify(sign_with(pair))).reason == "signed"


async def test_configured_jwks_url_takes_precedence_over_jku(jwks_server: JwksServer) -> None:
    pair = make_key("ES256", "ec-1")
    jwks_server.documents["/configured.json"] = {"keys": [make_key("ES256", "other").public_jwk]}
    jwks_server.documents["/jku.json"] = {"keys": [pair.public_jwk]}
    verifier = CardVerifier(jwks_url=jwks_server.url("/configured.json"), jku_allowlist=[jwks_server.url("/")])
    card = sign_with(pair, jku=jwks_server.url("/jku.json"))
    assert (await verifier.verify(card)).reason == "unknown-key"
    assert jwks_server.hits["/jku.json"] == 0


def test_configuration_is_validated() -> None:
    with pytest.raises(ValueError):
        CardVerifier(jku_allowlist=["ftp://keys.example/"])
    with pytest.raises(ValueError):
        CardVerifier(jwks_url="/relative/jwks.json")
    with pytest.raises(ValueError):
        CardVerifier(jwks={"keys": "nope"})
    assert CardVerifier(secret="s").enabled and CardVerifier(secrets={"k": "s"}).enabled
    assert CardVerifier(jwks={"keys": []}).enabled is False  # an empty key set configures nothing
