"""Tools whose calls wait for a user's answer of their own kind (:class:`~iac_code.api.InputPause`, e.g. the
resource selector): the pause that ends a turn, and the tool's ``resume`` on the task's next message.

While the call waits it is kept in the context's session (``turn.session["llm_pause"]``: the task, the tool, the
tool-use id, the tool's state and the calls of the same round after it, which were not run). The turn ends in
input-required with the tool's text and ``metadata.iac_code.inputRequired``. On the next message the tool's
``resume(state, context)`` reads the answer (its acknowledgement and result, or "not an answer"); with nothing
waiting, a tool may still claim the message (a replayed answer: its acknowledgement, and the turn ends).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from iac_code.api import InputPause, Progress, Resumed, RuntimeEvent, TextDelta, ToolContext, ToolOutcome, TurnRequest
from iac_code_runtime_llm import conversation

SESSION_KEY = "llm_pause"
NOT_RUN = "not run: the turn paused for the user's answer to {tool}; call it again if it is still needed"


def pause(session: MutableMapping[str, Any], turn: TurnRequest, tool_name: str, tool_use_id: str,
          waiting: InputPause, later: list[str], *, after_text: bool) -> list[RuntimeEvent]:
    """Keep the waiting call in the session; the events that end the turn on it."""
    session[SESSION_KEY] = {"taskId": turn.task_id, "tool": tool_name, "toolUseId": tool_use_id,
                            "state": dict(waiting.state), "later": list(later)}
    return [TextDelta(("\n\n" if after_text else "") + waiting.text),
            Progress({"inputRequired": dict(waiting.input_required)}, final=True)]


async def resume(session: MutableMapping[str, Any], turn: TurnRequest, context: ToolContext,
                 tools: Mapping[str, tuple[Any, Any]]) -> tuple[list[RuntimeEvent], list[dict[str, Any]], bool, bool]:
    """The waiting call's end (or a tool's claim on the message): the events to publish, the tool messages that
    close the paused round, whether the message was an answer, and whether the turn ends here."""
    pending = session.get(SESSION_KEY)
    if isinstance(pending, dict) and pending.get("taskId") == turn.task_id and pending.get("tool") in tools:
        session.pop(SESSION_KEY, None)
        name, tool_use_id = pending["tool"], str(pending.get("toolUseId", ""))
        resumed = await tools[name][1].resume(dict(pending.get("state") or {}), context)
        resumed = resumed if isinstance(resumed, Resumed) else Resumed(
            outcome=ToolOutcome(error="the user sent a new request instead of answering"), answered=False)
        later = [c for c in pending.get("later", []) if isinstance(c, str)]
        closing = [conversation.tool_message(c, ToolOutcome(error=NOT_RUN.format(tool=name))) for c in later]
        replies = ([conversation.tool_message(tool_use_id, resumed.outcome)] if resumed.outcome is not None
                   else []) + closing
        return list(resumed.events), replies, resumed.answered, resumed.end_turn
    for _spec, tool in tools.values():
        claim = getattr(tool, "resume", None)
        if claim is None:
            continue
        resumed = await claim(None, context)
        if isinstance(resumed, Resumed):
            return list(resumed.events), [], resumed.answered, resumed.end_turn
    return [], [], False, False


def offered(tool: Any, context: ToolContext) -> bool:
    """Whether this turn offers ``tool`` to the model (its optional ``offered(context)``; absent: always)."""
    check = getattr(tool, "offered", None)
    return True if check is None else bool(check(context))
