"""Credentials inside URLs (``redis://:password@host``, ``?password=``): found once, never shown.

Plugins that take a URL with credentials (the Redis push queue and transport) use
:func:`url_secrets` to scrub them from anything they log or raise; ``--check-config``
uses :func:`mask_url` to print the URL itself; :func:`redis_location` is what the Redis
plugins (push queue, transport, shared state) may log of theirs.
"""

from __future__ import annotations

import urllib.parse

MASK = "***"


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries (userinfo or ``?password=``), raw and percent-coded, longest first."""
    found: set[str] = set()
    try:
        parts = urllib.parse.urlsplit(url)
        values = [parts.password or "", parts.username or ""]
        values += urllib.parse.parse_qs(parts.query).get("password", [])
        for value in values:
            if value:
                found.update({value, urllib.parse.unquote(value), urllib.parse.quote(value, safe="")})
    except ValueError:
        pass
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)


def mask_url(value: str) -> str:
    """A URL with the password of its user info replaced by ``***``."""
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        return value
    if parts.password is None or not parts.scheme:
        return value
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


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
