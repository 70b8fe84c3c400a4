"""``ask_user_question`` (§3 of the 0.16 digest): a question with options and free text that pauses a turn
until the user answers, and the rules that read the answer.

A tool returns the question in its outcome (:attr:`~iac_code.agents.tools.ToolOutcome.question`); the runtime
that called it ends the turn with the question (its text for every client, :meth:`UserQuestion.input_required`
for clients that read metadata) and reads the next ordinary text message on the task as the answer
(:meth:`UserQuestion.answer`), which goes back to the model as the tool's result. Pipelines ask the same
questions with the same shapes. Nothing here imports a2a-sdk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ASK_USER_QUESTION = "ask_user_question"
QUESTION_TIMEOUT_SECONDS = 3600.0
MAX_OPTIONS = 20
MAX_TEXT = 1000

ASK_USER_QUESTION_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question, in the user's language."},
        "options": {"type": "array", "minItems": 1, "maxItems": MAX_OPTIONS, "items": {
            "type": "object", "properties": {"id": {"type": "string"}, "label": {"type": "string"},
                                             "description": {"type": "string"}},
            "required": ["id", "label"]}},
        "allow_free_text": {"type": "boolean", "description": "Whether the user may answer in their own words "
                                                              "(default true)."},
        "free_text_prompt": {"type": "string", "description": "What to write when no option fits."},
    },
    "required": ["question", "options"],
}


def match_question(text: str, options: Sequence[Mapping[str, Any]], allow_free_text: bool = True) -> dict[str, Any]:
    """§3's order: a 1-based number, an exact ``id`` or ``label``, free text, else the text as ``selectedLabel``.

    Returns ``selectedId``, ``selectedLabel``, ``freeText`` (unmatched fields ``""``; free text untrimmed).
    """
    trimmed = text.strip()
    if re.fullmatch(r"[0-9]+", trimmed):
        number = int(trimmed)
        if 1 <= number <= len(options):
            option = options[number - 1]
            return {"selectedId": str(option["id"]), "selectedLabel": str(option["label"]), "freeText": ""}
    for option in options:
        if trimmed in (str(option["id"]), str(option["label"])):
            return {"selectedId": str(option["id"]), "selectedLabel": str(option["label"]), "freeText": ""}
    if allow_free_text:
        return {"selectedId": "", "selectedLabel": "", "freeText": text}
    return {"selectedId": "", "selectedLabel": text, "freeText": ""}


def _text(value: Any, what: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f"{what} must be a non-empty string" if required else f"{what} must be a string")
    if len(value) > MAX_TEXT:
        raise ValueError(f"{what} is longer than {MAX_TEXT} characters")
    return value.strip()


@dataclass(frozen=True)
class UserQuestion:
    """A question for the user: ``options`` (``{"id", "label", "description"?}``), free text allowed or not."""

    question: str
    options: tuple[Mapping[str, str], ...]
    allow_free_text: bool = True
    free_text_prompt: str = ""

    @classmethod
    def from_input(cls, tool_input: Mapping[str, Any]) -> UserQuestion:
        """The question a tool call asks (its input: ``question``, ``options``, ``allow_free_text``,
        ``free_text_prompt``); ``ValueError`` saying what is wrong."""
        question = _text(tool_input.get("question"), "question")
        raw = tool_input.get("options")
        if not isinstance(raw, list) or not raw:
            raise ValueError("options must be a non-empty list")
        if len(raw) > MAX_OPTIONS:
            raise ValueError(f"options has more than {MAX_OPTIONS} entries")
        options: list[dict[str, str]] = []
        for n, entry in enumerate(raw, start=1):
            if not isinstance(entry, Mapping):
                raise ValueError(f"option {n} must be an object with id and label")
            option = {"id": _text(entry.get("id"), f"option {n} id"), "label": _text(entry.get("label"),
                                                                                         f"option {n} label")}
            description = _text(entry.get("description"), f"option {n} description", required=False)
            if description:
                option["description"] = description
            options.append(option)
        if len({o["id"] for o in options}) != len(options):
            raise ValueError("option ids must be unique")
        free = tool_input.get("allow_free_text", True)
        if not isinstance(free, bool):
            raise ValueError("allow_free_text must be true or false")
        prompt = _text(tool_input.get("free_text_prompt"), "free_text_prompt", required=False)
        return cls(question, tuple(options), free, prompt)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (for a runtime's session while the question waits)."""
        return {"question": self.question, "options": [dict(o) for o in self.options],
                "allow_free_text": self.allow_free_text, "free_text_prompt": self.free_text_prompt}

    def input_required(self, tool_use_id: str) -> dict[str, Any]:
        """§3's ``input_required`` data: ``kind``, ``inputId`` (``ask-<toolUseId>``), ``toolUseId``, ``question``,
        ``prompt``, ``options``, ``allowFreeText``, ``freeTextPrompt``."""
        return {"kind": ASK_USER_QUESTION, "inputId": f"ask-{tool_use_id}", "toolUseId": tool_use_id,
                "question": self.question, "prompt": self.question, "options": [dict(o) for o in self.options],
                "allowFreeText": self.allow_free_text, "freeTextPrompt": self.free_text_prompt}

    def as_text(self, answer_hint: str = "") -> str:
        """The question as text for clients that only read messages: the question, numbered options, the hint."""
        lines = [self.question]
        for n, option in enumerate(self.options, start=1):
            line = f"{n}. {option['label']}"
            if option.get("description"):
                line += f": {option['description']}"
            lines.append(line)
        if self.allow_free_text and self.free_text_prompt:
            lines.append(self.free_text_prompt)
        if answer_hint:
            lines.append(answer_hint)
        return "\n".join(lines)

    def answer(self, tool_use_id: str, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Read ``text`` as the answer (:func:`match_question`): §3's ``input_received`` data, and the result the
        model gets (``selectedId``, ``selectedLabel``, ``freeText``)."""
        matched = match_question(text, self.options, self.allow_free_text)
        received = {"kind": ASK_USER_QUESTION, "inputId": f"ask-{tool_use_id}", "toolUseId": tool_use_id,
                    "answerTextLength": len(text), **matched, "freeTextLength": len(matched["freeText"]),
                    "question": self.question, "options": [dict(o) for o in self.options],
                    "allowFreeText": self.allow_free_text}
        return received, {"question": self.question, **matched}

