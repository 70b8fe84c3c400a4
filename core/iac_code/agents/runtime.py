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
    kept and persisted by the kernel between turns. ``llm_headers`` are the extra
    request headers the context's caller set for LLM-provider calls (a live mapping:
    an answer mid-turn may change it; memory only, never to be logged or stored).
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
    llm_headers: Mapping[str, str] = field(default_factory=dict, repr=False)


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


@dataclass(frozen=True)
class ApiCall:
    """One cloud API call a tool call makes, as the permission envelope's ``operation.apiCalls`` lists it.

    ``effect`` is ``read`` or ``change``; ``repeat`` says a call is repeated (``polling`` while a
    tool waits for a stack), ``None`` for a single call.
    """

    product: str
    action: str
    effect: str = "change"
    repeat: str | None = None


@dataclass
class PermissionRequest:
    """A tool call that needs the caller's permission.

    The runtime yields this event and, when the kernel asks for its next event,
    reads ``allowed``: the kernel has decided by then (rules, auto-approval or
    the caller's interactive answer). ``operation`` describes cloud calls
    (``product``, ``action``, ``region``, ``stackName``, ``stackId``,
    ``deploymentSummary``; with ``apiCalls`` and ``target`` it is also shown
    as the envelope's since-0.13 §6 ``operation``); ``is_read_only`` is ``None``
    when unknown. ``api_calls`` are the cloud API calls the tool declares (else the kernel
    derives them), and ``display_parameters`` the input keys the envelope shows with their
    values (``None``: the kernel's rule by tool; ``()``: none). ``input_id``: the id the
    caller's answer must name (the kernel makes one when empty), so a runtime that announces
    the question itself (a pipeline's ``permission_requested``) knows it beforehand.
    With ``allowed`` the kernel also sets ``decided_by``: ``rule``,
    ``auto-approve``, ``interactive`` or ``timeout``.

    ``continuation``: a JSON object a runtime with ``resume_turn`` (:class:`ResumableRuntime`) sets
    to make the wait durable: the kernel writes it into the permission checkpoint before the
    question is published, and after a restart (or a suspension) hands it back to ``resume_turn``
    with the answer. ``None`` (the default): the wait lives only as long as the process and its turn.
    """

    tool_use_id: str
    tool_name: str
    input: Mapping[str, Any]
    is_read_only: bool | None = None
    operation: Mapping[str, Any] = field(default_factory=dict)
    allowed: bool | None = None
    input_id: str = ""
    decided_by: str = ""
    api_calls: tuple[ApiCall, ...] = ()
    display_parameters: tuple[str, ...] | None = None
    continuation: dict[str, Any] | None = None


@dataclass(frozen=True)
class Usage:
    """Token usage for the turn so far; ``provider``, ``model`` and ``cached_input_tokens`` (input tokens
    read from the provider's prompt cache) when the runtime knows them."""

    input_tokens: int
    output_tokens: int
    provider: str = ""
    model: str = ""
    cached_input_tokens: int | None = None


@dataclass(frozen=True)
class Progress:
    """Progress the caller sees while the turn runs: ``metadata`` goes under ``metadata.iac_code`` of a
    working status update and ``text``, when given, is its message. ``final``: no update of its own;
    ``metadata`` is merged into the turn's last status instead (e.g. the question a pipeline stops on).
    A tool reports its own progress while it runs through :attr:`~iac_code.agents.tools.ToolContext.report`."""

    metadata: Mapping[str, Any]
    text: str = ""
    final: bool = False
    tool_trace: bool = False
    """Part of the tool trace (an MCP tool's progress): published only when ``tool_trace`` exposure is on."""


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

    # Optional: ``resume_turn(turn, frame)``, see :class:`ResumableRuntime`.
    # Optional: ``readiness() -> Mapping`` with ``ready``, ``source``, ``provider``, ``providerDisplay``,
    # ``model`` and ``missing`` (a subset of partner_configuration, provider, model, api_key, configuration):
    # whether the runtime's model is configured, from configuration only (no network call, never a secret).
    # ``GET /iac-code/readiness`` shows it as ``llm``.

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


class ResumableRuntime(Protocol):
    """An agent runtime whose permission waits survive a restart (since-0.13 §4): an optional capability.

    Such a runtime sets :attr:`PermissionRequest.continuation` on the permission requests it can
    resume: a JSON object (the "continuation frame") with what it needs to redo exactly that tool
    call and the rest of the turn without repeating earlier side effects. The kernel writes the
    frame into a durable checkpoint before it publishes the question. When the answer comes after
    the live turn is gone (a restart, a suspended wait), the kernel restores the context's session
    as it was at the question and calls :meth:`resume_turn`.

    A runtime without ``resume_turn`` (or a request without ``continuation``) keeps the old
    behaviour: the wait lives in memory, ``permission-timeout`` denies it, and a restart marks the
    task FAILED "Task interrupted".
    """

    name: str

    def resume_turn(self, turn: TurnRequest, frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """Go on with the turn paused at the permission request ``frame`` describes.

        The first event must be the :class:`PermissionRequest` of that same call (same tool, tool
        use id and input: the kernel compares its digest with the checkpoint's and refuses the answer
        with ``permission_resume_invalid: canonical permission request changed.`` otherwise). The
        kernel sets its ``allowed`` from the recovered answer (the runtime runs the tool, or gives
        it the denial result), then translates every later event as in ``run_turn``: the rest of
        the turn, which may ask further permissions.
        """
        ...
