"""Encryption of push-notification secrets and queued jobs: the Fernet keyring (spec: push.md §3).

A push configuration carries the credentials the server presents to a webhook
(``token``, ``authentication.credentials``), and a queued job names a callback
URL and carries a task's event. Both are stored at rest (config files, the
local-file queue, Redis), so both are encrypted with a key the store does not
hold:

* :class:`PushKeyring` is the set of Fernet keys, one of them active. It comes
  from ``IAC_CODE_A2A_PUSH_KEYRING`` (environment-managed: several nodes share
  it, it is never written), else ``<state-dir>/push_keys.json``, else a key is
  generated and that file written (``0600`` in a ``0700`` directory). Rotation
  adds a key and makes it active; old keys stay, so old ciphertexts stay
  readable.
* :meth:`PushKeyring.encrypt_fields` / :meth:`PushKeyring.decrypt_fields` move a
  configuration's secrets into ``iacCodeEncryptedFields`` and back.
* :class:`JobCipher` is the :class:`iac_code.api.JobCodec` the queues store
  jobs through: the whole job is one Fernet token, so a job read back is also
  authenticated (a tampered queue entry does not decrypt).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from cryptography.fernet import Fernet, InvalidToken

from iac_code.api import PushJob, atomic_write, file_lock, jsonio, private_dir, read_private_file, write_new_private_file

logger = logging.getLogger(__name__)

KEYRING_ENV = "IAC_CODE_A2A_PUSH_KEYRING"
KEYRING_FILE = "push_keys.json"
ENCRYPTED_FIELDS = "iacCodeEncryptedFields"
ENCRYPTED_JOB = "iacCodeEncryptedPushJob"
FIELDS_VERSION = 1
JOB_ENVELOPE_VERSION = 1
TOKEN_FIELD = "token"
CREDENTIALS_FIELD = "authentication.credentials"

MALFORMED_MESSAGE = "A2A push secret keyring is malformed"
NO_ACTIVE_KEY_MESSAGE = "A2A push secret keyring does not contain its active key"
ENV_MANAGED_MESSAGE = "A2A push secret keyring is environment-managed and cannot be rotated locally"
DUPLICATE_KEY_MESSAGE = "A2A push secret encryption key already exists: {}"
UNKNOWN_KEY_MESSAGE = "A2A push secret encryption key is not available: {}"
BAD_CIPHERTEXT_MESSAGE = "A2A push secret ciphertext could not be decrypted"
NO_KEYRING_MESSAGE = "Encrypted A2A push job requires a configured secret keyring"
MALFORMED_JOB_MESSAGE = "Stored A2A push job is malformed"
UNENCRYPTED_JOB_MESSAGE = "Stored A2A push job is not encrypted"

# How often at most a miss on an unknown key id re-reads the key file (another process may have rotated),
# and how often encryption looks whether the file changed (a rotation by the command line or another node).
_RELOAD_INTERVAL = 1.0
_REFRESH_INTERVAL = 5.0


class PushSecretError(ValueError):
    """A keyring that cannot be loaded or changed, or a secret that cannot be decrypted (the spec's messages)."""


@dataclass(frozen=True)
class PushKey:
    """One Fernet key of the keyring. ``fernet_key`` is the url-safe base64 key ``Fernet.generate_key()`` makes."""

    id: str
    fernet_key: str = field(repr=False)
    created_at: int | None = None
    fernet: Fernet = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fernet", Fernet(self.fernet_key))

    @classmethod
    def generate(cls, now: float | None = None) -> PushKey:
        """A new key with a ``push-<unix seconds>-<12 hex>`` id."""
        created = int(time.time() if now is None else now)
        return cls(f"push-{created}-{secrets.token_hex(6)}", Fernet.generate_key().decode("ascii"), created)

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"fernetKey": self.fernet_key, "id": self.id}
        if self.created_at is not None:
            entry["createdAt"] = self.created_at
        return entry


