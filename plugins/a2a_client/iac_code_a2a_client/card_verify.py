"""Client-side Agent Card signature verification (spec ``client-and-routing.md`` §5).

A client that discovers an agent by its card must be able to tell a card the agent
published from one altered in transit or served by an impostor. The server signs its
card with a2a-sdk's JWS signer (``a2a.utils.signing``); this module checks such a card
with a2a-sdk's own verifier and canonicaliser, so both ends agree byte for byte on what
was signed. What this module adds is the part the SDK leaves to its caller: choosing the
verification key, and explaining a failure with one reason token.

Key selection (per signature, from its protected header):

* keys come from a per-``kid`` secrets map (HMAC secrets, ``HS256`` only), a local JWKS,
  and a remote JWKS: the configured ``jwks_url``, else the header's ``jku`` when it is on
  the allow-list (a card must not be able to name its own key server);
* a JWKS entry needs a string ``kid``; its ``alg``, when present, must equal the
  signature's; ``kty: oct`` serves only ``HS*``; ``RSA``/``EC``/``OKP`` *public* keys serve
  only the asymmetric algorithm of their type and curve. Filtering by algorithm first is
  what stops HMAC/public-key confusion: an ``HS256`` signature naming the ``kid`` of a
  public key never sees that key, so public key bytes are never used as an HMAC secret;
* with no usable key at all the plain ``secret`` is used (``HS*`` only), else
  ``missing-key``; with keys, a ``kid`` must name one (``unknown-key``), and without a
  ``kid`` exactly one key must exist (``ambiguous-key``).

Any signature in ``signatures`` may verify the card (a2a-sdk semantics); the reason
reported for a failure is the first signature's. When a remote JWKS served from the cache
left the result at ``unknown-key`` or ``signature-mismatch`` (a rotated key), the JWKS is
fetched again, bypassing the cache, and the card checked once more.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from a2a.types.a2a_pb2 import AgentCard, AgentCardSignature
from a2a.utils.signing import InvalidSignaturesError, NoSignatureError, create_signature_verifier
from google.protobuf.json_format import ParseDict, ParseError
from jwt.api_jwk import PyJWK
from jwt.exceptions import PyJWTError
from yarl import URL

logger = logging.getLogger(__name__)

FAILURE_PREFIX = "A2A Agent Card verification failed"
JWKS_NOT_OBJECT = "A2A JWKS response must be a JSON object"

REASONS = frozenset({
    "signed", "unsigned", "missing-signature", "malformed-signature", "unsupported-algorithm", "missing-key",
    "unknown-key", "ambiguous-key", "signature-mismatch", "jwks-fetch-failed",
})
SUPPORTED_ALGORITHMS: tuple[str, ...] = ("HS256", "RS256", "ES256", "ES384", "PS256", "EdDSA")

DEFAULT_JWKS_TTL = 3600.0
DEFAULT_CACHE_SIZE = 32
MAX_JWKS_BYTES = 1 << 20

# The key a JWK must be to verify a given algorithm: its kty and, where it matters, its curve.
_ALG_KEYS: dict[str, tuple[str, frozenset[str] | None]] = {
    "HS256": ("oct", None),
    "RS256": ("RSA", None),
    "PS256": ("RSA", None),
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}
# Failures a rotated remote key can explain, so worth one uncached JWKS fetch.
_REFETCH_REASONS = frozenset({"unknown-key", "signature-mismatch"})
# Failures whose message names the signature's kid when there is no other detail.
_KID_REASONS = frozenset({"unknown-key", "signature-mismatch"})
_B64URL = re.compile(r"[A-Za-z0-9_-]*=*")
_EMPTY: Mapping[str, str] = MappingProxyType({})

VerificationKey = PyJWK | str


@dataclass(frozen=True)
class CardVerificationResult:
    """The outcome of verifying one card: whether to trust it, and one reason token saying why.

    ``reason`` is one of :data:`REASONS`; ``signed`` and ``unsigned`` are the valid ones
    (``unsigned`` only when no signature is required). ``kid`` is the key id of the
    signature that verified, or of the first signature when none did.
    """

    valid: bool
    reason: str
    detail: str = ""
    kid: str = ""

    @property
    def message(self) -> str:
        """The spec's failure text: ``A2A Agent Card verification failed: <reason>[: detail | : kid=<kid>]``."""
        text = self.reason
        if self.detail:
            text = f"{self.reason}: {self.detail}"
        elif self.kid and self.reason in _KID_REASONS:
            text = f"{self.reason}: kid={self.kid}"
        return f"{FAILURE_PREFIX}: {text}"


