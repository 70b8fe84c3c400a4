"""Transport-neutral caller authentication (bearer, basic, API key).

Transports pass request headers in; the authenticator returns the caller's
principal or ``None``. Any configured scheme may satisfy a request, the
``Authorization`` scheme word is case-insensitive (RFC 7235), secrets are
compared in constant time, and the principal string is the caller's owner scope
for tasks.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from a2a.auth.user import User

from iac_code.base.config import ServerConfig

ANONYMOUS = ""
REALM = "iac-code"


@dataclass(frozen=True)
class Principal:
    """An authenticated (or anonymous) caller; ``name`` is its owner scope."""

    name: str
    scheme: str = ""

    @property
    def authenticated(self) -> bool:
        return bool(self.scheme)


ANONYMOUS_PRINCIPAL = Principal(ANONYMOUS)


class PrincipalUser(User):
    """Adapts a :class:`Principal` to a2a-sdk's ``User`` so owner scoping works."""

    __slots__ = ("_principal",)

    def __init__(self, principal: Principal) -> None:
        self._principal = principal

    @property
    def is_authenticated(self) -> bool:
        return self._principal.authenticated

    @property
    def user_name(self) -> str:
        return self._principal.name


def _eq(given: str, expected: str) -> bool:
    """Constant-time comparison; header text that is not valid UTF-8 (surrogate-escaped) just differs."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


class Authenticator:
    """Checks request headers against the configured schemes."""

    def __init__(self, config: ServerConfig) -> None:
        self.token = config.token
        self.basic = (config.basic_username, config.basic_password) if (
            config.basic_username and config.basic_password) else None
        self.api_key = config.api_key
        self.api_key_header = config.api_key_header.lower()
        self.api_key_header_name = config.api_key_header
        self.enabled = bool(self.token or self.basic or self.api_key)

    def challenges(self, realm: str = REALM) -> list[str]:
        """``WWW-Authenticate`` values of a 401 (RFC 9110 §11.6.1): one per configured scheme.

        API keys have no registered scheme; ``ApiKey realm=…, header=…`` names the header to send.
        """
        values: list[str] = []
        if self.token:
            values.append(f'Bearer realm="{realm}"')
        if self.basic:
            values.append(f'Basic realm="{realm}"')
        if self.api_key:
            header = self.api_key_header_name.replace("\\", "\\\\").replace('"', '\\"')
            values.append(f'ApiKey realm="{realm}", header="{header}"')
        return values

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """Return the caller's principal, or ``None`` when no scheme is satisfied.

        ``headers`` must be case-insensitive (aiohttp's and grpc metadata
        views are) or already lower-cased.
        """
        if not self.enabled:
            return ANONYMOUS_PRINCIPAL
        authorization = headers.get("authorization") or headers.get("Authorization") or ""
        scheme, _, credentials = authorization.partition(" ")
        scheme = scheme.lower()
        credentials = credentials.strip(" ")
        if self.token and scheme == "bearer" and _eq(credentials, self.token):
            return Principal("bearer", "bearer")
        if self.basic and scheme == "basic":
            principal = self._basic(credentials)
            if principal is not None:
                return principal
        if self.api_key:
            given = headers.get(self.api_key_header)
            if given is None:
                given = headers.get(self.api_key_header_name)
            if given is not None and _eq(given, self.api_key):
                return Principal(f"api-key:{self.api_key_header_name}", "api-key")
        return None

    def _basic(self, encoded: str) -> Principal | None:
        assert self.basic is not None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep or not user or not password:
            return None
        ok_user = _eq(user, self.basic[0])
        ok_password = _eq(password, self.basic[1])
        if ok_user and ok_password:
            return Principal(f"basic:{user}", "basic")
        return None
