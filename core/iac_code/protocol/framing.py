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
  frame (transports.md §1.1); only a 0.3 *method name* makes a call 0.3, when a
  protocol adapter answers it (``iac-code-compat-v03``). (HTTP keeps A2A 1.0 §3.6:
  no header there means 0.3.)
* then the kernel's one dispatcher, whose :func:`~iac_code.protocol.dispatcher.validate_envelope`
  is the one frame validator: a frame that is not a JSON-RPC 2.0 request object
  (a ``method`` that is a list, a batch, a number ...) gets ``-32600`` (``-32700`` when
  it does not parse), on every transport, authenticated or not: a frame refused
  by the authenticator gets "Unauthorized" whatever it holds, as an HTTP request
  gets 401 before its body is read. A transport that frames answers by method
  reads the frame through :func:`inspect_frame` (the same validator), never by
  looking the raw ``method`` up itself.

Client errors (malformed frames, oversized frames) are logged as one
rate-limited INFO line each (:func:`log_client_error`, 10 per 10 s per transport), with the error code and our
own text, never the input and never a traceback.

The answer is one JSON-RPC response dict, or an async iterator of them for a
stream (SendStreamingMessage, SubscribeToTask: whatever the dispatcher streams;
an error before the first event comes back as a dict, so the client sees it).
:func:`final_marker` is the terminator frame the NDJSON, WebSocket, envelope and
Redis framings send after a stream. On the client side, :func:`request_frame` builds the
request those transports' clients send.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from iac_code.base import jsonio
from iac_code.protocol.dispatcher import STREAMING_METHODS, CallInfo, InvalidEnvelope, answer_id, validate_envelope
from iac_code.security.log_limits import RateLimitedLog


class FrameHost(Protocol):
    """What serving a frame needs of the server (the kernel, or a plugin's ``PluginContext``)."""

    config: Any
    """The settings: ``max-request-bytes`` bounds a frame."""

    authenticator: Any
    """``authenticate(headers) -> Principal | None``."""

    dispatcher: Any
    """The JSON-RPC dispatcher, ``None`` while the server is starting."""


HEADERS_MEMBER = "headers"
UNAUTHORIZED = {"code": -32000, "message": "Unauthorized"}
TOO_LARGE = {"code": -32600, "message": "Request payload too large"}
STARTING = {"code": -32603, "message": "Server is starting"}
# The version a custom-transport frame speaks when neither it nor its channel names one.
DEFAULT_VERSION = "1.0"
# Error codes that mean "the client sent a malformed frame" (parse error, invalid request).
CLIENT_ERROR_CODES = frozenset({-32700, -32600})

logger = logging.getLogger(__name__)
# The rate-limited log of refused frames, one per transport name (a flood on one hides nothing on another).
_client_errors: dict[str, RateLimitedLog] = {}

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
    return answer_id(frame)


@dataclass(frozen=True, slots=True)
class FrameInfo:
    """What a transport may read from a frame before serving it, to frame the answer.

    ``request_id`` is the id its answers carry; ``method`` is ``None`` unless the frame is
    a valid JSON-RPC request object (:func:`~iac_code.protocol.dispatcher.validate_envelope`);
    ``streaming``: the method's answer is a stream.
    """

    request_id: str | int | None
    method: str | None
    streaming: bool = False


NOT_A_REQUEST = FrameInfo(None, None)


def inspect_frame(frame: Any, dispatcher: Any = None) -> FrameInfo:
    """A decoded frame's id and method, through the one validator (never raises).

    Whether the method streams is the ``dispatcher``'s word (its ``streaming_methods``: the
    1.0 names and those of its protocol adapters); without one, the 1.0 names only.
    """
    try:
        envelope = validate_envelope(frame)
    except InvalidEnvelope as exc:
        return FrameInfo(exc.request_id, None)
    streaming = dispatcher.streaming_methods if dispatcher is not None else STREAMING_METHODS
    return FrameInfo(envelope.request_id, envelope.method, envelope.method in streaming)


