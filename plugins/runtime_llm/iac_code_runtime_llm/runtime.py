"""The ``llm`` runtime: a turn is a loop of streamed model calls and the tools the model asks for.

Each round streams one chat completion: text deltas and provider reasoning are passed on
as they arrive, tool calls as ``ToolStarted`` and argument deltas; when the round ends
the tools run through :func:`iac_code.agents.tools.run_tool` (so permissions, pauses, audit and
artifacts are the kernel's, as for every runtime) and their results go back to the model
for the next round. A round without tool calls ends the turn.

Permission waits are durable (``resume_turn``): the continuation frame of a tool call that asks is
the transcript up to and including the assistant message that made the call (with the results of
the round's calls before it), the calls of the round still to run, and the round and token counts.
Resumed, the call runs (allowed) or gets the denial as its result, the round's other calls run, and
the conversation with the model goes on.

Tools are found through the kernel's tool hook by name; nothing here imports another
plugin. The API key of a turn (``metadata.iac_code.iac_code_api_key``, else the
configuration, else ``IAC_CODE_API_KEY``) is only ever put in the ``Authorization``
header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp

from iac_code.api import (
    RuntimeEvent,
    TextDelta,
    Thinking,
    ToolCall,
    ToolContext,
    ToolFailed,
    ToolOffer,
    ToolInputDelta,
    ToolStarted,
    Translator,
    TurnFailed,
    TurnRequest,
    Usage,
    Written,
    offered_tools,
    run_tool,
    safe_mode_tools,
    translator,
)
from iac_code.api import messages as m
from iac_code_runtime_llm import conversation, pauses, questions
from iac_code_runtime_llm.provider import Endpoint, ProviderError, stream_chat

if TYPE_CHECKING:
    from iac_code.api import PluginContext

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "qwen-plus"
PROVIDER_NAMES = {"dashscope": "Alibaba Cloud Model Studio (DashScope)", "openai": "OpenAI-compatible API"}
BACKOFF_CAP = 8.0
RETRY_AFTER_CAP = 30.0
_TRUE = {"1", "true", "t", "yes", "y", "on", "enable", "enabled"}
_FALSE = {"0", "false", "f", "no", "n", "off", "disable", "disabled"}


@dataclass(frozen=True)
class Settings:
    """The runtime's settings, read once from the configuration (``llm-*``) and the environment."""

    base_url: str
    model: str = ""
    api_key: str = ""
    provider: str = "auto"
    timeout: float = 120.0
    max_tool_rounds: int = 8
    context_tokens: int = 32_000
    max_retries: int = 3
    retry_backoff: float = 0.5

    def __repr__(self) -> str:  # no key in a log line
        return f"Settings(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def dialect(self) -> str:
        if self.provider != "auto":
            return self.provider
        return "dashscope" if "dashscope" in (urlsplit(self.base_url).hostname or "") else "openai"


@dataclass
class _Call:
    index: int
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    announced: bool = False
    pending: list[str] = field(default_factory=list)
    question: Any = None  # an ask_user_question call: the turn pauses for the answer
    pause: Any = None  # a tool's own question (InputPause): the turn pauses for the answer


