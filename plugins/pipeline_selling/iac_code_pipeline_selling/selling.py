"""The ``selling`` pipeline as an agent runtime (§2.1): intent, candidate architectures, their parallel evaluation
(template, cost), the user's choice, deploy, handoff to normal chat.

Every event is journaled (:mod:`.journal`) before it is yielded as a :class:`Progress` (``{"pipeline": envelope}``);
the run's state lives in ``turn.session["pipeline"]`` (plain JSON, kept by the kernel) and is mirrored to an
owner-only file next to the journal at every step boundary, so a run cut by a restart continues from the last
completed step.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from iac_code.api import (
    ArtifactPayload,
    IacEngine,
    PipelineServices,
    Progress,
    RuntimeEvent,
    TextDelta,
    ToolCompleted,
    ToolStarted,
    TurnFailed,
    TurnRequest,
    Understanding,
    atomic_write,
    read_private_file,
)
from iac_code_pipeline_selling.answers import match_question, parse_selection
from iac_code_pipeline_selling.journal import JournalStore, envelope
from iac_code_pipeline_selling.planning import check_constraints, mermaid, plan_candidates
from iac_code_pipeline_selling.pricing import PriceTable
from iac_code_pipeline_selling.texts import text

logger = logging.getLogger(__name__)

PIPELINE_NAME = "selling"
STEPS = ("intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select", "deploying")
STEP_TYPES = {"evaluate_candidates": "parallel_sub_pipeline"}
STEP_UI = {"confirm_and_select": "candidate_selection"}
SUB_PIPELINE = "evaluate_candidate"
SUB_STEPS = ("template_generating", "cost_estimating")
DEPLOYMENT_CATEGORIES = ("generation",)
VAGUE_OPTIONS = (
    ("web_app", "opt_web", "opt_web_desc",
     "Deploy a web application with a MySQL database on ECS servers in cn-hangzhou."),
    ("http_api", "opt_api", "opt_api_desc", "Deploy an HTTP API web service in cn-hangzhou."),
    ("static_site", "opt_static", "opt_static_desc", "Deploy a static website with an OSS bucket in cn-hangzhou."),
)


def _hex() -> str:
    return uuid.uuid4().hex


def _presentation(metadata: Mapping[str, Any]) -> str:
    section = metadata.get("iac_code") if isinstance(metadata.get("iac_code"), Mapping) else metadata
    return "rich-v1" if section.get("candidatePresentation") == "rich-v1" else "plain"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "candidate"


class _Turn:
    """One turn of a run: publishes its events (journal first, then the output queue) and records its state."""

    def __init__(self, pipeline: SellingPipeline, turn: TurnRequest, state: dict[str, Any]) -> None:
        self.pipeline = pipeline
        self.turn = turn
        self.state = state
        self.out: asyncio.Queue[Any] = asyncio.Queue()
        self.delegate = False
        self.language = state.get("language", turn.language)

    async def emit(self, event_type: str, scope: str, status: str | None, data: Mapping[str, Any], *,
                   extra: Mapping[str, Any] | None = None, final: bool = False, message: str = "") -> dict[str, Any]:
        """Journal one event, then queue it as a Progress (under the journal's lock, so the queue keeps sequence order)."""
        turn = self.turn

        def build(sequence: int) -> dict[str, Any]:
            event = envelope(sequence, event_type=event_type, scope=scope, status=status, data=data,
                             run_id=self.state["pipelineRunId"], task_id=turn.task_id, context_id=turn.context_id,
                             pipeline_name=PIPELINE_NAME, extra=extra)
            return event

        def publish(event: dict[str, Any]) -> None:
            self.out.put_nowait(Progress({"pipeline": event}, text=message, final=final))

        event = await self.pipeline.store.publish(turn.context_id, build, publish)
        self.state["lastSequence"] = max(int(self.state.get("lastSequence", 0)), event["sequence"])  # not a replayed one
        return event

    def step(self, step_id: str) -> dict[str, Any]:
        """The §2.4 ``step`` object of a parent step (its current attempt)."""
        attempt = self.state["steps"].get(step_id, {}).get("attempt", 1)
        obj: dict[str, Any] = {"id": step_id, "runId": f"step-{step_id}-{attempt}", "attempt": attempt,
                               "index": STEPS.index(step_id) + 1, "total": len(STEPS)}
        if step_id in STEP_TYPES:
            obj["type"] = STEP_TYPES[step_id]
        if step_id in STEP_UI:
            obj["uiMode"] = STEP_UI[step_id]
        return obj

    async def record(self, step_id: str, **fields: Any) -> None:
        """Record a step's state (in the session and, durably, in the state file) before the run goes on."""
        self.state["steps"].setdefault(step_id, {"attempt": 1}).update(fields)
        self.state["currentStep"] = step_id
        await self.pipeline.save_state(self.turn.context_id, self.state)

    # Events are journaled before the state records what they announce: a kill -9 in between redoes the step
    # on resume, and the journal drops the events it already holds (journal.once_key), so none is lost or doubled.

    async def step_started(self, step_id: str) -> None:
        await self.emit("step_started", "step", "working", {"step_id": step_id}, extra={"step": self.step(step_id)})
        await self.record(step_id, status="running")

    async def step_completed(self, step_id: str, conclusion: Mapping[str, Any]) -> None:
        await self.emit("step_completed", "step", "working", {"step_id": step_id, "conclusion": conclusion},
                        extra={"step": self.step(step_id)})
        await self.record(step_id, status="completed", result=dict(conclusion))

    def say(self, message: str) -> None:
        """Assistant text for generic clients (the turn's ``status.message``)."""
        self.out.put_nowait(TextDelta(message))


class SellingPipeline:
    """The ``selling`` pipeline: one instance serves every context (their turns never overlap)."""

    name = PIPELINE_NAME

    def __init__(self, services: PipelineServices, store: JournalStore, prices: PriceTable | None = None) -> None:
        self.services = services
        self.store = store
        self.prices = prices or PriceTable.load()
        config = getattr(services.context, "config", None)
        self.deployer = str(getattr(config, "deployer", "none") or "none")

    @property
    def engine(self) -> IacEngine | None:
        return self.services.engine

    # ------------------------------------------------------------------ state

    def _state_path(self, context_id: str) -> Path | None:
        if self.store.directory is None:
            return None
        return self.store.directory / (hashlib.sha256(context_id.encode("utf-8")).hexdigest()[:40] + ".state.json")

    async def save_state(self, context_id: str, state: dict[str, Any]) -> None:
        """Write the run's state atomically (nothing when persistence is off)."""
        path = self._state_path(context_id)
        if path is not None:
            data = json.dumps(state, ensure_ascii=False, sort_keys=True).encode("utf-8")
            await asyncio.to_thread(atomic_write, path, data)

    def _load_state(self, turn: TurnRequest) -> dict[str, Any] | None:
        """The session's state, or the state file's when that is newer (the kernel lost the end of a cut turn)."""
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
        best = max(candidates, key=lambda s: int(s.get("lastSequence", 0)))
        turn.session["pipeline"] = best
        return best

    # ------------------------------------------------------------------ the turn

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        """Run the pipeline's part of this turn; after the handoff, normal chat answers."""
        state = self._load_state(turn) if turn.run_mode == "pipeline" else None
        if turn.run_mode != "pipeline" or (state is not None and state.get("phase") == "handed_off"):
            async for event in self.services.chat.run_turn(turn):
                yield event
            return
        if self.engine is None:
            yield TurnFailed("The selling pipeline needs an IaC engine and none is installed.")
            return
        if state is None:
            state = turn.session["pipeline"] = {
                "pipelineName": PIPELINE_NAME, "pipelineRunId": f"run-{_hex()}", "phase": "running",
                "currentStep": STEPS[0], "steps": {}, "candidates": [], "language": turn.language,
                "prompt": turn.prompt, "lastSequence": self.store.journal(turn.context_id).last_sequence,
            }
        run = _Turn(self, turn, state)
        done = object()

        async def drive() -> None:
            try:
                await self._drive(run)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("selling pipeline failed (context %s)", turn.context_id)
                step = state.get("currentStep", STEPS[0])
                with contextlib.suppress(Exception):
                    await run.emit("pipeline_failed", "pipeline", "failed",
                                   {"step_id": step, "error": "internal_error"})
                run.out.put_nowait(TurnFailed(f"The selling pipeline failed at step {step}."))
            finally:
                run.out.put_nowait(done)

        task = asyncio.create_task(drive())
        try:
            while True:
                item = await run.out.get()
                if item is done:
                    break
                yield item
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if run.delegate:
            async for event in self.services.chat.run_turn(turn):
                yield event

    async def _drive(self, run: _Turn) -> None:
        state = run.state
        phase = state.get("phase")
        if phase in ("awaiting_clarification", "awaiting_selection") and not self._question_journaled(run):
            await self._ask_again(run)  # a crash cut the turn before its question was journaled: nobody saw it
            return
        if phase == "awaiting_clarification":
            if not await self._answer_clarification(run):
                return
        elif phase == "awaiting_selection":
            if not await self._answer_selection(run):
                return
        elif not state["steps"]:
            await run.emit("pipeline_started", "pipeline", "working",
                           {"pipeline_name": PIPELINE_NAME, "steps": list(STEPS), "user_input_length": len(run.turn.prompt)})
        else:
            await run.emit("pipeline_resumed", "pipeline", "working",
                           {"pipeline_name": PIPELINE_NAME, "step_id": state.get("currentStep", STEPS[0])})
        await self._continue(run)

    def _question_journaled(self, run: _Turn) -> bool:
        """Whether the question the run waits on was journaled (so published): it is the run's last event."""
        events = self.store.journal(run.turn.context_id).events
        last = events[-1] if events else {}
        return (last.get("eventType") == "input_required" and last.get("pipelineRunId") == run.state["pipelineRunId"]
                and last.get("step", {}).get("id") == run.state.get("pendingInput", {}).get("stepId"))

    async def _ask_again(self, run: _Turn) -> None:
        """Publish the pending question again (after a crash that cut it off); this turn's text is not an answer."""
        await run.emit("pipeline_resumed", "pipeline", "working",
                       {"pipeline_name": PIPELINE_NAME, "step_id": run.state.get("currentStep", STEPS[0])})
        pending = run.state["pendingInput"]
        if pending.get("stepId") == "confirm_and_select":
            await self._ask_selection(run)
            return
        data = {k: v for k, v in pending.items() if k not in ("reason", "stepId")}
        run.say("\n".join([data["question"]] + [f"{i}. {o['label']}" for i, o in enumerate(data["options"], start=1)]))
        await run.emit("input_required", "step", "input_required", data,
                       extra={"step": run.step("intent_parsing"), "input": {**data, "required": True}}, final=True)

    def _done(self, run: _Turn, step_id: str) -> bool:
        return run.state["steps"].get(step_id, {}).get("status") == "completed"

    async def _continue(self, run: _Turn) -> None:
        """Run the first step not completed, and the ones after it, until the run pauses or ends."""
        if not self._done(run, "intent_parsing"):
            if run.state["steps"].get("intent_parsing", {}).get("status") != "running":
                await run.step_started("intent_parsing")
            if not await self._intent(run, run.state["prompt"], clarified=False):
                return
        if not self._done(run, "architecture_planning"):
            await run.step_started("architecture_planning")
            intent = run.state["steps"]["intent_parsing"]["result"]
            fields = {k: v for k, v in intent.items() if k != "prompt"}
            candidates = plan_candidates(Understanding(**{**fields, "resources": tuple(fields["resources"])}),
                                         intent.get("prompt", run.state["prompt"]))
            for index, candidate in enumerate(candidates, start=1):
                candidate["candidate_index"] = index
            run.state["candidates"] = candidates
            await run.step_completed("architecture_planning", {"candidates": [
                {k: c[k] for k in ("candidate_index", "name", "summary", "generation_prompt", "hard_constraints")}
                for c in candidates]})
        if not self._done(run, "evaluate_candidates"):
            if not await self._evaluate_all(run):
                return
        if not self._done(run, "confirm_and_select"):
            await self._ask_selection(run)
            return
        await self._deploy_and_finish(run)

    # ------------------------------------------------------------------ intent_parsing

    async def _intent(self, run: _Turn, prompt: str, *, clarified: bool) -> bool:
        understanding = await asyncio.to_thread(self.engine.understand, prompt, run.language)  # type: ignore[union-attr]
        intent = {"is_infra_intent": understanding.is_infra_intent, "category": understanding.category,
                  "confidence": understanding.confidence, "resources": [dict(r) for r in understanding.resources],
                  "summary": understanding.summary, "other_cloud": understanding.other_cloud,
                  "region": understanding.region}
        if not understanding.is_infra_intent:
            await run.step_completed("intent_parsing", {**intent, "prompt": prompt})
            await self._finish(run, "early_exit", text(run.language, "early_exit"))
            run.delegate = True
            return False
        vague = (understanding.confidence == "low" or understanding.category not in DEPLOYMENT_CATEGORIES
                 or not understanding.resources)
        if not clarified and (understanding.other_cloud or vague):
            await self._ask_clarification(run, understanding)
            return False
        await run.step_completed("intent_parsing", {**intent, "prompt": prompt})
        return True

    async def _ask_clarification(self, run: _Turn, understanding: Understanding) -> None:
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
        tool_use_id = f"toolu_{_hex()[:24]}"
        data = {"kind": "ask_user_question", "inputId": f"ask-{tool_use_id}", "toolUseId": tool_use_id,
                "question": question, "prompt": question, "options": options, "allowFreeText": True,
                "freeTextPrompt": free}
        run.state["phase"] = "awaiting_clarification"
        run.state["pendingInput"] = {**data, "reason": reason, "stepId": "intent_parsing"}
        await run.record("intent_parsing", status="running")
        lines = [question] + [f"{i}. {o['label']}" for i, o in enumerate(options, start=1)] + [
            free, text(lang, "answer_howto")]
        run.say("\n".join(lines))
        await run.emit("input_required", "step", "input_required", data,
                       extra={"step": run.step("intent_parsing"), "input": {**data, "required": True}}, final=True)

    async def _answer_clarification(self, run: _Turn) -> bool:
        pending = run.state["pendingInput"]
        answer_text = run.turn.prompt
        matched = match_question(answer_text, pending["options"], pending.get("allowFreeText", True))
        await run.emit("input_received", "step", "working", {
            "kind": "ask_user_question", "inputId": pending["inputId"], "toolUseId": pending["toolUseId"],
            "answerTextLength": len(answer_text), **matched, "freeTextLength": len(matched["freeText"]),
            "question": pending["question"], "options": pending["options"],
            "allowFreeText": pending.get("allowFreeText", True)}, extra={"step": run.step("intent_parsing")})
        run.state["phase"] = "running"
        run.state.pop("pendingInput", None)
        original = run.state["prompt"]
        if pending["reason"] == "other_cloud":
            if matched["selectedId"] == "cancel":
                await run.record("intent_parsing", status="canceled")
                await self._finish(run, "canceled", text(run.language, "canceled"))
                return False
            refined = original if matched["selectedId"] else f"{original}\n{matched['freeText'] or matched['selectedLabel']}"
        else:
            prompts = {oid: prompt for oid, _, _, prompt in VAGUE_OPTIONS}
            refined = prompts.get(matched["selectedId"]) or f"{original}\n{matched['freeText'] or matched['selectedLabel']}"
        run.state["prompt"] = refined
        return await self._intent(run, refined, clarified=True)

    # ------------------------------------------------------------------ evaluate_candidates

    async def _evaluate_all(self, run: _Turn) -> bool:
        if run.state["steps"].get("evaluate_candidates", {}).get("status") != "running":
            await run.step_started("evaluate_candidates")
        pending = [c for c in run.state["candidates"] if c.get("evaluation", {}).get("status") not in ("completed", "failed")]
        await asyncio.gather(*(self._evaluate(run, c) for c in pending))
        evaluated = [c for c in run.state["candidates"] if c["evaluation"]["status"] == "completed"]
        summary = [{"candidate_index": c["candidate_index"], "name": c["name"], "status": c["evaluation"]["status"],
                    "total_monthly_cost": c["evaluation"].get("cost", {}).get("total_monthly_cost", "")}
                   for c in run.state["candidates"]]
        if not evaluated:
            await run.record("evaluate_candidates", status="failed")
            await run.emit("step_failed", "step", "failed", {"step_id": "evaluate_candidates",
                                                             "error": "no_candidate_evaluated", "candidates": summary},
                           extra={"step": run.step("evaluate_candidates")})
            await self._finish(run, "failed", text(run.language, "all_failed"))
            return False
        await run.step_completed("evaluate_candidates", {"evaluated_candidates": summary})
        return True

    def _candidate_obj(self, candidate: Mapping[str, Any], *, with_steps: bool = False) -> dict[str, Any]:
        index = candidate["candidate_index"]
        attempt = candidate.get("evaluation", {}).get("attempt", 1)
        run_id = f"candidate-{SUB_PIPELINE}-{index}-{attempt}"
        obj: dict[str, Any] = {"id": f"candidate-{index}", "runId": run_id, "index": index, "attempt": attempt,
                               "name": candidate["name"], "pipelineName": SUB_PIPELINE, "totalSteps": len(SUB_STEPS)}
        if with_steps:
            obj["steps"] = [{"id": s, "runId": f"{run_id}-{s}-1", "attempt": 1, "index": i, "total": len(SUB_STEPS),
                             "status": "pending"} for i, s in enumerate(SUB_STEPS, start=1)]
        return obj

    def _cstep(self, candidate: Mapping[str, Any], step_id: str) -> dict[str, Any]:
        cand = self._candidate_obj(candidate)
        return {"id": step_id, "runId": f"{cand['runId']}-{step_id}-1", "attempt": 1,
                "index": SUB_STEPS.index(step_id) + 1, "total": len(SUB_STEPS)}

    async def _evaluate(self, run: _Turn, candidate: dict[str, Any]) -> None:
        """The sub-pipeline ``evaluate_candidate`` for one candidate: template, then cost and hard constraints."""
        evaluation = candidate.setdefault("evaluation", {"attempt": 1, "status": "running", "steps": {}})
        base = {"candidate_index": candidate["candidate_index"], "candidate_name": candidate["name"]}
        if not evaluation["steps"]:
            await run.emit("candidate_started", "candidate", "working", base,
                           extra={"candidate": self._candidate_obj(candidate, with_steps=True)})

        async def sub_event(event_type: str, step_id: str, status: str, data: Mapping[str, Any], **extra: Any) -> None:
            await run.emit(event_type, "candidate_step", status, {**base, "step_id": step_id, **data},
                           extra={"candidate": self._candidate_obj(candidate),
                                  "candidateStep": self._cstep(candidate, step_id), **extra})

        template = evaluation.get("template")
        if evaluation["steps"].get("template_generating") != "completed":
            await sub_event("candidate_step_started", "template_generating", "working", {})
            generated = await asyncio.to_thread(self.engine.generate, candidate["generation_prompt"], "en")  # type: ignore[union-attr]
            ext = Path(generated.filename).suffix or ".yaml"
            filename = f"candidate-{candidate['candidate_index']}-{_slug(candidate['name'])}{ext}"
            sha = hashlib.sha256(generated.text.encode("utf-8")).hexdigest()
            tool_use_id = f"toolu_{_hex()[:24]}"
            run.out.put_nowait(ToolStarted(tool_use_id, "generate_template"))
            run.out.put_nowait(ToolCompleted(tool_use_id, "generate_template",
                                             {"filename": filename, "resourceCount": len(generated.resources)},
                                             artifact=ArtifactPayload(filename, generated.media_type, generated.text)))
            template = {"filename": filename, "media_type": generated.media_type, "sha256": sha,
                        "resources": [dict(r) for r in generated.resources], "not_generated": list(generated.not_generated),
                        "task_id": run.turn.task_id}
            await sub_event("artifact_created", "template_generating", "working", {"source": "conclusion"},
                            artifact={"filename": filename, "mediaType": generated.media_type, "content": generated.text,
                                      "role": "final", "contentSha256": sha,
                                      "dedupeKey": f"{candidate['candidate_index']}:{filename}:{sha[:16]}"})
            await sub_event("candidate_step_completed", "template_generating", "working", {"conclusion": {
                "filename": filename, "media_type": generated.media_type, "resource_count": len(generated.resources),
                "not_generated": list(generated.not_generated)}})
            evaluation["template"] = template
            evaluation["steps"]["template_generating"] = "completed"
            await run.pipeline.save_state(run.turn.context_id, run.state)
        assert template is not None
        await sub_event("candidate_step_started", "cost_estimating", "working", {})
        cost = self.prices.estimate(template["resources"])
        problems = check_constraints(candidate["hard_constraints"], template["resources"])
        if problems:
            await sub_event("candidate_step_failed", "cost_estimating", "failed",
                            {"error": "hard_constraints_violated", "violations": problems,
                             "hard_constraints": candidate["hard_constraints"]})
            await run.emit("candidate_failed", "candidate", "failed", {**base, "error": "hard_constraints_violated",
                                                                        "violations": problems},
                           extra={"candidate": self._candidate_obj(candidate)})
            evaluation.update(status="failed", violations=problems)
            evaluation["steps"]["cost_estimating"] = "failed"
            await run.pipeline.save_state(run.turn.context_id, run.state)
            return
        await sub_event("candidate_step_completed", "cost_estimating", "working", {"conclusion": {
            **cost, "hard_constraints": candidate["hard_constraints"], "constraints_met": True}})
        await run.emit("candidate_completed", "candidate", "completed",
                       {**base, "total_monthly_cost": cost["total_monthly_cost"], "template_filename": template["filename"]},
                       extra={"candidate": self._candidate_obj(candidate)})
        evaluation.update(status="completed", cost=cost, architecture_diagram=mermaid(candidate))
        evaluation["steps"]["cost_estimating"] = "completed"
        await run.pipeline.save_state(run.turn.context_id, run.state)

    # ------------------------------------------------------------------ confirm_and_select

    def _options(self, run: _Turn) -> list[dict[str, Any]]:
        rich = run.state.get("presentation") == "rich-v1"
        options = []
        for candidate in run.state["candidates"]:
            evaluation = candidate.get("evaluation", {})
            if evaluation.get("status") != "completed":
                continue
            option: dict[str, Any] = {"name": candidate["name"], "summary": candidate["summary"],
                                      "candidate_index": candidate["candidate_index"]}
            if rich:
                cost = evaluation["cost"]
                option["architecture_diagram"] = evaluation["architecture_diagram"]
                option["total_monthly_cost"] = cost["total_monthly_cost"]
                option["cost_items"] = [{"name": i["name"], **({"spec": i["spec"]} if i["spec"] else {}),
                                         "monthly_cost": i["monthly_cost"]} for i in cost["items"]]
            options.append(option)
        return options

    def _selection_text(self, run: _Turn, prompt: str, options: list[dict[str, Any]]) -> str:
        lang = run.language
        by_index = {c["candidate_index"]: c for c in run.state["candidates"]}
        lines = [prompt]
        for option in options:
            cost = by_index[option["candidate_index"]]["evaluation"]["cost"]
            lines.append(text(lang, "option_line", index=option["candidate_index"], name=option["name"],
                              summary=option["summary"], cost=cost["total_monthly_cost"]))
        lines.append(text(lang, "cost_note", disclaimer=self.prices.disclaimer))
        lines.append(text(lang, "select_howto"))
        return "\n".join(lines)

    async def _ask_selection(self, run: _Turn, reason: str = "") -> None:
        if "presentation" not in run.state:
            run.state["presentation"] = _presentation(run.turn.metadata)
        if run.state["steps"].get("confirm_and_select", {}).get("status") != "running":
            await run.step_started("confirm_and_select")
        options = self._options(run)
        prompt = text(run.language, "select_prompt")
        if reason:
            prompt = f"{reason} {prompt}"
        data = {"kind": "candidate_selection", "stepId": "confirm_and_select", "prompt": prompt, "options": options}
        run.state["phase"] = "awaiting_selection"
        run.state["pendingInput"] = {"kind": "candidate_selection", "stepId": "confirm_and_select", "prompt": prompt,
                                     "optionCount": len(options)}
        await run.record("confirm_and_select", status="running")
        run.say(self._selection_text(run, prompt, options))
        await run.emit("input_required", "step", "input_required", data,
                       extra={"step": run.step("confirm_and_select"), "input": {**data, "required": True}}, final=True)

    async def _answer_selection(self, run: _Turn) -> bool:
        options = self._options(run)
        answer = run.turn.prompt
        selection = parse_selection(answer, options)
        if selection.option is None:
            indices = ", ".join(str(o["candidate_index"]) for o in options)
            shown = answer.strip()[:80]
            await self._ask_selection(run, text(run.language, selection.error, answer=shown, indices=indices))
            return False
        option = selection.option
        evaluated = [o["candidate_index"] for o in options]
        conclusion: dict[str, Any] = {
            "user_prompt": run.state["pendingInput"]["prompt"], "options": options, "user_input": answer,
            "selected_candidate_name": option["name"], "selected_candidate_index": option["candidate_index"],
            "selected_evaluated_candidate_index": evaluated.index(option["candidate_index"])}
        if selection.parameter_overrides:
            conclusion["parameter_overrides"] = dict(selection.parameter_overrides)
        await run.emit("input_received", "step", "working", {
            "kind": "candidate_selection", "step_id": "confirm_and_select", "answer_text_length": len(answer),
            "selected_candidate_name": option["name"], "selected_candidate_index": option["candidate_index"],
            "selected_evaluated_candidate_index": conclusion["selected_evaluated_candidate_index"]},
            extra={"step": run.step("confirm_and_select")})
        run.state["phase"] = "running"
        run.state.pop("pendingInput", None)
        run.state["selected"] = option["candidate_index"]
        await run.step_completed("confirm_and_select", conclusion)
        run.say(text(run.language, "selected", name=option["name"]))
        return True

    # ------------------------------------------------------------------ deploying and the end

    async def _deploy_and_finish(self, run: _Turn) -> None:
        candidate = next(c for c in run.state["candidates"] if c["candidate_index"] == run.state["selected"])
        template = candidate["evaluation"]["template"]
        await run.step_started("deploying")
        message = text(run.language, "no_deployer", name=candidate["name"], artifact=template["filename"],
                       task=template["task_id"])
        await run.emit("pipeline_warning", "step", "working", {
            "code": "no_deployer_configured", "message": message, "source": "deploying",
            "artifact": {"name": template["filename"], "taskId": template["task_id"], "sha256": template["sha256"]}},
            extra={"step": run.step("deploying")})
        await run.step_completed("deploying", {
            "status": "not_deployed", "deployer": "none", "candidate_name": candidate["name"],
            "template_artifact": template["filename"], "template_task_id": template["task_id"]})
        run.say(message)
        await self._finish(run, "completed", message)

    async def _finish(self, run: _Turn, outcome: str, summary: str) -> None:
        """The terminal event for ``outcome`` and the handoff to normal chat."""
        event_type, status = {"completed": ("pipeline_completed", "completed"),
                              "early_exit": ("pipeline_completed", "completed"),
                              "canceled": ("pipeline_canceled", "canceled"),
                              "failed": ("pipeline_failed", "failed")}[outcome]
        await run.emit(event_type, "pipeline", status, {"outcome": outcome, "summary": summary})
        await run.emit("pipeline_handoff_ready", "pipeline", status, {
            "action": "switch_to_normal", "targetMode": "normal", "outcome": outcome, "summary": summary})
        run.state["phase"] = "handed_off"
        run.state["outcome"] = outcome
        await run.pipeline.save_state(run.turn.context_id, run.state)
        if outcome == "completed":
            run.say(text(run.language, "handoff"))
        elif outcome != "early_exit":
            run.say(summary)
