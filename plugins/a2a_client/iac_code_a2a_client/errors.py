"""What can go wrong calling a remote agent, each with its own exit code (docs/client.md).

Every failure of ``iac-code a2a-client`` becomes one :class:`ClientError`: a one-line
message for stderr (no traceback without ``--debug``) and a distinct exit code, so a
script can tell "the agent is down" from "the task failed" without parsing text.
"""

from __future__ import annotations

import enum
import re

import httpx
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.utils.errors import A2AError

from iac_code.api import mask_url, url_secrets


class ExitCode(enum.IntEnum):
    """The documented exit codes of ``iac-code a2a-client``."""

    OK = 0
    ERROR = 1  # bad configuration or options, anything not listed below
    USAGE = 2  # click's own usage errors (unknown option, missing required option)
    UNREACHABLE = 3  # connection refused, DNS, connection lost, an HTTP status other than 401/403
    TIMEOUT = 4
    AUTH = 5  # the agent refused our credentials (HTTP 401/403, gRPC UNAUTHENTICATED, JSON-RPC -32000)
    INVALID_CARD = 6  # no Agent Card, or not a valid one
    SIGNATURE = 7  # the card's signature did not verify (or a required signature is missing)
    AGENT_ERROR = 8  # the agent answered with a JSON-RPC / A2A error (task not found, invalid params, ...)
    NO_INTERFACE = 9  # the card advertises no interface this client can execute
    ROUTE = 10  # no route matched, unknown route name
    INPUT_REQUIRED = 11  # non-interactive call paused for a permission answer or a pipeline question
    TASK_FAILED = 12  # the task ended failed, rejected or canceled
    INTERRUPTED = 130  # Ctrl-C (the remote task was canceled)


class ClientError(Exception):
    """A failure to report as one line on stderr with ``code`` as the exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


_HTTP_STATUS = re.compile(r"HTTP Error (\d{3})")


def _auth_refused(exc: BaseException) -> bool:
    text = str(exc)
    if "JSON-RPC Error -32000" in text or "UNAUTHENTICATED" in text or "PERMISSION_DENIED" in text:
        return True
    status = _HTTP_STATUS.search(text)
    return status is not None and status.group(1) in {"401", "403"}


def _cause_status(exc: BaseException) -> int | None:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        status = getattr(cur, "status", None)
        if isinstance(status, int) and 100 <= status < 600:
            return status
        response = getattr(cur, "response", None)
        code = getattr(response, "status_code", None)
        if isinstance(code, int):
            return code
        cur = cur.__cause__ or cur.__context__
    return None


def shown_url(url: str) -> str:
    """``url`` as messages may show it: any credential in it (user info, ``?token=``) as ``***``."""
    return mask_url(url) if url_secrets(url) else url


def classify(exc: BaseException, url: str = "") -> ClientError:
    """Turn an exception from a2a-sdk's client (or a channel) into a :class:`ClientError`.

    ``url`` is the agent the call went to: an unreachable agent is named by it.
    """
    if isinstance(exc, ClientError):
        return exc
    at = f" at {shown_url(url)}" if url else ""
    if isinstance(exc, A2AClientTimeoutError | TimeoutError | httpx.TimeoutException):
        return ClientError("The remote agent did not answer in time.", ExitCode.TIMEOUT)
    if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
        name = type(exc).__name__.removesuffix("Error")
        return ClientError(f"The agent answered with an error ({name}): {exc}", ExitCode.AGENT_ERROR)
    status = _cause_status(exc)
    if status in (401, 403) or _auth_refused(exc):
        return ClientError("The agent refused the credentials (unauthorized). Check --token, --basic-username/"
                           "--basic-password or --api-key.", ExitCode.AUTH)
    text = str(exc)
    match = re.search(r"JSON-RPC Error (-?\d+): (.*)", text)
    if match:
        return ClientError(f"The agent answered with JSON-RPC error {match.group(1)}: {match.group(2)}",
                           ExitCode.AGENT_ERROR)
    if status is not None:
        return ClientError(f"The agent{at} answered HTTP {status}.", ExitCode.UNREACHABLE)
    if isinstance(exc, A2AClientError | OSError | ConnectionError | httpx.RequestError):
        return ClientError(f"Cannot reach the agent{at}: {_short(text) or type(exc).__name__}",
                           ExitCode.UNREACHABLE)
    return ClientError(f"{type(exc).__name__}: {_short(text)}", ExitCode.ERROR)


def _short(text: str) -> str:
    """The first line of an exception text, without the SDK's prefix, clipped."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    for prefix in ("Network communication error: ",):
        line = line.removeprefix(prefix)
    return line[:300]