def _parse_keyring(data: bytes | str | Mapping[str, Any]) -> tuple[dict[str, PushKey], str]:
    """Validate keyring JSON (spec §3.2 shape) → (keys by id, active key id); :class:`PushSecretError` otherwise."""
    try:
        document = data if isinstance(data, Mapping) else json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise PushSecretError(MALFORMED_MESSAGE) from None
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise PushSecretError(MALFORMED_MESSAGE)
    keys: dict[str, PushKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, Mapping):
            raise PushSecretError(MALFORMED_MESSAGE)
        key_id, fernet_key, created = entry.get("id"), entry.get("fernetKey"), entry.get("createdAt")
        if not isinstance(key_id, str) or not key_id or not isinstance(fernet_key, str) or key_id in keys \
                or not (created is None or (isinstance(created, int | float) and not isinstance(created, bool))):
            raise PushSecretError(MALFORMED_MESSAGE)
        try:
            keys[key_id] = PushKey(key_id, fernet_key, None if created is None else int(created))
        except (ValueError, TypeError):  # not a Fernet key
            raise PushSecretError(MALFORMED_MESSAGE) from None
    active = document.get("activeKeyId")
    if not isinstance(active, str) or active not in keys:
        raise PushSecretError(NO_ACTIVE_KEY_MESSAGE)
    return keys, active


