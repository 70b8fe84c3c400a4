"""The resource selector's hooks: its card extension (only when ``IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED`` is on),
the ``select_cloud_resource`` tool (offered per turn when the request declares the capability), the gate that
checks answers before their turn starts, and the keys of its cloud queries (:class:`SelectorConfig`). See
docs/resource-selector.md."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from iac_code.api import CardExtension, InterfaceInfo, PluginContext, ToolSpec, TurnGateSpec, hookimpl
from iac_code_resource_selector import capability, settings
from iac_code_resource_selector.backup import SelectionBackup, backup_dir
from iac_code_resource_selector.cloud import CloudQuery
from iac_code_resource_selector.gate import AnswerGate
from iac_code_resource_selector.owners import registry
from iac_code_resource_selector.settings import QuerySettings, SelectorConfig
from iac_code_resource_selector.store import SelectionStore
from iac_code_resource_selector.tool import NAME, SCHEMA, SelectCloudResource

IAC_CODE_API_VERSION = "1.0"
EXTENSION_URI = capability.EXTENSION_URI


def cloud_query(kernel: PluginContext) -> CloudQuery | None:
    """The server's cloud queries (``None`` without credentials: nothing is listed, values are pattern-checked)."""
    return CloudQuery.from_settings(QuerySettings.from_config(kernel.config))


def selection_store(kernel: PluginContext) -> SelectionStore:
    """The server's checkpoints, with their critical backup when a backup directory is configured."""
    directory = backup_dir(kernel.config)
    return SelectionStore(kernel.state_dir, SelectionBackup(directory) if directory is not None else None)


def runtime_ready(kernel: PluginContext) -> bool:
    """Whether this server's runtime can resume a selection call (the built-in ``llm`` runtime)."""
    config = kernel.config
    return str(getattr(config, "agent_runtime", "")) == "llm" and not str(getattr(config, "agent_executor", ""))


def create_tool(kernel: PluginContext) -> SelectCloudResource:
    """The server's ``select_cloud_resource`` tool."""
    return SelectCloudResource(selection_store(kernel), query=cloud_query(kernel), owners=registry(kernel.state_dir))


def create_gate(kernel: PluginContext) -> AnswerGate:
    """The server's answer gate."""
    return AnswerGate(selection_store(kernel), cloud_query(kernel), runtime_ready(kernel),
                      registry(kernel.state_dir))


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return SelectorConfig


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    return settings.check(config)


@hookimpl
def iac_code_card_extensions(config: Any, interfaces: list[InterfaceInfo]) -> list[CardExtension]:
    if not capability.enabled():
        return []
    return [CardExtension(uri=EXTENSION_URI, required=False, params=dict(capability.EXTENSION_PARAMS),
                          description="iac-code cloud resource selector: the agent may ask the user to pick a "
                                      "cloud resource (declare metadata.iac_code.capabilities.resourceSelector).")]


@hookimpl
def iac_code_tools() -> list[ToolSpec]:
    return [ToolSpec(name=NAME, create=create_tool,
                     description="Ask the user to pick an existing cloud resource (a VPC, vSwitch, security group "
                                 "or ECS instance type, or a value derived from an earlier choice: a vSwitch's zone, "
                                 "a VPC's CIDR block) for a template parameter; the turn waits for the choice, "
                                 "which comes back as this tool's result.",
                     parameters=SCHEMA)]


@hookimpl
def iac_code_turn_gates() -> list[TurnGateSpec]:
    return [TurnGateSpec(name="resource-selector", create=create_gate,
                         description="refuses a resource-selection answer that cannot be taken (-32602)")]
