"""Agent runtime events: the A2A-free vocabulary runtimes speak.

A runtime turns one :class:`TurnRequest` into an async stream of events. The
kernel's executor (:mod:`iac_code.tasks.executor`) is the one place that translates
them into A2A events. Nothing here imports a2a-sdk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class TurnRequest:
    """One turn of a conversation, as a runtime sees it.

    ``history`` holds the context's earlier turns (``{"role", "text"}``);
    ``session`` is the runtime's own JSON-serialisable state for the context,
    kept and persisted by the kernel between turns.
    """

    context_id: str
    task_id: str
    prompt: str
    cwd: str
    language: str = "en"
    channel: str = "unknown"
    manifest: tuple[Mapping[str, Any], ...] = ()
    history: tuple[Mapping[str, str], ...] = ()
    session: dict[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    run_mode: str = "normal"  # "pipeline": the turn runs the pipeline ``pipeline_name`` (validated by the kernel)
    pipeline_name: str = ""


@dataclass(frozen=True)
class TextDelta:
    """A chunk of assistant text."""

    text: str


@dataclass(frozen=True)
class ToolStarted:
    tool_use_id: str
    name: str


@dataclass(frozen=True)
class ToolInputDelta:
    tool_use_id: str
    name: str
    delta: str


@dataclass(frozen=True)
class ToolInputComplete:
    tool_use_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCompleted:
    """A tool finished; ``artifact`` carries a text payload to store (e.g. a template)."""

    tool_use_id: str
    name: str
    result: Mapping[str, Any]
    artifact: ArtifactPayload | None = None


@dataclass(frozen=True)
class ToolFailed:
    tool_use_id: str
    name: str
    error: str


@dataclass(frozen=True)
class ArtifactPayload:
    """A text payload the kernel stores as a task artifact.

    ``stored`` is filled by the kernel once it has stored the payload, before it asks the runtime for its
    next event: the reference it also puts in the artifact's metadata (``artifactId``, ``name``, ``url``,
    ``mediaType``, ``byteSize``, ``sha256``), so a runtime can name the stored artifact (e.g. its URL).
    """

    name: str
    media_type: str
    text: str
    stored: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Thinking:
    """Raw provider reasoning (exposed only when configured)."""

    text: str


@dataclass
class PermissionRequest:
    """A tool call that needs the caller's permission.

    The runtime yields this event and, when the kernel asks for its next event,
    reads ``allowed``: the kernel has decided by then (rules, auto-approval or
    the caller's interactive answer). ``operation`` describes cloud calls
    (``product``, ``action``, ``region``, ``stackName``, ``stackId``,
    ``deploymentSummary``); ``is_read_only`` is ``None`` when unknown.
    """

    tool_use_id: str
    tool_name: str
    input: Mapping[str, Any]
    is_read_only: bool | None = None
    operation: Mapping[str, Any] = field(default_factory=dict)
    allowed: bool | None = None


@dataclass(frozen=True)
class Usage:
    """Token usage for the turn so far."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Progress:
    """Progress the caller sees while the turn runs: ``metadata`` goes under ``metadata.iac_code`` of a
    working status update and ``text``, when given, is its message. ``final``: no update of its own;
    ``metadata`` is merged into the turn's last status instead (e.g. the question a pipeline stops on)."""

    metadata: Mapping[str, Any]
    text: str = ""
    final: bool = False


@dataclass(frozen=True)
class TurnFailed:
    """The runtime failed the turn; ``message`` is safe to show the caller."""

    message: str
    retryable: bool = False


RuntimeEvent = (
    TextDelta | ToolStarted | ToolInputDelta | ToolInputComplete | ToolCompleted | ToolFailed
    | Thinking | Usage | TurnFailed | PermissionRequest | Progress
)


class AgentRuntime(Protocol):
    """What an agent runtime plugin provides.

    ``run_turn`` is cancelled (``asyncio.CancelledError``) when the caller
    cancels the task; a runtime must stop promptly and release its resources.
    Turns of one ``context_id`` never run concurrently; different contexts may.
    """

    name: str

    def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        """Run one turn and stream its events."""
        ...


@dataclass(frozen=True)
class Written:
    """What a :class:`ModelWriter` wrote: the text, and the model and tokens it took (for usage reports)."""

    text: str
    model: str = ""
    provider: str = ""
    input_tokens: int = 0
    output_tokens: int = 0


@runtime_checkable
class ModelWriter(Protocol):
    """An agent runtime driven by a model that can also answer one prompt on its own: no tools, no conversation,
    nothing kept. Features that need a model's words (the selling pipelines' intent and candidate summaries) use
    it when the configured runtime is one; without it they stay deterministic."""

    async def write(self, instructions: str, prompt: str, *, language: str = "en",
                    metadata: Mapping[str, Any] | None = None) -> Written:
        """The model's answer to ``prompt`` under ``instructions`` (its system message); ``metadata`` is the
        request's ``metadata.iac_code`` (a per-request model or key). Raises when the model cannot answer."""
        ...
