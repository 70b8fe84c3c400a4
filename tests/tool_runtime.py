"""A runtime that calls tools needing permission, for the permission and metadata tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import AgentRuntimeSpec
from iac_code.agents.runtime import (
    PermissionRequest,
    RuntimeEvent,
    TextDelta,
    Thinking,
    ToolCompleted,
    ToolFailed,
    ToolInputComplete,
    ToolInputDelta,
    ToolStarted,
    TurnFailed,
    TurnRequest,
)

DEPLOY_INPUT: dict[str, Any] = {"product": "ros", "action": "CreateStack",
                                "params": {"StackName": "demo-stack", "secret_token": "hunter2-value"}}


class ToolRuntime:
    """``deploy`` → protected aliyun_api CreateStack (``deploy twice``: two of them); ``read`` → read_file;
    ``think`` → raw thinking."""

    name = "tools"

    def __init__(self) -> None:
        self.decisions: list[tuple[str, bool | None]] = []

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        if "fail" in turn.prompt:
            yield TextDelta("trying")
            yield TurnFailed("The quota for this operation is exhausted.", retryable="retry" in turn.prompt)
            return
        if "think" in turn.prompt:
            yield Thinking("step one: consider the VPC")
            yield TextDelta("thought about it")
            return
        if "read" in turn.prompt:
            requests = [PermissionRequest("tool-read", "read_file", {"path": "main.tf"}, is_read_only=True)]
        else:
            requests = [PermissionRequest(
                f"tool-deploy{'-' + str(n) if n else ''}", "aliyun_api", DEPLOY_INPUT, is_read_only=False,
                operation={"product": "ros", "action": "CreateStack", "region": "cn-hangzhou",
                           "stackName": "demo-stack"}) for n in range(2 if "twice" in turn.prompt else 1)]
        for request in requests:
            yield ToolStarted(request.tool_use_id, request.tool_name)
            yield ToolInputDelta(request.tool_use_id, request.tool_name, json.dumps(request.input)[:10])
            yield ToolInputComplete(request.tool_use_id, request.tool_name, request.input)
            yield request
            self.decisions.append((request.tool_name, request.allowed))
            if request.allowed:
                yield ToolCompleted(request.tool_use_id, request.tool_name, {"stackId": "stack-1", "log": "x" * 5000})
                yield TextDelta("allowed and done")
            else:
                yield ToolFailed(request.tool_use_id, request.tool_name, "permission denied")
                yield TextDelta("denied")


class ToolPlugin:
    def __init__(self) -> None:
        self.runtime = ToolRuntime()

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="tools", create_runtime=lambda kernel: self.runtime)]
