"""The conversation a context keeps between turns, bounded by ``llm-context-tokens``.

The messages live in the context's runtime session (``turn.session["llm"]``), which the
kernel persists with the context, so a restart restores them. Tokens are estimated as
one per four characters of the messages' JSON; when the conversation is over budget the
oldest whole turns (a user message and everything up to the next one) are dropped, never
the current one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from typing import Any

SESSION_KEY = "llm"
CHARS_PER_TOKEN = 4
TOOL_RESULT_LIMIT = 20_000  # characters of one tool result shown to the model

SYSTEM_PROMPT = (
    "You are iac-code, an Infrastructure-as-Code assistant for Alibaba Cloud: ROS templates (YAML or JSON) and "
    "Terraform. Use the tools to generate, review and convert templates, to read and write files in the user's "
    "workspace (paths relative to it) and to call the ROS API. Writing files and changing cloud resources ask the "
    "user first; if a tool reports 'permission denied', do not retry it, say what you would have done. "
    "When a request is ambiguous or a choice is the user's to make, ask with ask_user_question (a few options; "
    "the answer comes back as its result). "
    "Answer in the user's language ({language})."
)


def estimate_tokens(messages: list[Mapping[str, Any]]) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages) // CHARS_PER_TOKEN + 1


def history(session: Mapping[str, Any]) -> list[dict[str, Any]]:
    kept = session.get(SESSION_KEY, {})
    messages = kept.get("messages") if isinstance(kept, dict) else None
    return [dict(m) for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def bounded(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """``messages`` without their oldest whole turns until they fit ``budget`` (the last turn always stays)."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    while len(starts) > 1 and estimate_tokens(messages[starts[0]:]) > budget:
        starts.pop(0)
    return messages[starts[0]:] if starts else messages


def save(session: MutableMapping[str, Any], messages: list[dict[str, Any]], budget: int) -> None:
    session[SESSION_KEY] = {"messages": bounded(messages, budget)}


def tool_message(call_id: str, outcome: Any) -> dict[str, Any]:
    """What the model learns from one tool call: its result (or error), with text the tool kept private."""
    if outcome is None:
        content: dict[str, Any] = {"error": "the tool did not run"}
    elif outcome.error is not None:
        content = {"error": outcome.error}
    else:
        content = {"result": dict(outcome.result)}
        private = outcome.private
        text = private if isinstance(private, str) else getattr(private, "text", None)
        if isinstance(text, str):
            content["text"] = text[:TOOL_RESULT_LIMIT]
    return {"role": "tool", "tool_call_id": call_id,
            "content": json.dumps(content, ensure_ascii=False, default=str)[:TOOL_RESULT_LIMIT + 2_000]}
