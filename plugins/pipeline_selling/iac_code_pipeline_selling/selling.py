"""The ``selling`` pipeline as an agent runtime (§2.1): intent, candidate architectures, their parallel evaluation
(template, cost), the user's choice, deploy, handoff to normal chat.

Every event is journaled (:mod:`.journal`) before it is yielded as a :class:`Progress` (``{"pipeline": envelope}``);
the run's state lives in ``turn.session["pipeline"]`` (plain JSON, kept by the kernel) and is mirrored to an
owner-only file next to the journal at every step boundary, so a run cut by a restart continues from the last
completed step (:mod:`.runner`, shared with ``selling_solution_first``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from typing import Any

from iac_code.api import ArtifactPayload, ToolCompleted, ToolStarted, TurnRequest, Understanding
from iac_code_pipeline_selling import interrupts
from iac_code_pipeline_selling.answers import parse_selection
from iac_code_pipeline_selling.authoring import author_summaries
from iac_code_pipeline_selling.deploy import DeployPlan, default_region, deploy_with_ros
from iac_code_pipeline_selling.deployed import DeployedResources
from iac_code_pipeline_selling.planning import check_constraints, mermaid, plan_candidates
from iac_code_pipeline_selling.reviewing import (
    PLAIN_SUB_STEPS,
    REVIEWED_SUB_STEPS,
    review_candidate,
    reviewing_enabled,
    sub_steps,
)
from iac_code_pipeline_selling.runner import Layout, PipelineRuntime, RunTurn, new_hex, presentation, slug, template_filename
from iac_code_pipeline_selling.texts import text

PIPELINE_NAME = "selling"
STEPS = ("intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select", "deploying")
LAYOUT = Layout(PIPELINE_NAME, STEPS, types={"evaluate_candidates": "parallel_sub_pipeline"},
                ui_modes={"confirm_and_select": "candidate_selection"})
SUB_PIPELINE = "evaluate_candidate"
SUB_STEPS = PLAIN_SUB_STEPS  # with enable_reviewing: REVIEWED_SUB_STEPS (reviewing.py)


class SellingPipeline(DeployedResources, PipelineRuntime):
    """The ``selling`` pipeline: one instance serves every context (their turns never overlap)."""

    layout = LAYOUT

    def new_state(self, turn: TurnRequest) -> dict[str, Any]:
        """A fresh run's state, with ``enable_reviewing`` fixed for the run (reviewing.py)."""
        state = super().new_state(turn)
        state["enableReviewing"] = reviewing_enabled(getattr(self.services.context, "config", None))
        return state

    async def _drive(self, run: RunTurn) -> None:
        state = run.state
        phase = state.get("phase")
        if phase in ("awaiting_clarification", "awaiting_selection") and not self.question_journaled(run):
            await self._ask_again(run)  # a crash cut the turn before its question was journaled: nobody saw it
            return
        if phase == "awaiting_clarification":
            if not await self.answer_clarification(run):
                return
        elif phase == "awaiting_selection":
            if not await self._answer_selection(run):
                return
        else:
            await self.started_or_resumed(run)
        await self._continue(run)

    async def _ask_again(self, run: RunTurn) -> None:
        """Publish the pending question again (after a crash that cut it off); this turn's text is not an answer."""
        await self.ask_pending_again(run, {"candidate_selection": self._ask_selection})

    def _done(self, run: RunTurn, step_id: str) -> bool:
        return run.state["steps"].get(step_id, {}).get("status") == "completed"

    async def _continue(self, run: RunTurn) -> None:
        """Run the first step not completed, and the ones after it, until the run pauses or ends."""
        if not self._done(run, "intent_parsing"):
            if run.state["steps"].get("intent_parsing", {}).get("status") != "running":
                await run.step_started("intent_parsing")
            if not await self.intent(run, "intent_parsing", run.state["prompt"], clarified=False):
                return
        if not self._done(run, "architecture_planning"):
            await run.step_started("architecture_planning")
            intent = run.state["steps"]["intent_parsing"]["result"]
            fields = {k: v for k, v in intent.items() if k != "prompt"}
            candidates = plan_candidates(Understanding(**{**fields, "resources": tuple(fields["resources"])}),
                                         intent.get("prompt", run.state["prompt"]))
            for index, candidate in enumerate(candidates, start=1):
                candidate["candidate_index"] = index
            await author_summaries(self, run, "architecture_planning", candidates)  # the model's, if one writes
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

    # ------------------------------------------------------------------ evaluate_candidates

    async def _evaluate_all(self, run: RunTurn) -> bool:
        if run.state["steps"].get("evaluate_candidates", {}).get("status") != "running":
            await run.step_started("evaluate_candidates")
        await interrupts.evaluate_candidates(self, run)  # in parallel; restarts, pauses and rollbacks (interrupts)
        evaluated = [c for c in run.state["candidates"] if c["evaluation"]["status"] == "completed"]
        summary = [{"candidate_index": c["candidate_index"], "name": c["name"], "status": c["evaluation"]["status"],
                    "total_monthly_cost": c["evaluation"].get("cost", {}).get("total_monthly_cost", "")}
                   for c in run.state["candidates"]]
        if not evaluated:
            await run.record("evaluate_candidates", status="failed")
            await run.emit("step_failed", "step", "failed", {"step_id": "evaluate_candidates",
                                                             "error": "no_candidate_evaluated", "candidates": summary},
                           extra={"step": run.step("evaluate_candidates")})
            await self.finish(run, "failed", text(run.language, "all_failed"))
            return False
        await run.step_completed("evaluate_candidates", {"evaluated_candidates": summary})
        return True

    def _candidate_obj(self, candidate: Mapping[str, Any], *, with_steps: bool = False) -> dict[str, Any]:
        index = candidate["candidate_index"]
        steps = sub_steps(candidate)
        attempt = candidate.get("evaluation", {}).get("attempt", 1)
        run_id = f"candidate-{SUB_PIPELINE}-{index}-{attempt}"
        obj: dict[str, Any] = {"id": f"candidate-{index}", "runId": run_id, "index": index, "attempt": attempt,
                               "name": candidate["name"], "pipelineName": SUB_PIPELINE, "totalSteps": len(steps)}
        if with_steps:
            obj["steps"] = [{"id": s, "runId": f"{run_id}-{s}-1", "attempt": 1, "index": i, "total": len(steps),
                             "status": "pending"} for i, s in enumerate(steps, start=1)]
        return obj

    def _cstep(self, candidate: Mapping[str, Any], step_id: str) -> dict[str, Any]:
        cand = self._candidate_obj(candidate)
        return {"id": step_id, "runId": f"{cand['runId']}-{step_id}-1", "attempt": 1,
                "index": sub_steps(candidate).index(step_id) + 1, "total": len(sub_steps(candidate))}

    async def _evaluate(self, run: RunTurn, candidate: dict[str, Any]) -> None:
        """The sub-pipeline ``evaluate_candidate`` for one candidate: template, then cost and hard constraints."""
        evaluation = candidate.setdefault("evaluation", {"attempt": 1, "status": "running", "steps": {}})
        # fixed when this attempt began (a restart or rollback makes a fresh evaluation without it)
        evaluation.setdefault("sub_steps", list(REVIEWED_SUB_STEPS if run.state.get("enableReviewing") else SUB_STEPS))
        reviewing = "reviewing" in sub_steps(candidate)
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
            tool_use_id = f"toolu_{new_hex()[:24]}"
            tool_extra = {"candidate": self._candidate_obj(candidate),
                          "candidateStep": self._cstep(candidate, "template_generating")}
            await run.tool_started(tool_use_id, "generate_template",
                                   {"prompt": candidate["generation_prompt"], "language": "en"}, "candidate_step",
                                   tool_extra)
            try:
                generated = await asyncio.to_thread(
                    self.engine.generate, candidate["generation_prompt"], "en")  # type: ignore[union-attr]
            except Exception:
                await run.tool_result(tool_use_id, "generate_template", "candidate_step", tool_extra, is_error=True)
                raise
            filename = template_filename(candidate, generated.filename)
            sha = hashlib.sha256(generated.text.encode("utf-8")).hexdigest()
            run.out.put_nowait(ToolStarted(tool_use_id, "generate_template"))
            run.out.put_nowait(ToolCompleted(tool_use_id, "generate_template",
                                             {"filename": filename, "resourceCount": len(generated.resources)},
                                             artifact=ArtifactPayload(filename, generated.media_type, generated.text)))
            await run.tool_result(tool_use_id, "generate_template", "candidate_step", tool_extra,
                                  result={"filename": filename, "resourceCount": len(generated.resources)},
                                  normalized={"filename": filename, "resourceCount": len(generated.resources),
                                              "contentSha256": sha})
            template = {"filename": filename, "media_type": generated.media_type, "sha256": sha,
                        "resources": [dict(r) for r in generated.resources], "not_generated": list(generated.not_generated),
                        "task_id": run.turn.task_id, **({"text": generated.text} if reviewing else {})}
            await sub_event("artifact_created", "template_generating", "working", {"source": "conclusion"},
                            artifact={"filename": filename, "mediaType": generated.media_type, "content": generated.text,
                                      **({} if reviewing else {"role": "final"}), "contentSha256": sha,
                                      "dedupeKey": f"{candidate['candidate_index']}:{filename}:{sha[:16]}"})
            await sub_event("candidate_step_completed", "template_generating", "working", {"conclusion": {
                "filename": filename, "media_type": generated.media_type, "resource_count": len(generated.resources),
                "not_generated": list(generated.not_generated)}})
            evaluation["template"] = template
            evaluation["steps"]["template_generating"] = "completed"
            await run.pipeline.save_state(run.turn.context_id, run.state)
        assert template is not None
        await run.interrupts.candidate_checkpoint(candidate)  # restart, pause or rollback between sub-steps
        if reviewing and evaluation["steps"].get("reviewing") != "completed":
            template = await review_candidate(self, run, candidate, sub_event, new_hex)
        await run.interrupts.candidate_checkpoint(candidate)  # restart, pause or rollback between sub-steps
        await sub_event("candidate_step_started", "cost_estimating", "working", {})
        cost = await self.prices.estimate(template["resources"], region=run.state.get("intent", {}).get("region") or "")
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

    def _options(self, run: RunTurn) -> list[dict[str, Any]]:
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

    def _costs(self, run: RunTurn) -> dict[int, str]:
        return {c["candidate_index"]: c["evaluation"]["cost"]["total_monthly_cost"] for c in run.state["candidates"]
                if c.get("evaluation", {}).get("status") == "completed"}

    async def _ask_selection(self, run: RunTurn, reason: str = "") -> None:
        if "presentation" not in run.state:
            run.state["presentation"] = presentation(run.turn.metadata)
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
        await run.show_candidates("confirm_and_select", options)
        await run.ask("confirm_and_select", data, self.selection_text(run, prompt, options, self._costs(run)))

    async def _answer_selection(self, run: RunTurn) -> bool:
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

    async def _deploy_and_finish(self, run: RunTurn) -> None:
        candidate = next(c for c in run.state["candidates"] if c["candidate_index"] == run.state["selected"])
        template = candidate["evaluation"]["template"]
        await run.step_started("deploying")
        if self.deployer == "ros":
            await deploy_with_ros(self, run, "deploying", self.deploy_plan(run))
            return
        message = await self.no_deployer(run, "deploying", candidate, template)
        await run.step_completed("deploying", {
            "status": "not_deployed", "deployer": "none", "candidate_name": candidate["name"],
            "template_artifact": template["filename"], "template_task_id": template["task_id"]})
        run.say(message)
        await self.finish(run, "completed", message)

    def deploy_plan(self, run: RunTurn) -> DeployPlan:
        """What ``deployer: ros`` deploys: the chosen candidate's template, in the intent's region, with the choice's
        parameter overrides (the same for a run's state every time: a resumed question asks the same call)."""
        candidate = next(c for c in run.state["candidates"] if c["candidate_index"] == run.state["selected"])
        intent = run.state["steps"].get("intent_parsing", {}).get("result", {})
        selected = run.state["steps"].get("confirm_and_select", {}).get("result", {})
        return DeployPlan(
            candidate["name"], candidate["candidate_index"], candidate["evaluation"]["template"],
            region_id=intent.get("region") or default_region(self),
            stack_name=f"iac-code-{slug(candidate['name'])}-{run.state['pipelineRunId'][-8:]}",
            parameters=dict(selected.get("parameter_overrides") or {}), cost=candidate["evaluation"]["cost"])

    def rollback_state(self, run: RunTurn, target: str, candidates: tuple[int, ...]) -> None:
        interrupts.selling_rollback_state(run, target, candidates)

    def chosen_template(self, state: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
        candidate = next((c for c in state.get("candidates", []) if c["candidate_index"] == state.get("selected")), None)
        template = ((candidate or {}).get("evaluation") or {}).get("template")
        return (candidate, template) if candidate is not None and template else None
