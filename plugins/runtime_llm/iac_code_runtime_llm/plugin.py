"""Registers the ``llm`` agent runtime and its settings (``llm-*`` keys).

Nothing heavy is imported to register: the runtime module loads when a kernel builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iac_code.api import AgentRuntimeSpec, hookimpl, in_conflict, without_effect

if TYPE_CHECKING:
    from iac_code.api import PluginContext
    from iac_code_runtime_llm.runtime import LlmRuntime

IAC_CODE_API_VERSION = "1.0"

DASHSCOPE_COMPATIBLE = "https://dashscope.aliyuncs.com/compatible-mode/v1"


class LlmConfig(BaseModel):
    """The ``llm-*`` settings (``IAC_CODE_MODEL`` / ``IAC_CODE_API_KEY`` when the file leaves them empty)."""

    model_config = ConfigDict(extra="forbid")

    llm_base_url: str = Field(DASHSCOPE_COMPATIBLE, description="Base URL of the OpenAI-compatible API "
                              "(DashScope compatible mode by default; a local vLLM or Ollama server, OpenAI, ...).")
    llm_model: str = Field("", description="Model name (default qwen-plus; env IAC_CODE_MODEL).")
    llm_api_key: str = Field("", description="API key (env IAC_CODE_API_KEY); never logged or echoed.")
    llm_provider: str = Field("auto", description="How thinking options are sent: dashscope (enable_thinking, "
                              "thinking_budget), openai (reasoning_effort) or auto (by the base URL).")
    llm_timeout: float = Field(120.0, gt=0, description="Seconds for the provider to start answering and "
                               "between two chunks of its stream.")
    llm_max_tool_rounds: int = Field(8, ge=1, le=64, description="Model calls per turn at most (tool rounds).")
    llm_context_tokens: int = Field(32_000, ge=1_000, description="Conversation kept per context, in estimated "
                                    "tokens (4 characters each); the oldest turns are dropped first.")
    llm_max_retries: int = Field(3, ge=0, le=10, description="Retries of a 429, 5xx or connection failure that "
                                 "happened before any output.")
    llm_retry_backoff: float = Field(0.5, gt=0, le=10, description="Seconds before the first retry; doubled each "
                                     "time, at most 8 s (a longer Retry-After, up to 30 s, is honoured).")

    @field_validator("llm_provider")
    @classmethod
    def _provider(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in ("auto", "dashscope", "openai"):
            raise ValueError("'llm-provider': must be auto, dashscope or openai")
        return value

    @field_validator("llm_base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("'llm-base-url': must be an http(s) URL")
        return value


def create_runtime(kernel: PluginContext) -> LlmRuntime:
    from iac_code_runtime_llm.runtime import LlmRuntime

    return LlmRuntime.from_context(kernel)


@hookimpl
def iac_code_agent_runtimes() -> list[AgentRuntimeSpec]:
    return [AgentRuntimeSpec(name="llm", create_runtime=create_runtime,
                             description="A model over an OpenAI-compatible chat-completions API, with iac-code's tools.")]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return LlmConfig


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """The ``llm-*`` keys do nothing unless the ``llm`` runtime runs the turns."""
    if config.agent_executor:
        return in_conflict(config, LlmConfig.model_fields, "agent-executor")
    if str(config.agent_runtime).strip().lower() != "llm":
        return without_effect(config, LlmConfig.model_fields, "agent-runtime: llm")
    return []
