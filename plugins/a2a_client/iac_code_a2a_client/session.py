"""One ``a2a-client call``: send, show the stream, answer permission questions, handle Ctrl-C.

The turn runs in phases on one ``asyncio.Runner``: a phase sends a message (or answers a
permission, or resubscribes) and shows its events until the stream ends. Between phases
the session talks to the person synchronously: a permission question is answered at the
terminal and its answer starts the next phase; Ctrl-C (which the runner turns into a
cancelled phase and ``KeyboardInterrupt``) asks once whether to cancel the remote task.
Without a terminal, a permission question prints the envelope and ends the command with
:attr:`ExitCode.INPUT_REQUIRED`; ``call --answer`` answers it later.
"""

from __future__ import annotations

import asyncio
import shlex
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.client import ClientCallContext
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, SendMessageRequest, SubscribeToTaskRequest
from google.protobuf.json_format import ParseDict

from iac_code_a2a_client import events as ev
from iac_code_a2a_client.connect import Agent
from iac_code_a2a_client.errors import ClientError, ExitCode, classify, shown_url
from iac_code_a2a_client.view import View

DECISIONS = ("allow_once", "deny")
# metadata.iac_code.error.reason of a refused workspace, as the client's hint says it.
WORKSPACE_REASONS = {
    "not_absolute": "not an absolute path",
    "outside_allowed_roots": "outside the directories the agent accepts as workspaces",
    "does_not_exist": "no such directory on the agent's machine",
    "not_a_directory": "not a directory on the agent's machine",
    "server_directory": "inside the agent's own state directories",
}


def message_request(prompt: str, *, metadata: Mapping[str, Any] | None = None, context_id: str = "",
                    task_id: str = "") -> SendMessageRequest:
    """A ``SendMessageRequest`` with one text part and ``metadata.iac_code``."""
    message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": prompt}]}
    if metadata:
        message["metadata"] = {"iac_code": dict(metadata)}
    if context_id:
        message["contextId"] = context_id
    if task_id:
        message["taskId"] = task_id
    return ParseDict({"message": message, "configuration": {"acceptedOutputModes": ["text/plain"]}},
                     SendMessageRequest())


def answer_request(envelope: Mapping[str, Any], decision: str) -> SendMessageRequest:
    """The sideband message answering a permission envelope (the seeds' exact payload)."""
    data = {"schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
            "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": decision}
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": envelope["requestTaskId"],
               "contextId": envelope["contextId"], "parts": [{"mediaType": "application/json", "data": data}]}
    return ParseDict({"message": message}, SendMessageRequest())


@dataclass
class _Phase:
    envelope: dict[str, Any] | None = None
    question: dict[str, Any] | None = None  # the pipeline question the turn stopped on
    interrupted: bool = False


