"""What a permission envelope says about the operation a tool call performs (since-0.13 §6).

Three projections of a :class:`~iac_code.agents.runtime.PermissionRequest`:

* :func:`operation`: ``{"product", "action", "region", "target", "apiCalls"}``, each part only
  when known, from the permission's audit metadata (``request.operation``), else the tool input;
  ``apiCalls`` from the tool's own declaration (``Permission(api_calls=...)``), else derived
  (``ros_deploy`` actions, the ROS template tools, ``{PRODUCT, action, effect}``).
* :func:`display_parameters`: ``{"format": "json", "value": ...}``, the parameters a person
  decides on, with their values (unlike the shape-only ``inputSummary``): secret-looking keys
  become ``{"redacted": true}``, strings are sanitised, and depth, fields and nodes are capped.
  Only for tools that change the cloud or act elsewhere; never for local file, shell, web,
  memory, task, agent, skill, doc, question, display or MCP-resource tools.
* :func:`target_parts`: the tool-specific parts of the envelope's ``target`` text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from iac_code.agents.runtime import PermissionRequest
from iac_code.agents.tool_metadata import FIELD_LIMIT, MAX_DEPTH, MAX_FIELDS, NODE_BUDGET, sanitise_text

ALIYUN_API = "aliyun_api"
ROS_DEPLOY = "ros_deploy"
FACT_LIMIT = 256  # characters of one operation fact (product, action, region, stack name or id)
TARGET_SEPARATOR = " · "

# ros_deploy's own actions and the ROS API calls each makes (it waits for the stack: GetStack, polled).
_POLL = {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}
ROS_DEPLOY_CALLS: dict[str, tuple[dict[str, str], ...]] = {
    "create": ({"product": "ROS", "action": "CreateStack", "effect": "change"}, _POLL),
    "continue_create": ({"product": "ROS", "action": "ContinueCreateStack", "effect": "change"}, _POLL),
    "wait": (_POLL,),
    "delete_and_create": ({"product": "ROS", "action": "DeleteStack", "effect": "change"},
                          {"product": "ROS", "action": "CreateStack", "effect": "change"}, _POLL),
}
# The read-only ROS API calls of the ROS template tools (``ros_*`` other than ros_deploy).
ROS_TEMPLATE_ACTIONS = ("ValidateTemplate", "GetTemplateParameterConstraints", "PreviewStack",
                        "GetTemplateEstimateCost")

# Tools whose calls never get displayParameters (their envelopes already say what they touch).
_NO_DISPLAY_NAMES = frozenset({
    "read_file", "write_file", "edit_file", "multi_edit", "notebook_edit", "glob", "grep", "list_files", "ls",
    "bash", "shell", "powershell", "fetch", "memory", "task", "agent", "skill", "doc", "docs", "display",
    "ask_user_question", "list_mcp_resources", "read_mcp_resource",
})
_NO_DISPLAY_PREFIXES = ("web_", "memory_", "task_", "todo_", "agent_", "skill_", "doc_", "docs_", "show_",
                        "display_")
FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file", "multi_edit", "notebook_edit"})
SEARCH_TOOLS = frozenset({"glob", "grep", "list_files", "ls"})

_SECRET_WORDS = ("accesskey", "apikey", "auth", "authorization", "cookie", "credential", "passphrase", "privatekey",
                 "pwd", "secret", "session", "signature", "ststoken", "token", "password", "passwd")
_NON_ALNUM = re.compile(r"[^a-z0-9]")


def is_secret_name(name: str) -> bool:
    """A secret-looking field name: lower-cased, without non-alphanumerics, it contains a secret word."""
    folded = _NON_ALNUM.sub("", name.lower())
    return any(word in folded for word in _SECRET_WORDS)


def is_mcp_tool(tool_name: str) -> bool:
    return tool_name.startswith("mcp__")


def shows_no_parameters(tool_name: str) -> bool:
    """Local file, shell, web, memory, task, agent, skill, doc, question, display and MCP-resource tools."""
    name = tool_name.lower()
    if name in _NO_DISPLAY_NAMES or name.startswith(_NO_DISPLAY_PREFIXES):
        return True
    return is_mcp_tool(name) and "resource" in name


def _fact(source: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = source.get(key)
        if isinstance(value, str) and value.strip():
            return sanitise_text(value.strip())[:FACT_LIMIT]
    return ""


def _params(request: PermissionRequest) -> Mapping[str, Any]:
    params = request.input.get("params")
    return params if isinstance(params, Mapping) else {}


def stack_of(request: PermissionRequest) -> tuple[str, str]:
    """The stack name and id a call names (audit metadata, else the input or its ``params``), ``""`` when unknown."""
    audit, params = request.operation, _params(request)
    name = (_fact(audit, "stackName") or _fact(request.input, "stack_name", "stackName", "StackName")
            or _fact(params, "StackName", "stackName", "stack_name"))
    stack_id = (_fact(audit, "stackId") or _fact(request.input, "stack_id", "stackId", "StackId")
                or _fact(params, "StackId", "stackId", "stack_id"))
    return name, stack_id


def region_of(request: PermissionRequest) -> str:
    return (_fact(request.operation, "region") or _fact(request.input, "region_id", "regionId", "region")
            or _fact(_params(request), "RegionId", "region_id", "regionId", "region"))


def _api_calls(request: PermissionRequest, product: str, action: str) -> list[dict[str, str]]:
    if request.api_calls:  # the tool's own declaration wins
        calls = []
        for call in request.api_calls:
            entry = {"product": sanitise_text(call.product)[:FACT_LIMIT],
                     "action": sanitise_text(call.action)[:FACT_LIMIT],
                     "effect": "read" if call.effect == "read" else "change"}
            if call.repeat:
                entry["repeat"] = sanitise_text(call.repeat)[:FACT_LIMIT]
            calls.append(entry)
        return calls
    tool = request.tool_name
    if tool == ROS_DEPLOY:
        return [dict(c) for c in ROS_DEPLOY_CALLS.get(action, ())]
    if tool.startswith("ros_"):
        chosen = [a for a in ROS_TEMPLATE_ACTIONS if a == action] or list(ROS_TEMPLATE_ACTIONS)
        return [{"product": "ROS", "action": a, "effect": "read"} for a in chosen]
    if product and action:
        return [{"product": product.upper(), "action": action,
                 "effect": "read" if request.is_read_only is True else "change"}]
    return []


def operation(request: PermissionRequest) -> dict[str, Any] | None:
    """The envelope's ``operation``, or ``None`` when no fact about it is known."""
    audit, tool_input = request.operation, request.input
    product = _fact(audit, "product") or _fact(tool_input, "product")
    if not product and request.tool_name.startswith("ros_"):
        product = "ros"
    if request.tool_name == ROS_DEPLOY:  # its own actions: create, continue_create, wait, delete_and_create
        action = _fact(tool_input, "action")
        action = action if action in ROS_DEPLOY_CALLS else ""
    else:
        action = _fact(audit, "action") or _fact(tool_input, "action")
    result: dict[str, Any] = {}
    if product:
        result["product"] = product
    if action:
        result["action"] = action
    region = region_of(request)
    if region:
        result["region"] = region
    name, stack_id = stack_of(request)
    if name or stack_id:
        result["target"] = {"type": "resource", **({"name": name} if name else {}),
                            **({"id": stack_id} if stack_id else {})}
    calls = _api_calls(request, product, action)
    if calls:
        result["apiCalls"] = calls
    return result or None


