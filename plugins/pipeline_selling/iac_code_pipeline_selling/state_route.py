"""``GET /iac-code/pipeline/state``: the journaled events of a context's pipeline and a small snapshot (§10, transports §2.8).

Query: ``contextId`` and/or ``taskId`` (one is required), ``afterSequence`` (ASCII digits, at most 20),
``includeSnapshot`` (default true; ``0``/``false`` omit the snapshot and then need ``afterSequence``),
``lean`` (``1``/``true`` drop ``snapshot.display.toolResults``). The events are exactly the journaled ones, so
a client that missed part of a stream replays it from here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from iac_code.api import ANONYMOUS_PRINCIPAL, PrincipalUser
from iac_code_pipeline_selling.journal import Journal, JournalStore

logger = logging.getLogger(__name__)

SNAPSHOT_SCHEMA_VERSION = "1.2"
_DIGITS = re.compile(r"[0-9]{1,20}")


def _bad(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _flag(value: str | None, *, default: bool) -> bool:
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("1", "true"):
        return True
    if v in ("0", "false"):
        return False
    return default


def snapshot(journal: Journal, *, lean: bool) -> dict[str, Any]:
    """A small recovery snapshot built from the journal: current step, candidates, pending input, last sequence."""
    events = journal.events
    steps: dict[str, dict[str, Any]] = {}
    candidates: dict[int, dict[str, Any]] = {}
    pending: dict[str, Any] | None = None
    status = "working"
    run_id = pipeline_name = task_id = ""
    current = ""
    tool_results: list[dict[str, Any]] = []
    handoff: dict[str, Any] | None = None
    stack: dict[str, Any] | None = None
    current_stack: dict[str, Any] | None = None
    seen_current = False
    messages: dict[str, dict[str, Any]] = {}
    for event in events:
        run_id, pipeline_name, task_id = event["pipelineRunId"], event["pipelineName"], event["taskId"]
        kind, data = event["eventType"], event.get("data", {})
        if event.get("status") and kind not in ("message_started", "text_delta", "tool_started", "tool_result"):
            status = event["status"]
        if kind.startswith("step_") and "step" in event:
            step = event["step"]
            current = step["id"]
            steps[step["id"]] = {"id": step["id"], "runId": step["runId"], "attempt": step["attempt"],
                                 "status": {"step_started": "running", "step_completed": "completed",
                                            "step_failed": "failed"}.get(kind, "running")}
        elif kind.startswith("candidate_") and "candidate" in event:
            cand = event["candidate"]
            entry = candidates.setdefault(cand["index"], {"index": cand["index"], "name": cand.get("name", ""),
                                                          "runId": cand["runId"], "status": "running"})
            if kind == "candidate_started":  # a restarted candidate's new attempt (interrupts)
                entry.update(runId=cand["runId"], status="running")
            elif kind == "candidate_completed":
                entry.update(status="completed", totalMonthlyCost=data.get("totalMonthlyCost", ""))
            elif kind == "candidate_failed":
                entry["status"] = "failed"
        elif kind == "artifact_created":
            tool_results.append({"eventId": event["eventId"], "filename": event.get("artifact", {}).get("filename", ""),
                                 "candidateIndex": data.get("candidateIndex")})
        elif kind == "rollback_completed" and "step" in event:  # the target step waits for its new attempt
            step = event["step"]
            current = step["id"]
            steps[step["id"]] = {"id": step["id"], "runId": step["runId"], "attempt": step["attempt"],
                                 "status": "pending"}
        elif kind == "message_started":  # the run's narration (§10 display.messages)
            entry = {"messageId": data.get("messageId", ""), "role": data.get("role", "assistant"),
                     "round": data.get("round", 1), "text": "", "segments": []}
            messages[entry["messageId"]] = entry
        elif kind == "text_delta" and data.get("messageId") in messages:
            entry = messages[data["messageId"]]
            entry["text"] += str(data.get("delta", ""))
            segment = {"type": "text", "text": str(data.get("delta", "")), "sequence": event["sequence"]}
            if "step" in event:
                segment["stepId"] = event["step"]["id"]
            entry["segments"].append(segment)
        elif kind == "input_required":
            pending = dict(data)
        elif kind == "input_received":
            pending = None
        elif kind == "pipeline_handoff_ready":
            handoff = dict(data)
        elif kind == "permission_requested":  # the deploy waits for the caller's permission (its envelope)
            pending = dict(event.get("permission") or data)
        elif kind == "permission_resolved":
            pending = None
        elif kind == "stack_progress":
            stack = dict(data)
        elif kind == "stack_current_changed":  # the deployed stack; cleared by a cleanup
            seen_current = True
            current_stack = {k: data.get(k) for k in ("stackId", "stackName", "regionId", "stackStatus")} \
                if data.get("current") else None
    display: dict[str, Any] = {"messages": list(messages.values())}
    if not lean:
        display["toolResults"] = tool_results
    result: dict[str, Any] = {
        "schemaVersion": SNAPSHOT_SCHEMA_VERSION, "contextId": journal.context_id, "taskId": task_id,
        "pipelineRunId": run_id, "pipelineName": pipeline_name, "status": status, "currentStep": current,
        "steps": list(steps.values()), "candidates": [candidates[i] for i in sorted(candidates)],
        "pendingInput": pending, "lastSequence": journal.last_sequence, "display": display,
    }
    if handoff is not None:
        result["handoff"] = handoff
    if stack is not None:
        result["stack"] = stack  # the deploy's last stack_progress
    if seen_current:
        result["currentStack"] = current_stack
    return result


def state_body(journal: Journal, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    """The endpoint's answer for a known journal: (HTTP status, JSON body)."""
    include = _flag(query.get("includeSnapshot"), default=True)
    raw_after = query.get("afterSequence")
    if raw_after is not None and not _DIGITS.fullmatch(raw_after):
        return 400, {"error": "afterSequence must be a non-negative integer"}
    if not include and raw_after is None:
        return 400, {"error": "afterSequence must be a non-negative integer"}
    lean_raw = query.get("lean")
    lean = lean_raw is not None and lean_raw.strip().lower() in ("1", "true")
    if lean_raw is not None and not lean and lean_raw.strip().lower() not in ("0", "false"):
        logger.info("pipeline state: unknown lean value %r, answering in full", lean_raw[:20])
    after = int(raw_after) if raw_after is not None else 0
    events = journal.after(after)
    body: dict[str, Any] = {"contextId": journal.context_id, "events": events}
    if include:
        body["snapshot"] = snapshot(journal, lean=lean)
    else:
        body["fromSequence"] = after
        body["lastSequence"] = max([after, *(e["sequence"] for e in events)])
    return 200, body


