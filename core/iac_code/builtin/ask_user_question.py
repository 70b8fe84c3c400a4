"""The built-in ``ask_user_question`` tool (``iac_code_tools``): a runtime that drives a model (``agent-runtime:
llm``) offers it, so the model can ask the user a question with options in normal mode too; the turn pauses
until the next message on the task answers it (:mod:`iac_code.agents.questions`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iac_code.agents.questions import ASK_USER_QUESTION, ASK_USER_QUESTION_SCHEMA, UserQuestion
from iac_code.agents.tools import Permission, ToolContext, ToolOutcome
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import ToolSpec


class AskUserQuestion:
    """Validates the question and hands it to the calling runtime, which pauses the turn for the answer."""

    name = ASK_USER_QUESTION

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None  # it asks; it reads and changes nothing

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        try:
            question = UserQuestion.from_input(tool_input)
        except ValueError as exc:
            return ToolOutcome(error=f"invalid question: {exc}")
        return ToolOutcome(result={"status": "waiting_for_answer"}, question=question)


@hookimpl
def iac_code_tools() -> list[ToolSpec]:
    return [ToolSpec(name=ASK_USER_QUESTION, create=lambda context: AskUserQuestion(),
                     description="Ask the user a question with options (and, unless disallowed, free text) when "
                                 "the request is ambiguous or a choice is theirs; the turn waits for the answer, "
                                 "which comes back as this tool's result.",
                     parameters=ASK_USER_QUESTION_SCHEMA)]