def peek(raw: bytes | str, limit: int) -> FrameInfo:
    """:func:`inspect_frame` of undecoded ``raw``; :data:`NOT_A_REQUEST` when it is over ``limit`` or not JSON."""
    if len(raw) > limit:
        return NOT_A_REQUEST
    frame, ok = decode_frame(raw)
    return inspect_frame(frame) if ok else NOT_A_REQUEST


def final_marker(request_id: Any) -> dict[str, Any]:
    """The frame that ends a stream: ``{"jsonrpc": "2.0", "id": <id>, "final": true}``."""
    return {"jsonrpc": "2.0", "id": request_id, "final": True}


def request_frame(payload: Mapping[str, Any], headers: Mapping[str, str] | None, fresh_id: str,
                  in_flight: Collection[Any]) -> dict[str, Any]:
    """The JSON-RPC request a custom transport's client sends: ``jsonrpc`` set, ``fresh_id`` when the
    payload has no id, the per-call ``headers`` as the envelope's ``headers`` member; an id already
    ``in_flight`` on the connection is refused (its answers could not be told apart)."""
    frame = dict(payload)
    frame.setdefault("jsonrpc", "2.0")
    if frame.get("id") is None:
        frame["id"] = fresh_id
    if headers is not None:
        frame[HEADERS_MEMBER] = dict(headers)
    if frame["id"] in in_flight:
        raise ValueError(f"request id {frame['id']!r} is already in flight")
    return frame


def decode_frame(raw: bytes | str) -> tuple[Any, bool]:
    """(decoded JSON, ok); undecodable input comes back as (raw, False) for the dispatcher's own error."""
    try:
        return jsonio.loads(raw), True
    except (ValueError, UnicodeDecodeError):
        return raw, False


def log_client_error(transport: str, answer: Mapping[str, Any]) -> None:
    """One rate-limited line for an answer that refuses a malformed frame (code and our text, never the input)."""
    error = answer.get("error")
    if isinstance(error, Mapping) and error.get("code") in CLIENT_ERROR_CODES:
        log = _client_errors.get(transport)
        if log is None:
            log = _client_errors[transport] = RateLimitedLog(logger, logging.INFO, f"refused frames on {transport}")
        log.log("Refused a frame on %s: %s (%d)", transport, str(error.get("message", ""))[:100], error["code"])


async def serve_frame(kernel: FrameHost, raw: bytes | str | Mapping[str, Any], *, transport: str,
                      channel_headers: Mapping[str, str] | None = None,
                      stream_refusal: Mapping[str, Any] | None = None) -> Answer:
    """Answer one JSON-RPC frame over a custom transport (see the module docstring).

    ``stream_refusal``: the error answered, once the caller is authenticated, instead of
    dispatching a streaming method (a channel that can carry only one answer).
    """
    answer = await _serve(kernel, raw, transport=transport, channel_headers=channel_headers,
                          stream_refusal=stream_refusal)
    if isinstance(answer, dict) and "error" in answer:
        log_client_error(transport, answer)
    return answer


async def _serve(kernel: FrameHost, raw: bytes | str | Mapping[str, Any], *, transport: str,
                 channel_headers: Mapping[str, str] | None, stream_refusal: Mapping[str, Any] | None) -> Answer:
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
    if stream_refusal is not None and ok and inspect_frame(frame, dispatcher).streaming:
        return error_response(request_id_of(frame), stream_refusal)
    extensions = [v for k, v in headers.items() if k == "a2a-extensions"]
    call = CallInfo(principal=principal, headers=headers, extensions=extensions, transport=transport)
    return await dispatcher.dispatch(frame if ok else raw, call)


def dumps(frame: Mapping[str, Any]) -> bytes:
    """A frame as compact UTF-8 JSON (the one serialiser)."""
    return jsonio.dumps(frame)
