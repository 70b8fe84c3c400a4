"""The permission envelope's ``operation`` and ``displayParameters`` (issue 37, since-0.13 §6), on running servers.

* Default configuration (offline engine): a stack deployment through ``aliyun_api`` (against a
  local stand-in of the ROS API) shows the operation, the API call and its parameters with
  values; a workspace write shows neither.
* ``agent-runtime: llm`` over a scripted provider, calling tools that a test plugin registers
  through ``iac_code_tools``: ``ros_deploy`` (its own actions and API calls), an MCP tool (the
  whole input, ``server:tool`` target), a tool that declares its API calls and display
  parameters (``Permission(api_calls=..., display_parameters=...)``, capped and redacted), and
  a web tool (never parameters, its URL as the target).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.api import ApiCall, Permission, ToolContext, ToolOutcome, ToolSpec, hookimpl
from iac_code.testing import A2A_HEADERS, permission_answer_body, permission_envelope, send_message_body, start_server
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks
from tests.ros_standin import ros_standin


async def _rpc(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body, headers=A2A_HEADERS) as response:
        reply = await response.json()
    assert "result" in reply, reply
    return reply


async def _envelopes(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
                     decision: str = "deny") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Send ``body``; answer each permission the turn asks with ``decision``; its envelopes and the final task."""
    task = (await _rpc(http, url, body))["result"]["task"]
    seen: list[dict[str, Any]] = []
    while (envelope := permission_envelope(task)) is not None:
        seen.append(envelope)
        assert len(seen) <= 8
        answer = permission_answer_body(envelope, decision, message_id=f"answer-{len(seen)}")
        task = (await _rpc(http, url, answer))["result"]["task"]
    return seen, task


# ---------------------------------------------------------------------------- the default configuration


async def test_a_stack_deployment_shows_its_operation_and_parameters(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAItestkey000000")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret-value")
    async with ros_standin() as ros, start_server() as server, aiohttp.ClientSession() as http:
        monkeypatch.setenv("IACCODE_ALIYUN_ROS_ENDPOINT", ros.endpoint)
        first = send_message_body("Create a VPC with two vSwitches in cn-hangzhou", message_id="m1",
                                  contextId="ctx-deploy")
        [write], _ = await _envelopes(http, server.url, first, "allow_once")
        assert write["toolName"] == "write_file" and write["target"] == "template.ros.yaml"
        assert "operation" not in write and "displayParameters" not in write  # a file tool: neither

        deploy = send_message_body("deploy the template as a stack named demo-stack", message_id="m2",
                                   contextId="ctx-deploy")
        [envelope], final = await _envelopes(http, server.url, deploy, "deny")
    assert envelope["toolName"] == "aliyun_api" and envelope["title"] == "Create ROS stack"
    assert envelope["operation"] == {
        "product": "ros", "action": "CreateStack", "region": "cn-hangzhou",
        "target": {"type": "resource", "name": "demo-stack"},
        "apiCalls": [{"product": "ROS", "action": "CreateStack", "effect": "change"}]}
    shown = envelope["displayParameters"]
    assert shown["format"] == "json"
    assert shown["value"]["StackName"] == "demo-stack" and shown["value"]["RegionId"] == "cn-hangzhou"
    assert shown["value"]["TemplateBody"].startswith("ROSTemplateFormatVersion")  # values, unlike inputSummary
    assert envelope["target"] == "demo-stack · cn-hangzhou"
    assert envelope["prompt"] == "Create ROS stack (demo-stack · cn-hangzhou)?"
    assert "CreateStack" not in ros.actions()  # denied
    assert "test-secret-value" not in json.dumps(final)


# ---------------------------------------------------------------------------- plugin tools


class _Tool:
    """A tool a plugin registers: asks permission with the given declaration, records its runs."""

    def __init__(self, name: str, permission: Permission) -> None:
        self.name = name
        self._permission = permission
        self.runs = 0

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        return self._permission

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        self.runs += 1
        return ToolOutcome(result={"ok": True})


class _ToolPlugin:
    def __init__(self, *tools: _Tool) -> None:
        self.tools = tools

    @hookimpl
    def iac_code_tools(self) -> list[ToolSpec]:
        return [ToolSpec(name=tool.name, create=lambda kernel, tool=tool: tool, description=tool.name,
                         parameters={"type": "object"}) for tool in self.tools]


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "bottom"}
    for level in range(levels):
        value = {f"level{level}": value}
    return value


DEPLOY_INPUT = {"action": "delete_and_create", "stack_name": "shop", "region_id": "cn-shanghai",
                "parameters": {"InstanceType": "ecs.g7.large", "DbPassword": "S3cret-pass!",
                               "Network": {"VpcId": "vpc-1", "AccessKeyId": "LTAIabcdefgh1234"}}}
