"""The asymmetric signing keys of the ``jwks`` card signer: one active private key, retired ones published for a while.

Keys come from one of two sources:

* ``signing-key-files``: PEM or JWK private key files the operator manages. The
  first is the active key, the others are published (so signatures they made
  still verify) until the operator removes them from the list. Nothing is
  written and :meth:`JwksKeySet.rotate` is refused.
* otherwise the store ``<state_dir>/signing_keys.json`` (``0600`` in a ``0700``
  directory, replaced atomically): every key as a private JWK with its ``kid``
  (RFC 7638 thumbprint), ``alg``, ``createdAt`` and ``retiredAt`` (unix seconds;
  ``null`` for the one active key). A key of ``signing-algorithm`` is generated
  at first start. :meth:`JwksKeySet.rotate` (``iac-code a2a keys rotate``, or
  ``signing-rotate-days`` automatically) makes a new key active; the old one
  stays in :meth:`JwksKeySet.public_jwks` for ``signing-grace-days`` and is
  deleted from the store at the next write after that.

Several processes may share a store (a server and the CLI, or several servers):
writes are serialised with ``flock`` on ``.signing_keys.json.lock`` and each
process re-reads the store when its ``stat`` signature changes (looked at every
few seconds at most), so all of them sign with the same active key shortly
after a rotation.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jwcrypto import jwk
from jwcrypto.common import JWException, base64url_decode

from iac_code.api import atomic_write, file_lock, key_id, private_dir, write_new_private_file
from iac_code.api import public_jwks as _public_jwks
from iac_code_signing_jwks.algorithms import DEFAULT_ALGORITHM, canonical_algorithm

logger = logging.getLogger(__name__)

STORE_FILE = "signing_keys.json"
STORE_VERSION = 1
RSA_BITS = 3072
DAY_SECONDS = 86_400.0
# How often at most the store's stat signature is compared (a rotation by another process).
REFRESH_INTERVAL = 2.0
# After a failed automatic rotation (disk full, permissions), how long until it is tried again.
ROTATE_RETRY_SECONDS = 60.0

FILES_ROTATION_MESSAGE = "Signing keys come from signing-key-files: rotate them by changing that list."

_CURVE_ALGS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
_RSA_ALGS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_MIN_RSA_BITS = 2048


class SigningKeyError(ValueError):
    """A signing key or key store that cannot be used or changed; the message names the file, never key material."""


def key_algorithm(key: jwk.JWK, configured: str | None = None, *, source: str = "signing key") -> str:
    """The JWS algorithm ``key`` signs with: EC P-256 → ES256, P-384 → ES384, P-521 → ES512, Ed25519 → EdDSA, RSA → RS256.

    An ``alg`` the key declares must fit its type. For an RSA key without one,
    ``configured`` (``signing-algorithm``) chooses RS256 or PS256; an RSA key whose
    own ``alg`` contradicts a configured RSA algorithm is refused.
    :class:`SigningKeyError` for symmetric keys, unsupported curves and RSA keys
    under 2048 bits.
    """
    kty, declared, curve = key.get("kty"), key.get("alg"), key.get("crv")
    if kty == "EC":
        algorithm = _CURVE_ALGS.get(str(curve))
        if algorithm is None:
            raise SigningKeyError(f"{source}: unsupported EC curve {curve}")
    elif kty == "OKP":
        if curve != "Ed25519":
            raise SigningKeyError(f"{source}: unsupported OKP curve {curve} (only Ed25519)")
        algorithm = "EdDSA"
    elif kty == "RSA":
        size = int.from_bytes(base64url_decode(str(key.get("n", ""))), "big").bit_length()
        if size < _MIN_RSA_BITS:
            raise SigningKeyError(f"{source}: RSA keys must have at least {_MIN_RSA_BITS} bits (this one has {size})")
        rsa_configured = configured if configured in _RSA_ALGS else None
        if declared is None:
            return rsa_configured or "RS256"
        if declared not in _RSA_ALGS:
            raise SigningKeyError(f"{source}: alg {declared} does not fit an RSA key")
        if rsa_configured is not None and declared != rsa_configured:
            raise SigningKeyError(f"{source}: the key declares alg {declared} but signing-algorithm is {rsa_configured}")
        return str(declared)
    else:
        raise SigningKeyError(f"{source}: must be an asymmetric private key (EC, RSA or Ed25519), not {kty}")
    if declared is not None and declared != algorithm:
        raise SigningKeyError(f"{source}: alg {declared} does not fit an {kty} {curve} key")
    return algorithm


def with_metadata(key: jwk.JWK, algorithm: str, kid: str | None = None) -> jwk.JWK:
    """A copy of ``key`` with ``kid`` (given, its own, else its RFC 7638 thumbprint), ``alg`` and ``use: sig`` set."""
    document = json.loads(key.export_private())
    document["kid"] = kid or key_id(key)
    document["alg"] = algorithm
    document["use"] = "sig"
    return jwk.JWK(**document)


def generate_key(algorithm: str = DEFAULT_ALGORITHM, *, rsa_bits: int = RSA_BITS) -> jwk.JWK:
    """A new private key for ``algorithm`` (:data:`ALGORITHMS`), with ``kid`` = thumbprint, ``alg`` and ``use: sig``."""
    algorithm = canonical_algorithm(algorithm)
    if algorithm == "ES256":
        key = jwk.JWK.generate(kty="EC", crv="P-256")
    elif algorithm == "ES384":
        key = jwk.JWK.generate(kty="EC", crv="P-384")
    elif algorithm == "EdDSA":
        key = jwk.JWK.generate(kty="OKP", crv="Ed25519")
    else:
        key = jwk.JWK.generate(kty="RSA", size=rsa_bits)
    return with_metadata(key, algorithm)


@dataclass(frozen=True)
class KeyEntry:
    """One key of a :class:`JwksKeySet`: the private JWK (``kid``/``alg`` set) and its life times (unix seconds)."""

    kid: str
    alg: str
    key: jwk.JWK = field(repr=False, compare=False)
    created_at: int | None = None
    retired_at: int | None = None
    file: str = ""  # the signing-key-files entry it came from; "" for a stored key

    def to_json(self) -> dict[str, Any]:
        """The store's record of this key (holds the private key: never log it)."""
        return {"alg": self.alg, "createdAt": self.created_at, "jwk": json.loads(self.key.export_private()),
                "kid": self.kid, "retiredAt": self.retired_at}


