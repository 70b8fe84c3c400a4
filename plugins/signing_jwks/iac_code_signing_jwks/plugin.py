"""Plugin registration: the ``jwks`` Agent Card signer (ES256, ES384, RS256, PS256, EdDSA) and its configuration keys.

``card-signer: jwks`` signs the served cards with the active key of a
:class:`~iac_code_signing_jwks.keys.JwksKeySet` through a2a-sdk's signing
utility; the protected header is ``{"alg", "kid", "typ": "JOSE", "jku"}``, the
``jku`` pointing at the JWKS the server publishes (``signing-jwks-url``, else
the HTTP interface's URL + ``.well-known/jwks.json``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iac_code.api import CardSignerSpec, StartupError, hookimpl, normalise_name, without_effect
from iac_code_signing_jwks.algorithms import ALGORITHMS, DEFAULT_ALGORITHM, canonical_algorithm

if TYPE_CHECKING:
    from a2a.types import AgentCard

    from iac_code.api import PluginContext
    from iac_code_signing_jwks.keys import JwksKeySet, KeyEntry

IAC_CODE_API_VERSION = "1.0"

SIGNER_NAME = "jwks"
JWKS_PATH = ".well-known/jwks.json"
# The interfaces whose URL is the HTTP server's, under which the JWKS is published.
HTTP_BINDINGS = frozenset({"JSONRPC", "HTTP+JSON"})


class JwksSigningConfig(BaseModel):
    """Keys the ``jwks`` card signer adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    signing_key_files: list[str] = Field(
        default_factory=list,
        description="PEM or JWK private key files that sign the Agent Card (the first is active, the others stay in "
        "the JWKS); when empty a key of signing-algorithm is generated into <persistence-dir>/signing_keys.json.")
    signing_algorithm: str = Field(
        default=DEFAULT_ALGORITHM, description=f"Algorithm of generated signing keys ({', '.join(ALGORITHMS)}); for RSA key "
        "files RS256 or PS256.")
    signing_rotate_days: float = Field(
        default=0, ge=0, allow_inf_nan=False,
        description="Rotate the generated signing key automatically when it is older than this many days (0: never).")
    signing_grace_days: float = Field(
        default=7, ge=0, allow_inf_nan=False,
        description="Days a rotated-out signing key stays in the JWKS (then it is deleted from the key store).")
    signing_jwks_url: str = Field(
        default="", description="The jku published in card signatures (default: the HTTP interface URL + .well-known/jwks.json).")

    @field_validator("signing_key_files", mode="before")
    @classmethod
    def _one_file(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("signing_algorithm")
    @classmethod
    def _algorithm(cls, value: str) -> str:
        return canonical_algorithm(value)

    @field_validator("signing_rotate_days", "signing_grace_days", mode="before")
    @classmethod
    def _days_not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic would read true as 1
            raise ValueError(f"signing-rotate-days / signing-grace-days: must be a number of days, not {value}")
        return value


def settings_of(config: Any) -> JwksSigningConfig:
    """The plugin's settings from the server configuration (attributes), or from a mapping written as in YAML."""
    if isinstance(config, Mapping):
        values = {str(k).replace("-", "_"): v for k, v in config.items()}
        return JwksSigningConfig.model_validate({k: v for k, v in values.items() if k in JwksSigningConfig.model_fields})
    if isinstance(config, JwksSigningConfig):
        return config
    defaults = JwksSigningConfig()
    return JwksSigningConfig.model_validate({name: getattr(config, name, getattr(defaults, name))
                                             for name in JwksSigningConfig.model_fields})


_key_sets: dict[tuple[Any, ...], JwksKeySet] = {}
_key_sets_lock = threading.Lock()


def create_key_set(config: Any, state_dir: Path) -> JwksKeySet:
    """The process's :class:`JwksKeySet` for ``state_dir`` and these settings (built once, then shared).

    :class:`~iac_code.api.StartupError` when a key file or the key store is unusable.
    """
    from iac_code_signing_jwks.keys import JwksKeySet, SigningKeyError

    settings = settings_of(config)
    directory = Path(state_dir).expanduser().resolve()
    files = tuple(str(Path(os.path.expanduser(name)).resolve()) for name in settings.signing_key_files)
    cache_key = (directory, files, settings.signing_algorithm, settings.signing_rotate_days, settings.signing_grace_days)
    with _key_sets_lock:
        key_set = _key_sets.get(cache_key)
        if key_set is None:
            try:
                key_set = JwksKeySet(directory, key_files=files, algorithm=settings.signing_algorithm,
                                     rotate_days=settings.signing_rotate_days, grace_days=settings.signing_grace_days)
            except SigningKeyError as exc:
                raise StartupError(f"card-signer jwks: {exc}") from None
            _key_sets[cache_key] = key_set
        return key_set


def jwks_url(configured: str, interfaces: Any) -> str:
    """``configured``, else the first JSON-RPC / HTTP+JSON interface's URL with ``/`` + ``.well-known/jwks.json``."""
    if configured:
        return configured
    for interface in interfaces or ():
        binding: str = str(getattr(interface, "protocol_binding", ""))
        url: str = str(getattr(interface, "url", "") or "")
        if binding.upper() in HTTP_BINDINGS and url:
            return (url if url.endswith("/") else url + "/") + JWKS_PATH
    return ""


class JwksCardSigner:
    """``sign(card) -> card``: appends one ``AgentCardSignature`` made with the key set's active key.

    The JWS is a2a-sdk's (``create_agent_card_signer``), protected header
    ``{"alg", "kid", "typ": "JOSE", "jku"}`` (``jku`` left out while no URL is
    known). ``jku`` is looked up at each signature, ``jku_source()`` giving it, so
    interfaces bound after the signer was made count. The prepared key and
    a2a-sdk's signer are kept per ``(kid, jku)``. :meth:`current_kid` tells the
    kernel's card service when a rotation calls for signing the cards again.
    """

    def __init__(self, key_set: JwksKeySet, jku_source: Callable[[], str] = str) -> None:
        self.key_set = key_set
        self.jku_source = jku_source
        self._signers: dict[tuple[str, str], Callable[[AgentCard], AgentCard]] = {}
        self._lock = threading.Lock()

    def current_kid(self) -> str:
        """The ``kid`` the next signature is made with (rotating first when due)."""
        return self.key_set.active_kid

    def protected_header(self, entry: KeyEntry, jku: str) -> dict[str, str]:
        """The JWS protected header for a signature by ``entry``."""
        header = {"alg": entry.alg, "kid": entry.kid, "typ": "JOSE"}
        if jku:
            header["jku"] = jku
        return header

    def __call__(self, card: AgentCard) -> AgentCard:
        entry = self.key_set.active_entry()
        jku = self.jku_source() or ""
        sign = self._signers.get((entry.kid, jku))
        if sign is None:
            sign = self._make_signer(entry, jku)
        return sign(card)

    def _make_signer(self, entry: KeyEntry, jku: str) -> Callable[[AgentCard], AgentCard]:
        from a2a.utils.signing import create_agent_card_signer
        from jwt import PyJWK

        # A PyJWK holds the parsed private key: handing a2a-sdk the PEM instead would have PyJWT parse (and, for
        # RSA, validate) it again on every signature, about 100 ms for a 3072-bit key.
        private = PyJWK(json.loads(entry.key.export_private()), algorithm=entry.alg)
        sign = create_agent_card_signer(private, self.protected_header(entry, jku))  # type: ignore[arg-type]
        with self._lock:
            if len(self._signers) >= 8:  # rotations and interface changes: keep only what is in use
                self._signers.clear()
            self._signers[(entry.kid, jku)] = sign
        return sign


def create_signer(kernel: PluginContext) -> JwksCardSigner | None:
    """The ``jwks`` card signer for ``kernel``, or ``None`` unless ``card-signer`` is ``jwks``."""
    if normalise_name(str(getattr(kernel.config, "card_signer", "") or "")) != SIGNER_NAME:
        return None
    settings = settings_of(kernel.config)
    key_set = create_key_set(kernel.config, kernel.state_dir)
    return JwksCardSigner(key_set, lambda: jwks_url(settings.signing_jwks_url, kernel.interfaces))


@hookimpl
def iac_code_card_signers() -> list[CardSignerSpec]:
    return [CardSignerSpec(
        name=SIGNER_NAME,
        create_signer=create_signer,
        create_key_set=create_key_set,
        description="Asymmetric signatures (ES256, ES384, RS256, PS256, EdDSA) with key rotation and a published JWKS.",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return JwksSigningConfig


MISSING_DEPENDENCIES = "card-signer: jwks requires optional dependencies. Install iac-code[a2a-signing]."


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """The ``signing-*`` keys of this signer do nothing unless ``card-signer`` is ``jwks`` (they never imply it)."""
    if normalise_name(str(config.card_signer or "")) != SIGNER_NAME:
        return without_effect(config, JwksSigningConfig.model_fields, f"card-signer: {SIGNER_NAME}")
    if importlib.util.find_spec("jwcrypto") is None:
        return [MISSING_DEPENDENCIES]
    return [f"card-signer jwks: cannot read the signing-key-files entry {name!r}."
            for name in settings_of(config).signing_key_files
            if not os.access(os.path.expanduser(name), os.R_OK)]
