"""One streamed chat-completions call over aiohttp, and what can go wrong with it.

aiohttp, not the ``openai`` package: the kernel already depends on it, reading the SSE
stream line by line is a few lines, and cancelling the turn's task closes the
connection at once (no client-side retry or thread to stop). Failures become one
:class:`ProviderError` whose ``kind`` is all that leaves this module: never the
provider's body, our URL or the key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from iac_code.api import tracing


class ProviderError(Exception):
    """``kind``: ``auth`` (401/403), ``http`` (another status), ``timeout``, ``network``, ``bad_stream``."""

    def __init__(self, kind: str, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(f"{kind}{f' {status}' if status else ''}")
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Worth another attempt when nothing was shown yet: 429, 5xx, a timeout, a connection failure."""
        return self.kind in ("timeout", "network") or (self.kind == "http" and (self.status == 429 or self.status >= 500))


@dataclass(frozen=True)
class Endpoint:
    """Where to send the call: ``base_url`` (``.../v1``), the key for this turn, the per-read timeout."""

    base_url: str
    api_key: str
    timeout: float

    def __repr__(self) -> str:  # the key must never reach a log line or a traceback
        return f"Endpoint(base_url={self.base_url!r})"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return max(0.0, float(headers.get("Retry-After", "")))
    except ValueError:
        return None


# Headers the runtime sets itself: a context's ``llm_headers`` never replace them.
OWN_HEADERS = frozenset({"authorization", "content-type", "accept", "content-length", "host", "connection",
                         "transfer-encoding", "traceparent", "tracestate"})


async def stream_chat(session: aiohttp.ClientSession, endpoint: Endpoint, body: Mapping[str, Any],
                      extra_headers: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
    """POST ``body`` (``stream: true``) and yield each SSE chunk as a dict, until ``[DONE]``.

    ``extra_headers`` (the context's ``llm_headers``) go with the request, except the runtime's own.
    """
    headers = {k: v for k, v in (extra_headers or {}).items() if k.lower() not in OWN_HEADERS}
    headers.update({"Authorization": f"Bearer {endpoint.api_key}", "Content-Type": "application/json",
                    "Accept": "text/event-stream"})
    tracing.inject(headers)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=endpoint.timeout, sock_read=endpoint.timeout)
    try:
        async with session.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers,
                                timeout=timeout) as response:
            if response.status in (401, 403):
                raise ProviderError("auth", response.status)
            if response.status >= 400:
                raise ProviderError("http", response.status, _retry_after(response.headers))
            done = False
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue  # blank lines, comments, event names
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise ProviderError("bad_stream") from None
                if not isinstance(chunk, dict):
                    raise ProviderError("bad_stream")
                if isinstance(chunk.get("error"), dict):  # an error reported inside the stream
                    code = chunk["error"].get("code")
                    raise ProviderError("http", code if isinstance(code, int) and code >= 400 else 500)
                yield chunk
            if not done:
                raise ProviderError("bad_stream")  # the stream ended without [DONE]: truncated
    except ProviderError:
        raise
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise ProviderError("timeout") from None
    except ValueError:  # a line longer than the reader's limit
        raise ProviderError("bad_stream") from None
    except aiohttp.ClientError:
        raise ProviderError("network") from None
