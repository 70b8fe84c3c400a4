"""The iac-code session id of a conversation, as the wire names it (``iacCodeSessionId``).

A session here is a conversation context: its id is the context's ``contextId``. Every status
the executor publishes carries it in ``metadata.iac_code.iacCodeSessionId`` (and so the task's
merged metadata), the pipeline envelope carries it as ``iacCodeSessionId``, and
``POST /iac-code/session/ensure-restored`` takes it as ``sessionId``. Those three go through
these two functions, so they cannot drift apart.
"""

from __future__ import annotations

SESSION_ID_FIELD = "iacCodeSessionId"


def session_id_of(context_id: str) -> str:
    """The session id of the conversation ``context_id`` (``""`` when the context is not known)."""
    return context_id


def context_of_session(session_id: str) -> str:
    """The conversation context a session id names (the inverse of :func:`session_id_of`)."""
    return session_id