MCP_INPUT = {"repo": "acme/shop", "title": "Scale out", "body": "use token=abc123456 for the deploy",
             "auth_header": "Bearer abcdef"}
SCALE_INPUT = {"spec": {"nodes": 5, "note": "password=hunter2 set", "deep": _deep(20),
                        "wide": {f"f{n:03d}": n for n in range(100)}}, "internal": "not shown"}
FETCH_INPUT = {"url": "https://example.com/pricing", "prompt": "read the prices"}


async def test_plugin_tools_declare_their_operation_and_display_parameters(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tools = _ToolPlugin(
        _Tool("ros_deploy", Permission(is_read_only=False, operation={"product": "ros", "region": "cn-shanghai",
                                                                      "stackName": "shop"})),
        _Tool("mcp__github__create_issue", Permission(is_read_only=False)),
        _Tool("scale_cluster", Permission(is_read_only=False, api_calls=(ApiCall("CS", "ScaleCluster"),
                                                                         ApiCall("CS", "DescribeTask", "read",
                                                                                 "polling")),
                                          display_parameters=("spec", "missing"))),
        _Tool("web_fetch", Permission(is_read_only=False)))
    calls = [*tool_call_chunks(0, "call-deploy", "ros_deploy", json.dumps(DEPLOY_INPUT)),
             *tool_call_chunks(1, "call-mcp", "mcp__github__create_issue", json.dumps(MCP_INPUT)),
             *tool_call_chunks(2, "call-scale", "scale_cluster", json.dumps(SCALE_INPUT)),
             *tool_call_chunks(3, "call-fetch", "web_fetch", json.dumps(FETCH_INPUT)), finish_chunk("tool_calls")]
    async with OpenAIStub([Reply.stream(calls), Reply.stream([text_chunk("All denied."), finish_chunk("stop")])]) \
            as stub, start_server({"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test",
                                   "llm-timeout": 5}, extra_plugins={"op-tools": tools}) as server, \
            aiohttp.ClientSession() as http:
        body = send_message_body("do the four things", message_id=uuid.uuid4().hex, contextId="ctx-tools")
        envelopes, final = await _envelopes(http, server.url, body)
    assert [t.runs for t in tools.tools] == [0, 0, 0, 0]
    assert final["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
    deploy, mcp, scale, fetch = envelopes
    assert [e["toolName"] for e in envelopes] == ["ros_deploy", "mcp__github__create_issue", "scale_cluster",
                                                  "web_fetch"]

    # ros_deploy: its own action, the API calls it makes, its template parameters with values
    assert deploy["operation"] == {
        "product": "ros", "action": "delete_and_create", "region": "cn-shanghai",
        "target": {"type": "resource", "name": "shop"},
        "apiCalls": [{"product": "ROS", "action": "DeleteStack", "effect": "change"},
                     {"product": "ROS", "action": "CreateStack", "effect": "change"},
                     {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}]}
    assert deploy["displayParameters"] == {"format": "json", "value": {
        "InstanceType": "ecs.g7.large", "DbPassword": {"redacted": True},
        "Network": {"VpcId": "vpc-1", "AccessKeyId": {"redacted": True}}}}
    assert deploy["target"] == "shop · cn-shanghai"

    # an MCP tool: no cloud facts, the whole input (secrets redacted, strings sanitised), server:tool
    assert "operation" not in mcp
    assert mcp["displayParameters"] == {"format": "json", "value": {
        "repo": "acme/shop", "title": "Scale out", "body": "use token=[REDACTED] for the deploy",
        "auth_header": {"redacted": True}}}
    assert mcp["target"] == "github:create_issue"

    # declared: the API calls and only the named input keys, capped
    assert scale["operation"] == {"apiCalls": [
        {"product": "CS", "action": "ScaleCluster", "effect": "change"},
        {"product": "CS", "action": "DescribeTask", "effect": "read", "repeat": "polling"}]}
    value = scale["displayParameters"]["value"]
    assert set(value) == {"spec"}
    spec = value["spec"]
    assert spec["nodes"] == 5 and spec["note"] == "password=[REDACTED] set"
    depth, node = 2, spec["deep"]  # the value is level 0, spec 1, deep 2: levels 0-15 are kept, 16 is cut
    while "truncated" not in node:
        [node] = node.values()
        depth += 1
    assert depth == 16 and node == {"truncated": True}
    assert len(spec["wide"]) == 65 and spec["wide"]["_truncated"] is True and spec["wide"]["f063"] == 63

    # a web tool: never display parameters; its URL is the target
    assert "displayParameters" not in fetch and "operation" not in fetch
    assert fetch["target"] == "https://example.com/pricing"
    for envelope in envelopes:
        text = json.dumps(envelope)
        assert "S3cret-pass!" not in text and "hunter2" not in text and "abc123456" not in text
        assert "LTAIabcdefgh1234" not in text