class CardVerificationError(ValueError):
    """A card that did not verify; ``result`` says why and ``str()`` is the result's message."""

    def __init__(self, result: CardVerificationResult) -> None:
        super().__init__(result.message)
        self.result = result


class _FetchError(Exception):
    """A remote JWKS that could not be had; the text becomes the ``jwks-fetch-failed`` detail."""


@dataclass
class _CacheEntry:
    """One remote JWKS document as fetched, its validators, and its keys derived per algorithm."""

    keys: list[Any]
    etag: str
    expires: float
    derived: dict[str, dict[str, VerificationKey]] = field(default_factory=dict)


@dataclass
class _Run:
    """One pass over a card's signatures: which URLs to refetch, and where this pass got each JWKS."""

    force: frozenset[str] = frozenset()
    entries: dict[str, _CacheEntry] = field(default_factory=dict)
    from_cache: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Header:
    """The parts of a protected header that key selection reads."""

    alg: str
    kid: str
    jku: str


def _fail(reason: str, detail: str = "", kid: str = "") -> CardVerificationResult:
    return CardVerificationResult(valid=False, reason=reason, detail=detail, kid=kid)


def _decode_protected(protected: Any) -> dict[str, Any] | None:
    """The protected header as a JSON object, or ``None`` when it is not base64url-encoded JSON object text."""
    if not isinstance(protected, str) or not protected or not _B64URL.fullmatch(protected):
        return None
    text = protected.rstrip("=")
    try:
        header = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError):  # includes UnicodeDecodeError and JSONDecodeError
        return None
    return header if isinstance(header, dict) else None


def _header_kid(header: Mapping[str, Any]) -> str:
    kid = header.get("kid")
    return kid if isinstance(kid, str) else ""


def _normalise_url(url: str) -> str:
    """``url`` as yarl normalises it (case, default port, dot segments); ``""`` unless absolute http(s)."""
    try:
        parsed = URL(url)
    except (TypeError, ValueError):
        return ""
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return ""
    return str(parsed)


def derive_keys(jwks_keys: Iterable[Any], alg: str) -> dict[str, VerificationKey]:
    """The keys of a JWKS ``keys`` list that may verify ``alg``, by ``kid`` (the first of a repeated kid wins).

    An entry is skipped unless it has a string ``kid``, its ``alg`` (if any) is ``alg``, its
    ``kty``/``crv`` fit ``alg``, it is a public key (``d`` absent) for an asymmetric
    algorithm, its ``use``/``key_ops`` (if any) allow verification, and PyJWT can load it.
    """
    want = _ALG_KEYS.get(alg)
    if want is None:
        return {}
    kty, curves = want
    keys: dict[str, VerificationKey] = {}
    for jwk in jwks_keys:
        if not isinstance(jwk, dict):
            continue
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid or kid in keys:
            continue
        if jwk.get("alg") is not None and jwk.get("alg") != alg:
            continue
        if jwk.get("kty") != kty or (curves is not None and jwk.get("crv") not in curves):
            continue
        if kty != "oct" and "d" in jwk:
            continue  # a private key in a JWKS is a misconfiguration, not a verification key
        if jwk.get("use") not in (None, "sig"):
            continue
        ops = jwk.get("key_ops")
        if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
            continue
        try:
            keys[kid] = PyJWK(jwk, alg)  # binds the key to alg: PyJWT refuses a token of any other alg
        except (PyJWTError, ValueError, TypeError, KeyError, binascii.Error):
            continue
    return keys


def _cache_ttl(headers: Mapping[str, str], default: float) -> float | None:
    """Seconds a JWKS response may be reused per its ``Cache-Control``; ``None`` for ``no-store``."""
    ttl = default
    no_cache = False
    for directive in headers.get("Cache-Control", "").split(","):
        name, _, value = directive.strip().partition("=")
        name = name.strip().lower()
        if name == "no-store":
            return None
        if name == "no-cache":
            no_cache = True
        elif name == "max-age":
            try:
                ttl = max(0.0, float(int(value.strip().strip('"'))))
            except ValueError:
                ttl = 0.0
    return 0.0 if no_cache else ttl