def state_handler(kernel: Any, stores: Any) -> Any:
    """The aiohttp handler, bound to the kernel (for the caller's identity and its tasks) and the journals."""

    async def handle(request: web.Request) -> web.StreamResponse:
        query = request.query
        context_id = (query.get("contextId") or "").strip()
        task_id = (query.get("taskId") or "").strip()
        if not context_id and not task_id:
            return _bad("contextId or taskId is required")
        raw_after = query.get("afterSequence")
        if raw_after is not None and not _DIGITS.fullmatch(raw_after):
            return _bad("afterSequence must be a non-negative integer")
        store: JournalStore | None = stores()
        if store is None:
            return _bad("No pipeline state is available on this server.", 404)
        principal = kernel.authenticator.authenticate(request.headers) if kernel.authenticator is not None else None
        owner_task = task_id
        if task_id:
            task = await _visible_task(kernel, task_id, principal)
            if task is None:
                return _bad("Pipeline state not found.", 404)
            if context_id and task.context_id != context_id:
                return _bad("The task does not belong to that context.", 404)
            context_id = task.context_id
        journal = store.existing(context_id)
        if journal is None:
            return _bad("Pipeline state not found.", 404)
        if not owner_task:
            owner_task = journal.events[-1]["taskId"]
            if await _visible_task(kernel, owner_task, principal) is None:
                return _bad("Pipeline state not found.", 404)
        status, body = state_body(journal, query)
        return web.json_response(body, status=status)

    return handle


async def _visible_task(kernel: Any, task_id: str, principal: Any) -> Any:
    """The task when the caller may see it (the task store scopes by owner), else ``None``."""
    from a2a.server.context import ServerCallContext

    context = ServerCallContext(user=PrincipalUser(principal or ANONYMOUS_PRINCIPAL))
    try:
        return await kernel.task_store.get(task_id, context)
    except Exception:  # an unreadable id is simply not found
        logger.debug("pipeline state: task lookup failed", exc_info=True)
        return None
