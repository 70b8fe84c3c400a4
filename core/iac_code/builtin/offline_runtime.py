"""The built-in offline agent runtime (first form).

Works with no network and no credentials: every prompt gets streamed
assistant text; a prompt asking for a VPC gets a valid ROS template produced
through a ``ros_template`` tool call. Usage is an honest character-based
estimate (about four characters per token), not a tokenizer count.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from iac_code import messages as m
from iac_code.builtin import ros_templates
from iac_code.hookspecs import hookimpl
from iac_code.i18n import translator
from iac_code.records import AgentRuntimeSpec
from iac_code.runtime import (
    ArtifactPayload,
    RuntimeEvent,
    TextDelta,
    ToolCompleted,
    ToolInputComplete,
    ToolStarted,
    TurnRequest,
    Usage,
)

if TYPE_CHECKING:
    from iac_code.kernel import Kernel

def estimate_tokens(text: str) -> int:
    """Character-based token estimate: ceil(len / 4)."""
    return math.ceil(len(text) / 4) if text else 0


def _chunks(text: str) -> list[str]:
    """Split prose after sentence ends (Latin or CJK), so it streams naturally."""
    return [p for p in re.split(r"(?<=[.!?] )|(?<=[。！？])", text) if p]


class OfflineRuntime:
    """Deterministic offline runtime.

    The VPC it last generated is kept in the context's session, so a follow-up
    such as "add another vSwitch" or "make it 4 vSwitches" edits that template.
    """

    name = "offline"

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        output: list[str] = []
        request = _vpc_request(turn)
        if request is not None:
            count, region = request
            turn.session["vpc"] = {"vswitches": count, "region": region}
            tool_id = f"{turn.task_id}-ros-template-{len(turn.history) // 2 + 1}"
            yield ToolStarted(tool_id, "ros_template")
            yield ToolInputComplete(tool_id, "ros_template", {"kind": "vpc", "vswitches": count, "region": region})
            template = ros_templates.to_yaml(ros_templates.vpc_template(count, region))
            yield ToolCompleted(
                tool_id, "ros_template",
                {"resourceCount": count + 1, "format": "ROS YAML"},
                artifact=ArtifactPayload("vpc.ros.yaml", "text/yaml", template),
            )
            t = translator(turn.language)
            intro = t(m.VPC_TEMPLATE_INTRO_REGION, count=count, region=region) if region else t(
                m.VPC_TEMPLATE_INTRO, count=count)
            chunks = [intro + "\n", "```yaml\n" + template + "```\n"]
        else:
            chunks = _chunks(translator(turn.language)(m.OFFLINE_HELP))
        for chunk in chunks:
            output.append(chunk)
            yield TextDelta(chunk)
            await asyncio.sleep(0)  # a cancellation point between chunks
        yield Usage(estimate_tokens(turn.prompt), estimate_tokens("".join(output)))


def _vpc_request(turn: TurnRequest) -> tuple[int, str | None] | None:
    """(vSwitch count, region) asked for by this turn, using the session for follow-ups."""
    prompt = turn.prompt
    if ros_templates.wants_vpc(prompt):
        return ros_templates.vswitch_count(prompt), ros_templates.region_of(prompt)
    previous = turn.session.get("vpc")
    if not isinstance(previous, dict) or not ros_templates.mentions_vswitch(prompt):
        return None
    count = int(previous.get("vswitches", 1))
    region = ros_templates.region_of(prompt) or previous.get("region")
    change = ros_templates.vswitch_change(prompt)
    if change is not None:
        count = max(1, min(count + change, ros_templates.MAX_VSWITCHES))
    else:
        count = ros_templates.vswitch_count(prompt)
    return count, region


@hookimpl
def iac_code_agent_runtimes() -> list[AgentRuntimeSpec]:
    def create(kernel: Kernel) -> OfflineRuntime:
        return OfflineRuntime()

    return [AgentRuntimeSpec(name="offline", create_runtime=create,
                             description="Deterministic offline IaC engine (no credentials needed).")]