def _non_empty(value: Any) -> bool:
    return value not in (None, "", {}, [])


def _chosen_parameters(request: PermissionRequest) -> Any:
    """The part of the input a person decides on, before redaction (``None``: nothing to show)."""
    tool, tool_input = request.tool_name, request.input
    if request.display_parameters is not None:  # the tool's own declaration
        chosen = {k: tool_input[k] for k in request.display_parameters if _non_empty(tool_input.get(k))}
        return chosen or None
    if shows_no_parameters(tool):
        return None
    if tool == ALIYUN_API:
        if request.is_read_only is True:
            return None
        roa = {k: tool_input[k] for k in ("pathname", "query", "body") if _non_empty(tool_input.get(k))}
        return roa or (tool_input["params"] if _non_empty(tool_input.get("params")) else None)
    if tool.startswith("ros_"):
        key = "parameters" if tool == ROS_DEPLOY else "params"
        return tool_input[key] if _non_empty(tool_input.get(key)) else None
    if request.is_read_only is True:
        return None
    return dict(tool_input) if tool_input else None  # mcp__* and every other tool: the whole input


def display_parameters(request: PermissionRequest) -> dict[str, Any] | None:
    """The envelope's ``displayParameters`` (``{"format": "json", "value": ...}``), or ``None``."""
    chosen = _chosen_parameters(request)
    if chosen is None:
        return None
    return {"format": "json", "value": display_value(chosen)}


