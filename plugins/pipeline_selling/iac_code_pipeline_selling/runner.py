"""What every pipeline of this plugin shares: the turn that publishes events (journal first), the run's state
(session plus an owner-only state file), the turn loop, the intent step with its clarification question, the
no-deployer ending and the handoff to normal chat.

A pipeline subclasses :class:`PipelineRuntime`, names its steps in a :class:`Layout` and writes ``_drive``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iac_code.api import (
    IacEngine,
    Interrupt,
    PipelineServices,
    PriceSource,
    Progress,
    RuntimeEvent,
    TextDelta,
    TurnFailed,
    TurnRequest,
    Understanding,
    WorkingTemplate,
    atomic_write,
    input_summary,
    mark_pipeline_handoff,
    mark_pipeline_waiting,
    read_private_file,
    set_working_template,
)
from iac_code_pipeline_selling import interrupts
from iac_code_pipeline_selling.answers import match_question
from iac_code_pipeline_selling.authoring import author_intent
from iac_code_pipeline_selling.backups import Backups
from iac_code_pipeline_selling.journal import JournalStore, envelope
from iac_code_pipeline_selling.price_sources import price_source_for
from iac_code_pipeline_selling.texts import text

logger = logging.getLogger(__name__)

DEPLOYMENT_CATEGORIES = ("generation",)
NARRATION_TYPES = frozenset({"message_started", "text_delta"})
DISPLAY_TYPES = NARRATION_TYPES | {"tool_started", "tool_result", "candidate_detail_shown", "diagram_shown"}
"""The §2.5 display events (narration, engine tool calls, the choice's details and diagrams)."""
VAGUE_OPTIONS = (
    ("web_app", "opt_web", "opt_web_desc",
     "Deploy a web application with a MySQL database on ECS servers in cn-hangzhou."),
    ("http_api", "opt_api", "opt_api_desc", "Deploy an HTTP API web service in cn-hangzhou."),
    ("static_site", "opt_static", "opt_static_desc", "Deploy a static website with an OSS bucket in cn-hangzhou."),
)


def display_events_enabled() -> bool:
    """Whether the pipelines publish their display and telemetry events (narration, engine tool calls, the choice's
    details and diagrams): on by default, as the product does; ``IAC_CODE_PIPELINE_DISPLAY_EVENTS`` in
    ``0/false/no/off`` turns them off (docs/pipeline.md)."""
    return os.environ.get("IAC_CODE_PIPELINE_DISPLAY_EVENTS", "").strip().lower() not in ("0", "false", "no", "off")


def lifecycle(items: list[Any]) -> list[Any]:
    """``items`` (event types or events) without the display events, which interleave with the lifecycle events: what
    a client (or a test) following the run's steps looks at."""
    return [i for i in items if (i if isinstance(i, str) else i["eventType"]) not in DISPLAY_TYPES]


def new_hex() -> str:
    """32 random hex digits."""
    return uuid.uuid4().hex


def presentation(metadata: Mapping[str, Any]) -> str:
    """``rich-v1`` when the request asks for it (under ``iac_code`` or at the top), else ``plain``."""
    section = metadata.get("iac_code") if isinstance(metadata.get("iac_code"), Mapping) else metadata
    return "rich-v1" if section.get("candidatePresentation") == "rich-v1" else "plain"


def slug(name: str) -> str:
    """A file-name-safe lower-case form of a candidate's name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "candidate"


def template_filename(candidate: Mapping[str, Any], generated_filename: str) -> str:
    """How a candidate's stored template is named: ``candidate-<n>-<name>.<ext>``."""
    ext = Path(generated_filename).suffix or ".yaml"
    return f"candidate-{candidate['candidate_index']}-{slug(candidate['name'])}{ext}"


@dataclass(frozen=True)
class Layout:
    """A pipeline's parent steps: their order, their ``type`` and ``uiMode`` where they have one."""

    name: str
    steps: tuple[str, ...]
    types: Mapping[str, str] = field(default_factory=dict)
    ui_modes: Mapping[str, str] = field(default_factory=dict)


class ResumeRefused(BaseException):  # noqa: N818 - control flow of a resumed turn, never leaves resume_turn
    """A resumed turn tried to publish before it asked its paused question again: the run's state no longer leads
    straight back to that question, so the resumption ends with nothing published (the kernel then refuses the
    answer). A ``BaseException``, so that no step's own error handling records it as the run's failure."""


@dataclass
class Barrier:
    """Queued after an event whose processing by the kernel the pipeline waits for (e.g. a stored artifact):
    the turn loop resolves it when the kernel asks for the event after it."""

    future: asyncio.Future[None]


class RunTurn:
    """One turn of a run: publishes its events (journal first, then the output queue) and records its state."""

    def __init__(self, pipeline: PipelineRuntime, turn: TurnRequest, state: dict[str, Any]) -> None:
        self.pipeline = pipeline
        self.layout = pipeline.layout
        self.turn = turn
        self.state = state
        self.out: asyncio.Queue[Any] = asyncio.Queue()
        self.delegate = False
        self.language = state.get("language", turn.language)
        self.said = False
        self.interrupts = interrupts.Interrupts(self)  # user text that arrives while this turn runs
        # the continuation frame of the permission question this turn resumes, until it is asked again
        self.resuming: dict[str, Any] | None = None
        self.status = "working"
        self.narration_status = "working"
        self.narration: list[str] = []  # text said since the last narration events (:meth:`flush_narration`)
        # a turn of a run that narrated before resumes it after user input: its narration is the next round
        self.new_round = bool(state.get("narration"))

    async def emit(self, event_type: str, scope: str, status: str | None, data: Mapping[str, Any], *,
                   extra: Mapping[str, Any] | None = None, final: bool = False, message: str = "",
                   verbatim: bool = False, protect: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Journal one event, then queue it as a Progress (under the journal's lock, so the queue keeps sequence order);
        ``verbatim`` keeps ``data``'s keys as given. ``protect``: a protected publication, gated by a critical backup
        when backups are on (:mod:`.backups`; it says how to publish the event again if the backup fails)."""
        turn = self.turn
        if self.resuming is not None:  # nothing is published before the resumed question is asked again
            raise ResumeRefused(event_type)
        if self.narration and event_type not in NARRATION_TYPES:
            await self.flush_narration()  # what was said before this event is published before it
        if event_type == "interrupt_received" or (event_type == "permission_resolved" and not data.get("automatic")):
            self.new_round = True  # narration after an interrupt or the user's permission answer: the next round (§10)
        self.narration_status = self.status  # what narration journaled with this event carries (narration_events)
        if event_type not in NARRATION_TYPES and status is not None:
            self.status = status  # narration carries the run's status as the last event left it

        def build(sequence: int) -> dict[str, Any]:
            return envelope(sequence, event_type=event_type, scope=scope, status=status, data=data,
                            run_id=self.state["pipelineRunId"], task_id=turn.task_id, context_id=turn.context_id,
                            pipeline_name=self.layout.name, extra=extra, verbatim=verbatim)

        def publish(event: dict[str, Any]) -> None:
            self.out.put_nowait(Progress({"pipeline": event}, text=message, final=final))

        if protect is not None and self.pipeline.backups.enabled:
            event = await self.pipeline.backups.publish(self, event_type, protect, build, publish)
        else:
            event = await self.pipeline.store.publish(turn.context_id, build, publish)
        self.state["lastSequence"] = max(int(self.state.get("lastSequence", 0)), event["sequence"])  # not a replayed one
        return event

    def step(self, step_id: str) -> dict[str, Any]:
        """The §2.4 ``step`` object of a parent step (its current attempt)."""
        attempt = self.state["steps"].get(step_id, {}).get("attempt", 1)
        obj: dict[str, Any] = {"id": step_id, "runId": f"step-{step_id}-{attempt}", "attempt": attempt,
                               "index": self.layout.steps.index(step_id) + 1, "total": len(self.layout.steps)}
        if step_id in self.layout.types:
            obj["type"] = self.layout.types[step_id]
        if step_id in self.layout.ui_modes:
            obj["uiMode"] = self.layout.ui_modes[step_id]
        return obj

    async def record(self, step_id: str, **fields: Any) -> None:
        """Record a step's state (in the session and, durably, in the state file) before the run goes on."""
        self.state["steps"].setdefault(step_id, {"attempt": 1}).update(fields)
        self.state["currentStep"] = step_id
        await self.pipeline.save_state(self.turn.context_id, self.state)

    def status_of(self, step_id: str) -> str:
        """The recorded status of a step (``""`` before it started)."""
        return str(self.state["steps"].get(step_id, {}).get("status", ""))

    # Events are journaled before the state records what they announce: a kill -9 in between redoes the step
    # on resume, and the journal drops the events it already holds (journal.once_key), so none is lost or doubled.

    async def step_started(self, step_id: str) -> None:
        await self.interrupts.checkpoint(step_id)  # a waiting pause or rollback takes effect before the step
        await self.emit("step_started", "step", "working", {"step_id": step_id}, extra={"step": self.step(step_id)})
        await self.record(step_id, status="running")

    async def step_completed(self, step_id: str, conclusion: Mapping[str, Any]) -> None:
        await self.emit("step_completed", "step", "working", {"step_id": step_id, "conclusion": conclusion},
                        extra={"step": self.step(step_id)})
        await self.record(step_id, status="completed", result=dict(conclusion))

    async def ask(self, step_id: str, data: Mapping[str, Any], said: str, *, required: bool = True,
                  verbatim: bool = False) -> None:
        """Pause on ``step_id``: the text for generic clients, then the ``input_required`` event (the turn's last
        status carries it). A protected publication: behind a critical backup, the text goes with the event."""
        await self.interrupts.checkpoint(step_id, closing=True)  # the turn stops here: no more interrupts
        mark_pipeline_waiting(self.turn.session, self.turn.task_id)  # a message without taskId continues it
        if not self.pipeline.backups.enabled:
            self.say(said)
        extra: dict[str, Any] = {"step": self.step(step_id)}
        if required:
            extra["input"] = {**data, "required": True}
        await self.emit("input_required", "step", "input_required", data, extra=extra, final=True, verbatim=verbatim,
                        protect={"op": "ask", "step_id": step_id, "data": dict(data), "said": said,
                                 "required": required, "verbatim": verbatim})

    async def kernel_done(self) -> None:
        """Wait until the kernel has handled every event queued so far (e.g. stored an artifact)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.out.put_nowait(Barrier(future))
        await future

    def say(self, message: str, *, narrate: bool = True) -> str:
        """Assistant text for generic clients (the turn's ``status.message``; paragraphs apart), also published as
        pipeline narration (``message_started`` / ``text_delta``) before the next event or at the turn's end
        (``narrate=False``: the caller journals its narration itself, :meth:`narration_events`). Returns the delta."""
        delta = ("\n\n" if self.said else "") + message
        self.out.put_nowait(TextDelta(delta))
        self.said = True
        if narrate and self.pipeline.display_events:
            self.narration.append(delta)
        return delta

    def narration_events(self, delta: str, first: int) -> list[dict[str, Any]]:
        """The narration of ``delta`` as envelopes numbered from ``first`` (``message_started`` first when the round
        has none yet), for a publication whose sequences are assigned under the journal's lock (a backup-gated
        question and its text, a ``backup_blocked`` and its text): journaled and queued by the caller, so the stream
        keeps sequence order. Empty when display events are off. Advances the round like :meth:`flush_narration`."""
        if not delta or not self.pipeline.display_events:
            return []
        narration = self.state.setdefault("narration", {"round": 0, "messageId": ""})
        step = self.state.get("currentStep", self.layout.steps[0])
        extra = {"step": self.step(step)} if step in self.layout.steps else None
        scope = "step" if extra else "pipeline"
        specs: list[tuple[str, dict[str, Any]]] = []
        if self.new_round or not narration.get("messageId"):
            narration["round"] = int(narration.get("round", 0)) + 1
            narration["messageId"] = f"msg-{new_hex()}"
            self.new_round = False
            specs.append(("message_started", {"message_id": narration["messageId"], "role": "assistant",
                                              "round": narration["round"]}))
        specs.append(("text_delta", {"message_id": narration["messageId"], "round": narration["round"],
                                     "delta": delta}))
        return [envelope(first + i, event_type=kind, scope=scope, status=self.narration_status, data=data,
                         run_id=self.state["pipelineRunId"], task_id=self.turn.task_id,
                         context_id=self.turn.context_id, pipeline_name=self.layout.name, extra=extra)
                for i, (kind, data) in enumerate(specs)]

    async def flush_narration(self) -> None:
        """Publish the text said since the last flush as ``text_delta`` events of the round's assistant message
        (``message_started`` first when the round has none yet). A round is 1-based per run and advances when the
        run goes on after user input (a new turn) or an ``interrupt_received``; the state endpoint rebuilds
        ``display.messages`` from these events."""
        deltas, self.narration = self.narration, []
        if not deltas or self.resuming is not None:
            return
        narration = self.state.setdefault("narration", {"round": 0, "messageId": ""})
        step = self.state.get("currentStep", self.layout.steps[0])
        extra = {"step": self.step(step)} if step in self.layout.steps else None
        if self.new_round or not narration.get("messageId"):
            narration["round"] = int(narration.get("round", 0)) + 1
            narration["messageId"] = f"msg-{new_hex()}"
            self.new_round = False
            await self.emit("message_started", "step" if extra else "pipeline", self.status,
                            {"message_id": narration["messageId"], "role": "assistant", "round": narration["round"]},
                            extra=extra)
        for delta in deltas:
            await self.emit("text_delta", "step" if extra else "pipeline", self.status,
                            {"message_id": narration["messageId"], "round": narration["round"], "delta": delta},
                            extra=extra)

    async def show_candidates(self, step_id: str, options: list[Mapping[str, Any]]) -> None:
        """Before the candidate choice: ``candidate_detail_shown`` per offered candidate (name, summary and, with
        ``rich-v1``, its cost) and ``diagram_shown`` for each architecture diagram (Mermaid) it shows."""
        if not self.pipeline.display_events:
            return
        extra = {"step": self.step(step_id)}
        for option in options:
            detail = {"candidate_index": option["candidate_index"], "name": option["name"],
                      "summary": option["summary"]}
            if "total_monthly_cost" in option:
                detail.update(total_monthly_cost=option["total_monthly_cost"], cost_items=option.get("cost_items", []))
            await self.emit("candidate_detail_shown", "step", "working", detail, extra=extra)
            if option.get("architecture_diagram"):
                await self.emit("diagram_shown", "step", "working", {
                    "candidate_index": option["candidate_index"], "format": "mermaid",
                    "diagram": option["architecture_diagram"]}, extra=extra)

    async def tool_started(self, tool_use_id: str, tool_name: str, tool_input: Mapping[str, Any], scope: str,
                           extra: Mapping[str, Any]) -> None:
        """``tool_started`` for an engine call of the pipeline; ``input`` is the redacted shape of the call's input
        (never its values: the product's raw ``input`` is a defect not copied)."""
        if not self.pipeline.display_events:
            return
        await self.emit("tool_started", scope, "working", {
            "tool_use_id": tool_use_id, "tool_name": tool_name, "input": input_summary(tool_name, tool_input)},
            extra=extra)

    async def tool_result(self, tool_use_id: str, tool_name: str, scope: str, extra: Mapping[str, Any], *,
                          is_error: bool = False, result: Mapping[str, Any] | None = None,
                          normalized: Mapping[str, Any] | None = None) -> None:
        """``tool_result`` for an engine call: ``isError``, a small ``result`` and the ``normalizedConclusion`` the
        step keeps from it."""
        if not self.pipeline.display_events:
            return
        data: dict[str, Any] = {"tool_use_id": tool_use_id, "tool_name": tool_name, "is_error": is_error}
        if result is not None:
            data["result"] = dict(result)
        if normalized is not None:
            data["normalized_conclusion"] = dict(normalized)
        await self.emit("tool_result", scope, "working", data, extra=extra)


class PipelineRuntime:
    """The agent runtime of one pipeline: one instance serves every context (their turns never overlap)."""

    layout: Layout

    def __init__(self, services: PipelineServices, store: JournalStore, prices: PriceSource | None = None) -> None:
        self.services = services
        self.store = store
        self.prices: PriceSource = prices or price_source_for(services)  # ``price-source``'s, once per server
        config = getattr(services.context, "config", None)
        self.deployer = str(getattr(config, "deployer", "none") or "none")
        self.backups = Backups.shared(services, store)
        self.active: dict[str, RunTurn] = {}  # context id → its turn while the pipeline drives it (interrupts)
        self.display_events = display_events_enabled()

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def engine(self) -> IacEngine | None:
        return self.services.engine

    # ------------------------------------------------------------------ state

    def _state_path(self, context_id: str) -> Path | None:
        if self.store.directory is None:
            return None
        return self.store.directory / (hashlib.sha256(context_id.encode("utf-8")).hexdigest()[:40] + ".state.json")

    async def save_state(self, context_id: str, state: dict[str, Any]) -> None:
        """Write the run's state atomically (nothing when persistence is off), as its next ``revision``."""
        path = self._state_path(context_id)
        if path is not None:
            state["revision"] = int(state.get("revision", 0)) + 1
            data = json.dumps(state, ensure_ascii=False, sort_keys=True).encode("utf-8")
            await asyncio.to_thread(atomic_write, path, data)

    def _load_state(self, turn: TurnRequest) -> dict[str, Any] | None:
        """The session's state, or the state file's when that is newer (the kernel lost the end of a cut turn): the
        one that knows more events, and of two that know as many the later revision (the kernel may have written
        the session while the turn ran, with the state as it was between two of the file's revisions)."""
        session = turn.session.get("pipeline")
        path = self._state_path(turn.context_id)
        stored: dict[str, Any] | None = None
        if path is not None and path.exists():
            with contextlib.suppress(OSError, ValueError):
                raw = read_private_file(path)
                stored = json.loads(raw) if raw else None
        candidates = [s for s in (session, stored) if isinstance(s, dict)]
        if not candidates:
            return None
        best = max(candidates, key=lambda s: (int(s.get("lastSequence", 0)), int(s.get("revision", 0))))
        turn.session["pipeline"] = best
        return best

    async def handed_off(self, context_id: str) -> bool:
        """Whether the context's run handed off, by the state file or, when a crash kept the state from recording
        it, by the journal (the kernel asks when its session does not say so: a crash cut the turn that handed off
        before the session was written)."""
        path = self._state_path(context_id)
        if path is None or not path.exists():
            return False
        try:
            raw = await asyncio.to_thread(read_private_file, path)
            state = json.loads(raw) if raw else None
        except (OSError, ValueError):
            return False
        if not isinstance(state, dict):
            return False
        return state.get("phase") == "handed_off" or self._journaled_handoff(context_id, state) is not None

    def new_state(self, turn: TurnRequest) -> dict[str, Any]:
        """A fresh run's state."""
        return {"pipelineName": self.layout.name, "pipelineRunId": f"run-{new_hex()}", "phase": "running",
                "currentStep": self.layout.steps[0], "steps": {}, "candidates": [], "language": turn.language,
                "prompt": turn.prompt, "lastSequence": self.store.journal(turn.context_id).last_sequence}

    # ------------------------------------------------------------------ the turn

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        """Run the pipeline's part of this turn; after the handoff, normal chat answers."""
        state = self._load_state(turn) if turn.run_mode == "pipeline" else None
        if state is not None:
            await self._settle_handoff(turn, state)
        if state is not None and state.get("phase") == "handed_off" and turn.run_mode == "pipeline" \
                and turn.metadata.get("cleanupOnly") is True:  # remove what the run deployed (:mod:`.cleanup`)
            run = RunTurn(self, turn, state)
            summary: list[str] = []
            async for event in self._pump(run, lambda: self.clean_up(run)):
                if isinstance(event, TextDelta):
                    summary.append(event.text)
                yield event
            self.backups.checkpoint(turn, state, "".join(summary))  # like a chat turn's end (non-blocking)
            return
        if turn.run_mode != "pipeline" or (state is not None and state.get("phase") == "handed_off"):
            said: list[str] = []
            async for event in self.services.chat.run_turn(turn):
                if isinstance(event, TextDelta):
                    said.append(event.text)
                yield event
            if state is not None:  # the handed-off session's turn-end checkpoint (non-blocking)
                self.backups.checkpoint(turn, state, "".join(said))
            return
        if self.engine is None:
            yield TurnFailed(f"The {self.layout.name} pipeline needs an IaC engine and none is installed.")
            return
        if state is None:
            state = turn.session["pipeline"] = self.new_state(turn)
        run = RunTurn(self, turn, state)
        mark_pipeline_waiting(turn.session, None)  # this turn answers or goes on: nothing waits until it asks again
        self.active[turn.context_id] = run

        async def drive() -> None:  # a blocked backup's retry, else the pipeline with its interrupts
            await self._guarded(run, lambda: self.backups.drive(run, lambda r: interrupts.drive(self, r)))

        try:
            async for event in self._pump(run, drive):
                yield event
        finally:
            if self.active.get(turn.context_id) is run:
                del self.active[turn.context_id]
        if run.delegate:
            async for event in self.services.chat.run_turn(turn):
                yield event

    async def _guarded(self, run: RunTurn, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work``; an internal error fails the run (``pipeline_failed``) and the turn (:class:`TurnFailed`)."""
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s pipeline failed (context %s)", self.layout.name, run.turn.context_id)
            step = run.state.get("currentStep", self.layout.steps[0])
            with contextlib.suppress(Exception):
                await run.emit("pipeline_failed", "pipeline", "failed", {"step_id": step, "error": "internal_error"})
            run.out.put_nowait(TurnFailed(f"The {self.layout.name} pipeline failed at step {step}."))

    # ------------------------------------------------------------------ durable permission waits

    async def resume_turn(self, turn: TurnRequest, frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """Go on with a turn paused on the deploy (or cleanup) permission question ``frame`` describes (the kernel's
        durable permission waits, since-0.13 §4; ``iac_code.api.ResumableRuntime``), after a restart or a suspended
        wait. The first event is that question's :class:`PermissionRequest` again (same tool, tool use id, input id
        and input; its ``permission_requested`` is journaled already and not published again); the kernel sets its
        decision, and the deploy (or cleanup) goes on as it would have without the cut: ``permission_resolved``,
        then CreateStack (DeleteStack) and the rest of the run, or the decline. When the run's state no longer shows
        that question (:meth:`resume_ready`), nothing is yielded and nothing published."""
        state = self._load_state(turn) if turn.run_mode == "pipeline" else None
        if state is None or state.get("pipelineRunId") != frame.get("pipelineRunId"):
            logger.warning("The permission question of context %s is not in its pipeline run any more", turn.context_id)
            return
        run = RunTurn(self, turn, state)
        run.resuming = dict(frame)
        if not await self.resume_ready(run, frame):
            logger.warning("The permission question of context %s can no longer be resumed", turn.context_id)
            return
        cleanup = frame.get("operation") == "cleanup"
        if not cleanup:
            self.active[turn.context_id] = run  # takes interrupts as the deploy step of a live run does

        async def drive() -> None:
            try:
                if cleanup:
                    await self.resume_question(run, frame)
                else:
                    await self._guarded(run, lambda: self._resume_deploy(run, frame))
            except ResumeRefused as refused:
                logger.warning("The resumed permission question of context %s was not asked again (%s)",
                               turn.context_id, refused)

        said: list[str] = []
        try:
            async for event in self._pump(run, drive):
                if isinstance(event, TextDelta):
                    said.append(event.text)
                yield event
        finally:
            if self.active.get(turn.context_id) is run:
                del self.active[turn.context_id]
        if cleanup and run.resuming is None:
            self.backups.checkpoint(turn, state, "".join(said))  # like a cleanupOnly turn's end (non-blocking)

    async def _resume_deploy(self, run: RunTurn, frame: Mapping[str, Any]) -> None:
        try:
            await self.resume_question(run, frame)
        finally:
            if run.resuming is None:  # the question was asked again: what still waits is answered as at a run's end
                with contextlib.suppress(asyncio.CancelledError):
                    try:
                        await run.interrupts.close()
                    except Exception:
                        logger.exception("Closing the interrupts of context %s failed", run.turn.context_id)

    async def resume_ready(self, run: RunTurn, frame: Mapping[str, Any]) -> bool:
        """Whether the run's state still leads straight back to the question ``frame`` paused on (none here; a
        deploying pipeline has :class:`~.deployed.DeployedResources`)."""
        return False

    async def resume_question(self, run: RunTurn, frame: Mapping[str, Any]) -> None:
        """Go on from the question ``frame`` paused on (:class:`~.deployed.DeployedResources`)."""
        raise NotImplementedError

    @staticmethod
    async def _pump(run: RunTurn, work: Callable[[], Awaitable[None]]) -> AsyncIterator[RuntimeEvent]:
        """Run ``work`` (which publishes through ``run.out``) and yield what it queues, in order, until it ends; a
        :class:`Barrier` is resolved once the kernel asked for the event after it (it handled the ones before)."""
        done = object()

        async def drive() -> None:
            try:
                await work()
                with contextlib.suppress(ResumeRefused):
                    await run.flush_narration()  # what the turn said last (e.g. after the handoff)
            finally:
                run.out.put_nowait(done)

        task = asyncio.create_task(drive())
        try:
            while True:
                item = await run.out.get()
                if item is done:
                    break
                if isinstance(item, Barrier):  # the kernel has handled every event before it
                    if not item.future.done():
                        item.future.set_result(None)
                    continue
                yield item
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _drive(self, run: RunTurn) -> None:
        raise NotImplementedError

    async def _continue(self, run: RunTurn) -> None:
        """Run the first step not completed and the ones after it (after a rollback or a resumed pause)."""
        raise NotImplementedError

    async def interrupt(self, interrupt: Interrupt) -> bool:
        """User text for the context's running turn (the kernel's interrupt seam): taken when this pipeline
        drives that turn and it still takes interrupts (:mod:`.interrupts`)."""
        run = self.active.get(interrupt.context_id)
        if run is None or run.turn.task_id != interrupt.task_id or run.resuming is not None:
            return False  # (a resumed turn takes interrupts once it has asked its question again)
        return await interrupts.receive(self, run, interrupt)

    def rollback_state(self, run: RunTurn, target: str, candidates: tuple[int, ...]) -> None:
        """Drop what the steps from ``target`` on produced, before they run again (a rollback; ``candidates``:
        only these candidates are evaluated again). Nothing by default."""

    def chosen_template(self, state: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
        """The chosen candidate and its stored template's record (``filename``, ``media_type``, ``sha256``, …), once
        the user chose one; handed to normal chat as the context's working template at the handoff."""
        return None

    def cleanup_targets(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The cloud resources the run created that a ``cleanupOnly`` continuation removes (none here; a deploying
        pipeline has :class:`~.deployed.DeployedResources`)."""
        return []

    async def clean_up(self, run: RunTurn) -> None:
        """The ``cleanupOnly`` continuation of a handed-off run (:class:`~.deployed.DeployedResources`)."""
        raise NotImplementedError

    async def template_text(self, context_id: str, template: Mapping[str, Any]) -> str | None:
        """A stored template's text (``None``: not available; :class:`~.deployed.DeployedResources` reads it)."""
        return None

    def question_journaled(self, run: RunTurn) -> bool:
        """Whether the question the run waits on was journaled (so published): it is the run's last event (a crash
        between recording the question and journaling it leaves the state waiting on a question nobody saw)."""
        events = self.store.journal(run.turn.context_id).events
        last = events[-1] if events else {}
        return (last.get("eventType") == "input_required" and last.get("pipelineRunId") == run.state["pipelineRunId"]
                and last.get("step", {}).get("id") == run.state.get("pendingInput", {}).get("stepId"))

    async def ask_pending_again(self, run: RunTurn, asks: Mapping[str, Callable[[RunTurn], Awaitable[None]]]) -> None:
        """``pipeline_resumed``, then the question the run waits on (not journaled: :meth:`question_journaled`) again:
        by its ``kind`` through ``asks``, else the clarification question as it was recorded."""
        await run.emit("pipeline_resumed", "pipeline", "working",
                       {"pipeline_name": self.layout.name, "step_id": run.state.get("currentStep", self.layout.steps[0])})
        pending = run.state["pendingInput"]
        ask = asks.get(str(pending.get("kind", "")))
        if ask is not None:
            await ask(run)
            return
        data = {k: v for k, v in pending.items() if k not in ("reason", "stepId")}
        await run.ask(pending.get("stepId", self.layout.steps[0]), data,
                      "\n".join([data["question"]] + [f"{i}. {o['label']}" for i, o in enumerate(data["options"], start=1)]))

    async def started_or_resumed(self, run: RunTurn) -> None:
        """``pipeline_started`` for a fresh run, ``pipeline_resumed`` for one cut by a restart.

        A fresh run's state is durable before ``pipeline_started`` is journaled, so a kill -9 right after it (before
        the first step is recorded) leaves a run that the next message resumes, not a second run started again."""
        state = run.state
        run_id = state["pipelineRunId"]
        if not state["steps"] and not any(
                e.get("pipelineRunId") == run_id for e in reversed(self.store.journal(run.turn.context_id).events)):
            await self.save_state(run.turn.context_id, state)
            await run.emit("pipeline_started", "pipeline", "working",
                           {"pipeline_name": self.layout.name, "steps": list(self.layout.steps),
                            "user_input_length": len(run.turn.prompt)})
        else:
            await run.emit("pipeline_resumed", "pipeline", "working",
                           {"pipeline_name": self.layout.name, "step_id": state.get("currentStep", self.layout.steps[0])})

    # ------------------------------------------------------------------ intent (with its clarification)

    async def intent(self, run: RunTurn, step_id: str, prompt: str, *, clarified: bool,
                     complete: bool = True) -> bool:
        """Understand ``prompt`` on ``step_id``. Not infrastructure: the run ends early (the turn goes to chat);
        vague or another cloud: a clarification question (§3). ``True`` when the run goes on; the understanding
        is then in ``state["intent"]`` (and the step is completed with it when ``complete``)."""
        understanding = await asyncio.to_thread(self.engine.understand, prompt, run.language)  # type: ignore[union-attr]
        understanding = await author_intent(self, run, step_id, prompt, understanding)  # the model's, if one writes
        intent = {"is_infra_intent": understanding.is_infra_intent, "category": understanding.category,
                  "confidence": understanding.confidence, "resources": [dict(r) for r in understanding.resources],
                  "summary": understanding.summary, "other_cloud": understanding.other_cloud,
                  "region": understanding.region}
        if not understanding.is_infra_intent:
            await run.step_completed(step_id, {**intent, "prompt": prompt})
            await self.finish(run, "early_exit", text(run.language, "early_exit"))
            run.delegate = True
            return False
        vague = (understanding.confidence == "low" or understanding.category not in DEPLOYMENT_CATEGORIES
                 or not understanding.resources)
        if not clarified and (understanding.other_cloud or vague):
            await self._ask_clarification(run, step_id, understanding)
            return False
        run.state["intent"] = {**intent, "prompt": prompt}
        if complete:
            await run.step_completed(step_id, {**intent, "prompt": prompt})
        return True

    async def _ask_clarification(self, run: RunTurn, step_id: str, understanding: Understanding) -> None:
        lang = run.language
        if understanding.other_cloud:
            question = text(lang, "cloud_question", cloud=understanding.other_cloud.upper())
            options = [{"id": "alibaba_cloud", "label": text(lang, "opt_alibaba")},
                       {"id": "cancel", "label": text(lang, "opt_cancel")}]
            free = text(lang, "cloud_free")
            reason = "other_cloud"
        else:
            question = text(lang, "vague_question")
            options = [{"id": oid, "label": text(lang, label), "description": text(lang, desc)}
                       for oid, label, desc, _ in VAGUE_OPTIONS]
            free = text(lang, "vague_free")
            reason = "vague"
        tool_use_id = f"toolu_{new_hex()[:24]}"
        data = {"kind": "ask_user_question", "inputId": f"ask-{tool_use_id}", "toolUseId": tool_use_id,
                "question": question, "prompt": question, "options": options, "allowFreeText": True,
                "freeTextPrompt": free}
        run.state["phase"] = "awaiting_clarification"
        run.state["pendingInput"] = {**data, "reason": reason, "stepId": step_id}
        await run.record(step_id, status="running")
        lines = [question] + [f"{i}. {o['label']}" for i, o in enumerate(options, start=1)] + [
            free, text(lang, "answer_howto")]
        await run.ask(step_id, data, "\n".join(lines))

    async def answer_clarification(self, run: RunTurn, *, complete: bool = True) -> bool:
        """Read the answer to the pending question and understand the clarified request (see :meth:`intent`)."""
        pending = run.state["pendingInput"]
        step_id = pending["stepId"]
        answer_text = run.turn.prompt
        matched = match_question(answer_text, pending["options"], pending.get("allowFreeText", True))
        await run.emit("input_received", "step", "working", {
            "kind": "ask_user_question", "inputId": pending["inputId"], "toolUseId": pending["toolUseId"],
            "answerTextLength": len(answer_text), **matched, "freeTextLength": len(matched["freeText"]),
            "question": pending["question"], "options": pending["options"],
            "allowFreeText": pending.get("allowFreeText", True)}, extra={"step": run.step(step_id)})
        run.state["phase"] = "running"
        run.state.pop("pendingInput", None)
        original = run.state["prompt"]
        if pending["reason"] == "other_cloud":
            if matched["selectedId"] == "cancel":
                await run.record(step_id, status="canceled")
                await self.finish(run, "canceled", text(run.language, "canceled"))
                return False
            refined = original if matched["selectedId"] else f"{original}\n{matched['freeText'] or matched['selectedLabel']}"
        else:
            prompts = {oid: prompt for oid, _, _, prompt in VAGUE_OPTIONS}
            refined = prompts.get(matched["selectedId"]) or f"{original}\n{matched['freeText'] or matched['selectedLabel']}"
        run.state["prompt"] = refined
        return await self.intent(run, step_id, refined, clarified=True, complete=complete)

    # ------------------------------------------------------------------ selection text, deploy, the end

    def selection_text(self, run: RunTurn, prompt: str, options: list[dict[str, Any]], costs: Mapping[int, str]) -> str:
        """The candidate choice as text: the prompt, one line per option with its cost, the price note, how to answer."""
        lang = run.language
        lines = [prompt]
        for option in options:
            lines.append(text(lang, "option_line", index=option["candidate_index"], name=option["name"],
                              summary=option["summary"], cost=costs[option["candidate_index"]]))
        lines.append(text(lang, "cost_note", disclaimer=self.prices.disclaimer))
        lines.append(text(lang, "select_howto"))
        return "\n".join(lines)

    async def no_deployer(self, run: RunTurn, step_id: str, candidate: Mapping[str, Any],
                          template: Mapping[str, Any]) -> str:
        """The ``no_deployer_configured`` warning naming the stored template; returns its message."""
        message = text(run.language, "no_deployer", name=candidate["name"], artifact=template["filename"],
                       task=template["task_id"])
        artifact = {"name": template["filename"], "taskId": template["task_id"], "sha256": template["sha256"]}
        if template.get("url"):
            artifact["url"] = template["url"]
        await run.emit("pipeline_warning", "step", "working", {
            "code": "no_deployer_configured", "message": message, "source": step_id, "artifact": artifact},
            extra={"step": run.step(step_id)})
        return message

    async def finish(self, run: RunTurn, outcome: str, summary: str) -> None:
        """The terminal event for ``outcome`` and the handoff to normal chat."""
        await run.interrupts.close()  # what still waits cannot take effect any more: said so, before the end
        event_type, status = {"completed": ("pipeline_completed", "completed"),
                              "early_exit": ("pipeline_completed", "completed"),
                              "canceled": ("pipeline_canceled", "canceled"),
                              "failed": ("pipeline_failed", "failed")}[outcome]
        closing = text(run.language, "handoff") if outcome == "completed" else "" if outcome == "early_exit" else summary
        gated = self.backups.enabled
        early = self.display_events and not gated
        if closing and early:  # said first: its narration is published before the terminal events
            run.say(closing)
        resume = {"op": "finish", "outcome": outcome, "summary": summary}  # both protected publications
        await run.emit(event_type, "pipeline", status, {"outcome": outcome, "summary": summary}, protect=resume)
        await run.emit("pipeline_handoff_ready", "pipeline", status, {
            "action": "switch_to_normal", "targetMode": "normal", "outcome": outcome, "summary": summary},
            protect=resume)
        await self._record_handoff(run, outcome)
        if closing and not early:  # behind a backup the text waits for the handoff (a blocked one retries the finish)
            run.say(closing)

    async def _record_handoff(self, run: RunTurn, outcome: str) -> None:
        """Record the handoff (after its event was journaled): the run's state, the chosen template for the chat,
        the kernel's session marker."""
        run.state["phase"] = "handed_off"
        run.state["outcome"] = outcome
        run.state.pop("pendingInput", None)
        await self._hand_over_template(run)
        mark_pipeline_handoff(run.turn.session, outcome)
        await self.save_state(run.turn.context_id, run.state)

    def _journaled_handoff(self, context_id: str, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The run's ``pipeline_handoff_ready`` when the journal holds it (it is journaled, so published, before the
        state records the handoff: a crash in between leaves the state behind the journal)."""
        run_id = state.get("pipelineRunId")
        for event in reversed(self.store.journal(context_id).events):
            if event.get("eventType") == "pipeline_handoff_ready" and event.get("pipelineRunId") == run_id:
                return event
        return None

    async def _settle_handoff(self, turn: TurnRequest, state: dict[str, Any]) -> None:
        """A run whose handoff was published but not recorded (kill -9 in between) is recorded as handed off; a
        handed-off run's marker is put back into the kernel's session (a crash may have kept it from being written)."""
        if state.get("phase") != "handed_off":
            handoff = self._journaled_handoff(turn.context_id, state)
            if handoff is None:
                return
            outcome = str((handoff.get("data") or {}).get("outcome", "completed"))
            await self._record_handoff(RunTurn(self, turn, state), outcome)
        mark_pipeline_handoff(turn.session, str(state.get("outcome", "completed")))

    async def _hand_over_template(self, run: RunTurn) -> None:
        """The chosen candidate's template becomes the context's working template: the chat that answers after the
        handoff edits it (e.g. "add a tag env=prod to the VPC" gives an edited template artifact)."""
        chosen = self.chosen_template(run.state)
        if chosen is None:
            return
        candidate, template = chosen
        body = await self.template_text(run.turn.context_id, template)
        if body is None:
            logger.warning("The chosen template %s is not available for the chat.", template.get("filename"))
            return
        set_working_template(run.turn.session, WorkingTemplate(
            text=body, filename=str(template.get("filename", "")), media_type=str(template.get("media_type", "")),
            request=str(candidate.get("generation_prompt", "")), source=f"pipeline:{self.layout.name}"))