@dataclass
class CallSession:
    """Runs one call against ``agent`` and returns its exit code (see :class:`ExitCode`)."""

    runner: asyncio.Runner
    agent: Agent
    view: View
    interactive: bool
    headers: Mapping[str, str]
    timeout: float | None
    url: str = ""  # the agent's URL, as the user gave it (named in hints and errors)
    cwd: str | None = None  # the workspace sent as metadata.iac_code.cwd (None: none sent)
    ask: Callable[[dict[str, Any]], str] | None = None  # interactive permission question → decision
    confirm: Callable[[str], bool] | None = None  # interactive yes/no question
    ask_pipeline: Callable[[dict[str, Any]], str] | None = None  # interactive pipeline question → answer text
    metadata: dict[str, Any] = field(default_factory=dict)  # metadata.iac_code of the turn, sent with answers
    follow_up_flags: list[str] = field(default_factory=list)  # call options a piped answer must repeat
    task_id: str = ""
    context_id: str = ""
    state: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)  # metadata.iac_code.error of the last failure

    def _context(self, unary: bool) -> ClientCallContext:
        return ClientCallContext(service_parameters=dict(self.headers), timeout=self.timeout if unary else None)

    # ------------------------------------------------------------------ phases

    async def _consume(self, stream: AsyncIterator[Any], phase: _Phase, first_note: str = "") -> None:
        try:
            async for response in stream:
                event = ev.as_json(response)
                if first_note:
                    self.view.note(first_note)  # said once the subscription is really open
                    first_note = ""
                self.task_id = ev.task_id(event) or self.task_id
                self.context_id = ev.context_id(event) or self.context_id
                self.state = ev.state(event) or self.state
                _, obj = ev.body(event)
                usage = ev.iac_metadata(obj).get("usage")
                if isinstance(usage, dict):
                    self.usage = usage
                error = ev.iac_metadata(obj).get("error")
                if isinstance(error, dict):
                    self.error = error
                envelope = ev.permission_request(event)
                phase.envelope = envelope if self.state == "input-required" else None
                if "statusUpdate" in event or "task" in event:
                    phase.question = ev.pipeline_question(event)
                self.view.event(event)
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    def _phase(self, make_stream: Callable[[], AsyncIterator[Any]], first_note: str = "") -> _Phase:
        phase = _Phase()
        try:
            self.runner.run(self._consume(make_stream(), phase, first_note))
        except KeyboardInterrupt:
            phase.interrupted = True
        except Exception as exc:
            raise classify(exc, url=self.url) from None
        return phase

    def _send(self, request: SendMessageRequest) -> _Phase:
        return self._phase(lambda: self.agent.client.send_message(request, context=self._context(True)))

    def _resubscribe(self) -> _Phase:
        return self._phase(lambda: self.agent.client.subscribe(SubscribeToTaskRequest(id=self.task_id),
                                                              context=self._context(False)),
                           first_note=f"Following task {self.task_id} again.")

    # ------------------------------------------------------------------ the call

    def run(self, request: SendMessageRequest) -> ExitCode:
        return self._loop(self._send(request))

    def answer(self, task_id: str, context_id: str, decision: str) -> ExitCode:
        """Answer the permission a paused task is waiting for, then show the rest of the turn."""
        try:
            task = ev.as_json(self.runner.run(self.agent.client.get_task(GetTaskRequest(id=task_id),
                                                                         context=self._context(True))))
        except Exception as exc:
            raise classify(exc, url=self.url) from None
        envelope = ev.permission_request(task)
        if envelope is None or ev.friendly_state(task.get("status", {}).get("state", "")) != "input-required":
            raise ClientError(f"Task {task_id} is not waiting for a permission answer.")
        if context_id and envelope.get("contextId") != context_id:
            raise ClientError(f"Task {task_id} belongs to another context than {context_id}.")
        self.task_id, self.context_id = task_id, str(envelope.get("contextId", ""))
        if ev.suspended_permission(task):
            self.view.note("The question was waiting durably (suspended); this answer resumes the turn.")
        return self._loop(self._send(answer_request(envelope, decision)))

    def _loop(self, phase: _Phase) -> ExitCode:
        while True:
            if phase.interrupted:
                resumed = self._interrupted()
                if resumed is None:
                    return ExitCode.INTERRUPTED
                phase = resumed
                continue
            if phase.envelope is not None:
                self.view.permission(phase.envelope, interactive=self.interactive, url=self.url)
                if not self.interactive or self.ask is None:
                    return ExitCode.INPUT_REQUIRED
                try:
                    decision = self.ask(phase.envelope)
                except (KeyboardInterrupt, EOFError):
                    self._cancel_remote()
                    return ExitCode.INTERRUPTED
                phase = self._send(answer_request(phase.envelope, decision))
                continue
            if phase.question is not None and self.state == "input-required":
                self.view.pipeline_question(phase.question, interactive=self.interactive,
                                            follow_up=self._follow_up())
                if not self.interactive or self.ask_pipeline is None:
                    self.view.finish({"state": self.state, "taskId": self.task_id, "contextId": self.context_id,
                                      "usage": self.usage})
                    return ExitCode.INPUT_REQUIRED
                try:
                    reply = self.ask_pipeline(phase.question)
                except (KeyboardInterrupt, EOFError):
                    self._cancel_remote()
                    return ExitCode.INTERRUPTED
                phase = self._send(message_request(reply, metadata=self.metadata, context_id=self.context_id,
                                                   task_id=self.task_id))
                continue
            self.view.finish({"state": self.state, "taskId": self.task_id, "contextId": self.context_id,
                              "usage": self.usage})
            if self.state in ("failed", "rejected", "canceled", "auth-required"):
                if self.state == "failed" and self.error.get("code") == "invalid_workspace":
                    self.view.error(self._workspace_hint(), ExitCode.TASK_FAILED)
                return ExitCode.TASK_FAILED
            return ExitCode.OK

    def _follow_up(self) -> str:
        """The command line that answers the pipeline's question later (a piped call cannot ask)."""
        target = shlex.quote(shown_url(self.url)) if self.url else "<url>"
        parts = ["iac-code a2a-client call --url", target, *self.follow_up_flags, "--task-id",
                 shlex.quote(self.task_id), "--context-id", shlex.quote(self.context_id), "-p", "'<answer>'"]
        return " ".join(parts)

    def _workspace_hint(self) -> str:
        """The agent refused the workspace: which one this client sent, why, and how to choose another."""
        code = str(self.error.get("reason", ""))
        why = WORKSPACE_REASONS.get(code, code or "no reason given")
        if self.cwd is None:
            return (f"The agent refused its own directory as the workspace ({why}): choose one with "
                    "--cwd <dir> (a directory on the agent's machine).")
        return (f"The agent refused the workspace this client sent, cwd {self.cwd} ({why}): choose another "
                "with --cwd <dir> (a directory on the agent's machine), or send none with --no-cwd (the agent "
                "then works in its own directory).")

    def _interrupted(self) -> _Phase | None:
        """Ctrl-C: cancel the remote task (asking first at a terminal); a phase when the person says no."""
        if not self.task_id or self.state in ev.TERMINAL_STATES:
            self.view.note("Interrupted.")
            return None
        if self.interactive and self.confirm is not None:
            try:
                keep_going = not self.confirm(f"Cancel remote task {self.task_id}?")
            except (KeyboardInterrupt, EOFError):
                keep_going = False
            if keep_going:
                return self._resubscribe()
        self._cancel_remote()
        return None

    def _cancel_remote(self) -> None:
        if not self.task_id:
            return
        try:
            task = self.runner.run(self.agent.client.cancel_task(CancelTaskRequest(id=self.task_id),
                                                                 context=self._context(True)))
            self.view.note(f"Canceled remote task {self.task_id} ({ev.friendly_state(ev.as_json(task)['status']['state'])}).")
        except KeyboardInterrupt:
            self.view.note("Interrupted again; the remote task may still run.")
        except Exception as exc:
            self.view.note(f"Could not cancel remote task {self.task_id}: {classify(exc).message}")
