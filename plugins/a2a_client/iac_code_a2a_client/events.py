"""Reading A2A stream events (``StreamResponse`` as proto JSON dicts) for display.

a2a-sdk's client yields ``StreamResponse`` protos; the client converts each to its JSON
form once (:func:`as_json`) so the terminal view, ``--output json`` and the permission
logic all read the same dicts, whatever binding carried them.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})
STOP_STATES = TERMINAL_STATES | {"input-required", "auth-required"}


def as_json(message: Message) -> dict[str, Any]:
    """A proto as the A2A JSON the wire carries (camelCase, enums by name, integers as integers).

    Metadata and data parts are protobuf ``Struct`` values, which hold every number as a
    double; A2A has no float fields of its own, so an integral number is an integer again.
    """
    return _integers(MessageToDict(message, preserving_proto_field_name=False))


def _integers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return value


def friendly_state(state: str) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``."""
    text = str(state or "").strip().lower()
    text = text.removeprefix("task_state_")
    return text.replace("_", "-")


def body(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The event's kind (``task``, ``statusUpdate``, ``artifactUpdate``, ``message``) and its object."""
    for kind in ("statusUpdate", "artifactUpdate", "task", "message"):
        if isinstance(event.get(kind), dict):
            return kind, event[kind]
    return "", {}


def task_id(event: dict[str, Any]) -> str:
    kind, obj = body(event)
    if kind == "task":
        return str(obj.get("id", ""))
    return str(obj.get("taskId", ""))


def context_id(event: dict[str, Any]) -> str:
    _, obj = body(event)
    return str(obj.get("contextId", ""))


def state(event: dict[str, Any]) -> str:
    kind, obj = body(event)
    if kind in ("task", "statusUpdate"):
        return friendly_state(obj.get("status", {}).get("state", ""))
    return ""


def iac_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    value = meta.get("iac_code") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def status_text(obj: dict[str, Any]) -> str:
    """The text of a status message; its text parts one after the other, a space apart (a failure and its reason)."""
    message = obj.get("status", {}).get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return ""
    return " ".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"])


def permission_request(event_or_task: dict[str, Any]) -> dict[str, Any] | None:
    """The pending permission envelope of a status update or a task (``metadata.iac_code.input``)."""
    _, obj = body(event_or_task) if "id" not in event_or_task else ("task", event_or_task)
    envelope = iac_metadata(obj).get("input")
    if isinstance(envelope, dict) and envelope.get("kind") == "permission":
        return envelope
    return None


def suspended_permission(obj: dict[str, Any]) -> bool:
    """Whether a task (or status update) rests on a suspended permission question: its live turn ended and
    only an answer resumes it (``metadata.iac_code.permissionWait.status == "suspended"``)."""
    wait = iac_metadata(obj).get("permissionWait")
    return isinstance(wait, dict) and wait.get("status") == "suspended" \
        and friendly_state(obj.get("status", {}).get("state", "")) == "input-required"


def task_answer(task: dict[str, Any]) -> str:
    """The text a turn answered: the status message, else the last agent text message of the history.

    Only the last one: a streamed turn's history holds its text deltas and then the whole answer.
    The status message of a task paused for permission is the question, not an answer.
    """
    text = status_text(task) if permission_request(task) is None else ""
    if text:
        return text
    for entry in reversed(task.get("history", []) or []):
        if entry.get("role") != "ROLE_AGENT":
            return ""
        piece = parts_text(entry.get("parts"))
        if piece:
            return piece
    return ""


def human_size(size: Any) -> str:
    try:
        n = float(size)
    except (TypeError, ValueError):
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


PIPELINE_QUESTION_KINDS = frozenset({"candidate_selection", "ask_user_question", "deployment_confirmation",
                                     "pipeline_pause_confirmation"})


def pipeline_events(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The pipeline events a status update carries, in order: ``metadata.iac_code.pipeline`` (one) or
    ``metadata.iac_code.pipelineBatch.events`` (a burst published together), docs/pipeline.md."""
    kind, obj = body(event)
    if kind not in ("statusUpdate", "task"):
        return []
    meta = iac_metadata(obj)
    found: list[dict[str, Any]] = []
    single = meta.get("pipeline")
    if isinstance(single, dict):
        found.append(single)
    batch = meta.get("pipelineBatch")
    if isinstance(batch, dict) and isinstance(batch.get("events"), list):
        found.extend(e for e in batch["events"] if isinstance(e, dict))
    return found


def pipeline_question(event: dict[str, Any]) -> dict[str, Any] | None:
    """The question a pipeline stopped on (the ``data`` of its ``input_required`` event), if this status
    update (or task) is input-required with one: ``candidate_selection``, ``ask_user_question``,
    ``deployment_confirmation`` or ``pipeline_pause_confirmation`` (an interrupt paused the run)."""
    if state(event) != "input-required":
        return None
    for pipeline_event in reversed(pipeline_events(event)):
        data = pipeline_event.get("data")
        if pipeline_event.get("eventType") == "input_required" and isinstance(data, dict) \
                and data.get("kind") in PIPELINE_QUESTION_KINDS:
            return data
    return None
