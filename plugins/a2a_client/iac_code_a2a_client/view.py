"""How ``iac-code a2a-client`` shows results: rich text for a person, JSON lines for scripts.

:class:`TextView` prints streamed assistant text as it arrives, tool activity as compact
status lines (a spinner while a tool runs, on a terminal only), artifacts with size and
path, the final state and usage. :class:`JsonView` prints one JSON object per event or
result. Both read the JSON form of the events (:mod:`iac_code_a2a_client.events`).
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any, TextIO
from urllib.parse import unquote, urlsplit

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from iac_code_a2a_client import events as ev
from iac_code_a2a_client.errors import shown_url


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """JSON as the client prints it: sorted keys, non-ASCII kept."""
    return json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False)


class View:
    """The interface both views implement (see the module docstring)."""

    json = False
    url = ""  # the agent's URL as the user gave it: named in the commands a view suggests

    def event(self, event: dict[str, Any]) -> None: ...

    def execution_snapshot(self, snapshot: dict[str, Any]) -> None:
        """Show an execution-control snapshot (``a2a-client execution ...``)."""

    def result(self, value: Any) -> None: ...

    def permission(self, envelope: dict[str, Any], *, interactive: bool, url: str = "") -> None: ...

    def pipeline_question(self, question: dict[str, Any], *, interactive: bool, follow_up: str = "") -> None:
        """Show the question a pipeline stopped on; without a terminal, also how to answer it."""

    def finish(self, summary: dict[str, Any]) -> None: ...

    def note(self, text: str) -> None: ...

    def error(self, text: str, code: int) -> None: ...

    def close(self) -> None: ...


def _reason(data: dict[str, Any]) -> str:
    """The human part of an event's ``data``: its message, reason or error."""
    for key in ("message", "reason", "error", "summary"):
        value = data.get(key)
        if value:
            return str(value.get("message", value) if isinstance(value, dict) else value)
    return ""


class JsonView(View):
    """One JSON object per line on stdout; errors also as ``{"error": {...}}`` for scripts."""

    json = True

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr

    def _line(self, value: Any) -> None:
        self._out.write(dumps(value, indent=None) + "\n")
        self._out.flush()

    def event(self, event: dict[str, Any]) -> None:
        self._line(event)

    def result(self, value: Any) -> None:
        self._out.write(dumps(value) + "\n")
        self._out.flush()

    def permission(self, envelope: dict[str, Any], *, interactive: bool, url: str = "") -> None:
        if not interactive:
            self._line({"permissionRequest": envelope})

    def pipeline_question(self, question: dict[str, Any], *, interactive: bool, follow_up: str = "") -> None:
        if not interactive:
            self._line({"pipelineQuestion": question, "answerWith": follow_up})

    def error(self, text: str, code: int) -> None:
        self._err.write(f"Error: {text}\n")
        self._line({"error": {"message": text, "exitCode": code}})


