"""The client side of ``redis-streams``: from an interface URL to a :class:`JsonRpcChannel`.

The Agent Card advertises ``redis-streams://<host>:<port>/<db>/<request-stream>`` without
credentials; a user may write them into ``--url``
(``redis-streams://[user:password@]host:port/db/<request-stream>``) or set the
``redis_password`` client option. Neither the password nor the Redis URL built from it is
logged or put in an error text.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from iac_code.api import ClientTarget
from iac_code_transport_redis.client import DEFAULT_REQUEST_STREAM, RedisStreamsClient

SCHEME = "redis-streams"
BAD_URL = "a redis-streams interface URL is redis-streams://[user:password@]host:port/db/<request-stream>"


@dataclass(frozen=True)
class RedisTarget:
    """Where a client sends requests: ``redis_url`` (may hold credentials: never show it) and the stream."""

    redis_url: str
    request_stream: str

    def __repr__(self) -> str:  # the URL may carry a password
        return f"RedisTarget(request_stream={self.request_stream!r})"


def parse_interface_url(url: str, password: str = "") -> RedisTarget:
    """The ``redis://`` URL and request stream of a ``redis-streams://`` URL; ``password`` when the URL has none."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or 6379
    except ValueError:
        raise ValueError(BAD_URL) from None
    if parts.scheme != SCHEME:
        raise ValueError(BAD_URL)
    db, _, stream = parts.path.lstrip("/").partition("/")
    if db and not db.isdigit():
        raise ValueError(BAD_URL)
    host = parts.hostname or "localhost"
    host = f"[{host}]" if ":" in host else host
    username = urllib.parse.unquote(parts.username or "")
    secret = urllib.parse.unquote(parts.password) if parts.password is not None else password
    userinfo = ""
    if username or secret:
        userinfo = urllib.parse.quote(username, safe="")
        if secret:
            userinfo += ":" + urllib.parse.quote(secret, safe="")
        userinfo += "@"
    return RedisTarget(redis_url=f"redis://{userinfo}{host}:{port}/{int(db or 0)}",
                       request_stream=urllib.parse.unquote(stream) or DEFAULT_REQUEST_STREAM)


class RedisStreamsChannel:
    """A :class:`RedisStreamsClient` as a ``JsonRpcChannel``: no deadline of its own.

    The client bounds each call and each whole stream (30 s by default); a channel's caller
    bounds requests itself and a stream (a subscription to a long task) may run for as long as
    the task does, so both are given no limit here.
    """

    def __init__(self, client: RedisStreamsClient) -> None:
        self.client = client

    async def request(self, payload: Mapping[str, Any], *,
                      headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.client.request(dict(payload), headers=dict(headers) if headers else None, timeout=math.inf)

    def stream(self, payload: Mapping[str, Any], *,
               headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        return self.client.stream(dict(payload), headers=dict(headers) if headers else None, timeout=math.inf)

    async def aclose(self) -> None:
        await self.client.aclose()


def open_channel(target: ClientTarget) -> RedisStreamsChannel:
    """A channel to the request stream ``target.url`` names (``redis_password`` option when the URL has none)."""
    password = str(target.options.get("redis_password") or "")
    where = parse_interface_url(target.url, password)
    return RedisStreamsChannel(RedisStreamsClient(where.redis_url, request_stream=where.request_stream))
