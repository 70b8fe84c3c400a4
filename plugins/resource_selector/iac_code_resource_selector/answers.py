"""Reading an answer (``metadata.iac_code.inputResponse``) and checking it against its checkpoint (§9).

Every refusal is ``resource_selection_resume_invalid: <reason>`` with the digest's reasons.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from iac_code_resource_selector.owners import DIFFERENT_OWNER
from iac_code_resource_selector.profiles import BY_ID, PROFILE_HASH, canonical
from iac_code_resource_selector.store import INPUT_ID, SelectionStore, Unreadable

KIND = "cloud_resource_selection"
PREFIX = "resource_selection_resume_invalid: "
MAX_TEXT = 1024
STATUSES = ("selected", "canceled")


class Invalid(ValueError):
    """A refused answer; ``str()`` is the reason (without the prefix)."""


def is_selection(metadata: Mapping[str, Any]) -> bool:
    """Whether the message's ``metadata.iac_code`` carries a resource-selection answer."""
    response = metadata.get("inputResponse")
    return isinstance(response, Mapping) and response.get("kind") == KIND


def _text(response: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = response.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise Invalid(f"{key} is invalid")
    return value


def read_answer(response: Any) -> dict[str, Any]:
    """The answer's fields, checked for shape only (``Invalid`` with the reason)."""
    if not isinstance(response, Mapping):
        raise Invalid("inputResponse is invalid")
    version = response.get("schemaVersion")
    if version != 1 or isinstance(version, bool):
        raise Invalid("unsupported schema version")
    status = response.get("status")
    if status not in STATUSES:
        raise Invalid("status is invalid")
    answer: dict[str, Any] = {"status": status}
    for key in ("requestTaskId", "contextId", "inputId", "toolUseId"):
        answer[key] = _text(response, key)
    if not INPUT_ID.fullmatch(answer["inputId"]):
        raise Invalid("inputId is invalid")
    if status == "selected":
        answer["selectorId"] = _text(response, "selectorId")
        answer["value"] = _text(response, "value")
        label = _text(response, "label", required=False)
        if label is not None:
            answer["label"] = label
        if "source" in response:
            source = response["source"]
            if not isinstance(source, Mapping) or not all(isinstance(v, str) and 0 < len(v) <= MAX_TEXT
                                                          for v in source.values()):
                raise Invalid("source is invalid")
            answer["source"] = dict(source)
    else:
        selector = _text(response, "selectorId", required=False)
        if selector is not None:
            answer["selectorId"] = selector
        if "optionsEmpty" in response:
            if not isinstance(response["optionsEmpty"], bool):
                raise Invalid("optionsEmpty is invalid")
            answer["optionsEmpty"] = response["optionsEmpty"]
    return answer


def digest(answer: Mapping[str, Any]) -> str:
    """What identifies an answer: the same answer again is a replay, another one conflicts."""
    return "sha256:" + hashlib.sha256(canonical(dict(answer))).hexdigest()


def check(store: SelectionStore, task_id: str, context_id: str, response: Any,
          owner: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answer and its checkpoint, when the answer may be taken (first time or replay); ``Invalid`` else.

    ``task_id``/``context_id`` are the message's (the task it is sent on, that task's context); ``owner`` the
    caller's owner digest (:func:`~iac_code_resource_selector.owners.owner_ref`): an answer to a question another
    owner's turn asked is refused with ``Task belongs to a different owner`` (no prefix: the spec's own text).
    """
    answer = read_answer(response)
    if owner is not None:
        try:
            asked = store.read(answer["inputId"])
        except Unreadable:
            asked = None
        if asked is not None and asked.get("ownerRef") not in (None, owner):
            raise Invalid(DIFFERENT_OWNER)
    if not task_id or task_id != answer["requestTaskId"]:
        raise Invalid("correlation mismatch")
    if context_id and context_id != answer["contextId"]:
        raise Invalid("task context mismatch")
    try:
        record = store.read(answer["inputId"])
    except Unreadable as exc:
        raise Invalid(str(exc)) from None
    if record is None:
        raise Invalid("pending input not found")
    if record["taskId"] != answer["requestTaskId"] or record["toolUseId"] != answer["toolUseId"]:
        raise Invalid("correlation mismatch")
    if record["contextId"] != answer["contextId"]:
        raise Invalid("task context changed")
    if record["state"] == "abandoned":
        raise Invalid("pending input is unavailable")
    selector = record["selector"]
    if "selectorId" in answer and answer["selectorId"] != selector.get("id"):
        raise Invalid("selector mismatch")
    profile = BY_ID.get(str(selector.get("id")))
    if (profile is None or selector.get("profileHash") != PROFILE_HASH
            or selector.get("outputKind") != profile.output_kind
            or (selector.get("source") or {}).get("selector_id") != profile.source):
        raise Invalid("selector profile mismatch")
    if answer["status"] == "selected":
        source = selector.get("source")
        if answer.get("source") != source if source is not None else "source" in answer:
            raise Invalid("source mismatch")
        if not profile.valid(answer["value"], selector.get("associationPropertyMetadata")):
            raise Invalid("selector value is invalid")
    if record["state"] in ("claimed", "resolved") and record.get("answerDigest") != digest(answer):
        raise Invalid("answer conflicts with prior answer")
    return answer, record
