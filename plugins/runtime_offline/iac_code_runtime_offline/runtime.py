"""The built-in offline agent runtime: the embedded, deterministic IaC engine.

Works with no network and no credentials. It picks one of the four advertised
skills from the prompt (an explicit ``metadata.iac_code.skill`` wins) and
works through tools, so progress streams as tool events and assistant text:

* ``iac_generation``: generate or edit a ROS/Terraform template, write it into
  the workspace (permission-gated) as a task artifact;
* ``iac_review``: review inline, attached, workspace or last-generated templates;
* ``terraform_ros_conversion``: convert alicloud Terraform to ROS;
* ``aliyun_ros_operations``: ROS stack operations through ``aliyun_api``.

The conversation state (last template, generation spec) lives in the context
session, so follow-ups edit instead of starting over. A working template someone
else set on the context (a pipeline's chosen candidate at its handoff,
``iac_code.api.working_template``) is adopted first: follow-ups edit that one.
Usage is an honest character-based estimate (about four characters per token),
not a tokenizer.

Its permission waits are durable (``resume_turn``): the two calls that ask (``write_file`` saving a
template, ``aliyun_api`` changing a stack) are each the last call of their turn, so the continuation
frame is the call itself and what follows it (``save``: say whether the file was saved; ``operate``:
report the ROS result). Earlier calls are not repeated: their results are in the context session the
kernel restores with the frame.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from iac_code.api import (
    AgentRuntimeSpec,
    PermissionRequest,
    RuntimeEvent,
    TextDelta,
    Tool,
    ToolCall,
    ToolContext,
    ToolOffer,
    ToolOutcome,
    Translator,
    TurnRequest,
    Usage,
    hookimpl,
    offered_tools,
    run_tool,
    safe_mode_tools,
    translator,
    working_template,
)
from iac_code.api import messages as m

if TYPE_CHECKING:
    from iac_code.api import PluginContext

SKILLS = ("iac_generation", "iac_review", "terraform_ros_conversion", "aliyun_ros_operations")
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.S)
_FILE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:ya?ml|json|tf))\b")
_STACK_NAME = re.compile(r"(?:named|called|name|名为|名称为?)\s*[:=]?\s*[\"']?([A-Za-z][A-Za-z0-9_-]{0,254})", re.I)
_STACK_ID = re.compile(r"\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b", re.I)
_REGION = re.compile(r"\b((?:cn|ap|us|eu|me|sa|na)-[a-z]+(?:-[a-z0-9]+)?)\b")
ADOPTED_KEY = "adopted_working_template"  # the SHA-256 of the working template this conversation took over


def estimate_tokens(text: str) -> int:
    """Character-based token estimate: ceil(len / 4)."""
    return math.ceil(len(text) / 4) if text else 0


def _chunks(text: str) -> list[str]:
    """Split prose after sentence ends (Latin or CJK), so it streams naturally."""
    return [p for p in re.split(r"(?<=[.!?] )|(?<=[。！？])", text) if p]


def choose_skill(turn: TurnRequest) -> str | None:
    """The skill for this turn: the metadata hint, else the intent of the whole prompt; ``None`` for help."""
    hint = turn.metadata.get("skill")
    if isinstance(hint, str) and hint in SKILLS:
        return hint
    from iac_code_runtime_offline.engine.intent import classify

    return classify(turn.prompt, turn.session.get("generation"))


def adopt_working_template(session: dict[str, Any]) -> None:
    """Take over a working template set on the context by someone else (once per version): it becomes the last
    template (reviews read it) and, when generating its ``request`` again reproduces its text exactly, the
    generation spec follow-ups edit."""
    working = working_template(session)
    if working is None or not working.text or session.get(ADOPTED_KEY) == working.sha256:
        return
    session[ADOPTED_KEY] = working.sha256
    name = working.filename.lower()
    fmt = "terraform" if name.endswith(".tf") else "ros-json" if name.endswith(".json") else "ros-yaml"
    if working.request:
        from iac_code_runtime_offline.engine.generation import generate

        result = generate(working.request)
        if result.text == working.text:
            session["generation"] = result.spec
            fmt = result.format
    session["last_template"] = {"text": working.text, "fileName": working.filename, "format": fmt}


def extract_template(prompt: str) -> str | None:
    """Template text given inline: a fenced block, or the prompt from where a template starts."""
    fenced = _FENCE.search(prompt)
    if fenced:
        return fenced.group(1)
    lines = prompt.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("ROSTemplateFormatVersion", '{"ROSTemplateFormatVersion"', "terraform {",
                                "resource \"", "provider \"", "variable \"")) or (
                stripped == "{" and "ROSTemplateFormatVersion" in prompt):
            return "\n".join(lines[index:])
    return None


class OfflineRuntime:
    """Deterministic runtime over the engine's tools."""

    name = "offline"

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = tools

    def readiness(self) -> dict[str, Any]:
        """Always ready: the engine is built in and needs no model, key or network."""
        return {"ready": True, "source": "builtin", "provider": "offline",
                "providerDisplay": "iac-code offline engine", "model": None, "missing": []}

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        adopt_working_template(turn.session)
        session = Session(turn, self._tools)
        handlers = {"iac_generation": session.generate, "iac_review": session.review,
                    "terraform_ros_conversion": session.convert, "aliyun_ros_operations": session.operate}
        mcp = mcp_request(turn.prompt)
        if mcp is not None:  # "use the <server> MCP server to <tool> ...": a call of that server's tool
            async for event in self._counted(turn, session.call_mcp(*mcp), 0):
                yield event
            return
        skill = choose_skill(turn)
        async for event in self._counted(turn, handlers[skill]() if skill is not None else session.help(), 0):
            yield event

    async def resume_turn(self, turn: TurnRequest, frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """Go on from the permission of the frame's call: the call (allowed or denied by the kernel), then
        what the turn does after it (see the module)."""
        session = Session(turn, self._tools)
        call = frame.get("call") if isinstance(frame.get("call"), Mapping) else {}
        events = session.resume(str(call.get("id", "")), str(call.get("name", "")), dict(call.get("input") or {}),
                                frame)
        async for event in self._counted(turn, events, int(frame.get("outputChars") or 0)):
            yield event

    @staticmethod
    async def _counted(turn: TurnRequest, events: AsyncIterator[RuntimeEvent],
                       said: int) -> AsyncIterator[RuntimeEvent]:
        """``events``, then the usage estimate; a permission request's frame learns how much was said before it."""
        output: list[str] = []
        async for event in events:
            if isinstance(event, TextDelta):
                output.append(event.text)
            elif isinstance(event, PermissionRequest) and event.continuation is not None:
                event.continuation["outputChars"] = said + len("".join(output))
            yield event
            await asyncio.sleep(0)  # a cancellation point between events
        yield Usage(estimate_tokens(turn.prompt), math.ceil((said + len("".join(output))) / 4))


class Session:
    """One turn's work: the tools, the context session and the turn's language."""

    def __init__(self, turn: TurnRequest, tools: Mapping[str, Tool]) -> None:
        self.turn = turn
        self.tools = safe_mode_tools(tools)
        self.t: Translator = translator(turn.language)
        self.context = ToolContext(cwd=turn.cwd, language=turn.language, metadata=turn.metadata,
                                   task_id=turn.task_id, context_id=turn.context_id)
        self._calls = 0

    def _call(self, name: str, tool_input: dict[str, Any]) -> ToolCall:
        self._calls += 1
        return ToolCall(f"{self.turn.task_id}-{name}-{len(self.turn.history) // 2 + 1}-{self._calls}", name,
                        tool_input)

    async def _run(self, call: ToolCall, step: Mapping[str, Any] | None = None) -> AsyncIterator[RuntimeEvent]:
        """Run ``call``; ``step`` (what the turn does after it) makes its permission wait durable."""
        frame = None
        if step is not None:
            frame = {"runtime": "offline", "version": 1, **step,
                     "call": {"id": call.tool_use_id, "name": call.name, "input": dict(call.input)}}
        tool = self.tools.get(call.name)
        if tool is None:  # not offered (safe mode): the call fails without running
            call.outcome = ToolOutcome(error=f"The tool {call.name} is not available in safe mode.")
            return
        async for event in run_tool(tool, call, self.context, continuation=frame):
            yield event

    async def resume(self, call_id: str, name: str, tool_input: dict[str, Any],
                     frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """The resumed call from its permission on, then its step's rest."""
        tool = self.tools.get(name)
        if tool is None and name.startswith("mcp__"):  # an MCP tool: its server is started (again) first
            offers: dict[str, ToolOffer] = {}
            async for event in offered_tools(self.tools, self.context, offers):
                yield event
            tool = offers[name].tool if name in offers else None
        if tool is None or not call_id:
            return
        call = ToolCall(call_id, name, tool_input)
        async for event in run_tool(tool, call, self.context, resumed=True):
            yield event
        step = frame.get("step")
        rest = self._mcp_said(call) if step == "mcp" else \
            self._saved(call, str(frame.get("file", ""))) if step == "save" else \
            self._operated(call, str(frame.get("action", ""))) if step == "operate" else None
        if rest is not None:
            async for event in rest:
                yield event

    def _say(self, text: str) -> TextDelta:
        return TextDelta(text + "\n")

    # ------------------------------------------------------------------ skills

    async def help(self) -> AsyncIterator[RuntimeEvent]:
        for chunk in _chunks(self.t(m.OFFLINE_HELP)):
            yield TextDelta(chunk)

    async def generate(self) -> AsyncIterator[RuntimeEvent]:
        call = self._call("generate_template", {"request": self.turn.prompt,
                                                "previous": self.turn.session.get("generation")})
        async for event in self._run(call):
            yield event
        result = call.outcome.private if call.outcome is not None else None
        if result is None:
            yield self._say(self.t(m.INTERNAL_FAILURE))
            return
        if not result.resources:  # nothing could be mapped: say so, write nothing
            yield self._say(self.t(m.NOT_MAPPED, items=", ".join(result.unmapped) or self.turn.prompt[:200]))
            return
        self.turn.session["generation"] = result.spec
        self._remember(result.text, result.file_name, result.format)
        yield self._say(self.t(m.TEMPLATE_READY, file=result.file_name))
        language = "hcl" if result.format == "terraform" else "json" if result.format == "ros-json" else "yaml"
        yield TextDelta(f"```{language}\n{result.text.rstrip()}\n```\n")
        if result.unmapped:
            yield self._say(self.t(m.NOT_MAPPED, items=", ".join(result.unmapped)))
        async for event in self._save(result.file_name, result.text):
            yield event

    async def review(self) -> AsyncIterator[RuntimeEvent]:
        async for event in self._load_source(".tf", ".yaml", ".yml", ".json"):
            yield event
        text, name = self.source
        if text is None:
            yield self._say(self.t(m.REVIEW_NOTHING))
            return
        call = self._call("review_template", {"text": text, "fileName": name})
        async for event in self._run(call):
            yield event
        report = call.outcome.private if call.outcome is not None else None
        if report is not None:
            for chunk in self._report_lines(report):
                yield TextDelta(chunk)

    def _report_lines(self, report: Any) -> list[str]:
        """The review as readable text in the turn's language (rule texts stay as the engine wrote them)."""
        t = self.t
        subject = t({"ros": m.REVIEW_SUBJECT_ROS, "terraform": m.REVIEW_SUBJECT_TERRAFORM}.get(
            report.format, m.REVIEW_SUBJECT_UNKNOWN))
        if not report.findings:
            return [t(m.REVIEW_CLEAN, subject=subject) + "\n"]
        severity = {"error": t(m.SEVERITY_ERROR), "warning": t(m.SEVERITY_WARNING), "info": t(m.SEVERITY_INFO)}
        lines = [t(m.REVIEW_HEADLINE, subject=subject, errors=report.count("error"),
                   warnings=report.count("warning"), infos=report.count("info")) + "\n"]
        for finding in report.findings:
            lines.append("\n" + t(m.REVIEW_FINDING, severity=severity.get(finding.severity, finding.severity),
                                   rule=finding.rule_id, location=finding.location) + "\n")
            lines.append("  " + t(m.REVIEW_PROBLEM, message=finding.message) + "\n")
            lines.append("  " + t(m.REVIEW_FIX, fix=finding.fix) + "\n")
        return lines

    async def convert(self) -> AsyncIterator[RuntimeEvent]:
        async for event in self._load_source(".tf"):
            yield event
        text, _ = self.source
        if text is None:
            yield self._say(self.t(m.CONVERT_NOTHING))
            return
        call = self._call("convert_terraform", {"text": text})
        async for event in self._run(call):
            yield event
        result = call.outcome.private if call.outcome is not None else None
        if result is None:
            yield self._say(self.t(m.INTERNAL_FAILURE))
            return
        yield self._say(self.t(m.CONVERTED, count=len(result.converted)))
        yield TextDelta(f"```yaml\n{result.text.rstrip()}\n```\n")
        if result.unconverted:
            yield self._say(self.t(m.NOT_CONVERTED, items="; ".join(result.unconverted)))
        if result.unmapped_properties:  # arguments of converted resources that are not in the template
            yield self._say(self.t(m.NOT_CONVERTED, items="; ".join(result.unmapped_properties)))
        if result.converted:
            self._remember(result.text, "converted.ros.yaml", "ros-yaml")
            async for event in self._save("converted.ros.yaml", result.text):
                yield event

    async def operate(self) -> AsyncIterator[RuntimeEvent]:
        action, params = self._ros_request()
        if action is None:
            yield self._say(self.t(m.ROS_NO_TEMPLATE))
            return
        call = self._call("aliyun_api", {"action": action, "params": params})
        async for event in self._run(call, {"step": "operate", "action": action}):
            yield event
        async for event in self._operated(call, action):
            yield event

    async def _operated(self, call: ToolCall, action: str) -> AsyncIterator[RuntimeEvent]:
        """What the turn says after its ROS call (and the stack id it remembers)."""
        outcome = call.outcome
        if outcome is None or outcome.error is not None:
            error = outcome.error if outcome is not None else "unknown error"
            yield self._say(self.t(m.ROS_CALL_FAILED, action=action, error=error))
            return
        yield self._say(self.t(m.ROS_CALL_DONE, action=action))
        result = outcome.result.get("result")
        if isinstance(result, Mapping):
            for key in ("StackId", "Status", "StatusReason", "TotalCount"):
                if key in result:
                    yield TextDelta(f"- {key}: {result[key]}\n")
            if isinstance(result.get("StackId"), str):
                self.turn.session["stack_id"] = result["StackId"]

    async def call_mcp(self, server: str, request: str) -> AsyncIterator[RuntimeEvent]:
        """Call the MCP tool of ``server`` that ``request`` names (see :func:`mcp_request`) and show its result."""
        offers: dict[str, ToolOffer] = {}
        async for event in offered_tools(self.tools, self.context, offers):
            yield event
        chosen = pick_mcp_tool(offers, server, request)
        if chosen is None:
            names = ", ".join(sorted(n for n in offers if _server_part(n) == _sanitise(server))) or "none"
            yield self._say(f"No tool of the MCP server '{server}' matches the request (its tools: {names}).")
            return
        call = self._call("mcp", mcp_arguments(request))
        call = ToolCall(call.tool_use_id.replace("-mcp-", f"-{chosen}-", 1), chosen, call.input)
        frame = {"runtime": "offline", "version": 1, "step": "mcp",
                 "call": {"id": call.tool_use_id, "name": call.name, "input": dict(call.input)}}
        async for event in run_tool(offers[chosen].tool, call, self.context, continuation=frame):
            yield event
        async for event in self._mcp_said(call):
            yield event

    async def _mcp_said(self, call: ToolCall) -> AsyncIterator[RuntimeEvent]:
        outcome = call.outcome
        if outcome is None or outcome.error is not None:
            yield self._say(f"The MCP tool {call.name} failed: {outcome.error if outcome else 'no result'}")
            return
        yield self._say(f"The MCP tool {call.name} answered:")
        text = str(outcome.result.get("content", ""))
        yield TextDelta(text[:4000] + ("\n[...]" if len(text) > 4000 else "") + "\n")

    # ------------------------------------------------------------------ helpers

    def _remember(self, text: str, file_name: str, fmt: str) -> None:
        self.turn.session["last_template"] = {"text": text, "fileName": file_name, "format": fmt}

    async def _save(self, file_name: str, text: str) -> AsyncIterator[RuntimeEvent]:
        call = self._call("write_file", {"path": file_name, "content": text})
        async for event in self._run(call, {"step": "save", "file": file_name}):
            yield event
        async for event in self._saved(call, file_name):
            yield event

    async def _saved(self, call: ToolCall, file_name: str) -> AsyncIterator[RuntimeEvent]:
        saved = call.outcome is not None and call.outcome.error is None
        yield self._say(self.t(m.TEMPLATE_SAVED if saved else m.TEMPLATE_NOT_SAVED, file=file_name))

    async def _load_source(self, *suffixes: str) -> AsyncIterator[RuntimeEvent]:
        """Find the template to work on; sets ``self.source`` to ``(text, file name)``.

        Inline text (a fenced block, an attached part) first, then a workspace
        file named in the prompt (read with ``read_file``), then the last
        template of this conversation.
        """
        self.source: tuple[str | None, str | None] = (None, None)
        inline = extract_template(self.turn.prompt)
        if inline is not None:
            self.source = (inline, None)
            return
        for match in _FILE.finditer(self.turn.prompt):
            name = match.group(1)
            if name.endswith(suffixes):
                call = self._call("read_file", {"path": name})
                async for event in self._run(call):
                    yield event
                if call.outcome is not None and call.outcome.error is None:
                    self.source = (call.outcome.private, name)
                return
        last = self.turn.session.get("last_template")
        if isinstance(last, dict) and isinstance(last.get("text"), str):
            self.source = (last["text"], last.get("fileName"))

    def _ros_request(self) -> tuple[str | None, dict[str, Any]]:
        prompt = self.turn.prompt
        lower = prompt.lower()
        last = self.turn.session.get("last_template")
        body = last.get("text") if isinstance(last, dict) else None
        from iac_code_runtime_offline.engine.aliyun_api import metadata_region

        region = (metadata_region(self.turn.metadata) or
                  (_REGION.search(lower).group(1) if _REGION.search(lower) else "cn-hangzhou"))
        stack_id = _STACK_ID.search(prompt)
        known_id = stack_id.group(1) if stack_id else self.turn.session.get("stack_id")
        name_match = _STACK_NAME.search(prompt)
        name = name_match.group(1) if name_match else "iac-code-stack"
        if re.search(r"\blist\b|列出|列表", lower):
            return "ListStacks", {"RegionId": region}
        if re.search(r"\bdelete\b|删除", lower):
            return ("DeleteStack", {"RegionId": region, "StackId": known_id}) if known_id else (None, {})
        if re.search(r"\b(status|get|why|describe)\b|状态|失败", lower) and known_id:
            return "GetStack", {"RegionId": region, "StackId": known_id}
        if body is None:
            return None, {}
        if re.search(r"\bvalidate\b|校验|验证", lower):
            return "ValidateTemplate", {"RegionId": region, "TemplateBody": body}
        if re.search(r"\bpreview\b|预览", lower):
            return "PreviewStack", {"RegionId": region, "StackName": name, "TemplateBody": body}
        if re.search(r"\bupdate\b|更新", lower) and known_id:
            return "UpdateStack", {"RegionId": region, "StackId": known_id, "TemplateBody": body}
        if re.search(r"\b(create|deploy)\b|创建|部署", lower):
            return "CreateStack", {"RegionId": region, "StackName": name, "TemplateBody": body}
        return None, {}


_MCP_REQUEST = re.compile(r"\buse\s+(?:the\s+)?[\"'`]?([A-Za-z0-9_.-]+)[\"'`]?\s+mcp\s+server\s+to\s+(.+)",
                          re.I | re.S)
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)
_PAIR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")


def _sanitise(name: str) -> str:
    return re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_-]+", "_", name)).strip("_").lower()


