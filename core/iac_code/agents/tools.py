"""Tools agent runtimes call, and the one helper that turns a call into runtime events.

Tools are registered through the ``iac_code_tools`` hook (third parties can add
their own, an LLM runtime can reuse them). A tool says whether a call needs
permission; :func:`run_tool` emits the standard lifecycle (started, input
deltas, input complete, permission request, completed or failed) so every
runtime reports tools the same way. Nothing here imports a2a-sdk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from iac_code.agents.runtime import (
    ApiCall,
    ArtifactPayload,
    PermissionRequest,
    RuntimeEvent,
    ToolCompleted,
    ToolFailed,
    ToolInputComplete,
    ToolInputDelta,
    ToolStarted,
)

if TYPE_CHECKING:
    from iac_code.agents.questions import UserQuestion

INPUT_CHUNK = 256  # characters of JSON per input_delta event


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use: the workspace, the turn's language and message metadata (``metadata.iac_code``),
    and the task and context of the turn (``""`` when the caller does not say); :func:`run_tool` sets
    ``tool_use_id`` to the call's. ``report`` is set by :func:`run_tool` for a tool that declares
    ``reports_progress = True``: a runtime event it hands there while it runs (a
    :class:`~iac_code.agents.runtime.Progress`) is published before the call ends."""

    cwd: str
    language: str = "en"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    task_id: str = ""
    context_id: str = ""
    tool_use_id: str = ""
    report: Callable[[Any], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ToolOffer:
    """A tool a tool source offers for one turn (an MCP server's tool): its public name, what a model is shown
    (``description``, ``parameters``: a JSON Schema) and the tool object a runtime calls."""

    name: str
    tool: Any
    description: str = ""
    parameters: Mapping[str, Any] | None = None


async def offered_tools(tools: Mapping[str, Any], context: ToolContext,
                        into: dict[str, ToolOffer]) -> AsyncIterator[Any]:
    """Ask every tool source among ``tools`` (an object with ``offer_tools(context)``, an async iterator of runtime
    events and :class:`ToolOffer`) for this turn's tools: the offers go into ``into`` (a name already taken is
    skipped), the events are yielded for the runtime to pass on (status, warnings, a permission question whose
    ``allowed`` the kernel sets before the next event is asked for)."""
    for tool in list(tools.values()):
        offer = getattr(tool, "offer_tools", None)
        if offer is None:
            continue
        async for item in offer(context):
            if isinstance(item, ToolOffer):
                if item.name not in tools and item.name not in into:
                    into[item.name] = item
            else:
                yield item


@dataclass(frozen=True)
class Permission:
    """A tool call's permission needs: read-only or not, and the cloud operation if any.

    ``operation`` is the call's audit metadata (``product``, ``action``, ``region``,
    ``stackName``, ``stackId``, ``deploymentSummary``). For the permission envelope's
    ``operation.apiCalls`` and ``displayParameters`` a tool may declare ``api_calls`` (the
    cloud API calls this call makes) and ``display_parameters`` (the input keys a person
    decides on, shown with their values, secrets redacted; ``()`` shows none); left out, the
    kernel derives both from the tool's name and input.
    """

    is_read_only: bool | None
    operation: Mapping[str, Any] = field(default_factory=dict)
    api_calls: tuple[ApiCall, ...] = ()
    display_parameters: tuple[str, ...] | None = None


@dataclass(frozen=True)
class InputPause:
    """A tool call that waits for the user's answer (a tool's own kind of question, e.g. a resource selection).

    The runtime ends the turn in input-required with ``text`` (for every client) and
    ``metadata.iac_code.inputRequired = input_required``, keeps ``state`` (plain JSON) in the context's
    session, and on the task's next message calls the tool's ``resume(state, context)``
    (:class:`Resumed`), which reads the answer from the message's metadata.
    """

    text: str
    input_required: Mapping[str, Any]
    state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Resumed:
    """What a pausing tool's ``resume(state, context)`` makes of the message that came after its pause.

    ``events`` are published first (an ``inputReceived`` acknowledgement, the call's completion);
    ``outcome`` is the paused call's result for the model (``None``: no paused call is closed);
    ``answered``: the message was the answer (not a new request for the model); ``end_turn``: the
    turn ends after ``events`` without asking the model (a replayed answer).
    """

    events: tuple[Any, ...] = ()
    outcome: ToolOutcome | None = None
    answered: bool = True
    end_turn: bool = False


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result; ``error`` set means the call failed (a safe message).

    ``result`` is published in tool metadata; ``private`` is for the calling
    runtime only (e.g. a generated template's full text) and never published.
    ``question`` set means the call waits for the user's answer (``ask_user_question``):
    :func:`run_tool` emits no completion, and the runtime ends the turn with the question
    and reads the next message on the task as the answer (:mod:`iac_code.agents.questions`).
    ``pause`` set means the same for a tool's own kind of question (:class:`InputPause`).
    """

    result: Mapping[str, Any] = field(default_factory=dict)
    artifact: ArtifactPayload | None = None
    error: str | None = None
    private: Any = None
    question: UserQuestion | None = None
    pause: InputPause | None = None


class Tool(Protocol):
    """A tool. Optional methods a runtime looks for: ``offered(context) -> bool`` (whether this turn may offer
    the tool to a model; absent: always) and, for a tool whose outcome may carry an :class:`InputPause`,
    ``async resume(state, context) -> Resumed | None`` (``state`` ``None``: no pause of it waits, and the
    message may still be meant for it, e.g. a replayed answer; ``None``: not its business)."""

    name: str

    def permission(self, tool_input: Mapping[str, Any], context: ToolContext) -> Permission | None:
        """``None`` when the call needs no permission."""
        ...

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        ...


@dataclass
class ToolCall:
    """Holds the outcome of :func:`run_tool` once its events are consumed."""

    tool_use_id: str
    name: str
    input: Mapping[str, Any]
    outcome: ToolOutcome | None = None
    allowed: bool = True


async def run_tool(tool: Tool, call: ToolCall, context: ToolContext, *,
                   announced: bool = False, resumed: bool = False,
                   continuation: dict[str, Any] | None = None) -> AsyncIterator[RuntimeEvent]:
    """Emit the lifecycle of one tool call; ``call.outcome`` holds the result afterwards.

    ``announced``: the runtime already emitted ``ToolStarted`` and the input deltas as
    the input arrived (a model streaming a call's arguments); the lifecycle goes on from
    ``ToolInputComplete``. ``resumed``: the call paused for its permission before a restart
    (:class:`~iac_code.agents.runtime.ResumableRuntime`): its started and input events were
    published then, so the lifecycle starts at the :class:`PermissionRequest`, which is always
    asked (the kernel answers it from the recovered decision). ``continuation``: the frame to
    set on the call's permission request (it makes the wait durable).
    """
    if not announced and not resumed:
        yield ToolStarted(call.tool_use_id, call.name)
        encoded = json.dumps(dict(call.input), ensure_ascii=False)
        for start in range(0, len(encoded), INPUT_CHUNK):
            yield ToolInputDelta(call.tool_use_id, call.name, encoded[start:start + INPUT_CHUNK])
    if not resumed:
        yield ToolInputComplete(call.tool_use_id, call.name, call.input)
    context = replace(context, tool_use_id=call.tool_use_id)
    needs = tool.permission(call.input, context)
    if needs is None and resumed:
        needs = Permission(is_read_only=None)
    if needs is not None:
        request = PermissionRequest(call.tool_use_id, call.name, call.input, is_read_only=needs.is_read_only,
                                    operation=dict(needs.operation), api_calls=tuple(needs.api_calls),
                                    display_parameters=(tuple(needs.display_parameters)
                                                        if needs.display_parameters is not None else None),
                                    continuation=continuation)
        yield request
        call.allowed = bool(request.allowed)
        if not call.allowed:
            call.outcome = ToolOutcome(error="permission denied")
            yield ToolFailed(call.tool_use_id, call.name, "permission denied")
            return
    try:
        if getattr(tool, "reports_progress", False):
            outcome = None
            async for event in _reporting(tool, call, context):
                if isinstance(event, ToolOutcome):
                    outcome = event
                else:
                    yield event
            assert outcome is not None
        else:
            outcome = await tool.run(call.input, context)
    except Exception as exc:  # a tool bug must not end the turn without a trace
        outcome = ToolOutcome(error=f"{call.name} failed: {type(exc).__name__}")
    call.outcome = outcome
    if (outcome.question is not None or outcome.pause is not None) and outcome.error is None:
        return  # the call completes when the user has answered (the runtime reports it then)
    if outcome.error is not None:
        yield ToolFailed(call.tool_use_id, call.name, outcome.error)
    else:
        yield ToolCompleted(call.tool_use_id, call.name, dict(outcome.result), artifact=outcome.artifact)


async def _reporting(tool: Tool, call: ToolCall, context: ToolContext) -> AsyncIterator[Any]:
    """Run a tool that reports progress: its reported events as they come, then its :class:`ToolOutcome`.

    Cancelled (the task is cancelled, or the stream closed), the tool's run is cancelled and awaited."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    running = asyncio.ensure_future(tool.run(call.input, replace(context, report=queue.put_nowait)))
    try:
        while not running.done():
            getter = asyncio.ensure_future(queue.get())
            try:
                await asyncio.wait({running, getter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                yield getter.result()
        while not queue.empty():
            yield queue.get_nowait()
        yield running.result()
    finally:
        if not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running