@dataclass
class _Round:
    """What one streamed completion produced."""

    turn_id: str
    text: str = ""
    calls: dict[int, _Call] = field(default_factory=dict)
    usage: tuple[int, int] | None = None
    cached: int | None = None  # prompt tokens read from the provider's cache, when it says
    model: str = ""  # the model that answered, as the provider names it
    produced: bool = False

    def feed(self, chunk: Mapping[str, Any]) -> list[RuntimeEvent]:
        events: list[RuntimeEvent] = []
        if isinstance(chunk.get("model"), str) and chunk["model"].strip():
            self.model = chunk["model"].strip()
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0:
                self.cached = cached
        choices = chunk.get("choices")
        delta = choices[0].get("delta") if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
            else None
        if not isinstance(delta, dict):
            return events
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.append(Thinking(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text += content
            events.append(TextDelta(content))
        for piece in delta.get("tool_calls") or []:
            if isinstance(piece, dict):
                events.extend(self._tool_piece(piece))
        self.produced = self.produced or bool(events)
        return events

    def _tool_piece(self, piece: Mapping[str, Any]) -> list[RuntimeEvent]:
        index = piece.get("index") if isinstance(piece.get("index"), int) else len(self.calls)
        call = self.calls.setdefault(index, _Call(index))
        if isinstance(piece.get("id"), str) and piece["id"] and not call.call_id:
            call.call_id = piece["id"]
        function = piece.get("function") if isinstance(piece.get("function"), dict) else {}
        if isinstance(function.get("name"), str) and function["name"]:
            call.name += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            call.arguments += arguments
            call.pending.append(arguments)
        # A name may come in pieces: the call is announced once its arguments start (or the round ends).
        return self._announce(call) if call.name and call.pending else []

    def _announce(self, call: _Call) -> list[RuntimeEvent]:
        if not call.call_id:
            call.call_id = f"{self.turn_id}-call-{call.index}"
        events: list[RuntimeEvent] = []
        if not call.announced:
            call.announced = True
            events.append(ToolStarted(call.call_id, call.name))
        events.extend(ToolInputDelta(call.call_id, call.name, part) for part in call.pending)
        call.pending.clear()
        return events

    def flush(self) -> list[RuntimeEvent]:
        """Announce the calls whose arguments never started (a tool called with no input)."""
        events = [e for i in sorted(self.calls) if self.calls[i].name for e in self._announce(self.calls[i])]
        self.produced = self.produced or bool(events)
        return events


@dataclass
class _Counts:
    """How far a turn has got: model rounds made, token totals, cached input tokens, the model that answered."""

    rounds: int = 0
    totals: list[int] = field(default_factory=lambda: [0, 0])
    cached: int | None = None
    model: str = ""


class LlmRuntime:
    """An agent runtime driven by a model (see the module docstring)."""

    name = "llm"

    def __init__(self, settings: Settings, tools: Mapping[str, tuple[Any, Any]],
                 environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self._tools = dict(tools)  # tool name → (ToolSpec, tool object)
        self._env = os.environ if environ is None else environ

    @classmethod
    def from_context(cls, kernel: PluginContext) -> LlmRuntime:
        c = kernel.config
        settings = Settings(base_url=c.llm_base_url, model=c.llm_model, api_key=c.llm_api_key,
                            provider=c.llm_provider, timeout=c.llm_timeout, max_tool_rounds=c.llm_max_tool_rounds,
                            context_tokens=c.llm_context_tokens, max_retries=c.llm_max_retries,
                            retry_backoff=c.llm_retry_backoff)
        tools = {spec.name: (spec, spec.create(kernel)) for spec in kernel.tools().values()}
        runtime = cls(settings, tools)
        if not runtime.configured_key():
            logger.warning("agent-runtime: llm has no API key (set llm-api-key or IAC_CODE_API_KEY; a local model "
                           "server takes any value): every turn fails with 'Authentication required' unless its "
                           "message brings a key in metadata.iac_code.iac_code_api_key")
        return runtime

    def readiness(self) -> dict[str, Any]:
        """Whether the server's own model is usable (``/iac-code/readiness``): its provider and model, and
        where its key comes from (``config``, ``environment``), or ``missing: ["api_key"]``. No network call."""
        source = "config" if self.settings.api_key else "environment" if self.configured_key() else None
        model = self.settings.model or self._env.get("IAC_CODE_MODEL", "").strip() or DEFAULT_MODEL
        dialect = self.settings.dialect
        return {"ready": source is not None, "source": source, "provider": dialect,
                "providerDisplay": PROVIDER_NAMES.get(dialect, dialect), "model": model,
                "missing": [] if source is not None else ["api_key"]}

    def configured_key(self) -> str:
        """The server's own API key (``llm-api-key``, else ``IAC_CODE_API_KEY``); '' when there is none."""
        return self.settings.api_key or self._env.get("IAC_CODE_API_KEY", "").strip()

    # ------------------------------------------------------------------ the request

    def _model(self, turn: TurnRequest) -> str:
        chosen = turn.metadata.get("iac_code_model")
        if isinstance(chosen, str) and chosen.strip():
            return chosen.strip()
        return self.settings.model or self._env.get("IAC_CODE_MODEL", "").strip() or DEFAULT_MODEL

    def _key(self, turn: TurnRequest) -> str:
        chosen = turn.metadata.get("iac_code_api_key")
        if isinstance(chosen, str) and chosen.strip():
            return chosen.strip()
        return self.configured_key()

    def _tool_objects(self) -> dict[str, Any]:
        return {name: tool for name, (spec, tool) in self._tools.items()}

    def _tool_definitions(self, context: ToolContext,
                          offers: Mapping[str, ToolOffer] | None = None) -> list[dict[str, Any]]:
        table = [(name, spec.description, spec.parameters) for name, (spec, tool) in safe_mode_tools(self._tools).items()
                 if pauses.offered(tool, context)]
        table += [(name, o.description, o.parameters) for name, o in (offers or {}).items()]
        return [{"type": "function", "function": {
            "name": name, "description": description or name,
            "parameters": dict(parameters or {"type": "object", "properties": {}})}}
            for name, description, parameters in sorted(table, key=lambda item: item[0])]

    def _thinking(self, turn: TurnRequest) -> dict[str, Any]:
        raw = turn.metadata.get("thinking")
        options = dict(raw) if isinstance(raw, dict) else {}
        for alias, key in (("thinking_enabled", "enabled"), ("thinkingEnabled", "enabled"),
                           ("thinking_effort", "effort"), ("thinkingEffort", "effort"),
                           ("thinking_budget", "budget"), ("thinkingBudget", "budget")):
            for source in (options, turn.metadata):
                if alias in source and key not in options:
                    options[key] = source[alias]
        enabled = _flag(options.get("enabled"))
        effort = options.get("effort") if isinstance(options.get("effort"), str) and options["effort"].strip() else ""
        budget = _positive_int(options.get("budget"))
        body: dict[str, Any] = {}
        if self.settings.dialect == "dashscope":
            if enabled is not None:
                body["enable_thinking"] = enabled
            if budget is not None:
                body["thinking_budget"] = budget
        elif effort and enabled is not False:
            body["reasoning_effort"] = effort.strip()
        return body

    def _user_message(self, turn: TurnRequest) -> dict[str, Any]:
        text = turn.prompt
        if turn.manifest:
            names = ", ".join(f"{e.get('name', 'attachment')} ({e.get('mediaType', '?')})" for e in turn.manifest)
            text += f"\n\n[Attached: {names}]"
        return {"role": "user", "content": text}

    # ------------------------------------------------------------------ one answer (iac_code.api.ModelWriter)

    async def write(self, instructions: str, prompt: str, *, language: str = "en",
                    metadata: Mapping[str, Any] | None = None) -> Written:
        """One completion without tools or conversation (a pipeline's intent or summaries); ``ProviderError``
        (or ``RuntimeError`` without a key) when the model does not answer."""
        turn = TurnRequest(context_id="", task_id="write", prompt=prompt, cwd="", language=language,
                           metadata=dict(metadata or {}))
        key = self._key(turn)
        if not key:
            raise RuntimeError("no API key")
        model = self._model(turn)
        body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "system", "content": instructions}, {"role": "user", "content": prompt}]}
        state = _Round("write")
        async with aiohttp.ClientSession() as session:
            async for _ in self._round(session, Endpoint(self.settings.base_url, key, self.settings.timeout), body,
                                       state, {}):  # no context, so no llm_headers
                pass
        tokens = state.usage or (0, 0)
        return Written(state.text, model=model, provider=self.settings.dialect, input_tokens=tokens[0],
                       output_tokens=tokens[1])

    # ------------------------------------------------------------------ the turn

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        t = translator(turn.language)
        key = self._key(turn)
        if not key:
            yield TurnFailed(t(m.AUTH_REQUIRED))
            return
        context = ToolContext(cwd=turn.cwd, language=turn.language, metadata=turn.metadata, task_id=turn.task_id,
                              context_id=turn.context_id)
        resumed, replies, answered = questions.resume(turn.session, turn)  # a question that waited for this turn
        for event in resumed:
            yield event
        if not resumed:  # or a tool's own question (a resource selection), or a tool's claim on the message
            more, replies, answered, end_turn = await pauses.resume(turn.session, turn, context, self._tools)
            for event in more:
                yield event
            if end_turn:
                return
        messages = [*conversation.history(turn.session), *replies]
        if replies:  # the round the question paused is closed, whatever happens next
            conversation.save(turn.session, messages, self.settings.context_tokens)
        if not answered:
            messages.append(self._user_message(turn))
        messages = conversation.bounded(messages, self.settings.context_tokens)
        async for event in self._rounds(turn, key, messages, _Counts()):
            yield event

    async def resume_turn(self, turn: TurnRequest, frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """Go on from the permission of the frame's first pending call (see the module)."""
        messages = [dict(m) for m in frame.get("messages") or () if isinstance(m, Mapping)]
        calls = [_Call(index=n, call_id=str(c.get("id", "")), name=str(c.get("name", "")),
                       arguments=str(c.get("arguments", "")), announced=True)
                 for n, c in enumerate(frame.get("pending") or ()) if isinstance(c, Mapping)]
        totals = frame.get("totals") if isinstance(frame.get("totals"), list) else [0, 0]
        counts = _Counts(rounds=int(frame.get("rounds") or 0), totals=[int(totals[0]), int(totals[1])],
                         cached=frame.get("cached") if isinstance(frame.get("cached"), int) else None,
                         model=str(frame.get("model") or ""))
        context = ToolContext(cwd=turn.cwd, language=turn.language, metadata=turn.metadata, task_id=turn.task_id,
                              context_id=turn.context_id)
        offers: dict[str, ToolOffer] = {}  # a tool source's tools (MCP): the resumed call may be one
        async for event in offered_tools(self._tool_objects(), context, offers):
            yield event
        for n, call in enumerate(calls):
            async for event in self._run_call(call, context, messages, calls[n:], counts, resumed=n == 0,
                                              offers=offers):
                yield event
        conversation.save(turn.session, messages, self.settings.context_tokens)
        key = self._key(turn)
        if not key:
            yield TurnFailed(translator(turn.language)(m.AUTH_REQUIRED))
            return
        async for event in self._rounds(turn, key, messages, counts, offers):
            yield event

    async def _rounds(self, turn: TurnRequest, key: str, messages: list[dict[str, Any]],
                      counts: _Counts, offers: dict[str, ToolOffer] | None = None) -> AsyncIterator[RuntimeEvent]:
        """Model rounds (and their tool calls) until one makes no call, or ``llm-max-tool-rounds`` in all."""
        t = translator(turn.language)
        endpoint = Endpoint(self.settings.base_url, key, self.settings.timeout)
        system = {"role": "system", "content": conversation.SYSTEM_PROMPT.format(language=turn.language)}
        context = ToolContext(cwd=turn.cwd, language=turn.language, metadata=turn.metadata, task_id=turn.task_id,
                              context_id=turn.context_id)
        if offers is None:  # the turn's tools of tool sources (MCP servers), and what they publish first
            offers = {}
            async for event in offered_tools(self._tool_objects(), context, offers):
                yield event
        base: dict[str, Any] = {"model": self._model(turn), "stream": True, "stream_options": {"include_usage": True},
                                "tools": self._tool_definitions(context, offers), **self._thinking(turn)}
        totals = counts.totals
        async with aiohttp.ClientSession() as session:
            while counts.rounds < self.settings.max_tool_rounds:
                counts.rounds += 1
                state = _Round(turn.task_id)
                try:
                    async for event in self._round(session, endpoint, {**base, "messages": [system, *messages]},
                                                   state, turn.llm_headers):
                        yield event
                except ProviderError as exc:
                    yield self._failure(exc, state, t)
                    return
                if state.usage is not None:
                    totals[0] += state.usage[0]
                    totals[1] += state.usage[1]
                    if state.cached is not None:
                        counts.cached = (counts.cached or 0) + state.cached
                    counts.model = state.model or base["model"]
                    yield Usage(totals[0], totals[1], provider=self.settings.dialect,
                                model=counts.model, cached_input_tokens=counts.cached)
                calls = [state.calls[i] for i in sorted(state.calls) if state.calls[i].name]
                assistant: dict[str, Any] = {"role": "assistant", "content": state.text or None}
                if not calls:
                    messages.append({"role": "assistant", "content": state.text})
                    conversation.save(turn.session, messages, self.settings.context_tokens)
                    return
                assistant["tool_calls"] = [{"id": c.call_id, "type": "function",
                                            "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                                           for c in calls]
                messages.append(assistant)
                for n, call in enumerate(calls):
                    async for event in self._run_call(call, context, messages, calls[n:], counts, offers=offers):
                        yield event
                    if call.question is not None:  # ask_user_question: the turn ends on it
                        later = [c.call_id for c in calls[n + 1:]]
                        for event in questions.pause(turn.session, turn, call.call_id, call.question, later,
                                                     after_text=bool(state.text)):
                            yield event
                        conversation.save(turn.session, messages, self.settings.context_tokens)
                        return
                    if call.pause is not None:  # a tool's own question: the turn ends on it too
                        later = [c.call_id for c in calls[n + 1:]]
                        for event in pauses.pause(turn.session, turn, call.name, call.call_id, call.pause, later,
                                                  after_text=bool(state.text)):
                            yield event
                        conversation.save(turn.session, messages, self.settings.context_tokens)
                        return
                conversation.save(turn.session, messages, self.settings.context_tokens)
        yield TurnFailed(t(m.TOOL_ROUNDS_EXCEEDED, rounds=self.settings.max_tool_rounds), retryable=True)

    async def _round(self, session: aiohttp.ClientSession, endpoint: Endpoint, body: dict[str, Any],
                     state: _Round, headers: Mapping[str, str]) -> AsyncIterator[RuntimeEvent]:
        """One completion, retried (with backoff) while it failed retryably before showing anything.

        ``headers``: the context's ``llm_headers``, read at each call (an answer may have changed them).
        """
        for attempt in range(self.settings.max_retries + 1):
            try:
                async for chunk in stream_chat(session, endpoint, body, headers):
                    for event in state.feed(chunk):
                        yield event
                for event in state.flush():
                    yield event
                return
            except ProviderError as exc:
                if state.produced or not exc.retryable or attempt == self.settings.max_retries:
                    raise
                delay = min(BACKOFF_CAP, self.settings.retry_backoff * 2 ** attempt)
                if exc.retry_after is not None:
                    delay = max(delay, min(RETRY_AFTER_CAP, exc.retry_after))
                state.usage, state.cached = None, None
                await asyncio.sleep(delay)

    async def _run_call(self, call: _Call, context: ToolContext, messages: list[dict[str, Any]],
                        pending: list[_Call], counts: _Counts, *, resumed: bool = False,
                        offers: Mapping[str, ToolOffer] | None = None) -> AsyncIterator[RuntimeEvent]:
        """Run one call of the round (``pending``: it and the round's calls after it, for its continuation frame);
        ``resumed``: it paused for its permission before and goes on from there; ``offers``: the turn's tools
        of tool sources (MCP)."""
        entry = safe_mode_tools(self._tools).get(call.name)  # in safe mode, only its tools run
        if entry is None and offers and call.name in offers:
            entry = (None, offers[call.name].tool)
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        if entry is None or not isinstance(arguments, dict):
            error = f"unknown tool {call.name}" if entry is None else "the arguments are not a JSON object"
            yield ToolFailed(call.call_id, call.name, error)
            messages.append({"role": "tool", "tool_call_id": call.call_id,
                             "content": json.dumps({"error": error})})
            return
        tool_call = ToolCall(call.call_id, call.name, arguments)
        frame = {"runtime": "llm", "version": 1, "messages": list(messages),
                 "pending": [{"id": c.call_id, "name": c.name, "arguments": c.arguments} for c in pending],
                 "rounds": counts.rounds, "totals": list(counts.totals), "cached": counts.cached, "model": counts.model}
        async for event in run_tool(entry[1], tool_call, context, announced=True, resumed=resumed,
                                    continuation=frame):
            yield event
        outcome = tool_call.outcome
        if outcome is not None and outcome.question is not None and outcome.error is None:
            call.question = outcome.question  # answered by the next message: its tool message comes then
            return
        if outcome is not None and outcome.pause is not None and outcome.error is None:
            call.pause = outcome.pause  # the same, for a tool's own question
            return
        messages.append(conversation.tool_message(call.call_id, tool_call.outcome))

    @staticmethod
    def _failure(exc: ProviderError, state: _Round, t: Translator) -> TurnFailed:
        """The provider's failure as the caller sees it: no body, no URL, no key."""
        if exc.kind == "auth":
            return TurnFailed(t(m.AUTH_REQUIRED))
        if exc.kind == "http" and not exc.retryable:
            return TurnFailed(t(m.PROVIDER_ERROR, status=exc.status))
        if exc.kind == "bad_stream" and not state.produced:
            return TurnFailed(t(m.PROVIDER_BAD_STREAM), retryable=True)
        return TurnFailed(t(m.TEMPORARY_ERROR), retryable=True)


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        return True if text in _TRUE else False if text in _FALSE else None
    return None


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and int(value) > 0:
        return int(value)
    return None