class TextView(View):
    """Rich output on a terminal; plain text (no colour, no spinner) when stdout is not one."""

    def __init__(self, console: Console | None = None, err: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.err = err or Console(stderr=True, highlight=False, soft_wrap=True)
        self._status: Any = None
        self._line_open = False
        self._streamed = False  # assistant text arrived as deltas: the final answer is not repeated
        self._execution_shown = ""  # the last execution-control phase a line was printed for
        self._waits_shown: set[tuple[str, str]] = set()  # (permissionWait status, inputId) already said

    # ------------------------------------------------------------------ helpers

    def _end_line(self) -> None:
        if self._line_open:
            self.console.print()
            self._line_open = False

    def _spin(self, text: str) -> None:
        if not self.console.is_terminal:
            return
        if self._status is None:
            self._status = self.console.status(text, spinner="dots")
            self._status.start()
        else:
            self._status.update(text)

    def _stop_spin(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _say(self, markup: str) -> None:
        self._stop_spin()
        self._end_line()
        self.console.print(markup)

    def _text(self, text: str) -> None:
        self._stop_spin()
        self.console.print(text, end="", markup=False, highlight=False)
        self._line_open = not text.endswith("\n")

    # ------------------------------------------------------------------ events

    def event(self, event: dict[str, Any]) -> None:
        kind, obj = ev.body(event)
        if kind in ("task", "statusUpdate"):
            self._durability(ev.iac_metadata(obj), obj)
        if kind == "message":
            text = ev.parts_text(obj.get("parts"))
            if text:
                self._text(text)
            return
        if kind == "artifactUpdate":
            self._artifact(obj.get("artifact", {}))
            return
        if kind == "task":
            if ev.state(event) in ev.TERMINAL_STATES | {"input-required"} and not self._streamed:
                answer = ev.task_answer(obj)
                if answer:
                    self._text(answer)
                    self._streamed = True
            for artifact in obj.get("artifacts", []) or []:
                self._artifact(artifact)
            return
        if kind != "statusUpdate":
            return
        for pipeline_event in ev.pipeline_events(event):
            self._pipeline(pipeline_event)
        meta = ev.iac_metadata(obj)
        tool = meta.get("tool")
        if isinstance(tool, dict):
            self._tool(tool)
        received = meta.get("inputReceived")
        if isinstance(received, dict):
            self._say(f"[dim]↳ answer recorded: {escape(str(received.get('decision', '')))}[/dim]")
        permission = meta.get("permission")
        if isinstance(permission, dict) and not permission.get("pending") and "autoApproved" in permission:
            verdict = "allowed by policy" if permission.get("autoApproved") else "denied by policy"
            self._say(f"[dim]↳ {escape(str(permission.get('toolName', '')))} {verdict}[/dim]")
        text = ev.status_text(obj)
        state = ev.state(event)
        if not text or ev.permission_request(event) is not None:  # a pause's question: shown by permission()
            return
        if "assistantFinal" in meta:
            if not self._streamed:
                self._text(text)
            return
        if state in ("failed", "rejected", "canceled") or "error" in meta:
            self._say(f"[red]{escape(text)}[/red]")
            return
        self._streamed = True
        self._text(text)

    def _durability(self, meta: dict[str, Any], obj: dict[str, Any]) -> None:
        """Lines for ``metadata.iac_code.executionControl`` (its phase changes) and for durable permission
        waits (``permissionWait`` suspended or suspending, ``permissionRecovered``)."""
        control = meta.get("executionControl")
        if isinstance(control, dict):
            self._execution_phase(control)
        recovered = meta.get("permissionRecovered")
        if isinstance(recovered, dict) and ("recovered", str(recovered.get("inputId", ""))) not in self._waits_shown:
            self._waits_shown.add(("recovered", str(recovered.get("inputId", ""))))
            self._say("[cyan]↻ the suspended permission question was recovered; the turn goes on[/cyan]")
        wait = meta.get("permissionWait")
        if not isinstance(wait, dict):
            return
        envelope = meta.get("input") if isinstance(meta.get("input"), dict) else {}
        status = str(wait.get("status", ""))
        key = (status, str(envelope.get("inputId", "")))
        if key in self._waits_shown:
            return
        if status == "suspended":
            self._waits_shown.add(key)
            task = str(envelope.get("requestTaskId") or obj.get("taskId") or obj.get("id") or "")
            context = str(envelope.get("contextId") or obj.get("contextId") or "")
            target = shlex.quote(shown_url(self.url)) if self.url else "<url>"
            self._say("[bold cyan]⏾ The permission question is waiting durably (suspended).[/bold cyan]")
            self.console.print(f"You can answer it later with: iac-code a2a-client call --url {target} "
                               f"--answer allow_once|deny --task-id {shlex.quote(task)} "
                               f"--context-id {shlex.quote(context)}", markup=False, soft_wrap=True)
        elif status == "suspending":
            self._waits_shown.add(key)
            self._say("[dim]↳ answer accepted; the suspended question is being recovered …[/dim]")

    EXECUTION_LINES = {
        "pausing": "[yellow]⏸ execution pausing[/yellow] (at the next safe point)",
        "paused": "[yellow]⏸ execution paused[/yellow]",
        "resuming": "[cyan]▶ execution resuming[/cyan]",
        "running": "[green]▶ execution resumed[/green]",
        "terminating": "[red]■ execution terminating[/red]",
        "terminated": "[red]■ execution terminated[/red]",
    }

    def _execution_phase(self, control: dict[str, Any]) -> None:
        """One line when the execution's phase changes (a first ``running`` is the ordinary case: silent)."""
        phase = str(control.get("phase", ""))
        if phase == "pause_committing":
            phase = "pausing"  # the pause is being written: still pausing to a person
        if phase == self._execution_shown or phase not in self.EXECUTION_LINES:
            return
        first = not self._execution_shown
        self._execution_shown = phase
        if first and phase == "running":
            return
        line = self.EXECUTION_LINES[phase]
        details = []
        if phase == "paused":
            if control.get("pauseReason"):
                details.append(f"reason {escape(str(control['pauseReason']))}")
            if control.get("expiresAt"):
                details.append(f"resume before {escape(str(control['expiresAt']))}")
        if phase in ("terminating", "terminated") and control.get("terminationReason"):
            details.append(f"reason {escape(str(control['terminationReason']))}")
        self._say(line + (f" · {' · '.join(details)}" if details else ""))

    def execution_snapshot(self, snapshot: dict[str, Any]) -> None:
        self._stop_spin()
        self._end_line()
        phase = str(snapshot.get("phase", "unknown"))
        style = {"running": "green", "paused": "yellow", "pausing": "yellow", "pause_committing": "yellow",
                 "resuming": "cyan", "terminating": "red", "terminated": "red"}.get(phase, "white")
        self.console.print(f"[{style}]● {escape(phase)}[/{style}] · execution "
                           f"{escape(str(snapshot.get('executionId', '')))} · context "
                           f"{escape(str(snapshot.get('contextId', '')))}")
        rows = [("task", snapshot.get("taskId")), ("status", snapshot.get("executionStatus")),
                ("pause", snapshot.get("pauseId")), ("pause reason", snapshot.get("pauseReason")),
                ("expires", snapshot.get("expiresAt")), ("termination", snapshot.get("terminationReason")),
                ("epoch", snapshot.get("connectionEpoch")), ("commit error", snapshot.get("commitError"))]
        blockers = snapshot.get("blockers")
        if isinstance(blockers, list) and blockers:
            rows.append(("waiting for", ", ".join(f"{b.get('kind', '?')} ×{b.get('count', '?')}"
                                                 for b in blockers if isinstance(b, dict))))
        operations = snapshot.get("externalOperations")
        if isinstance(operations, list) and operations:
            rows.append(("cloud operations", ", ".join(
                f"{o.get('product', '?')}:{o.get('action', '?')} {o.get('outcome', '')}".strip()
                for o in operations if isinstance(o, dict))))
        if snapshot.get("releaseReady"):
            rows.append(("release ready", "yes"))
        for label, value in rows:
            if value is not None and value != "":
                self.console.print(f"  {label}: {value}", markup=False, highlight=False)

    def _tool(self, tool: dict[str, Any]) -> None:
        name = escape(str(tool.get("name", "tool")))
        status = tool.get("status")
        if status in ("started", "input_delta", "input_complete"):
            self._end_line()
            size = tool.get("partialJsonLength")
            self._spin(f"{name} …" + (f" ({size} chars of input)" if size else ""))
        elif status == "completed":
            self._say(f"[green]✓[/green] {name}")
        elif status == "failed":
            error = tool.get("result", {}).get("error", "") if isinstance(tool.get("result"), dict) else ""
            self._say(f"[red]✗[/red] {name}: {escape(str(error)[:200])}")

    def _pipeline(self, event: dict[str, Any]) -> None:
        """One line for a pipeline event worth a person's attention (docs/pipeline.md, "Events")."""
        kind = str(event.get("eventType", ""))
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        step = escape(str(data.get("stepId") or (event.get("step") or {}).get("id", "") or ""))
        candidate = f"candidate {data.get('candidateIndex', '?')} {escape(str(data.get('candidateName', '')))}"
        if kind == "pipeline_started":
            self._say(f"[bold]pipeline {escape(str(data.get('pipelineName') or event.get('pipelineName', '')))}"
                      f"[/bold] started")
        elif kind == "pipeline_resumed":
            self._say("[bold]pipeline resumed[/bold]")
        elif kind == "step_started":
            self._say(f"[cyan]▸[/cyan] {step}")
        elif kind == "step_completed":
            self._say(f"[green]✓[/green] {step}")
        elif kind == "step_failed":
            self._say(f"[red]✗[/red] {step}: {escape(_reason(data))}")
        elif kind == "candidate_started":
            self._say(f"  [cyan]▸[/cyan] {candidate}")
        elif kind == "candidate_step_failed":
            self._say(f"  [red]✗[/red] {candidate} {step}: {escape(_reason(data))}")
        elif kind == "candidate_completed":
            cost = data.get("totalMonthlyCost")
            self._say(f"  [green]✓[/green] {candidate}" + (f" · {escape(str(cost))}" if cost else ""))
        elif kind == "candidate_failed":
            self._say(f"  [red]✗[/red] {candidate}: {escape(_reason(data))}")
        elif kind == "artifact_created":
            artifact = event.get("artifact") if isinstance(event.get("artifact"), dict) else {}
            name = artifact.get("filename") or artifact.get("name") or data.get("filename") or data.get("name") or "artifact"
            self._say(f"  [cyan]artifact[/cyan] {escape(str(name))}")
        elif kind == "pipeline_warning":
            self._say(f"[yellow]! {escape(str(data.get('code', 'warning')))}[/yellow] {escape(_reason(data))}")
        elif kind == "input_received":
            answer = data.get("action") or data.get("selectedLabel") or data.get("freeText") or ""
            self._say("[dim]↳ answer received" + (f": {escape(str(answer))}" if answer else "") + "[/dim]")
        elif kind == "rollback_completed":
            self._say(f"[yellow]↺ back to {escape(str(data.get('toStepId') or data.get('toStep') or ''))}[/yellow]")
        elif kind in ("pipeline_completed", "pipeline_canceled", "pipeline_failed"):
            style = {"pipeline_completed": "green", "pipeline_canceled": "yellow"}.get(kind, "red")
            self._say(f"[{style}]● {kind.replace('_', ' ')}[/{style}]"
                      + (f": {escape(_reason(data))}" if kind == "pipeline_failed" else ""))
        elif kind == "pipeline_handoff_ready":
            self._say(f"[bold]→ handoff[/bold]: {escape(str(data.get('action', '')))} "
                      f"({escape(str(data.get('outcome', '')))}); the next messages go to normal chat")

    def pipeline_question(self, question: dict[str, Any], *, interactive: bool, follow_up: str = "") -> None:
        self._stop_spin()
        self._end_line()
        options = [o for o in question.get("options", []) or [] if isinstance(o, dict)]
        self.console.print(f"[bold cyan]Pipeline question[/bold cyan] ({escape(str(question.get('kind', '')))}): "
                           f"{escape(str(question.get('prompt') or question.get('question') or ''))}")
        if any("total_monthly_cost" in o for o in options):
            table = Table("#", "Candidate", "Monthly cost")
            for o in options:
                table.add_row(str(o.get("candidate_index", "")), str(o.get("name", "")),
                              str(o.get("total_monthly_cost", "")))
            self.console.print(table)
            for o in options:
                if o.get("architecture_diagram"):
                    self.console.print(f"candidate {o.get('candidate_index', '')} {o.get('name', '')}:",
                                       markup=False)
                    self.console.print(f"```mermaid\n{str(o['architecture_diagram']).rstrip()}\n```",
                                       markup=False, highlight=False)
        for number, o in enumerate(options, 1):
            label = str(o.get("name") or o.get("label") or o.get("action") or o.get("id") or "")
            if o.get("action") and str(o["action"]).lower() != label.lower():
                label = f"{o['action']}: {label}"
            index = o.get("candidate_index", number)
            self.console.print(f"  {index}. {label}", markup=False)
        if question.get("kind") == "deployment_confirmation":
            for key in ("template_url", "cost"):
                value = question.get(key)
                if isinstance(value, dict):
                    value = value.get("total_monthly_cost") or value.get("total") or ""
                if value:
                    self.console.print(f"  {key.replace('_', ' ')}: {value}", markup=False)
        if not interactive and follow_up:
            self.console.print(f"Answer it with: {follow_up}", markup=False, soft_wrap=True)

    def _artifact(self, artifact: dict[str, Any]) -> None:
        parts = artifact.get("parts", []) or []
        if any(part.get("url") for part in parts):  # a served artifact's inline copy is not another artifact
            parts = [part for part in parts if part.get("url")]
        for part in parts:
            url = part.get("url") or ""
            meta = part.get("metadata", {}) if isinstance(part.get("metadata"), dict) else {}
            path = unquote(urlsplit(url).path) if url.startswith("file://") else url
            name = artifact.get("name") or part.get("filename") or "artifact"
            self._say(f"[cyan]artifact[/cyan] {escape(str(name))} · {ev.human_size(meta.get('byteSize'))} · "
                      f"{escape(path)}")

    def permission(self, envelope: dict[str, Any], *, interactive: bool, url: str = "") -> None:
        self._stop_spin()
        self._end_line()
        title = envelope.get("title") or envelope.get("toolName") or "permission"
        self.console.print(f"[bold yellow]Permission needed:[/bold yellow] {escape(str(title))}")
        for label, key in (("target", "target"), ("effect", "effect"), ("purpose", "purpose")):
            if envelope.get(key):
                self.console.print(f"  {label}: {escape(str(envelope[key]))}")
        if envelope.get("safeSummary"):
            self.console.print(f"  [dim]{escape(str(envelope['safeSummary']))}[/dim]")
        if not interactive:
            target = shlex.quote(shown_url(url)) if url else "<url>"
            task, context = (shlex.quote(str(envelope.get(k, ""))) for k in ("requestTaskId", "contextId"))
            self.console.print(f"Answer it with: iac-code a2a-client call --url {target} --answer allow_once|deny "
                               f"--task-id {task} --context-id {context}", markup=False)

    def finish(self, summary: dict[str, Any]) -> None:
        self._stop_spin()
        self._end_line()
        state = str(summary.get("state") or "unknown")
        style = {"completed": "green", "input-required": "cyan", "failed": "red", "rejected": "red",
                 "canceled": "yellow"}.get(state, "white")
        parts = [f"[{style}]● {escape(state)}[/{style}]"]
        if summary.get("taskId"):
            parts.append(f"task {escape(str(summary['taskId']))}")
        if summary.get("contextId"):
            parts.append(f"context {escape(str(summary['contextId']))}")
        usage = summary.get("usage") or {}
        if usage:
            parts.append(f"tokens {usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out")
        self.console.print(" · ".join(parts))

    def note(self, text: str) -> None:
        self._say(f"[dim]{escape(text)}[/dim]")

    def result(self, value: Any) -> None:
        self._stop_spin()
        self._end_line()
        self.console.print_json(dumps(value)) if self.console.is_terminal else self.console.print(
            dumps(value), markup=False, highlight=False, soft_wrap=True)

    def table(self, table: Table) -> None:
        self._stop_spin()
        self._end_line()
        self.console.print(table)

    def error(self, text: str, code: int) -> None:
        self._stop_spin()
        self._end_line()
        self.err.print(f"[red]Error:[/red] {escape(text)}")

    def close(self) -> None:
        self._stop_spin()
        self._end_line()