def _server_part(public: str) -> str:
    parts = public.split("__")
    return parts[1].lower() if len(parts) >= 3 else ""


def mcp_request(prompt: str) -> tuple[str, str] | None:
    """``use the <server> MCP server to <request>`` (case-insensitive): the server and the request, else ``None``."""
    match = _MCP_REQUEST.search(prompt)
    return (match.group(1), match.group(2).strip()) if match else None


def _words(text: str) -> set[str]:
    words = set()
    for word in re.findall(r"[A-Za-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower()):
        words.add(word)
        if len(word) > 3 and word.endswith("s"):
            words.add(word[:-1])
    return words


def pick_mcp_tool(offers: Mapping[str, ToolOffer], server: str, request: str) -> str | None:
    """The tool of ``server`` the request names: the one whose name's words all appear in the request before any
    arguments (most words wins, then the shorter name, then alphabetical); a public name given as is wins."""
    mine = sorted(n for n in offers if _server_part(n) == _sanitise(server))
    for name in mine:
        if name in request:
            return name
    head = _JSON_OBJECT.split(request, 1)[0]
    head = _PAIR.sub(" ", head)
    said = _words(head)
    best: tuple[int, int, str] | None = None
    for name in mine:
        words = _words(name.split("__", 2)[2])
        if words and words <= said:
            score = (-len(words), len(name), name)
            best = score if best is None or score < best else best
    return best[2] if best is not None else None


def mcp_arguments(request: str) -> dict[str, Any]:
    """A call's arguments: the request's JSON object, else its ``key=value`` pairs (numbers and booleans parsed)."""
    import json

    found = _JSON_OBJECT.search(request)
    if found:
        try:
            value = json.loads(found.group(0))
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
    arguments: dict[str, Any] = {}
    for key, raw in _PAIR.findall(request):
        text = raw[1:-1] if raw[:1] in "\"'" and len(raw) >= 2 else raw.rstrip(".,;")
        try:
            arguments[key] = json.loads(text) if raw[:1] not in "\"'" else text
        except ValueError:
            arguments[key] = text
    return arguments


@hookimpl
def iac_code_agent_runtimes() -> list[AgentRuntimeSpec]:
    def create(kernel: PluginContext) -> OfflineRuntime:
        from iac_code_runtime_offline.tools import tool_table

        return OfflineRuntime(tool_table(kernel))

    return [AgentRuntimeSpec(name="offline", create_runtime=create,
                             description="Deterministic offline IaC engine (no credentials needed).")]