Signature = tuple[int, int, int, int]


def _stat_signature(info: os.stat_result) -> Signature:
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _path_signature(path: Path) -> Signature | None:
    try:
        return _stat_signature(os.stat(path))
    except OSError:
        return None


def _read_store(path: Path) -> tuple[bytes, Signature] | None:
    """The store's bytes and the stat signature of exactly what was read (``None`` when absent).

    A store readable by group or others is restricted to its owner first, with a warning.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if os.name != "nt" and info.st_mode & 0o077:
            logger.warning("%s was readable by other users; restricting it to its owner (0600)", path.name)
            os.fchmod(fd, 0o600)
            info = os.fstat(fd)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks), _stat_signature(info)
    finally:
        os.close(fd)


def _is_time(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_store(data: bytes) -> list[KeyEntry]:
    """The keys of a store document; :class:`SigningKeyError` unless it is well formed with exactly one active key."""
    malformed = f"{STORE_FILE} is malformed"
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise SigningKeyError(f"{malformed}: not JSON") from None
    if not isinstance(document, dict) or document.get("version") != STORE_VERSION \
            or not isinstance(document.get("keys"), list):
        raise SigningKeyError(f"{malformed}: expected {{\"version\": {STORE_VERSION}, \"keys\": [...]}}")
    entries: list[KeyEntry] = []
    for position, item in enumerate(document["keys"]):
        where = f"{malformed}: key {position}"
        if not isinstance(item, dict):
            raise SigningKeyError(where)
        kid, alg, created, retired, key_json = (item.get(name) for name in ("kid", "alg", "createdAt", "retiredAt", "jwk"))
        if not isinstance(kid, str) or not kid or not isinstance(alg, str) or not _is_time(created) \
                or not (retired is None or _is_time(retired)) or not isinstance(key_json, dict):
            raise SigningKeyError(where)
        try:
            key = jwk.JWK(**key_json)
        except (JWException, ValueError, TypeError):
            raise SigningKeyError(f"{where}: not a JWK") from None
        if not key.has_private:
            raise SigningKeyError(f"{where}: not a private key")
        if key_algorithm(key, alg, source=where) != alg:
            raise SigningKeyError(f"{where}: alg {alg} does not fit the key")
        if any(entry.kid == kid for entry in entries):
            raise SigningKeyError(f"{malformed}: kid {kid} appears twice")
        entries.append(KeyEntry(kid, alg, with_metadata(key, alg, kid), int(created),  # type: ignore[arg-type]
                                None if retired is None else int(retired)))
    if sum(entry.retired_at is None for entry in entries) != 1:
        raise SigningKeyError(f"{malformed}: it must hold exactly one active key (retiredAt null)")
    return entries


def dump_store(entries: Iterable[KeyEntry]) -> bytes:
    """The store document for ``entries`` (sorted keys, the active key first, then newest first)."""
    ordered = sorted(entries, key=lambda e: (e.retired_at is not None, -(e.created_at or 0), e.kid))
    document = {"keys": [entry.to_json() for entry in ordered], "version": STORE_VERSION}
    return json.dumps(document, sort_keys=True, indent=1).encode("utf-8")


def load_key_file(path: Path, configured: str | None = None) -> KeyEntry:
    """A ``signing-key-files`` entry: a PEM (PKCS#8, SEC1, PKCS#1, unencrypted) or JWK private key file.

    ``kid`` is the JWK's own, else the RFC 7638 thumbprint; ``alg`` per
    :func:`key_algorithm`; ``createdAt`` the file's modification time. A file
    readable by group or others is used, with a warning (it is the operator's:
    its mode is left alone).
    """
    source = f"Signing key file {path}"
    try:
        data = path.read_bytes()
        info = os.stat(path)
    except OSError as exc:
        raise SigningKeyError(f"Cannot read signing key file {path}: {exc.strerror or exc}") from None
    if os.name != "nt" and info.st_mode & 0o077:
        logger.warning("Signing key file %s is readable by other users; restrict it to its owner (chmod 600)", path)
    try:
        if data.lstrip().startswith(b"{"):
            key = jwk.JWK.from_json(data.decode("utf-8"))
        else:
            key = jwk.JWK.from_pem(data)
    except (JWException, ValueError, TypeError, UnicodeDecodeError):
        raise SigningKeyError(f"{source} is not an unencrypted PEM or JWK private key") from None
    algorithm = key_algorithm(key, configured, source=source)
    if not key.has_private:
        raise SigningKeyError(f"{source} holds a public key only; it must be the private key")
    use = key.get("use")
    if use not in (None, "sig"):
        raise SigningKeyError(f"{source} is marked use {use!r}, not for signatures")
    kid = key_id(key)
    return KeyEntry(kid, algorithm, with_metadata(key, algorithm, kid), int(info.st_mtime), None, str(path))


def _store_lock(state_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Serialise read-modify-write of the store between processes."""
    return file_lock(state_dir / f".{STORE_FILE}.lock")


class JwksKeySet:
    """The ``jwks`` signer's keys (:class:`iac_code.base.records.SigningKeySet`): one active private key, retired ones
    published for ``grace_days``; from ``key_files`` or the store in ``state_dir`` (see the module docstring).

    Thread-safe. :meth:`active_key` is cheap: it touches the disk only to look at
    the store's ``stat`` every ``refresh_interval`` seconds and when an automatic
    rotation is due. ``clock`` (unix seconds) dates keys and decides rotation and
    grace; tests pass their own.
    """

    def __init__(self, state_dir: Path | str, *, key_files: Sequence[str | os.PathLike[str]] = (),
                 algorithm: str = DEFAULT_ALGORITHM, rotate_days: float = 0.0, grace_days: float = 7.0,
                 clock: Callable[[], float] = time.time, refresh_interval: float = REFRESH_INTERVAL,
                 rsa_bits: int = RSA_BITS) -> None:
        for name, value in (("signing-rotate-days", rotate_days), ("signing-grace-days", grace_days)):
            if not _is_time(value) or value < 0:
                raise SigningKeyError(f"'{name}': must be a number of days, 0 or more (not {value!r})")
        try:
            self.algorithm = canonical_algorithm(algorithm)
        except ValueError as exc:
            raise SigningKeyError(str(exc)) from None
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / STORE_FILE
        self.key_files = tuple(Path(os.path.expanduser(os.fspath(p))) for p in key_files)
        self.rotate_seconds = float(rotate_days) * DAY_SECONDS
        self.grace_seconds = float(grace_days) * DAY_SECONDS
        self.refresh_interval = refresh_interval
        self.clock = clock
        self.rsa_bits = rsa_bits
        self._lock = threading.RLock()
        self._entries: tuple[KeyEntry, ...] = ()
        self._active: KeyEntry | None = None
        self._signature: Signature | None = None
        self._check_after = 0.0  # time.monotonic() of the next stat of the store
        self._rotate_after = math.inf  # clock() at which the active key is due for rotation
        self._jwks: list[dict[str, Any]] | None = None
        self._jwks_until = math.inf  # clock() at which a published retired key leaves the JWKS
        if self.key_files:
            self._load_files()
        else:
            self._load_or_create()

    # ------------------------------------------------------------------ SigningKeySet

    def active_key(self) -> jwk.JWK:
        """The private key new signatures use (``kid``, ``alg`` set); rotated first when ``signing-rotate-days`` says so.

        Adopts a rotation another process wrote to the store (looked at every
        ``refresh_interval`` seconds). A failed automatic rotation is logged and
        retried a minute later; the current key keeps signing meanwhile.
        """
        return self.active_entry().key

    def active_entry(self) -> KeyEntry:
        """:meth:`active_key` with its ``kid``, ``alg`` and times."""
        if time.monotonic() >= self._check_after:
            self.refresh()
        if self.clock() >= self._rotate_after:
            try:
                self._rotate(only_if_due=True)
            except (OSError, SigningKeyError) as exc:
                logger.error("Automatic rotation of the Agent Card signing key failed: %s", exc)
                self._rotate_after = self.clock() + ROTATE_RETRY_SECONDS
        assert self._active is not None
        return self._active

    @property
    def active_kid(self) -> str:
        """The ``kid`` of :meth:`active_key`."""
        return self.active_entry().kid

    def public_jwks(self) -> dict[str, Any]:
        """``{"keys": [...]}``: public halves (``kid``, ``alg``, ``use: sig``) of the active key and of retired keys
        still within their grace period (with key files: of every file), the active key first."""
        if time.monotonic() >= self._check_after:
            self.refresh()
        now = self.clock()
        with self._lock:
            if self._jwks is None or now >= self._jwks_until:
                published = [entry for entry in self._ordered(self._entries) if self._status(entry, now) != "expired"]
                pending = [entry.retired_at + self.grace_seconds for entry in published if entry.retired_at is not None]
                self._jwks = _public_jwks([entry.key for entry in published])["keys"]
                self._jwks_until = min(pending, default=math.inf)
            return {"keys": [dict(key) for key in self._jwks]}

    def rotate(self) -> str:
        """Make a new key of ``signing-algorithm`` active now; the old one enters its grace period. The new ``kid``.

        Keys whose grace period is over are deleted from the store in the same
        write; keys another process added meanwhile are kept. Refused
        (:class:`SigningKeyError`) when the keys come from ``signing-key-files``.
        """
        return self._rotate(only_if_due=False)

    def describe(self) -> list[dict[str, Any]]:
        """Every key, active first, without key material: ``kid``, ``alg``, ``status`` (``active``; ``retired``: still
        in the JWKS; ``expired``: past its grace period, deleted at the next write), ``createdAt`` and ``retiredAt``
        (unix seconds; ``retiredAt`` is ``None`` for the active key and for key files, ``createdAt`` of a key file is
        its modification time)."""
        self.refresh(force=True)
        now = self.clock()
        with self._lock:
            entries = self._ordered(self._entries)
        return [{"kid": entry.kid, "alg": entry.alg, "status": self._status(entry, now), "createdAt": entry.created_at,
                 "retiredAt": entry.retired_at} for entry in entries]

    # ------------------------------------------------------------------ store

    @property
    def from_files(self) -> bool:
        """Whether the keys come from ``signing-key-files`` (read-only, no rotation)."""
        return bool(self.key_files)

    def refresh(self, *, force: bool = False) -> bool:
        """Adopt what another process wrote to the store (a rotation); whether anything changed.

        Without ``force`` the store is looked at (one ``stat``) at most every
        ``refresh_interval`` seconds and read only when its signature changed. A
        store that became unreadable or malformed is logged and the keys in
        memory are kept. Nothing happens with key files.
        """
        if self.key_files:
            return False
        now = time.monotonic()
        if not force and now < self._check_after:
            return False
        with self._lock:
            self._check_after = now + self.refresh_interval
            signature = _path_signature(self.path)
            if signature is None or signature == self._signature:
                return False
            try:
                read = _read_store(self.path)
                if read is None:
                    return False
                entries = parse_store(read[0])
            except (OSError, SigningKeyError) as exc:
                self._signature = signature  # warn once per change of the file, not at every look
                logger.warning("Could not re-read the Agent Card signing keys (keeping the loaded ones): %s", exc)
                return False
            before = self._active.kid if self._active is not None else None
            self._adopt(entries, read[1])
            if self._active is not None and self._active.kid != before:
                logger.info("Agent Card signing key %s is active (rotated by another process)", self._active.kid)
            return True

    def _load_files(self) -> None:
        entries = [load_key_file(path, self.algorithm) for path in self.key_files]
        seen: dict[str, str] = {}
        for entry in entries:
            if entry.kid in seen:
                raise SigningKeyError(f"Signing key files {seen[entry.kid]} and {entry.file} have the same kid {entry.kid}")
            seen[entry.kid] = entry.file
        with self._lock:
            self._entries, self._active = tuple(entries), entries[0]
            self._jwks = None

    def _load_or_create(self) -> None:
        private_dir(self.state_dir)
        read = _read_store(self.path)
        if read is None:
            entry = self._new_entry()
            if write_new_private_file(self.path, dump_store([entry])):
                logger.info("Generated the Agent Card signing key %s (%s) in %s", entry.kid, entry.alg, self.path.name)
            read = _read_store(self.path)  # ours, or the one another process created first
            if read is None:
                raise SigningKeyError(f"{STORE_FILE} vanished while it was created")
        entries = parse_store(read[0])
        with self._lock:
            self._adopt(entries, read[1])
        assert self._active is not None
        if self._active.alg != self.algorithm:
            logger.warning("The active Agent Card signing key %s is %s, signing-algorithm is %s: it applies from the next "
                           "rotation (iac-code a2a keys rotate)", self._active.kid, self._active.alg, self.algorithm)

    def _new_entry(self) -> KeyEntry:
        key = generate_key(self.algorithm, rsa_bits=self.rsa_bits)
        return KeyEntry(key_id(key), self.algorithm, key, int(self.clock()), None)

    def _adopt(self, entries: Sequence[KeyEntry], signature: Signature | None) -> None:
        """Make ``entries`` (store keys, one active) current; the caller holds ``self._lock``."""
        active = next(entry for entry in entries if entry.retired_at is None)
        self._entries, self._active, self._signature = tuple(entries), active, signature
        self._check_after = time.monotonic() + self.refresh_interval
        self._jwks = None
        self._rotate_after = (active.created_at or 0) + self.rotate_seconds if self.rotate_seconds > 0 else math.inf

    def _rotate(self, *, only_if_due: bool) -> str:
        if self.key_files:
            raise SigningKeyError(FILES_ROTATION_MESSAGE)
        private_dir(self.state_dir)
        with self._lock, _store_lock(self.state_dir):
            read = _read_store(self.path)
            entries = parse_store(read[0]) if read is not None else list(self._entries)
            active = next(entry for entry in entries if entry.retired_at is None)
            if only_if_due and (self.rotate_seconds <= 0 or self.clock() < (active.created_at or 0) + self.rotate_seconds):
                # Another process rotated first: use its key.
                self._adopt(entries, read[1] if read is not None else self._signature)
                return active.kid
            new = self._new_entry()
            now = new.created_at or 0
            kept = [entry for entry in entries if self._status(entry, now) != "expired"]
            dropped = len(entries) - len(kept)
            kept = [KeyEntry(e.kid, e.alg, e.key, e.created_at, now) if e.retired_at is None else e for e in kept]
            if any(entry.kid == new.kid for entry in kept):
                raise SigningKeyError(f"Signing key {new.kid} already exists")
            entries = [new, *kept]
            atomic_write(self.path, dump_store(entries))
            with contextlib.suppress(OSError):
                os.chmod(self.path, 0o600)
            self._adopt(entries, _path_signature(self.path))
        logger.info("Rotated the Agent Card signing key: %s (%s) is active, %s retired%s", new.kid, new.alg, active.kid,
                    f", {dropped} expired key(s) deleted" if dropped > 0 else "")
        return new.kid

    def _status(self, entry: KeyEntry, now: float) -> str:
        if entry.file:  # the first key file is active, the others are published until they leave the list
            return "active" if entry is self._active else "retired"
        if entry.retired_at is None:
            return "active"
        return "expired" if now >= entry.retired_at + self.grace_seconds else "retired"

    def _ordered(self, entries: Iterable[KeyEntry]) -> list[KeyEntry]:
        """Key files in their order (the active one first); stored keys active first, then the latest retired first."""
        if self.key_files:
            return list(entries)
        return sorted(entries, key=lambda e: (e.retired_at is not None, -(e.retired_at or 0), -(e.created_at or 0), e.kid))
