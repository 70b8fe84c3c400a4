"""``select_cloud_resource``: the model asks the user to pick a cloud resource; the turn waits for the answer.

The call writes its checkpoint (``pending``) and hands the runtime an :class:`~iac_code.api.InputPause` whose
``inputRequired`` is §9's object; the answer (``metadata.iac_code.inputResponse``, checked before its turn starts
by :class:`~iac_code_resource_selector.gate.AnswerGate`) comes back through :meth:`SelectCloudResource.resume`:
``claimed``, the ``inputReceived`` acknowledgement, the call's result, ``resolved``. The same answer again is a
replay (acknowledged, nothing runs).

With cloud queries configured (:mod:`~iac_code_resource_selector.cloud`), the call first lists what the user may
pick: the question's ``selector`` then carries ``options`` (at most 100 ``{"value", "label"}``), ``optionsComplete``
and ``valueCheck: "cloud"``; when there is nothing to pick the call does not ask and the model gets
``{"status": "canceled", "selectorId", "optionsEmpty": true}`` at once; a failed query is the call's error. Without
credentials nothing is listed and ``valueCheck`` is ``"pattern"``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from iac_code.api import (
    InputPause,
    Permission,
    Progress,
    Resumed,
    ToolCompleted,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    TurnFailed,
)
from iac_code_resource_selector import answers, capability
from iac_code_resource_selector.cloud import CloudQuery, QueryError
from iac_code_resource_selector.profiles import BY_ID, PROFILE_HASH, PROFILES
from iac_code_resource_selector.store import SelectionStore

logger = logging.getLogger(__name__)

NAME = "select_cloud_resource"
NOT_ANSWERED = "the user sent a new request instead of choosing a resource"
SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "selector": {"type": "string", "enum": [p.id for p in PROFILES],
                     "description": "What to pick: " + ", ".join(f"{p.id} ({p.description})" for p in PROFILES)},
        "question": {"type": "string", "description": "The question to show the user, in their language."},
        "association_property_metadata": {
            "type": "object", "additionalProperties": {"type": "string"},
            "description": "What narrows the choice, as ROS associationPropertyMetadata (e.g. RegionId, VpcId)."},
    },
    "required": ["selector", "question"],
}


def _ack(answer: Mapping[str, Any], replayed: bool) -> dict[str, Any]:
    return {"inputReceived": {"schemaVersion": 1, "kind": answers.KIND, "inputId": answer["inputId"],
                              "toolUseId": answer["toolUseId"], "status": answer["status"], "replayed": replayed}}


class SelectCloudResource:
    """The selector tool (see the module docstring)."""

    name = NAME

    def __init__(self, store: SelectionStore, environ: Mapping[str, str] | None = None,
                 query: CloudQuery | None = None) -> None:
        self.store = store
        self._env = environ
        self.query = query

    def offered(self, context: ToolContext) -> bool:
        reason = capability.not_offered(context.metadata, self._env)
        if reason is not None:
            logger.debug("select_cloud_resource not offered on task %s: %s", context.task_id, reason)
        return reason is None

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None  # it asks; it reads and changes nothing

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        reason = capability.not_offered(context.metadata, self._env)
        if reason is not None:
            return ToolOutcome(error=f"the resource selector is not available: {reason}")
        profile = BY_ID.get(str(tool_input.get("selector")))
        question = tool_input.get("question")
        if profile is None:
            return ToolOutcome(error="invalid selector: one of " + ", ".join(BY_ID))
        if not isinstance(question, str) or not question.strip() or len(question) > answers.MAX_TEXT:
            return ToolOutcome(error="invalid question: a non-empty string of at most 1024 characters")
        extra = tool_input.get("association_property_metadata") or {}
        if not isinstance(extra, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and len(v) <= 1024
                                                     for k, v in extra.items()):
            return ToolOutcome(error="invalid association_property_metadata: an object of strings")
        tool_use_id = context.tool_use_id
        input_id = f"resource-{uuid.uuid4().hex}"
        selector = {"id": profile.id, "associationProperty": profile.association_property,
                    "outputKind": profile.output_kind, "associationPropertyMetadata": dict(extra), "source": None,
                    "profileHash": PROFILE_HASH, "valueCheck": "pattern"}
        if self.query is not None:
            try:
                listing = await self.query.options(profile.id, selector["associationPropertyMetadata"])
            except QueryError as exc:
                return ToolOutcome(error=f"could not list the choices for {profile.id}: {exc}")
            if not listing.options:  # nothing to pick: the user is not asked
                return ToolOutcome(result={"status": "canceled", "selectorId": profile.id, "optionsEmpty": True})
            selector.update(valueCheck="cloud", options=[o.to_json() for o in listing.options],
                            optionsComplete=listing.complete)
        envelope = {"schemaVersion": 1, "kind": answers.KIND, "requestTaskId": context.task_id,
                    "contextId": context.context_id, "inputId": input_id, "toolUseId": tool_use_id,
                    "prompt": question.strip(), "required": True, "selector": selector}
        self.store.write({"inputId": input_id, "taskId": context.task_id, "contextId": context.context_id,
                          "toolUseId": tool_use_id, "state": "pending", "selector": selector,
                          "prompt": question.strip()})  # durable before the question is published
        return ToolOutcome(result={"status": "waiting_for_selection", "inputId": input_id},
                           pause=InputPause(text=question.strip(), input_required=envelope,
                                            state={"inputId": input_id}))

    async def resume(self, state: Mapping[str, Any] | None, context: ToolContext) -> Resumed | None:
        response = context.metadata.get("inputResponse")
        if state is None:  # nothing waits: a repeated answer is a replay
            if not answers.is_selection(context.metadata):
                return None
            try:
                answer, record = answers.check(self.store, context.task_id, context.context_id, response)
            except answers.Invalid as exc:  # changed since the gate checked it
                return Resumed(events=(TurnFailed(answers.PREFIX + str(exc), retryable=True),), end_turn=True)
            if record["state"] == "pending":
                return Resumed(events=(TurnFailed(answers.PREFIX + "pending input is unavailable", retryable=True),),
                               end_turn=True)
            return Resumed(events=(Progress(_ack(answer, True), final=True),), end_turn=True)
        input_id = str(state.get("inputId", ""))
        try:
            record = self.store.read(input_id)
        except Exception:
            record = None
        if record is None:
            return Resumed(events=(TurnFailed(answers.PREFIX + "checkpoint is unreadable", retryable=True),),
                           end_turn=True)
        tool_use_id = record["toolUseId"]
        if not answers.is_selection(context.metadata) or response.get("inputId") != input_id:
            self.store.write({**record, "state": "abandoned"})
            return Resumed(events=(ToolFailed(tool_use_id, NAME, NOT_ANSWERED),),
                           outcome=ToolOutcome(error=NOT_ANSWERED), answered=False)
        try:
            answer, record = answers.check(self.store, context.task_id, context.context_id, response)
        except answers.Invalid as exc:  # changed since the gate checked it
            return Resumed(events=(TurnFailed(answers.PREFIX + str(exc), retryable=True),), end_turn=True)
        replayed = record["state"] != "pending"
        if not replayed:
            self.store.write({**record, "state": "claimed", "answer": answer, "answerDigest": answers.digest(answer)})
        result: dict[str, Any] = {"status": answer["status"], "selectorId": record["selector"]["id"]}
        if answer["status"] == "selected":
            result.update({k: answer[k] for k in ("value", "label") if k in answer})
        elif "optionsEmpty" in answer:
            result["optionsEmpty"] = answer["optionsEmpty"]
        events = (Progress(_ack(answer, replayed)), ToolCompleted(tool_use_id, NAME, result))
        self.store.write({**record, "state": "resolved", "answer": answer, "answerDigest": answers.digest(answer)})
        return Resumed(events=events, outcome=ToolOutcome(result=result))
