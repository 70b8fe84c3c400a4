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
from iac_code_resource_selector.backup import BackupFailed
from iac_code_resource_selector.cloud import CloudQuery, QueryError
from iac_code_resource_selector.owners import TurnOwners
from iac_code_resource_selector.profiles import BY_ID, PROFILE_HASH, PROFILES, Profile
from iac_code_resource_selector.store import TOOL, SelectionStore, Unreadable, payload_digest

logger = logging.getLogger(__name__)

NAME = TOOL
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
        "source": {
            "type": "object", "properties": {"selector_id": {"type": "string"}, "value": {"type": "string"}},
            "required": ["selector_id", "value"],
            "description": "Only for a derived selector (" + ", ".join(
                f"{p.id} from {p.source}" for p in PROFILES if p.source) + "): the earlier answer it derives from."},
    },
    "required": ["selector", "question"],
}


def _source(profile: Profile, given: Any) -> dict[str, str] | None | str:
    """The question's ``source``: ``None`` for a selector that is not derived, the ``{selector_id, value}`` of a
    derived one; a string is the error (a missing, foreign or malformed source)."""
    if profile.source is None:
        return None if given is None else f"invalid source: {profile.id} is not a derived selector"
    if not isinstance(given, Mapping) or set(given) != {"selector_id", "value"}:
        return f"invalid source: {profile.id} derives from a {profile.source} answer: give {{selector_id, value}}"
    base = BY_ID[profile.source]
    value = given.get("value")
    if given.get("selector_id") != base.id or not isinstance(value, str) or not base.valid(value):
        return f"invalid source: {profile.id} derives from a {profile.source} answer ({base.pattern})"
    return {"selector_id": base.id, "value": value}


def _ack(answer: Mapping[str, Any], replayed: bool) -> dict[str, Any]:
    return {"inputReceived": {"schemaVersion": 1, "kind": answers.KIND, "inputId": answer["inputId"],
                              "toolUseId": answer["toolUseId"], "status": answer["status"], "replayed": replayed}}


class SelectCloudResource:
    """The selector tool (see the module docstring)."""

    name = NAME

    def __init__(self, store: SelectionStore, environ: Mapping[str, str] | None = None,
                 query: CloudQuery | None = None, owners: TurnOwners | None = None) -> None:
        self.store = store
        self._env = environ
        self.query = query
        self.owners = owners if owners is not None else TurnOwners()

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
        source = _source(profile, tool_input.get("source"))
        if isinstance(source, str):
            return ToolOutcome(error=source)
        waiting = self.store.pending_in(context.context_id) if context.context_id else None
        if waiting is not None:
            return ToolOutcome(error=answers.PREFIX + "input already pending")
        tool_use_id = context.tool_use_id
        input_id = f"resource-{uuid.uuid4().hex}"
        selector = {"id": profile.id, "associationProperty": profile.association_property,
                    "outputKind": profile.output_kind, "associationPropertyMetadata": dict(extra), "source": source,
                    "profileHash": PROFILE_HASH, "valueCheck": "pattern"}
        if self.query is not None and profile.source is None:  # a derived value is checked by its pattern
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
        record = {"inputId": input_id, "taskId": context.task_id, "contextId": context.context_id,
                  "toolUseId": tool_use_id, "state": "pending", "selector": selector, "prompt": question.strip(),
                  "tool": NAME}
        owner = self.owners.of(context.task_id)
        if owner is not None:
            record["ownerRef"] = owner
        record["payloadDigest"] = payload_digest(record)
        try:  # durable (and backed up) before the question is published
            self.store.write(record, critical=True)
        except BackupFailed as exc:
            logger.warning("Selection %s not asked: its backup failed (%s)", input_id, exc)
            return ToolOutcome(error=f"the selection could not be backed up ({exc}); the question was not asked")
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
        reason = "checkpoint is unreadable"
        try:
            record = self.store.read(input_id)
        except Unreadable as exc:
            record, reason = None, str(exc)
        except Exception:
            record = None
        if record is None:
            return Resumed(events=(TurnFailed(answers.PREFIX + reason, retryable=True),), end_turn=True)
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