def display_value(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """A JSON value kept for people to read: secret-looking keys ``{"redacted": true}``, strings sanitised
    (and cut at 4,000 characters); objects and arrays deeper than 16 levels become ``{"truncated": true}``,
    at most 64 fields (items) each and 512 nodes in all, a cut container marked ``_truncated``."""
    budget = budget if budget is not None else [NODE_BUDGET]
    budget[0] -= 1
    if isinstance(value, str):
        return sanitise_text(value)[:FIELD_LIMIT]
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
        return {"truncated": True}
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= MAX_FIELDS or budget[0] <= 0:
                result["_truncated"] = True
                break
            name = sanitise_text(str(key))[:FACT_LIMIT]
            if is_secret_name(str(key)):
                budget[0] -= 1
                result[name] = {"redacted": True}
            else:
                result[name] = display_value(item, depth + 1, budget)
        return result
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for index, item in enumerate(value):
            if index >= MAX_FIELDS or budget[0] <= 0:
                items.append({"_truncated": True})
                break
            items.append(display_value(item, depth + 1, budget))
        return items
    return sanitise_text(str(value))[:FIELD_LIMIT]


def target_parts(request: PermissionRequest) -> list[str] | None:
    """The tool-specific parts of the envelope's ``target`` (joined by `` · ``); ``None``: the generic text.

    File tools: the path; search tools: path and pattern; web tools: the URL (or query); MCP tools:
    ``server:tool``; cloud calls: the resource identifiers and the region (the product and action
    when no resource is named).
    """
    tool, tool_input = request.tool_name, request.input
    audit = request.operation
    if _fact(audit, "product") or _fact(audit, "action") or tool == ALIYUN_API or tool.startswith("ros_"):
        name, stack_id = stack_of(request)
        resource = _fact(tool_input, "resource_id", "resourceId")
        identifiers = [p for p in dict.fromkeys((name, stack_id, resource)) if p]
        if not identifiers:
            api = " ".join(p for p in (_fact(audit, "product") or _fact(tool_input, "product"),
                                       _fact(audit, "action") or _fact(tool_input, "action")) if p)
            identifiers = [api] if api else []
        parts = [*identifiers, region_of(request)]
        return [p for p in parts if p] or None
    if is_mcp_tool(tool):
        pieces = tool.split("__")
        return [f"{pieces[1]}:{'__'.join(pieces[2:])}"] if len(pieces) >= 3 and pieces[1] else None
    if tool in FILE_TOOLS:
        path = _fact(tool_input, "file_path", "filePath", "path", "notebook_path")
        return [path] if path else None
    if tool in SEARCH_TOOLS:
        parts = [_fact(tool_input, "path", "directory"), _fact(tool_input, "pattern", "glob", "query")]
        return [p for p in parts if p] or None
    if tool.startswith("web_") or tool == "fetch":
        url = _fact(tool_input, "url", "uri") or _fact(tool_input, "query")
        return [url] if url else None
    return None
