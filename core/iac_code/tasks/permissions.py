"""Tool permissions: rules, auto-approval, the interactive envelope, answers, audit.

A runtime asks with a :class:`~iac_code.agents.runtime.PermissionRequest`. The
:class:`PermissionPolicy` decides from configuration (deny rules first, then
exact per-API allows, then blanket allows and auto-approval, which never release
a protected Alibaba Cloud write API); otherwise the turn pauses in
INPUT_REQUIRED with a permission envelope (and a question people read in its
status message, :func:`pause_text`) and the :class:`PermissionBroker` waits for
the caller's answer: the structured answer (a data part, or the same JSON as an
``IAC_CODE_PERMISSION:`` text part, :func:`read_answer`), or a text one (:func:`text_decision`).
Every decision is appended to the audit log; an allow whose record cannot be
written becomes a deny.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError
from google.protobuf.struct_pb2 import Struct, Value

from iac_code.language import messages as m
from iac_code.language.i18n import Translator, translator
from iac_code.agents.runtime import PermissionRequest
from iac_code.base.storage import private_dir
from iac_code.agents.tool_metadata import input_shape, sanitise_text
from iac_code.tasks.permission_display import TARGET_SEPARATOR, display_parameters, is_mcp_tool, target_parts
from iac_code.tasks.permission_display import operation as describe_operation

logger = logging.getLogger(__name__)

ALLOW_ONCE = "allow_once"
ACK_KIND = "permission_ack"
DENY = "deny"
ANSWER_FIELDS = frozenset({"schemaVersion", "kind", "requestTaskId", "inputId", "toolUseId", "decision"})
ALIYUN_API = "aliyun_api"
ROS_DEPLOY = "ros_deploy"  # a pipeline's stack creation: a cloud change like a write through aliyun_api
ROS_DELETE_STACK = "ros_delete_stack"  # a pipeline's cleanup removing the stack it deployed
STACK_TOOLS = frozenset({ROS_DEPLOY, ROS_DELETE_STACK})  # protected cloud changes allowed only by a rule naming them
PERMISSION_NOT_ACTIVE = "permission_resume_invalid: pending permission is not active."
_EXACT_API_RULE = re.compile(r"aliyun_api\((?P<product>[A-Za-z0-9_-]+):(?P<action>[A-Za-z0-9_]+)\)")
READ_TOOLS = frozenset({"read_file", "glob", "grep", "list_files"})
FILE_TOOLS = frozenset({"write_file", "edit_file"})
STACK_TITLES = {"CreateStack": m.TITLE_CREATE_STACK, "ContinueCreateStack": m.TITLE_CONTINUE_CREATE_STACK,
                "UpdateStack": m.TITLE_UPDATE_STACK, "DeleteStack": m.TITLE_DELETE_STACK}
TARGET_KEYS = ("file_path", "filePath", "path", "region_id", "regionId", "resource_id", "resourceId")


@dataclass(frozen=True)
class Decision:
    allow: bool
    source: str  # "rule", "auto-approve", "interactive", "timeout"


def is_protected(request: PermissionRequest) -> bool:
    """A cloud API call not proven read-only, a deploy or a stack deletion: only an exact rule may allow it (an exact
    per-API rule for ``aliyun_api``, the tool's own name for ``ros_deploy`` and ``ros_delete_stack``)."""
    return (request.tool_name == ALIYUN_API or request.tool_name in STACK_TOOLS) and request.is_read_only is not True


def _api_of(request: PermissionRequest) -> tuple[str, str]:
    operation = request.operation
    return str(operation.get("product", "")).lower(), str(operation.get("action", ""))


class PermissionPolicy:
    """Decides without asking when configuration says how; ``None`` means ask."""

    def __init__(self, allow: list[str], deny: list[str], auto_approve: bool) -> None:
        self._allow = [r.strip() for r in allow if r.strip()]
        self._deny = [r.strip() for r in deny if r.strip()]
        self._auto_approve = auto_approve

    def decide(self, request: PermissionRequest) -> Decision | None:
        if any(self._matches(rule, request) for rule in self._deny):
            return Decision(False, "rule")
        exact = [r for r in self._allow if _EXACT_API_RULE.fullmatch(r) or r in STACK_TOOLS]
        if any(self._matches(rule, request) for rule in exact):
            return Decision(True, "rule")
        if is_protected(request):
            return None if not self._auto_approve else Decision(False, "auto-approve")
        if any(self._matches(rule, request) for rule in self._allow if rule not in exact):
            return Decision(True, "rule")
        if self._auto_approve:
            return Decision(True, "auto-approve")
        return None

    @staticmethod
    def _matches(rule: str, request: PermissionRequest) -> bool:
        api = _EXACT_API_RULE.fullmatch(rule)
        if api is not None:
            product, action = _api_of(request)
            return request.tool_name == ALIYUN_API and api["product"].lower() == product and api["action"] == action
        return fnmatch.fnmatchcase(request.tool_name, rule)


class AuditLog:
    """Append-only JSON-lines record of permission decisions (``0600``, fsynced)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def append(self, record: Mapping[str, Any]) -> bool:
        """Write one record; ``False`` when it could not be made durable."""
        line = (json.dumps(dict(record), separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")

        def write() -> None:
            private_dir(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

        try:
            await asyncio.to_thread(write)
            return True
        except OSError as exc:
            logger.error("Permission audit record could not be written: %s", exc.strerror or type(exc).__name__)
            return False


# --------------------------------------------------------------------------- interactive answers


@dataclass
class _Pending:
    task_id: str
    context_id: str
    input_id: str
    tool_use_id: str
    future: asyncio.Future[str]


@dataclass(frozen=True)
class Answer:
    task_id: str
    context_id: str
    input_id: str
    tool_use_id: str
    decision: str


class PermissionBroker:
    """Pending interactive permissions, keyed by task id and input id."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], _Pending] = {}

    def register(self, task_id: str, context_id: str, tool_use_id: str,
                 input_id: str = "") -> tuple[str, asyncio.Future[str]]:
        """Wait for the answer naming ``input_id`` (a new ``permission-<32 hex>`` when empty or already waiting)."""
        if not input_id or (task_id, input_id) in self._pending:
            input_id = f"permission-{uuid.uuid4().hex}"
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[(task_id, input_id)] = _Pending(task_id, context_id, input_id, tool_use_id, future)
        return input_id, future

    def discard(self, task_id: str, input_id: str) -> None:
        self._pending.pop((task_id, input_id), None)

    def waiting(self) -> int:
        """How many permission requests await an answer (the ``permission_waits`` gauge)."""
        return len(self._pending)

    def waits_for(self, task_id: str, input_id: str) -> bool:
        """Whether a live turn here waits for the answer naming ``input_id`` of ``task_id``."""
        pending = self._pending.get((task_id, input_id))
        return pending is not None and not pending.future.done()

    def pending_for(self, task_id: str) -> bool:
        return any(key[0] == task_id for key in self._pending)

    def waiting_answer(self, task_id: str) -> Answer | None:
        """The pending request of ``task_id`` as an answer to complete with a decision, if any."""
        for pending in self._pending.values():
            if pending.task_id == task_id and not pending.future.done():
                return Answer(pending.task_id, pending.context_id, pending.input_id, pending.tool_use_id, "")
        return None

    def waiting_in_context(self, context_id: str) -> list[str]:
        """The tasks of ``context_id`` waiting for a permission answer."""
        return [p.task_id for p in self._pending.values() if p.context_id == context_id and not p.future.done()]

    def resolve(self, answer: Answer) -> None:
        """Deliver a validated answer; errors leave the pending request untouched."""
        pending = self._pending.get((answer.task_id, answer.input_id))
        if pending is None:
            if self.pending_for(answer.task_id):
                raise InvalidParamsError(message="input_response_mismatch: permission correlation does not match.")
            raise InvalidParamsError(message=PERMISSION_NOT_ACTIVE)
        if (pending.context_id, pending.tool_use_id) != (answer.context_id, answer.tool_use_id):
            raise InvalidParamsError(message="input_response_mismatch: permission correlation does not match.")
        if pending.future.done():
            raise InvalidParamsError(message="permission_resume_invalid: permission wait point is unavailable.")
        del self._pending[(answer.task_id, answer.input_id)]
        pending.future.set_result(answer.decision)


TEXT_PREFIX = "IAC_CODE_PERMISSION:"
TEXT_ANSWER_FIELDS = ANSWER_FIELDS | {"contextId"}
ONE_TRANSPORT = m.ANSWER_ONE_TRANSPORT  # these three: localised by the request handler (preferredLanguage)
ONE_TEXT_PART = m.ANSWER_ONE_TEXT_PART
CONTEXT_MISMATCH = m.ANSWER_CONTEXT_MISMATCH


def permission_answer_part(message: Message, raw_message: Any) -> list[Any] | None:
    """The message's parts as JSON if any is a permission answer data part, else ``None``."""
    raw_parts = raw_message.get("parts") if isinstance(raw_message, dict) else None
    if not isinstance(raw_parts, list):
        return None
    for part in raw_parts:
        if (isinstance(part, dict) and part.get("mediaType") == "application/json"
                and isinstance(part.get("data"), dict) and part["data"].get("kind") == "permission"):
            return raw_parts
    return None


def text_answer_payload(text: str) -> dict[str, Any] | None:
    """The JSON object of an ``IAC_CODE_PERMISSION:{json}`` text, when it is one with ``kind: permission``.

    Anything else (no prefix, not JSON, not an object, another kind) is ``None``: ordinary chat.
    """
    if not text.startswith(TEXT_PREFIX):
        return None
    try:
        payload = json.loads(text[len(TEXT_PREFIX):])
    except ValueError:
        return None
    return payload if isinstance(payload, dict) and payload.get("kind") == "permission" else None


def read_answer(message: Message, raw_message: Any) -> Answer | None:
    """The validated permission answer a message carries, in either form, or ``None`` for an ordinary message.

    The forms: one ``application/json`` data part (input-and-permissions §3), or one text part
    ``IAC_CODE_PERMISSION:{json}`` for text-only gateways (its payload adds ``contextId``; a message
    without ``taskId``/``contextId`` takes them from the payload, written into ``message``). Both forms
    in one message are refused. Every error is -32602 with the protocol's text.
    """
    data_parts = permission_answer_part(message, raw_message)
    payloads = [payload for part in message.parts if part.WhichOneof("content") == "text"
                for payload in (text_answer_payload(part.text),) if payload is not None]
    if data_parts is not None and payloads:
        raise InvalidParamsError(message=ONE_TRANSPORT)
    if data_parts is not None:
        return validate_answer(message, data_parts)
    if payloads:
        return validate_text_answer(message, payloads)
    return None


def _check_payload(data: Mapping[str, Any], fields: frozenset[str]) -> None:
    """Steps 3-5 of the answer checks: exact fields, ``schemaVersion`` 1, a known decision."""
    if set(data) != fields:
        raise InvalidParamsError(message="Permission response payload fields do not match schemaVersion 1.")
    version = data["schemaVersion"]
    if isinstance(version, bool) or not isinstance(version, int | float) or version != 1:
        raise InvalidParamsError(message="Permission response schemaVersion must be 1.")
    if data["decision"] not in (ALLOW_ONCE, DENY):
        raise InvalidParamsError(message="Permission decision must be allow_once or deny.")


def validate_answer(message: Message, raw_parts: list[Any]) -> Answer:
    """Check a permission answer's shape (all errors are -32602 with the documented texts)."""
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(message="Permission responses must use ROLE_USER.")
    if len(raw_parts) != 1:
        raise InvalidParamsError(message="Permission responses must contain exactly one application/json DataPart.")
    data = raw_parts[0]["data"]
    _check_payload(data, ANSWER_FIELDS)
    fields = (message.task_id, message.context_id, data["requestTaskId"], data["inputId"], data["toolUseId"])
    if not all(isinstance(f, str) and f for f in fields):
        raise InvalidParamsError(message="Permission response correlation fields are required.")
    if message.task_id != data["requestTaskId"]:
        raise InvalidParamsError(message="Permission response taskId does not match requestTaskId.")
    return Answer(message.task_id, message.context_id, data["inputId"], data["toolUseId"], data["decision"])


def validate_text_answer(message: Message, payloads: list[dict[str, Any]]) -> Answer:
    """Check an ``IAC_CODE_PERMISSION:`` text answer: the data-part checks, one text part, and its ``contextId``.

    A message without ``taskId`` (``contextId``) answers the payload's ``requestTaskId`` (``contextId``).
    """
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(message="Permission responses must use ROLE_USER.")
    if len(message.parts) != 1 or len(payloads) != 1:
        raise InvalidParamsError(message=ONE_TEXT_PART)
    data = payloads[0]
    _check_payload(data, TEXT_ANSWER_FIELDS)
    task_id = message.task_id or data["requestTaskId"]
    context_id = message.context_id or data["contextId"]
    fields = (task_id, context_id, data["requestTaskId"], data["contextId"], data["inputId"], data["toolUseId"])
    if not all(isinstance(f, str) and f for f in fields):
        raise InvalidParamsError(message="Permission response correlation fields are required.")
    if task_id != data["requestTaskId"]:
        raise InvalidParamsError(message="Permission response taskId does not match requestTaskId.")
    if context_id != data["contextId"]:
        raise InvalidParamsError(message=CONTEXT_MISMATCH)
    message.task_id, message.context_id = task_id, context_id
    return Answer(task_id, context_id, data["inputId"], data["toolUseId"], data["decision"])


def ack_message(*, task_id: str, context_id: str, input_id: str, tool_use_id: str, decision: str) -> Message:
    """The ``permission_ack`` DataPart message for an accepted answer (``decision`` is the effective one)."""
    data = Struct()
    data.update({"schemaVersion": 1, "kind": ACK_KIND, "inputId": input_id,
                 "toolUseId": tool_use_id, "decision": decision, "accepted": True})
    return Message(message_id=f"permission-ack-{uuid.uuid4().hex}", task_id=task_id,
                   context_id=context_id, role=Role.ROLE_AGENT,
                   parts=[Part(data=Value(struct_value=data), media_type="application/json")])


def acknowledgement(input_id: str) -> Callable[[Any, Task], Message | None]:
    """A turn-waiter pick: the ``permission_ack`` message of ``input_id`` once the turn publishes it."""

    def pick(event: Any, task: Task) -> Message | None:
        if not isinstance(event, TaskStatusUpdateEvent) or not event.status.HasField("message"):
            return None
        for part in event.status.message.parts:
            fields = part.data.struct_value.fields
            kind = fields.get("kind")
            given = fields.get("inputId")
            if kind is not None and kind.string_value == ACK_KIND and given is not None \
                    and given.string_value == input_id:
                ack = Message()
                ack.CopyFrom(event.status.message)
                return ack
        return None

    return pick


# --------------------------------------------------------------------------- the envelope


def _cut(text: str, limit: int = 500) -> str:
    return sanitise_text(text)[:limit]


def _display(request: PermissionRequest, t: Translator) -> dict[str, str]:
    product, action = _api_of(request)
    tool = request.tool_name
    if product or action:
        calls = (describe_operation(request) or {}).get("apiCalls") or ()
        changes = [str(c.get("action", "")) for c in calls
                   if isinstance(c, Mapping) and c.get("effect") == "change"]
        if changes:  # a §6 operation (``action: create``): the API call it changes with names it
            action = changes[-1]
        api = " ".join(p for p in (product, action) if p)
        stack_title = STACK_TITLES.get(action) if product == "ros" else None
        if stack_title is not None:
            title = t(stack_title, product=product.upper())
        elif request.is_read_only:
            title = t(m.TITLE_CLOUD_READ, operation=api)
        else:
            title = t(m.TITLE_CLOUD_RUN, operation=api)
        target = TARGET_SEPARATOR.join(target_parts(request) or [api])  # resources · region
        effect = "read" if request.is_read_only else "cloud_change" if request.is_read_only is False else "unknown"
        return {"title": title, "purpose": t(m.PURPOSE_CLOUD, operation=api), "target": target, "effect": effect}
    explicit = next((str(request.input[k]) for k in TARGET_KEYS if isinstance(request.input.get(k), str)), None)
    specific = target_parts(request)
    if specific:  # file path; path · pattern; URL; server:tool for MCP
        explicit = TARGET_SEPARATOR.join(specific)
    if tool == "bash":
        command = str(request.input.get("command", ""))[:240]
        target = t(m.TARGET_WORKSPACE)
        if command:
            target = t(m.TARGET_COMMAND, target=target, command=command)
        if request.is_read_only:
            return {"title": t(m.TITLE_SHELL_READ), "purpose": t(m.PURPOSE_READ), "target": target, "effect": "read"}
        return {"title": t(m.TITLE_SHELL_RUN), "purpose": t(m.PURPOSE_SHELL), "target": target,
                "effect": "local_execution" if request.is_read_only is False else "unknown"}
    if tool in FILE_TOOLS:
        return {"title": t(m.TITLE_FILE_CHANGE), "purpose": t(m.PURPOSE_FILE),
                "target": explicit or t(m.TARGET_WORKSPACE_FILE), "effect": "file_change"}
    if is_mcp_tool(tool) and request.is_read_only is not True:  # a tool of an MCP server: outside iac-code
        return {"title": t(m.TITLE_RUN_TOOL, tool=tool), "purpose": t(m.PURPOSE_OTHER),
                "target": explicit or t(m.TARGET_WORKSPACE_OR_ACCOUNT), "effect": "external_tool"}
    if tool in READ_TOOLS or request.is_read_only:
        return {"title": t(m.TITLE_READ_TOOL, tool=tool), "purpose": t(m.PURPOSE_READ),
                "target": explicit or t(m.TARGET_WORKSPACE), "effect": "read"}
    return {"title": t(m.TITLE_RUN_TOOL, tool=tool), "purpose": t(m.PURPOSE_OTHER),
            "target": explicit or t(m.TARGET_WORKSPACE_OR_ACCOUNT),
            "effect": "local_or_remote_change" if request.is_read_only is False else "unknown"}


def _deployment(request: PermissionRequest, t: Translator, language: str) -> tuple[str | None, dict[str, Any] | None]:
    summary = request.operation.get("deploymentSummary")
    if not isinstance(summary, Mapping):
        return None, None
    clean: dict[str, Any] = {k: _cut(str(summary[k]), 300) for k in
                             ("candidateName", "action", "region", "stackName", "template", "totalMonthlyCost")
                             if isinstance(summary.get(k), str)}
    resources = summary.get("resources")
    if isinstance(resources, list):
        clean["resources"] = [{k: _cut(str(r[k]), 200) for k in ("name", "spec", "monthlyCost") if k in r}
                              for r in resources[:12] if isinstance(r, Mapping)]
    pieces = [t(m.DEPLOY_SUMMARY)]
    for key, message in (("candidateName", m.DEPLOY_PLAN), ("region", m.DEPLOY_REGION),
                         ("stackName", m.DEPLOY_STACK), ("template", m.DEPLOY_TEMPLATE),
                         ("totalMonthlyCost", m.DEPLOY_COST)):
        if key in clean:
            pieces.append(t(message, value=clean[key]))
    if clean.get("resources"):
        costs = "; ".join(" / ".join(str(v) for v in r.values()) for r in clean["resources"])
        pieces.append(t(m.DEPLOY_RESOURCES, value=costs))
    separator = "；" if language == "zh" else "; "
    return separator.join(pieces)[:1200], clean


def envelope(request: PermissionRequest, *, task_id: str, context_id: str, input_id: str,
             language: str) -> dict[str, Any]:
    """The ``metadata.iac_code.input`` permission envelope (schemaVersion 1), localised.

    ``operation`` and ``displayParameters`` (:mod:`iac_code.tasks.permission_display`) are added when known.
    """
    t = translator(language)
    display = {k: (_cut(v, 80) if k == "effect" else _cut(v)) for k, v in _display(request, t).items()}
    display["title"] = display["title"] or t(m.TITLE_FALLBACK)
    deployment_text, deployment = _deployment(request, t, t.language)
    if deployment_text is None:
        safe_input = {k: (sanitise_text(str(v)) if k in ("command", "cmd", "path", "file_path") else input_shape(v))
                      for k, v in request.input.items()}
        safe_summary = f"{request.tool_name}: " + json.dumps(safe_input, separators=(",", ":"), ensure_ascii=False)
    else:
        safe_summary = deployment_text
    result: dict[str, Any] = {
        "schemaVersion": 1, "kind": "permission", "requestTaskId": task_id, "contextId": context_id,
        "inputId": input_id, "toolUseId": request.tool_use_id, "toolName": request.tool_name,
        **display, "isReadOnly": request.is_read_only is True,
        "prompt": _question(request, display, t),
        "safeSummary": safe_summary[:1200],
        "options": [{"id": ALLOW_ONCE, "label": t(m.OPTION_ALLOW_ONCE)}, {"id": DENY, "label": t(m.OPTION_DENY)}],
        "language": t.language, "required": True,
    }
    if deployment is not None:
        result["deploymentSummary"] = deployment
    described = describe_operation(request)
    if described is not None:
        result["operation"] = described
    shown = display_parameters(request)
    if shown is not None:
        result["displayParameters"] = shown
    return result


def _file_target(request: PermissionRequest) -> str | None:
    """The file a workspace write names (a sanitised, cut path), else ``None``."""
    if request.tool_name not in FILE_TOOLS or request.operation.get("product") or request.operation.get("action"):
        return None
    return next((_cut(str(request.input[k]), 240) for k in TARGET_KEYS
                 if isinstance(request.input.get(k), str) and request.input[k].strip()), None)


def _question(request: PermissionRequest, display: Mapping[str, str], t: Translator) -> str:
    """The envelope's ``prompt``: what the tool wants to do, as a question."""
    file = _file_target(request)
    if file is not None:
        return t(m.PROMPT_WRITE_FILE, file=file)
    if display["effect"] == "file_change":
        return t(m.PROMPT_WRITE_ANY_FILE)
    return _cut(t(m.PERMISSION_PROMPT, title=display["title"], target=display["target"]))


def pause_text(request: PermissionRequest, input_envelope: Mapping[str, Any]) -> str:
    """The human-readable text of a permission pause (the INPUT_REQUIRED ``status.message``).

    What the tool wants to do and its target (the question), why, the deployment summary
    when there is one, and how to answer in text, in the envelope's language.
    """
    t = translator(str(input_envelope.get("language", "en")))
    lines = [str(input_envelope["prompt"]), str(input_envelope["purpose"])]
    if "deploymentSummary" in input_envelope:
        lines.append(str(input_envelope["safeSummary"]))
    file = _file_target(request)
    lines.append(t(m.ANSWER_HINT_WRITE_FILE, file=file) if file else t(m.ANSWER_HINT))
    return "\n".join(line for line in lines if line)


# --------------------------------------------------------------------------- text answers

# The words a person may reply instead of the structured answer: those the pause text shows in
# each catalog language, and the common yes/no forms of the languages the project's users write.
# A text answer never grants more than once: every "allow" form means ``allow_once``.
ALLOW_WORDS = frozenset({
    "allow", "allow once", "allow_once", "yes", "approve",
    "允许", "允许一次", "允许本次", "是", "是的", "好", "好的", "可以", "同意",
    "erlauben", "einmal erlauben", "ja", "zulassen", "genehmigen", "zustimmen",
    "permitir", "permitir uma vez", "permitir una vez", "sim", "sí", "autorizar", "aprovar",
    "autoriser", "autoriser une fois", "oui",
    "許可", "今回のみ許可", "はい",
})
DENY_WORDS = frozenset({
    "deny", "no", "reject",
    "拒绝", "否", "不", "不要", "不行", "不可以", "不允许",
    "ablehnen", "verweigern", "nein",
    "negar", "recusar", "rejeitar", "não", "nao", "denegar",
    "refuser", "non",
    "拒否", "いいえ",
})
_CJK_GAP = re.compile(r"(?<=[\u3040-\u30ff\u4e00-\u9fff]) (?=[\u3040-\u30ff\u4e00-\u9fff])")
_PUNCTUATION = re.compile(r"[\s`'\"“”‘’«»„.,;:!?¡¿。，、；：！？…()\[\]（）【】「」『』-]+")


def text_decision(text: str) -> str | None:
    """``allow_once`` or ``deny`` for a text answer (case, spaces and punctuation ignored), else ``None``."""
    words = _PUNCTUATION.sub(" ", text.casefold()).split()
    phrase = " ".join(words)
    forms = {phrase, phrase.replace(" ", "_"), _CJK_GAP.sub("", phrase)}  # allow_once; 允许 一次
    if forms & ALLOW_WORDS:
        return ALLOW_ONCE
    if forms & DENY_WORDS:
        return DENY
    return None


def message_text(message: Message) -> str | None:
    """The text of a message made only of text parts (``None`` when any part is something else)."""
    if not message.parts or any(part.WhichOneof("content") != "text" for part in message.parts):
        return None
    return "".join(part.text for part in message.parts)


def awaited_answer(task: Task) -> Answer | None:
    """The answer a stored task paused for permission waits for (no decision yet), from its envelope.

    For a turn paused on another node (shared state), where this node's broker knows nothing of it.
    """
    iac_code = task.metadata.fields.get("iac_code")
    fields = iac_code.struct_value.fields if iac_code is not None else {}
    permission = fields["permission"].struct_value.fields if "permission" in fields else {}
    pending = permission.get("pending")
    question = fields["input"].struct_value.fields if "input" in fields else {}
    if pending is None or not pending.bool_value or "inputId" not in question or "toolUseId" not in question:
        return None
    return Answer(task.id, task.context_id, question["inputId"].string_value, question["toolUseId"].string_value, "")


def pending_error(task_id: str, language: str | None) -> InvalidParamsError:
    """The -32602 for a message a paused task cannot take: how to answer, and which task waits."""
    return InvalidParamsError(message=translator(language)(m.PERMISSION_PENDING, task=task_id))


def audit_record(request: PermissionRequest, *, task_id: str, context_id: str, owner: str, decision: Decision,
                 input_id: str = "") -> dict[str, Any]:
    product, action = _api_of(request)
    return {"time": time.time(), "taskId": task_id, "contextId": context_id, "owner": owner,
            "toolName": request.tool_name, "toolUseId": request.tool_use_id, "inputId": input_id,
            "product": product, "action": action, "readOnly": request.is_read_only,
            "decision": ALLOW_ONCE if decision.allow else DENY, "source": decision.source}
