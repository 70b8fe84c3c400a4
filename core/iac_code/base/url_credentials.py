"""Credentials inside URLs (``redis://:password@host``, ``?password=``): found once, never shown.

Plugins that take a URL with credentials (the Redis push queue and transport) use
:func:`url_secrets` to scrub them from anything they log or raise; ``--check-config``
uses :func:`mask_url` to print the URL itself; :func:`redis_location` is what the Redis
plugins (push queue, transport, shared state) may log of theirs.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

MASK = "***"
REDACTED = "[redacted]"

# Query parameters that carry a credential (redis-py reads ``?password=``; HTTP APIs take keys and
# signatures in the query). Compared case-insensitively, ``-`` and ``_`` alike.
SECRET_QUERY_KEYS = frozenset({
    "password", "passwd", "pwd", "pass", "apikey", "api_key", "key", "token", "access_token", "refresh_token",
    "id_token", "auth", "auth_token", "authorization", "secret", "client_secret", "sig", "signature",
    "credential", "credentials", "session_token", "security_token", "x_api_key", "accesskeysecret",
    "access_key_secret", "sas", "code",
})


def _secret_key(name: str) -> bool:
    return name.strip().lower().replace("-", "_") in SECRET_QUERY_KEYS


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries (userinfo, credential query parameters), raw and percent-coded, longest first."""
    found: set[str] = set()
    try:
        parts = urllib.parse.urlsplit(url)
        values = [parts.password or "", parts.username or ""]
        values += [v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if _secret_key(k)]
        for value in values:
            if value:
                found.update({value, urllib.parse.unquote(value), urllib.parse.quote(value, safe="")})
    except ValueError:
        pass
    return sorted((s for s in found if s), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str], replacement: str = REDACTED) -> str:
    """``text`` with every whole occurrence of a secret replaced.

    A secret counts only where it stands as a value: not inside a longer word, so a short
    token such as ``t`` never mangles ``Client`` into ``Clien[redacted]``.
    """
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not ordered:
        return text
    pattern = re.compile("|".join(rf"(?<![A-Za-z0-9]){re.escape(s)}(?![A-Za-z0-9])" for s in ordered))
    return pattern.sub(replacement, text)


def mask_url(value: str) -> str:
    """A URL with its credentials replaced by ``***``: the user info's password (or a lone user
    name, often a token) and the value of every credential query parameter."""
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        return value
    if not parts.scheme:
        return value
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(_secret_key(k) for k, _ in pairs):
            query = "&".join(f"{urllib.parse.quote(k, safe='')}={MASK if _secret_key(k) and v else urllib.parse.quote(v, safe='')}"
                             for k, v in pairs)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def mask_urls_in(text: str) -> str:
    """``text`` with every URL in it masked as :func:`mask_url` does (for error texts and log lines)."""
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redis_location(url: str) -> str:
    """What may be logged of a Redis URL: ``host:port`` or the socket path, never credentials."""
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "unix":
            return parts.path or "unix socket"
        host = parts.hostname or "localhost"
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{parts.port or 6379}"
    except ValueError:
        return "redis"
