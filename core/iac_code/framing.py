"""What every custom JSON-RPC transport shares: one frame in, the dispatcher's answer out.

The stdio, Unix socket, WebSocket, gRPC JSON-RPC envelope and Redis Streams
transports only frame. Each received frame (one JSON-RPC request object) goes
through :func:`serve_frame`, which applies the same rules as HTTP:

* the size limit (``max-request-bytes``: ``-32600`` "Request payload too large");
* authentication: a frame may carry a top-level ``"headers"`` object (for
  example ``{"Authorization": "Bearer ..."}``, ``A2A-Version``,
  ``A2A-Extensions``), the channel's own headers when it has some (a WebSocket
  handshake, gRPC metadata) are merged under it; a refused caller gets
  ``-32000`` "Unauthorized";
* a frame that names no ``A2A-Version`` (neither in its ``headers`` nor on the
  channel) is a 1.0 call, as the anchor's dispatcher sends every custom-transport
  frame (transports.md §1.1); only a 0.3 *method name* makes a call 0.3. (HTTP
  keeps A2A 1.0 §3.6: no header there means 0.3.)
* then the kernel's one dispatcher.

The answer is one JSON-RPC response dict, or an async iterator of them for a
stream (SendStreamingMessage, SubscribeToTask: whatever the dispatcher streams;
an error before the first event comes back as a dict, so the client sees it).
:func:`final_marker` is the terminator frame the NDJSON, WebSocket, envelope and
Redis framings send after a stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from iac_code import jsonio
from iac_code.compat03 import STREAMING_METHODS as STREAMING_METHODS_03
from iac_code.dispatcher import STREAMING_METHODS, CallInfo

if TYPE_CHECKING:
    from iac_code.kernel import Kernel

# Methods whose answer is a stream: the A2A 1.0 names and their 0.3 spellings.
STREAM_METHODS = STREAMING_METHODS | STREAMING_METHODS_03
HEADERS_MEMBER = "headers"
UNAUTHORIZED = {"code": -32000, "message": "Unauthorized"}
TOO_LARGE = {"code": -32600, "message": "Request payload too large"}
STARTING = {"code": -32603, "message": "Server is starting"}
# The version a custom-transport frame speaks when neither it nor its channel names one.
DEFAULT_VERSION = "1.0"

Answer = dict[str, Any] | AsyncIterator[dict[str, Any]]


class _Headers(dict[str, str]):
    """Lower-case header names; look-ups in any case."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


def error_response(request_id: Any, error: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error response (``request_id`` kept only when it is a string, integer or null)."""
    if not (request_id is None or isinstance(request_id, str) or
            (isinstance(request_id, int) and not isinstance(request_id, bool))):
        request_id = None
    return {"jsonrpc": "2.0", "id": request_id, "error": dict(error)}


def request_id_of(frame: Any) -> Any:
    """The ``id`` of a decoded frame (``None`` when there is none or it is not a valid id)."""
    if isinstance(frame, dict):
        value = frame.get("id")
        if value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


def final_marker(request_id: Any) -> dict[str, Any]:
    """The frame that ends a stream: ``{"jsonrpc": "2.0", "id": <id>, "final": true}``."""
    return {"jsonrpc": "2.0", "id": request_id, "final": True}


def decode_frame(raw: bytes | str) -> tuple[Any, bool]:
    """(decoded JSON, ok); undecodable input comes back as (raw, False) for the dispatcher's own error."""
    try:
        return jsonio.loads(raw), True
    except (ValueError, UnicodeDecodeError):
        return raw, False


async def serve_frame(kernel: Kernel, raw: bytes | str | Mapping[str, Any], *, transport: str,
                      channel_headers: Mapping[str, str] | None = None) -> Answer:
    """Answer one JSON-RPC frame over a custom transport (see the module docstring)."""
    limit = kernel.config.max_request_bytes
    if isinstance(raw, bytes | str) and len(raw) > limit:
        return error_response(None, TOO_LARGE)
    frame, ok = (raw, True) if isinstance(raw, Mapping) else decode_frame(raw)
    headers = _Headers({k.lower(): v for k, v in (channel_headers or {}).items() if isinstance(v, str)})
    if ok and isinstance(frame, dict) and HEADERS_MEMBER in frame:
        frame = dict(frame)
        extra = frame.pop(HEADERS_MEMBER)
        if isinstance(extra, dict):
            headers.update({str(k).lower(): v for k, v in extra.items() if isinstance(v, str)})
    if not headers.get("a2a-version", "").strip():
        headers["a2a-version"] = DEFAULT_VERSION
    principal = kernel.authenticator.authenticate(headers)
    if principal is None:
        return error_response(request_id_of(frame), UNAUTHORIZED)
    dispatcher = kernel.dispatcher
    if dispatcher is None:
        return error_response(request_id_of(frame), STARTING)
    extensions = [v for k, v in headers.items() if k == "a2a-extensions"]
    call = CallInfo(principal=principal, headers=headers, extensions=extensions, transport=transport)
    return await dispatcher.dispatch(frame if ok else raw, call)


def dumps(frame: Mapping[str, Any]) -> bytes:
    """A frame as compact UTF-8 JSON (the one serialiser)."""
    return jsonio.dumps(frame)