def _rotation_lock(state_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Serialise read-modify-write of the key file between processes."""
    return file_lock(state_dir / f".{KEYRING_FILE}.lock")


def _sorted_json(document: Any) -> bytes:
    """Compact JSON with sorted keys (orjson; the standard library for what orjson refuses, e.g. huge integers)."""
    try:
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass")


_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGIT_RUN = b"0" * 20


def _loads_record(data: bytes) -> Any:
    """Parse JSON we wrote: orjson, unless the text may hold an integer beyond 64 bits (orjson would make it a float).

    Equivalent to :func:`iac_code.api.jsonio.loads` (which the rare documents with a
    20-digit run go to), but its digit-run screen is a ``translate`` rather than a
    regular expression: ten times faster on a kilobyte.
    """
    if _LONG_DIGIT_RUN not in data.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return jsonio.loads(data)


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file from the one read: inode, size, modification time (``None`` when absent)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


class PushKeyring:
    """The Fernet keys push secrets and jobs are encrypted with: every key decrypts, the active one encrypts.

    Thread-safe for encryption and decryption (a storage thread may decrypt while
    the event loop encrypts). Built by :meth:`load`; :meth:`rotate` changes it.
    """

    def __init__(self, keys: Mapping[str, PushKey], active_key_id: str, *, env_managed: bool = False,
                 path: Path | None = None) -> None:
        if active_key_id not in keys:
            raise PushSecretError(NO_ACTIVE_KEY_MESSAGE)
        self._keys = dict(keys)
        self._active = self._keys[active_key_id]
        self.env_managed = env_managed
        self.path = path
        self._lock = threading.Lock()
        self._file_signature = _signature(path) if path is not None else None
        self._check_after = time.monotonic() + _REFRESH_INTERVAL
        self._forced_after = 0.0

    @classmethod
    def load(cls, state_dir: Path, env: Mapping[str, str] = os.environ) -> PushKeyring:
        """The keyring from ``IAC_CODE_A2A_PUSH_KEYRING`` (JSON), else ``<state_dir>/push_keys.json``, else a new one.

        A new keyring (one generated key) is written to ``<state_dir>/push_keys.json``
        (``0600``, directory ``0700``) before it is returned, so nothing is ever
        encrypted with a key that is not on disk. An empty variable counts as
        unset. Raises :class:`PushSecretError` for a malformed keyring.
        """
        text = env.get(KEYRING_ENV)
        if text is not None and text.strip():
            keys, active = _parse_keyring(text)
            return cls(keys, active, env_managed=True)
        path = Path(state_dir) / KEYRING_FILE
        data = read_private_file(path)
        if data is None:
            key = PushKey.generate()
            keyring = cls({key.id: key}, key.id, path=path)
            if write_new_private_file(path, keyring.dumps()):
                logger.info("Generated the A2A push secret keyring %s", path.name)
                return keyring
            data = read_private_file(path) or b""  # another process created it first: use theirs
        keys, active = _parse_keyring(data)
        return cls(keys, active, path=path)

    @property
    def active_key_id(self) -> str:
        """The id of the key new ciphertexts use."""
        return self.active_key.id

    @property
    def active_key(self) -> PushKey:
        """The key new ciphertexts use (a rotation written to the key file by another process is adopted)."""
        if time.monotonic() >= self._check_after:
            self.refresh()
        return self._active

    @property
    def key_ids(self) -> list[str]:
        """Every key id, sorted."""
        return sorted(self._keys)

    def to_json(self) -> dict[str, Any]:
        """The keyring document (spec §3.2): keys sorted by id. Holds the key material: never log it."""
        return {"activeKeyId": self._active.id, "keys": [self._keys[key_id].to_json() for key_id in sorted(self._keys)]}

    def dumps(self) -> bytes:
        """:meth:`to_json` as the file holds it: sorted keys."""
        return json.dumps(self.to_json(), sort_keys=True).encode("utf-8")

    def _rotate(self, state_dir: Path | None, *, key_id: str | None, now: float | None) -> str:
        if self.env_managed:
            raise PushSecretError(ENV_MANAGED_MESSAGE)
        path = Path(state_dir) / KEYRING_FILE if state_dir is not None else self.path
        if path is None:
            raise PushSecretError(ENV_MANAGED_MESSAGE)
        private_dir(path.parent)
        with _rotation_lock(path.parent), self._lock:
            data = read_private_file(path)
            keys = dict(self._keys)
            if data is not None:
                on_disk, _ = _parse_keyring(data)
                for known_id, key in on_disk.items():
                    keys.setdefault(known_id, key)
            created = int(time.time() if now is None else now)
            new = PushKey.generate(created) if key_id is None else PushKey(
                key_id, Fernet.generate_key().decode("ascii"), created)
            if new.id in keys:
                raise PushSecretError(DUPLICATE_KEY_MESSAGE.format(new.id))
            keys[new.id] = new
            document = {"activeKeyId": new.id, "keys": [keys[k].to_json() for k in sorted(keys)]}
            atomic_write(path, json.dumps(document, sort_keys=True).encode("utf-8"))
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)
            self._keys, self._active, self.path = keys, new, path
            self._file_signature = _signature(path)
        logger.info("Rotated the A2A push secret keyring; active key %s", new.id)
        return new.id

    def rotate(self, state_dir: Path | None = None, *, key_id: str | None = None, now: float | None = None) -> str:
        """Add a new key (``key_id`` or a generated ``push-<seconds>-<hex>``), make it active, write the file; its id.

        Updates this keyring in place. Running servers on the same file adopt the
        new active key within a few seconds (:meth:`refresh`); keys another process
        added meanwhile are kept. Refused for an environment-managed keyring
        (rotate the variable instead) and for a key id already present
        (:class:`PushSecretError`).
        """
        return self._rotate(state_dir, key_id=key_id, now=now)

    @classmethod
    def rotate_file(cls, state_dir: Path, env: Mapping[str, str] = os.environ) -> str:
        """Rotate the keyring :meth:`load` would return (``iac-code a2a push-key-rotate``); the new active key id."""
        return cls.load(state_dir, env).rotate(state_dir)

    def _key(self, key_id: str) -> PushKey:
        key = self._keys.get(key_id)
        if key is None and self.refresh(force=True):
            key = self._keys.get(key_id)
        if key is None:
            raise PushSecretError(UNKNOWN_KEY_MESSAGE.format(key_id))
        return key

    def refresh(self, *, force: bool = False) -> bool:
        """Adopt keys and the active key another process (a rotation) wrote to the key file; whether anything changed.

        Without ``force`` the file is looked at (one ``stat``) at most every few
        seconds and re-read only when it changed; ``force`` (an unknown key id
        while decrypting) re-reads it at most once a second. Keys are only ever
        added. Nothing happens for an environment-managed keyring.
        """
        if self.env_managed or self.path is None:
            return False
        now = time.monotonic()
        if now < (self._forced_after if force else self._check_after):
            return False
        with self._lock:
            self._check_after = now + _REFRESH_INTERVAL
            if force:
                self._forced_after = now + _RELOAD_INTERVAL
            signature = _signature(self.path)
            if signature is None or signature == self._file_signature:
                return False
            try:
                data = read_private_file(self.path)
                if data is None:
                    return False
                on_disk, active = _parse_keyring(data)
            except (OSError, PushSecretError) as exc:
                logger.warning("Could not re-read the A2A push secret keyring: %s", exc)
                return False
            self._file_signature = signature
            added = {key_id: key for key_id, key in on_disk.items() if key_id not in self._keys}
            keys = {**self._keys, **added}
            changed = bool(added) or keys[active] is not self._active
            self._keys, self._active = keys, keys[active]
            return changed

    def encrypt(self, plaintext: bytes) -> dict[str, str]:
        """``plaintext`` as an envelope ``{"keyId", "ciphertext"}`` (Fernet token, active key)."""
        key = self.active_key
        return {"keyId": key.id, "ciphertext": key.fernet.encrypt(plaintext).decode("ascii")}

    def decrypt(self, envelope: Mapping[str, Any]) -> bytes:
        """The plaintext of an :meth:`encrypt` envelope; :class:`PushSecretError` (unknown key, bad ciphertext)."""
        key_id, ciphertext = envelope.get("keyId"), envelope.get("ciphertext")
        if not isinstance(key_id, str) or not isinstance(ciphertext, str):
            raise PushSecretError(BAD_CIPHERTEXT_MESSAGE)
        return self.decrypt_token(key_id, ciphertext)

    def decrypt_token(self, key_id: str, token: str | bytes) -> bytes:
        """The plaintext of Fernet ``token`` made with key ``key_id``."""
        key = self._key(key_id)
        try:
            return key.fernet.decrypt(token)
        except (InvalidToken, TypeError, ValueError):
            raise PushSecretError(BAD_CIPHERTEXT_MESSAGE) from None

    def encrypt_fields(self, config_json: Mapping[str, Any]) -> dict[str, Any]:
        """A ``TaskPushNotificationConfig`` proto-JSON dict with ``token`` and ``authentication.credentials`` encrypted.

        The secrets leave the clear JSON and go, one envelope each, under
        ``iacCodeEncryptedFields`` (``{"version": 1, "fields": {...}}``);
        ``authentication.scheme`` and everything else stay clear. Empty secrets are
        dropped (proto-JSON defaults). The input is not modified.
        """
        stored = copy.deepcopy(dict(config_json))
        existing = stored.pop(ENCRYPTED_FIELDS, None)
        fields: dict[str, Any] = dict(existing["fields"]) if isinstance(existing, Mapping) \
            and isinstance(existing.get("fields"), Mapping) else {}
        token = stored.pop(TOKEN_FIELD, None)
        if isinstance(token, str) and token:
            fields[TOKEN_FIELD] = self.encrypt(token.encode("utf-8"))
        authentication = stored.get("authentication")
        if isinstance(authentication, dict):
            credentials = authentication.pop("credentials", None)
            if isinstance(credentials, str) and credentials:
                fields[CREDENTIALS_FIELD] = self.encrypt(credentials.encode("utf-8"))
            if not authentication:
                del stored["authentication"]
        if fields:
            stored[ENCRYPTED_FIELDS] = {"version": FIELDS_VERSION, "fields": fields}
        return stored

    def decrypt_fields(self, stored: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`encrypt_fields` reversed: the config JSON with its secrets in clear.

        A dict without ``iacCodeEncryptedFields`` (a config stored before
        encryption) is returned as a copy. :class:`PushSecretError` when an
        envelope cannot be decrypted.
        """
        config = copy.deepcopy(dict(stored))
        encrypted = config.pop(ENCRYPTED_FIELDS, None)
        if encrypted is None:
            return config
        if not isinstance(encrypted, Mapping) or encrypted.get("version") != FIELDS_VERSION \
                or not isinstance(encrypted.get("fields"), Mapping):
            raise PushSecretError(BAD_CIPHERTEXT_MESSAGE)
        for name, envelope in encrypted["fields"].items():
            if name not in (TOKEN_FIELD, CREDENTIALS_FIELD) or not isinstance(envelope, Mapping):
                raise PushSecretError(BAD_CIPHERTEXT_MESSAGE)
            try:
                value = self.decrypt(envelope).decode("utf-8")
            except UnicodeDecodeError:
                raise PushSecretError(BAD_CIPHERTEXT_MESSAGE) from None
            if name == TOKEN_FIELD:
                config[TOKEN_FIELD] = value
            else:
                authentication = config.get("authentication")
                if not isinstance(authentication, dict):
                    authentication = config["authentication"] = {}
                authentication["credentials"] = value
        return config


class JobCipher:
    """The :class:`iac_code.api.JobCodec` queues store jobs through: one Fernet token per job.

    ``encode`` → ``{"iacCodeEncryptedPushJob":{"ciphertext":"…","keyId":"…","version":1}}``
    (compact, sorted keys), the ciphertext being the compact sorted JSON of
    :meth:`PushJob.to_record`. ``decode`` refuses (``ValueError``) anything not so
    encrypted, so a queue entry cannot be forged or altered without a key.
    ``keyring=None`` models a server without a keyring: every call fails with the
    spec's message.
    """

    def __init__(self, keyring: PushKeyring | None) -> None:
        self.keyring = keyring

    def encode(self, job: PushJob) -> bytes:
        """The job, encrypted with the active key."""
        if self.keyring is None:
            raise PushSecretError(NO_KEYRING_MESSAGE)
        key = self.keyring.active_key
        token = key.fernet.encrypt(_sorted_json(job.to_record()))
        return b"".join((b'{"' + ENCRYPTED_JOB.encode() + b'":{"ciphertext":"', token, b'","keyId":',
                         orjson.dumps(key.id), b',"version":1}}'))

    def decode(self, data: bytes | str) -> PushJob:
        """The job :meth:`encode` wrote; ``ValueError`` (a :class:`PushSecretError`) when unreadable."""
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise PushSecretError(MALFORMED_JOB_MESSAGE) from None
        envelope = document.get(ENCRYPTED_JOB) if isinstance(document, dict) else None
        if envelope is None:
            raise PushSecretError(UNENCRYPTED_JOB_MESSAGE)
        if self.keyring is None:
            raise PushSecretError(NO_KEYRING_MESSAGE)
        if not isinstance(envelope, dict) or envelope.get("version") != JOB_ENVELOPE_VERSION:
            raise PushSecretError(MALFORMED_JOB_MESSAGE)
        key_id, ciphertext = envelope.get("keyId"), envelope.get("ciphertext")
        if not isinstance(key_id, str) or not isinstance(ciphertext, str):
            raise PushSecretError(MALFORMED_JOB_MESSAGE)
        plaintext = self.keyring.decrypt_token(key_id, ciphertext)
        try:
            record = _loads_record(plaintext)
            if not isinstance(record, dict):
                raise TypeError("not an object")
            return PushJob.from_record(record)
        except (KeyError, TypeError, ValueError):
            raise PushSecretError(MALFORMED_JOB_MESSAGE) from None
