"""The request bodies of the execution-control routes, validated into typed requests, and every wire text.

A body that is not a JSON object, a missing or mistyped field, an id that is not a protocol id
(``^[A-Za-z0-9_.:-]+$``, at most 128 characters), a ``connectionEpoch`` that is not an integer (a
boolean is not one) and a non-finite ``reconnectTimeoutSeconds`` are all ``400 Invalid execution
control request.``; a finite timeout outside 1-3600 is a conflict (409), as in the product.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")

# Errors {"error": text}, by HTTP status.
NOT_FOUND = "Execution was not found"
INVALID = "Invalid execution control request."
UNAVAILABLE = "Execution control is unavailable."
IDENTITY_MISMATCH = "Execution identity does not match the current execution"
STALE_EPOCH = "connectionEpoch is stale"
RESUMING = "Execution is resuming; retry pause after it reaches running"
TERMINATING = "Execution is terminating or terminated"
OTHER_PAUSE = "A different pause request is already active"
TIMEOUT_RANGE = "reconnectTimeoutSeconds must be between 1 and 3600"
NOT_PAUSED = "Execution is not paused"
OTHER_RESUME = "A different resume request is already active"
NOT_ACTIVE_PAUSE = "pauseId does not identify the active pause"
DEADLINE_CLAIMED = "Reconnect deadline has expired; termination was claimed"
DISCONNECT_NOT_ACTIVE = "disconnect_timeout no longer identifies the active pause"
NOT_CURRENT_EXECUTION = "executionId does not identify the current execution"
NOT_CURRENT_PAUSE = "pauseId does not identify the current pause"
REQUEST_REUSED = "requestId was already used with different content"
RECOVERY_FIRST = "Current execution must finish recovery before a new task starts"

# The session routes (§8).
INVALID_RESTORE = "Invalid session restore request."
RESTORE_UNAVAILABLE = "Session restore is unavailable."
RESTORE_FAILED = "Unable to restore the A2A session."

DEFAULT_RECONNECT_SECONDS = 300.0
MIN_RECONNECT_SECONDS = 1.0
MAX_RECONNECT_SECONDS = 3600.0
EXPLICIT_TERMINATE = "explicit_terminate"
DISCONNECT_TIMEOUT = "disconnect_timeout"


class BadRequest(ValueError):
    """A body the routes refuse with 400 (the text is always :data:`INVALID`)."""


def _id(body: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise BadRequest(key)
    return value


def _epoch(body: Mapping[str, Any]) -> int:
    value = body.get("connectionEpoch")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest("connectionEpoch")
    return value


def _text(body: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = body.get(key, default)
    if not isinstance(value, str) or not value.strip() or len(value) > 1024:
        raise BadRequest(key)
    return value


def _timeout(body: Mapping[str, Any]) -> float:
    value = body.get("reconnectTimeoutSeconds", DEFAULT_RECONNECT_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest("reconnectTimeoutSeconds")
    return float(value)


def _object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("body")
    return body


@dataclass(frozen=True)
class PauseRequest:
    context_id: str
    task_id: str
    expected_execution_id: str
    request_id: str
    connection_epoch: int
    reason: str
    reconnect_timeout: float

    @classmethod
    def read(cls, body: Any) -> PauseRequest:
        body = _object(body)
        return cls(context_id=_id(body, "contextId") or "", task_id=_id(body, "taskId") or "",
                   expected_execution_id=_id(body, "expectedExecutionId") or "",
                   request_id=_id(body, "requestId") or "", connection_epoch=_epoch(body),
                   reason=_text(body, "reason"), reconnect_timeout=_timeout(body))


@dataclass(frozen=True)
class ResumeRequest:
    context_id: str
    execution_id: str
    pause_id: str
    request_id: str
    connection_epoch: int

    @classmethod
    def read(cls, body: Any) -> ResumeRequest:
        body = _object(body)
        return cls(context_id=_id(body, "contextId") or "", execution_id=_id(body, "executionId") or "",
                   pause_id=_id(body, "pauseId") or "", request_id=_id(body, "requestId") or "",
                   connection_epoch=_epoch(body))


@dataclass(frozen=True)
class TerminateRequest:
    context_id: str
    expected_execution_id: str
    request_id: str
    connection_epoch: int
    reason: str
    pause_id: str | None

    @classmethod
    def read(cls, body: Any) -> TerminateRequest:
        body = _object(body)
        return cls(context_id=_id(body, "contextId") or "",
                   expected_execution_id=_id(body, "expectedExecutionId") or "",
                   request_id=_id(body, "requestId") or "", connection_epoch=_epoch(body),
                   reason=_text(body, "reason", EXPLICIT_TERMINATE), pause_id=_id(body, "pauseId", required=False))


@dataclass(frozen=True)
class StateQuery:
    context_id: str
    execution_id: str | None
    pause_id: str | None

    @classmethod
    def read(cls, query: Mapping[str, Any]) -> StateQuery:
        return cls(context_id=_id(query, "contextId") or "", execution_id=_id(query, "executionId", required=False),
                   pause_id=_id(query, "pauseId", required=False))


@dataclass(frozen=True)
class RecoveryQuery:
    context_id: str
    execution_id: str

    @classmethod
    def read(cls, query: Mapping[str, Any]) -> RecoveryQuery:
        return cls(context_id=_id(query, "contextId") or "", execution_id=_id(query, "executionId") or "")


@dataclass(frozen=True)
class RestoreRequest:
    cwd: str
    session_id: str
    task_id: str | None

    @classmethod
    def read(cls, body: Any) -> RestoreRequest:
        body = _object(body)
        cwd = body.get("cwd")
        if not isinstance(cwd, str) or not cwd or "\x00" in cwd or len(cwd) > 4096:
            raise BadRequest("cwd")
        return cls(cwd=cwd, session_id=_id(body, "sessionId") or "", task_id=_id(body, "taskId", required=False))


def digest(operation: str, request: Any) -> str:
    """What a ``requestId`` stands for: the operation and every field of its request."""
    content = json.dumps([operation, asdict(request)], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(content.encode("utf-8")).hexdigest()