class CardVerifier:
    """Verifies Agent Card signatures against configured secrets and JWKS (local, remote, allow-listed ``jku``).

    One verifier keeps a bounded per-URL cache of remote JWKS documents, so reuse one
    instance across discoveries. ``jwks`` is a local JWKS object (``{"keys": [...]}``) of
    octet keys (``HS256``) and public EC/RSA/OKP keys. A ``jku`` entry of
    ``jku_allowlist`` ending in ``/`` is a URL prefix; any other entry must match exactly
    (after normalisation), so ``https://keys.example`` cannot admit ``https://keys.example.evil``.
    """

    def __init__(
        self,
        secret: str = "",
        secrets: Mapping[str, str] | None = _EMPTY,
        jwks: Mapping[str, Any] | None = None,
        jwks_url: str = "",
        jku_allowlist: Iterable[str] = (),
        require_signature: bool = False,
        timeout: float = 5.0,
        algorithms: Iterable[str] = SUPPORTED_ALGORITHMS,
        *,
        cache_ttl: float = DEFAULT_JWKS_TTL,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self._algorithms = tuple(algorithms)
        unsupported = [alg for alg in self._algorithms if alg not in _ALG_KEYS]
        if unsupported:
            raise ValueError(f"Unsupported Agent Card signature algorithm(s): {', '.join(map(str, unsupported))}")
        self._secret = secret or ""
        self._secrets: dict[str, str] = {}
        for kid, value in (secrets or {}).items():
            if not isinstance(kid, str) or not isinstance(value, str):
                raise ValueError("Agent Card verification secrets must map string kids to string secrets")
            if kid and value:
                self._secrets[kid] = value
        self._jwks_keys: list[Any] = []
        if jwks is not None:
            keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
            if not isinstance(keys, list):
                raise ValueError("A local JWKS must be a JSON object with a 'keys' array")
            self._jwks_keys = list(keys)
        self._jwks_url = ""
        if jwks_url:
            self._jwks_url = _normalise_url(jwks_url)
            if not self._jwks_url:
                raise ValueError(f"A2A JWKS URL must be an absolute http(s) URL: {jwks_url}")
        self._jku_exact: set[str] = set()
        self._jku_prefixes: list[str] = []
        for entry in jku_allowlist:
            normalised = _normalise_url(entry) if isinstance(entry, str) else ""
            if not normalised:
                raise ValueError(f"A jku allow-list entry must be an absolute http(s) URL: {entry!r}")
            if entry.endswith("/"):
                self._jku_prefixes.append(normalised if normalised.endswith("/") else normalised + "/")
            else:
                self._jku_exact.add(normalised)
        self._require_signature = require_signature
        self._timeout = timeout
        self._cache_ttl = cache_ttl
        self._cache_size = max(1, cache_size)
        self._cache: OrderedDict[str, _CacheEntry] = OrderedDict()
        self._local: dict[str, dict[str, VerificationKey]] = {}

    @property
    def enabled(self) -> bool:
        """Whether anything is configured that makes verification worth running (spec §5's trigger)."""
        return bool(self._require_signature or self._secret or self._secrets or self._jwks_keys or self._jwks_url
                    or self._jku_exact or self._jku_prefixes)

    @property
    def require_signature(self) -> bool:
        """Whether an unsigned card fails (``missing-signature``) instead of passing as ``unsigned``."""
        return self._require_signature

    async def verify_or_raise(self, card: Mapping[str, Any] | AgentCard) -> CardVerificationResult:
        """:meth:`verify`, raising :class:`CardVerificationError` for an invalid result; the valid result otherwise."""
        result = await self.verify(card)
        if not result.valid:
            raise CardVerificationError(result)
        return result

    async def verify(self, card: Mapping[str, Any] | AgentCard) -> CardVerificationResult:
        """Verify ``card`` (a served card dict, legacy 0.3 fields allowed, or an ``AgentCard`` proto).

        Never raises for a bad card or an unreachable JWKS: the result's reason says what went wrong.
        """
        if isinstance(card, AgentCard):
            proto: AgentCard | None = card
            first = card.signatures[0] if card.signatures else None
            protected: Any = first.protected if first is not None else None
            signature: Any = first.signature if first is not None else None
        elif isinstance(card, Mapping):
            proto = None
            raw = card.get("signatures")
            first_raw = raw[0] if isinstance(raw, list) and raw else None
            first = first_raw if isinstance(first_raw, Mapping) else None
            protected = first.get("protected") if first is not None else None
            signature = first.get("signature") if first is not None else None
        else:
            raise TypeError(f"An Agent Card must be a mapping or an AgentCard proto, not {type(card).__name__}")

        if first is None:  # step 1
            return _fail("missing-signature") if self._require_signature else CardVerificationResult(True, "unsigned")
        header = _decode_protected(protected)  # step 2
        if header is None:
            return _fail("malformed-signature")
        kid = _header_kid(header)
        alg = header.get("alg")  # step 3
        if not isinstance(alg, str) or alg not in self._algorithms:
            shown = "<missing>" if alg is None else (alg if isinstance(alg, str) else json.dumps(alg))
            return _fail("unsupported-algorithm", f"alg={shown}", kid)
        if not isinstance(signature, str):
            return _fail("malformed-signature", kid=kid)
        if proto is None:
            try:
                proto = ParseDict(dict(card), AgentCard(), ignore_unknown_fields=True)  # legacy fields ignored
            except (ParseError, TypeError, ValueError, AttributeError) as exc:
                logger.debug("Agent Card does not parse as an A2A AgentCard: %s", exc)
                return _fail("malformed-signature", kid=kid)

        run = _Run()
        result = await self._check_all(proto, run)  # steps 4-5
        if not result.valid and result.reason in _REFETCH_REASONS and run.from_cache:  # step 6
            logger.debug("Agent Card %s with cached JWKS; refetching %s", result.reason, sorted(run.from_cache))
            result = await self._check_all(proto, _Run(force=frozenset(run.from_cache)))
        return result

    async def _check_all(self, card: AgentCard, run: _Run) -> CardVerificationResult:
        """Try each signature in turn; the first that verifies wins, else the first signature's failure."""
        base = AgentCard()
        base.CopyFrom(card)
        del base.signatures[:]
        first_failure: CardVerificationResult | None = None
        for index, signature in enumerate(card.signatures):
            result = await self._check_one(base, signature, run)
            if result.valid:
                return result
            if index == 0:
                first_failure = result
        assert first_failure is not None  # the caller saw a first signature
        return first_failure

    async def _check_one(self, base: AgentCard, signature: AgentCardSignature, run: _Run) -> CardVerificationResult:
        """Select the key for one signature and verify it alone with a2a-sdk's verifier (restricted to its alg)."""
        header = _decode_protected(signature.protected)
        if header is None:
            return _fail("malformed-signature")
        kid = _header_kid(header)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            shown = "<missing>" if alg is None else (alg if isinstance(alg, str) else json.dumps(alg))
            return _fail("unsupported-algorithm", f"alg={shown}", kid)
        jku = header.get("jku")
        parsed = _Header(alg=alg, kid=kid, jku=jku if isinstance(jku, str) else "")
        key = await self._select_key(parsed, run)
        if isinstance(key, CardVerificationResult):
            return key

        base.signatures.append(signature)
        try:
            create_signature_verifier(lambda _kid, _jku: key, [alg])(base)
        except InvalidSignaturesError as exc:
            # a2a-sdk chains the cause only when the card has no canonical form (e.g. nested too deep)
            reason = "malformed-signature" if exc.__cause__ is not None else "signature-mismatch"
            return _fail(reason, kid=kid)
        except NoSignatureError:  # pragma: no cover - a signature was just appended
            return _fail("missing-signature", kid=kid)
        finally:
            del base.signatures[:]
        return CardVerificationResult(True, "signed", kid=kid)

    async def _select_key(self, header: _Header, run: _Run) -> VerificationKey | CardVerificationResult:
        """The one key to verify ``header``'s signature with, or the failure that explains why there is none."""
        local = self._local_keys(header.alg)
        if header.kid and header.kid in local:
            return local[header.kid]
        keys = local
        url = self._remote_url(header.jku)
        if url:
            try:
                remote = await self._remote_keys(url, header.alg, run)
            except _FetchError as exc:
                return _fail("jwks-fetch-failed", str(exc), header.kid)
            keys = {**remote, **local}  # configured keys win over fetched ones for the same kid
        if keys:
            if header.kid:
                return keys[header.kid] if header.kid in keys else _fail("unknown-key", kid=header.kid)
            if len(keys) > 1:
                return _fail("ambiguous-key")
            return next(iter(keys.values()))
        if self._secret and header.alg.startswith("HS"):
            return self._secret
        return _fail("missing-key", kid=header.kid)

    def _local_keys(self, alg: str) -> dict[str, VerificationKey]:
        """The per-kid secrets (``HS*`` only) and the local JWKS keys that fit ``alg``, by kid (secrets first)."""
        keys = self._local.get(alg)
        if keys is None:
            keys = dict(self._secrets) if alg.startswith("HS") else {}
            for kid, key in derive_keys(self._jwks_keys, alg).items():
                keys.setdefault(kid, key)
            self._local[alg] = keys
        return keys

    def _remote_url(self, jku: str) -> str:
        """The JWKS URL to fetch: the configured one, else ``jku`` if the allow-list admits it, else ``""``."""
        if self._jwks_url:
            return self._jwks_url
        if not jku:
            return ""
        normalised = _normalise_url(jku)
        if not normalised:
            return ""
        if normalised in self._jku_exact or any(normalised.startswith(prefix) for prefix in self._jku_prefixes):
            return normalised
        logger.debug("Agent Card jku %s is not on the allow-list; not fetched", jku)
        return ""

    async def _remote_keys(self, url: str, alg: str, run: _Run) -> dict[str, VerificationKey]:
        entry = await self._load_jwks(url, run)
        keys = entry.derived.get(alg)
        if keys is None:
            keys = entry.derived[alg] = derive_keys(entry.keys, alg)
        return keys

    async def _load_jwks(self, url: str, run: _Run) -> _CacheEntry:
        """The JWKS at ``url``: once per pass, from the cache while fresh unless this pass forces a refetch."""
        entry = run.entries.get(url)
        if entry is not None:
            return entry
        cached = self._cache.get(url)
        if cached is not None and url not in run.force and cached.expires > time.monotonic():
            self._cache.move_to_end(url)
            run.from_cache.add(url)
        else:
            cached = await self._fetch(url, cached)
        run.entries[url] = cached
        return cached

    async def _fetch(self, url: str, previous: _CacheEntry | None) -> _CacheEntry:
        """GET the JWKS (no credentials; conditional on the cached ``ETag``), then cache it per ``Cache-Control``."""
        import aiohttp  # only a client that verifies against a remote JWKS needs it

        headers = {"Accept": "application/json"}
        if previous is not None and previous.etag:
            headers["If-None-Match"] = previous.etag
        # A configured jwks_url may redirect (it is trusted); an allow-listed jku must not leave the list.
        allow_redirects = url == self._jwks_url
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout)) as session:
                async with session.get(url, headers=headers, allow_redirects=allow_redirects) as response:
                    ttl = _cache_ttl(response.headers, self._cache_ttl)
                    if response.status == 304 and previous is not None:
                        entry = previous  # unchanged: keep the keys, take the new lifetime (and validator, if sent)
                        entry.etag = response.headers.get("ETag", "") or entry.etag
                    elif response.status != 200:
                        raise _FetchError(f"A2A JWKS request to {url} failed: HTTP {response.status}")
                    else:
                        if (response.content_length or 0) > MAX_JWKS_BYTES:
                            raise _FetchError(f"A2A JWKS response from {url} is too large")
                        body = bytearray()
                        async for chunk in response.content.iter_chunked(65536):
                            body.extend(chunk)
                            if len(body) > MAX_JWKS_BYTES:
                                raise _FetchError(f"A2A JWKS response from {url} is too large")
                        try:
                            document = json.loads(bytes(body))
                        except ValueError as exc:
                            raise _FetchError(f"A2A JWKS response from {url} is not valid JSON") from exc
                        if not isinstance(document, dict):
                            raise _FetchError(JWKS_NOT_OBJECT)
                        keys = document.get("keys")
                        entry = _CacheEntry(keys=keys if isinstance(keys, list) else [],
                                            etag=response.headers.get("ETag", ""), expires=0.0)
        except _FetchError:
            raise
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise _FetchError(f"A2A JWKS request to {url} failed: {str(exc) or type(exc).__name__}") from exc

        if ttl is None:  # no-store: usable for this verification only
            self._cache.pop(url, None)
            return entry
        entry.expires = time.monotonic() + ttl
        self._cache[url] = entry
        self._cache.move_to_end(url)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return entry
