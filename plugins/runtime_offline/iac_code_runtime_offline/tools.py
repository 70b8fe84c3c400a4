"""Built-in tools of the offline IaC engine, registered through ``iac_code_tools``.

``generate_template``, ``review_template`` and ``convert_terraform`` wrap the
engine; ``read_file`` and ``write_file`` work inside the turn's workspace
(writing asks permission and makes the file a task artifact); ``aliyun_api``
calls the Alibaba Cloud ROS API (write actions are protected: only an exact
``aliyun_api(ros:Action)`` rule or the caller's answer releases them).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iac_code.api import (
    ArtifactPayload,
    Permission,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    atomic_write,
    hookimpl,
    is_protected_file,
    is_within,
)

if TYPE_CHECKING:
    from iac_code.api import PluginContext

READ_LIMIT = 1024 * 1024
MEDIA_TYPES = {".yaml": "text/yaml", ".yml": "text/yaml", ".json": "application/json", ".tf": "text/plain"}


def workspace_path(context: ToolContext, relative: str) -> Path | None:
    """The resolved path of ``relative`` inside the workspace, or ``None`` if it escapes
    or is one of the server's own files (:class:`iac_code.security.workspace.ProtectedPaths`)."""
    if not relative or "\x00" in relative:
        return None
    path = Path(os.path.realpath(os.path.join(context.cwd, relative)))
    if not is_within(str(path), os.path.realpath(context.cwd)):
        return None
    if is_protected_file(str(path)):
        return None
    return path


class GenerateTemplate:
    """Generate (or edit, given the previous spec) a ROS or Terraform template."""

    name = "generate_template"
    parameters: Mapping[str, Any] = {
        "type": "object", "required": ["request"],
        "properties": {"request": {"type": "string", "description": "What to build, in the user's words."},
                       "previous": {"type": "object", "description": "The spec of the template to edit (optional)."}}}

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        from iac_code_runtime_offline.engine.generation import generate
        from iac_code_runtime_offline.engine.ros_schema import validate_ros

        result = generate(str(tool_input.get("request", "")), tool_input.get("previous") or None)
        problems = validate_ros(result.template) if result.template is not None else []
        return ToolOutcome(result={"format": result.format, "fileName": result.file_name,
                                   "resources": list(result.resources), "unmapped": list(result.unmapped),
                                   "valid": not problems, "problems": problems[:20]},
                           private=result)


class ReviewTemplate:
    """Review a ROS or Terraform template; the JSON report becomes an artifact."""

    name = "review_template"
    parameters: Mapping[str, Any] = {
        "type": "object", "required": ["text"],
        "properties": {"text": {"type": "string", "description": "The template text (ROS YAML/JSON or Terraform)."},
                       "fileName": {"type": "string", "description": "Its file name, if known."}}}

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        import json

        from iac_code_runtime_offline.engine.review import review

        report = review(str(tool_input.get("text", "")), tool_input.get("fileName") or None)
        document = report.to_json()
        return ToolOutcome(result={"format": document["format"], "summary": document["summary"]},
                           artifact=ArtifactPayload("review.json", "application/json",
                                                    json.dumps(document, ensure_ascii=False, indent=2)),
                           private=report)


class ConvertTerraform:
    """Convert alicloud Terraform to a ROS template."""

    name = "convert_terraform"
    parameters: Mapping[str, Any] = {
        "type": "object", "required": ["text"],
        "properties": {"text": {"type": "string", "description": "alicloud Terraform (HCL) to convert."}}}

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        from iac_code_runtime_offline.engine.terraform_to_ros import convert

        result = convert(str(tool_input.get("text", "")))
        return ToolOutcome(result={"converted": list(result.converted), "unconverted": list(result.unconverted),
                                   "warnings": list(result.warnings), "unmapped_types": list(result.unmapped_types),
                                   "unmapped_properties": list(result.unmapped_properties)}, private=result)


class ReadFile:
    """Read a text file inside the workspace (at most 1 MiB)."""

    name = "read_file"
    parameters: Mapping[str, Any] = {
        "type": "object", "required": ["path"],
        "properties": {"path": {"type": "string", "description": "Path relative to the workspace."}}}

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return None

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        path = workspace_path(context, str(tool_input.get("path", "")))
        if path is None or not path.is_file():
            return ToolOutcome(error="The file is not in the workspace.")
        data = path.read_bytes()[:READ_LIMIT + 1]
        if len(data) > READ_LIMIT:
            return ToolOutcome(error="The file is larger than 1 MiB.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolOutcome(error="The file is not UTF-8 text.")
        return ToolOutcome(result={"path": str(tool_input.get("path")), "byteSize": len(data)}, private=text)


class WriteFile:
    """Write a file into the workspace (asks permission); the content becomes a task artifact."""

    name = "write_file"
    parameters: Mapping[str, Any] = {
        "type": "object", "required": ["path", "content"],
        "properties": {"path": {"type": "string", "description": "Path relative to the workspace."},
                       "content": {"type": "string", "description": "The whole new content of the file."}}}

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return Permission(is_read_only=False)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        relative = str(tool_input.get("path", ""))
        path = workspace_path(context, relative)
        if path is None:
            return ToolOutcome(error="The path is outside the workspace.")
        content = str(tool_input.get("content", ""))
        data = content.encode("utf-8")
        import asyncio

        await asyncio.to_thread(atomic_write, path, data)
        media_type = MEDIA_TYPES.get(path.suffix, "text/plain")
        return ToolOutcome(result={"path": relative, "byteSize": len(data),
                                   "sha256": hashlib.sha256(data).hexdigest()},
                           artifact=ArtifactPayload(path.name, media_type, content))


class AliyunApi:
    """Call the Alibaba Cloud ROS API; write actions are protected."""

    name = "aliyun_api"
    parameters: Mapping[str, Any] = {
        "type": "object", "required": ["action"],
        "properties": {"action": {"type": "string", "description": "ROS API action, e.g. ValidateTemplate, CreateStack."},
                       "params": {"type": "object", "description": "The action's parameters (RegionId, ...)."}}}

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        from iac_code_runtime_offline.engine.aliyun_api import is_read_only, metadata_region

        action = str(tool_input.get("action", ""))
        if is_read_only(action):
            return None
        params = tool_input.get("params") or {}
        region = params.get("RegionId") or metadata_region(context.metadata) or "cn-hangzhou"
        return Permission(is_read_only=False, operation={
            "product": "ros", "action": action, "region": region,
            "stackName": params.get("StackName", ""), "stackId": params.get("StackId", "")})

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        from iac_code_runtime_offline.engine.aliyun_api import call_ros, credentials_from

        credentials = credentials_from(context.metadata, os.environ)
        outcome = await call_ros(str(tool_input.get("action", "")), dict(tool_input.get("params") or {}),
                                 credentials)
        if not outcome.get("ok"):
            return ToolOutcome(result=outcome, error=str(outcome.get("error", "The ROS call failed.")))
        return ToolOutcome(result=outcome)


@hookimpl
def iac_code_tools() -> list[ToolSpec]:
    tools: list[Any] = [GenerateTemplate(), ReviewTemplate(), ConvertTerraform(), ReadFile(), WriteFile(), AliyunApi()]

    def factory(tool: Any) -> Any:
        return lambda kernel: tool

    return [ToolSpec(name=tool.name, create=factory(tool), description=(tool.__doc__ or "").strip(),
                     parameters=tool.parameters) for tool in tools]


def tool_table(kernel: PluginContext) -> dict[str, Any]:
    """Every registered tool by name (built-in and third-party)."""
    return {spec.name: spec.create(kernel) for spec in kernel.tools().values()}
