"""Session restore and recovery (§8): ``ensure-restored`` and ``recovery``, over the server's own persistence.

A session here is a conversation context (``sessionId`` = ``contextId``): its snapshot under the
persistence directory holds its workspace and conversation, and the server loads it back on demand
(:meth:`iac_code.api.PluginContext.restore_session`). ``current``: it was in memory; ``restored``: it
was read back from disk; ``not_found``: the caller has no such session in that workspace. This server
keeps no separate session backups, so ``SESSION_BACKUP_NOT_READY`` (409) is never answered.
"""

from __future__ import annotations

import logging
from typing import Any

from iac_code.api import Principal, PluginContext, PrincipalUser, context_of_session, message_to_json
from iac_code_execution_control import requests as r
from iac_code_execution_control.controller import Controller, Reply, error

logger = logging.getLogger(__name__)


def call_context(owner: str) -> Any:
    """An a2a-sdk call context for ``owner``: task look-ups see that owner's tasks only."""
    from a2a.server.context import ServerCallContext

    return ServerCallContext(user=PrincipalUser(Principal(owner, "execution-control" if owner else "")))


async def _task(kernel: PluginContext, owner: str, task_id: str) -> Any:
    try:
        return await kernel.task_store.get(task_id, call_context(owner))
    except Exception:  # an unreadable task is not found
        logger.debug("session routes: task look-up failed", exc_info=True)
        return None


async def ensure_restored(kernel: PluginContext, owner: str, request: r.RestoreRequest) -> Reply:
    """``POST /iac-code/session/ensure-restored``."""
    context_id = context_of_session(request.session_id)  # the ``iacCodeSessionId`` the task's statuses carry
    try:
        session = await kernel.restore_session(owner, context_id, request.cwd)
    except ValueError:  # the workspace is not acceptable (not absolute, outside the allowed roots, ...)
        return error(400, r.INVALID_RESTORE)
    except NotImplementedError:
        return error(503, r.RESTORE_UNAVAILABLE)
    except Exception:
        logger.exception("Restoring a session failed")
        return error(503, r.RESTORE_FAILED)
    if session is None:
        return Reply(404, {"status": "not_found"})
    if request.task_id is not None:
        task = await _task(kernel, owner, request.task_id)
        if task is None or task.context_id != context_id:
            return error(400, r.INVALID_RESTORE)
    return Reply(200, {"status": session.status})


def output_text(task: Any) -> list[str]:
    """The agent's text of the task, message by message (its history, then its current status message)."""
    from a2a.types.a2a_pb2 import Role

    messages = [*task.history]
    if task.status.HasField("message"):
        messages.append(task.status.message)
    texts = []
    for message in messages:
        if message.role != Role.ROLE_AGENT:
            continue
        text = "".join(part.text for part in message.parts if part.HasField("text"))
        if text:
            texts.append(text)
    return texts


async def recovery(kernel: PluginContext, controller: Controller, owner: str, query: r.RecoveryQuery) -> Reply:
    """``GET /iac-code/session/recovery``: what a client needs to pick the execution up again."""
    found = await controller.state(owner, r.StateQuery(query.context_id, query.execution_id, None))
    if found.status != 200:
        return found
    snapshot = found.body
    task = await _task(kernel, owner, snapshot["taskId"])
    try:
        session = await kernel.restore_session(owner, query.context_id)
    except NotImplementedError:
        session = None
    return Reply(200, {
        "contextId": snapshot["contextId"], "taskId": snapshot["taskId"], "executionId": snapshot["executionId"],
        "revision": snapshot["revision"], "executionStatus": snapshot["executionStatus"],
        "outputText": output_text(task) if task is not None else [],
        "task": message_to_json(task) if task is not None else None,
        "messages": [dict(m) for m in session.history] if session is not None else [],
        "executionControl": snapshot,
    })
