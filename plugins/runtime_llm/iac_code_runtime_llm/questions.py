"""The model's ``ask_user_question`` calls: the pause that ends a turn with the question, and the answer that the
next message on the task brings back to the model.

While the question waits, the call is kept in the context's session (``turn.session["llm_question"]``: the task, the
tool-use id, the question, when it was asked, and the calls of the same round after it, which were not run). The
turn ends in ``input-required`` with the question as its text and ``metadata.iac_code.inputRequired`` (§3's data
with ``schemaVersion``, ``requestTaskId``, ``contextId`` and ``required: true``). The next text message on the same
task within an hour is the answer (§3's matching): ``metadata.iac_code.inputReceived`` acknowledges it, the call
completes with the answer, and the model goes on from there. A message on another task, or after the hour, is a new
request; the model learns that the question went unanswered.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

from iac_code.api import (
    ASK_USER_QUESTION,
    QUESTION_TIMEOUT_SECONDS,
    Progress,
    RuntimeEvent,
    TextDelta,
    ToolCompleted,
    ToolFailed,
    ToolOutcome,
    TurnRequest,
    UserQuestion,
)
from iac_code_runtime_llm import conversation

SESSION_KEY = "llm_question"
HINTS = {
    "en": "Answer with an option's number or label{free}.",
    "zh": "请回复选项的编号或名称{free}。",
}
FREE = {"en": ", or in your own words", "zh": "，或直接描述您的需求"}
NOT_RUN = "not run: the turn paused for the user's answer to ask_user_question; call it again if it is still needed"


def _hint(question: UserQuestion, language: str) -> str:
    lang = language if language in HINTS else "en"
    return HINTS[lang].format(free=FREE[lang] if question.allow_free_text else "")


def pause(session: MutableMapping[str, Any], turn: TurnRequest, tool_use_id: str, question: UserQuestion,
          later: list[str], *, after_text: bool) -> list[RuntimeEvent]:
    """Keep the waiting call in the session; the events that end the turn on the question."""
    session[SESSION_KEY] = {"taskId": turn.task_id, "toolUseId": tool_use_id, "question": question.to_json(),
                            "askedAt": time.time(), "later": list(later)}
    envelope = {"schemaVersion": 1, **question.input_required(tool_use_id), "requestTaskId": turn.task_id,
                "contextId": turn.context_id, "required": True}
    said = question.as_text(_hint(question, turn.language))
    return [TextDelta(("\n\n" if after_text else "") + said), Progress({"inputRequired": envelope}, final=True)]


def resume(session: MutableMapping[str, Any], turn: TurnRequest,
           ) -> tuple[list[RuntimeEvent], list[dict[str, Any]], bool]:
    """The waiting question's end, if one waits: the events to publish, the tool messages that close its round,
    and whether this turn's text was the answer (else it is a new request)."""
    pending = session.pop(SESSION_KEY, None)
    if not isinstance(pending, dict) or not isinstance(pending.get("toolUseId"), str):
        return [], [], False
    tool_use_id = pending["toolUseId"]
    later = [c for c in pending.get("later", []) if isinstance(c, str)]
    closing = [conversation.tool_message(call_id, ToolOutcome(error=NOT_RUN)) for call_id in later]
    try:
        question = UserQuestion.from_input(pending.get("question") or {})
    except ValueError:
        question = None
    fresh = time.time() - float(pending.get("askedAt", 0) or 0) <= QUESTION_TIMEOUT_SECONDS
    if question is not None and pending.get("taskId") == turn.task_id and fresh:
        received, answer = question.answer(tool_use_id, turn.prompt)
        events: list[RuntimeEvent] = [Progress({"inputReceived": {"schemaVersion": 1, **received}}),
                                      ToolCompleted(tool_use_id, ASK_USER_QUESTION, answer)]
        return events, [conversation.tool_message(tool_use_id, ToolOutcome(result=answer)), *closing], True
    reason = ("the user did not answer within an hour" if not fresh
              else "the user sent a new request instead of answering")
    return ([ToolFailed(tool_use_id, ASK_USER_QUESTION, reason)],
            [conversation.tool_message(tool_use_id, ToolOutcome(error=reason)), *closing], False)
