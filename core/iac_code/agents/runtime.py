"""Agent runtime events: the A2A-free vocabulary runtimes speak.

A runtime turns one :class:`TurnRequest` into an async stream of events. The
kernel's executor (:mod:`iac_code.tasks.executor`) is the one place that translates
them into A2A events. Nothing here imports a2a-sdk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


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
    ``deploymentSummary``; with ``apiCalls`` and ``target`` it is also shown
    as the envelope's since-0.13 §6 ``operation``); ``is_read_only`` is ``None``
    when unknown. ``input_id``: the id the caller's answer must name (the
    kernel makes one when empty), so a runtime that announces the question
    itself (a pipeline's ``permission_requested``) knows it beforehand.
    With ``allowed`` the kernel also sets ``decided_by``: ``rule``,
    ``auto-approve``, ``interactive`` or ``timeout``.
    """

    tool_use_id: str
    tool_name: str
    input: Mapping[str, Any]
    is_read_only: bool | None = None
    operation: Mapping[str, Any] = field(default_factory=dict)
    allowed: bool | None = None
    input_id: str = ""
    decided_by: str = ""


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


@dataclass(frozen=True)
class Interrupt:
    """User text that arrived for a context whose turn is still running (a pipeline mid-run).

    The kernel offers it to the runtime's optional ``interrupt`` method instead of refusing the
    message as "already working"; ``task_id`` is the running task, ``metadata`` the message's
    ``metadata.iac_code``.
    """

    context_id: str
    task_id: str
    text: str
    language: str = "en"
    metadata: Mapping[str, Any] = field(default_factory=dict)


RuntimeEvent = (
    TextDelta | ToolStarted | ToolInputDelta | ToolInputComplete | ToolCompleted | ToolFailed
    | Thinking | Usage | TurnFailed | PermissionRequest | Progress
)


class AgentRuntime(Protocol):
    """What an agent runtime plugin provides.

    ``run_turn`` is cancelled (``asyncio.CancelledError``) when the caller
    cancels the task; a runtime must stop promptly and release its resources.
    Turns of one ``context_id`` never run concurrently; different contexts may.

    A runtime may also have ``async def interrupt(self, interrupt: Interrupt) -> bool``: the kernel
    calls it for a pipeline-mode message on a context whose turn is running; ``True`` takes the
    message into that turn (the caller follows the running task), ``False`` leaves the kernel's
    "already working" refusal. It must not block on the turn.

    A pipeline runtime may also have ``async def handed_off(self, context_id: str) -> bool``: whether
    its durable run state shows the context's pipeline handed off to normal chat. The kernel asks it
    when the context's session does not say so (a crash cut the turn that handed off before the
    session was written), before refusing a ``cleanupOnly`` continuation.
    """

    name: str

    def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        """Run one turn and stream its events."""
        ...
