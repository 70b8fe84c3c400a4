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

    def event(self, event: dict[str, Any]) -> None: ...

    def result(self, value: Any) -> None: ...

    def permission(self, envelope: dict[str, Any], *, interactive: bool, url: str = "") -> None: ...

    def finish(self, summary: dict[str, Any]) -> None: ...

    def note(self, text: str) -> None: ...

    def error(self, text: str, code: int) -> None: ...

    def close(self) -> None: ...


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
