"""The ``selling_solution_first`` pipeline (§2.2): three ordinary steps, no sub-pipeline.

1. ``solution_planning_and_selection`` → ``solution_selection`` (``candidate_selection``): the request understood
   (with the same clarification question as ``selling``), the same candidate architectures, priced from their
   planned resources, and the user's choice in one step; ``status`` ``selected`` or ``rejected`` (a rejection
   ends the run, ``continue_pipeline: false``).
2. ``materialize_selected_candidate`` → ``selected_plan`` (``deployment_confirmation``): the chosen candidate's
   template written by the engine and stored as a task artifact, priced, its deployment parameters; it waits
   for ``confirm`` / ``adjust`` / ``reselect`` / ``cancel`` (``reselect`` rolls back to step 1, at most
   :data:`MAX_ROLLBACKS` times).
3. ``deploying`` → ``deployment``: without a deployer, the ``no_deployer_configured`` warning, then the handoff.

Events, journal, state and the turn loop are :mod:`.runner`'s, shared with ``selling``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import yaml

from iac_code.api import ArtifactPayload, ToolCompleted, ToolStarted, Understanding
from iac_code_pipeline_selling.answers import is_rejection, parse_confirmation, parse_selection
from iac_code_pipeline_selling.authoring import author_summaries
from iac_code_pipeline_selling.deploy import DeployPlan, default_region, deploy_with_ros
from iac_code_pipeline_selling.deployed import DeployedResources
from iac_code_pipeline_selling.planning import check_constraints, mermaid, plan_candidates, planned_resources
from iac_code_pipeline_selling.runner import (
    Layout,
    PipelineRuntime,
    RunTurn,
    new_hex,
    presentation,
    slug,
    template_filename,
)
from iac_code_pipeline_selling.texts import text

PIPELINE_NAME = "selling_solution_first"
SELECT = "solution_planning_and_selection"
MATERIALIZE = "materialize_selected_candidate"
DEPLOY = "deploying"
STEPS = (SELECT, MATERIALIZE, DEPLOY)
LAYOUT = Layout(PIPELINE_NAME, STEPS, ui_modes={SELECT: "candidate_selection", MATERIALIZE: "deployment_confirmation"})
MAX_ROLLBACKS = 3
CONFIRM_ACTIONS = (("confirm", "opt_confirm"), ("adjust", "opt_adjust"), ("reselect", "opt_reselect"),
                   ("cancel", "opt_cancel_deploy"))


def template_parameters(template_text: str) -> dict[str, dict[str, Any]]:
    """The template's ``Parameters`` (JSON or YAML): name → its declaration (``{}`` when it has none)."""
    document: Any = None
    with contextlib.suppress(ValueError, yaml.YAMLError):
        document = json.loads(template_text)
    if document is None:
        with contextlib.suppress(yaml.YAMLError):
            document = yaml.safe_load(template_text)
    parameters = document.get("Parameters") if isinstance(document, dict) else None
    if not isinstance(parameters, dict):
        return {}
    return {str(k): dict(v) if isinstance(v, dict) else {} for k, v in parameters.items()}


class SolutionFirstPipeline(DeployedResources, PipelineRuntime):
    """``selling_solution_first``: choose a solution first, then confirm its materialized template, then deploy."""

    layout = LAYOUT

    async def _drive(self, run: RunTurn) -> None:
        phase = run.state.get("phase")
        if phase in ("awaiting_clarification", "awaiting_selection", "awaiting_confirmation") \
                and not self.question_journaled(run):  # a crash cut the turn before its question was journaled
            await self.ask_pending_again(run, {"candidate_selection": self._ask_selection,
                                               "deployment_confirmation": self._ask_confirmation})
            return
        if phase == "awaiting_clarification":
            if not await self.answer_clarification(run, complete=False):
                return
        elif phase == "awaiting_selection":
            await self._answer_selection(run)
            return
        elif phase == "awaiting_confirmation":
            await self._answer_confirmation(run)
            return
        else:
            await self.started_or_resumed(run)
        await self._continue(run)

    async def _continue(self, run: RunTurn) -> None:
        """Run the first step not completed, and the ones after it, until the run pauses or ends."""
        state = run.state
        if run.status_of(SELECT) != "completed":
            if run.status_of(SELECT) != "running":
                await run.step_started(SELECT)
            if "intent" not in state and not await self.intent(run, SELECT, state["prompt"], clarified=False,
                                                               complete=False):
                return
            if not state["candidates"]:
                intent = {k: v for k, v in state["intent"].items() if k != "prompt"}
                candidates = plan_candidates(Understanding(**{**intent, "resources": tuple(intent["resources"])}),
                                             state["intent"]["prompt"])
                for index, candidate in enumerate(candidates, start=1):
                    candidate["candidate_index"] = index
                    candidate["estimate"] = await self.prices.estimate(planned_resources(candidate))
                await author_summaries(self, run, SELECT, candidates)  # the model's, if one writes
                state["candidates"] = candidates
            await self._ask_selection(run, text(run.language, "reselect_prompt") if state.get("rollbacks") else "")
            return
        if run.status_of(MATERIALIZE) != "completed":
            await self._materialize(run)
            return
        await self._deploy(run)

    def _candidate(self, run: RunTurn) -> dict[str, Any]:
        return next(c for c in run.state["candidates"] if c["candidate_index"] == run.state["selected"])

    # ------------------------------------------------------------------ step 1: plan and choose

    def _options(self, run: RunTurn) -> list[dict[str, Any]]:
        rich = run.state.get("presentation") == "rich-v1"
        options = []
        for candidate in run.state["candidates"]:
            option: dict[str, Any] = {"name": candidate["name"], "summary": candidate["summary"],
                                      "candidate_index": candidate["candidate_index"]}
            if rich:
                cost = candidate["estimate"]
                option["architecture_diagram"] = mermaid(candidate)
                option["total_monthly_cost"] = cost["total_monthly_cost"]
                option["cost_items"] = [{"name": i["name"], **({"spec": i["spec"]} if i["spec"] else {}),
                                         "monthly_cost": i["monthly_cost"]} for i in cost["items"]]
            options.append(option)
        return options

    async def _ask_selection(self, run: RunTurn, reason: str = "") -> None:
        if "presentation" not in run.state:
            run.state["presentation"] = presentation(run.turn.metadata)
        options = self._options(run)
        prompt = text(run.language, "select_prompt")
        if reason:
            prompt = f"{reason} {prompt}"
        data = {"kind": "candidate_selection", "stepId": SELECT, "prompt": prompt, "options": options}
        run.state["phase"] = "awaiting_selection"
        run.state["pendingInput"] = {"kind": "candidate_selection", "stepId": SELECT, "prompt": prompt,
                                     "optionCount": len(options)}
        await run.record(SELECT, status="running", selection_status="awaiting_selection")
        costs = {c["candidate_index"]: c["estimate"]["total_monthly_cost"] for c in run.state["candidates"]}
        said = self.selection_text(run, prompt, options, costs).rsplit("\n", 1)[0]
        said += "\n" + text(run.language, "sf_estimate") + "\n" + text(run.language, "sf_howto")
        await run.show_candidates(SELECT, options)
        await run.ask(SELECT, data, said)

    def _selection_conclusion(self, run: RunTurn, status: str, options: list[dict[str, Any]]) -> dict[str, Any]:
        intent = {k: v for k, v in run.state.get("intent", {}).items() if k != "prompt"}
        return {"status": status, "continue_pipeline": status == "selected", "intent": intent,
                "architecture": {"candidates": [
                    {k: c[k] for k in ("candidate_index", "name", "summary", "generation_prompt", "hard_constraints")}
                    for c in run.state["candidates"]]},
                "user_prompt": run.state["pendingInput"]["prompt"], "options": options, "user_input": run.turn.prompt}

    async def _answer_selection(self, run: RunTurn) -> None:
        options = self._options(run)
        answer = run.turn.prompt
        received = {"kind": "candidate_selection", "step_id": SELECT, "answer_text_length": len(answer)}
        if is_rejection(answer):
            await run.emit("input_received", "step", "working", {**received, "rejected": True},
                           extra={"step": run.step(SELECT)})
            conclusion = self._selection_conclusion(run, "rejected", options)
            run.state["phase"] = "running"
            run.state.pop("pendingInput", None)
            await run.step_completed(SELECT, conclusion)
            await self.finish(run, "canceled", text(run.language, "sf_rejected"))
            return
        selection = parse_selection(answer, options)
        if selection.option is None:
            indices = ", ".join(str(o["candidate_index"]) for o in options)
            await self._ask_selection(run, text(run.language, selection.error, answer=answer.strip()[:80],
                                                indices=indices))
            return
        option = selection.option
        evaluated = [o["candidate_index"] for o in options]
        conclusion = {**self._selection_conclusion(run, "selected", options),
                      "selected_candidate_name": option["name"], "selected_candidate_index": option["candidate_index"],
                      "selected_evaluated_candidate_index": evaluated.index(option["candidate_index"])}
        if selection.parameter_overrides:
            conclusion["parameter_overrides"] = dict(selection.parameter_overrides)
        await run.emit("input_received", "step", "working", {
            **received, "selected_candidate_name": option["name"], "selected_candidate_index": option["candidate_index"],
            "selected_evaluated_candidate_index": conclusion["selected_evaluated_candidate_index"]},
            extra={"step": run.step(SELECT)})
        run.state["phase"] = "running"
        run.state.pop("pendingInput", None)
        run.state["selected"] = option["candidate_index"]
        run.state["overrides"] = dict(selection.parameter_overrides or {})
        run.state.pop("template", None)
        await run.step_completed(SELECT, conclusion)
        run.say(text(run.language, "selected", name=option["name"]))
        await self._materialize(run)

    # ------------------------------------------------------------------ step 2: materialize and confirm

    async def _materialize(self, run: RunTurn) -> None:
        candidate = self._candidate(run)
        if run.status_of(MATERIALIZE) != "running":
            await run.step_started(MATERIALIZE)
        template = run.state.get("template")
        if template is None or template.get("candidate_index") != candidate["candidate_index"]:
            tool_use_id = f"toolu_{new_hex()[:24]}"
            tool_extra = {"step": run.step(MATERIALIZE)}
            await run.tool_started(tool_use_id, "generate_template",
                                   {"prompt": candidate["generation_prompt"], "language": "en"}, "step", tool_extra)
            try:
                generated = await asyncio.to_thread(
                    self.engine.generate, candidate["generation_prompt"], "en")  # type: ignore[union-attr]
            except Exception:
                await run.tool_result(tool_use_id, "generate_template", "step", tool_extra, is_error=True)
                raise
            filename = template_filename(candidate, generated.filename)
            payload = ArtifactPayload(filename, generated.media_type, generated.text)
            run.out.put_nowait(ToolStarted(tool_use_id, "generate_template"))
            run.out.put_nowait(ToolCompleted(tool_use_id, "generate_template",
                                             {"filename": filename, "resourceCount": len(generated.resources)},
                                             artifact=payload))
            await run.tool_result(tool_use_id, "generate_template", "step", tool_extra,
                                  result={"filename": filename, "resourceCount": len(generated.resources)},
                                  normalized={"filename": filename, "resourceCount": len(generated.resources),
                                              "contentSha256": hashlib.sha256(generated.text.encode("utf-8")).hexdigest()})
            await run.kernel_done()  # the kernel has stored it: its URL is in payload.stored
            resources = [dict(r) for r in generated.resources]
            declared = template_parameters(generated.text)
            template = {
                "candidate_index": candidate["candidate_index"], "filename": filename,
                "media_type": generated.media_type,
                "sha256": hashlib.sha256(generated.text.encode("utf-8")).hexdigest(),
                "url": str(payload.stored.get("url", "")), "artifact_id": str(payload.stored.get("artifactId", "")),
                "task_id": run.turn.task_id, "resources": resources, "not_generated": list(generated.not_generated),
                "cost": await self.prices.estimate(resources),
                "constraint_problems": check_constraints(candidate["hard_constraints"], resources),
                "defaults": {name: d["Default"] for name, d in declared.items() if "Default" in d},
                "declared": sorted(declared),
            }
            run.state["template"] = template
            await self.save_state(run.turn.context_id, run.state)
        await self._ask_confirmation(run)

    def _effective(self, run: RunTurn) -> dict[str, Any]:
        candidate, template = self._candidate(run), run.state["template"]
        region = run.state.get("intent", {}).get("region") or default_region(self)
        return {"region_id": region, "stack_name": f"iac-code-{slug(candidate['name'])}",
                **template["defaults"], **run.state.get("overrides", {})}

    def _confirmation(self, run: RunTurn, prompt: str) -> dict[str, Any]:
        candidate, template = self._candidate(run), run.state["template"]
        effective = self._effective(run)
        options = [{"action": action, "label": text(run.language, label)} for action, label in CONFIRM_ACTIONS]
        return {"kind": "deployment_confirmation", "stepId": MATERIALIZE, "prompt": prompt, "options": options,
                "solution_summary": f"{candidate['name']}: {candidate['summary']}", "template_url": template["url"],
                "cost": template["cost"], "effective_deployment_parameters": effective,
                "parameter_overrides": dict(run.state.get("overrides", {})),
                "preview_ready_for_create": all(name in effective for name in template["declared"])}

    async def _ask_confirmation(self, run: RunTurn, reason: str = "") -> None:
        candidate = self._candidate(run)
        lang = run.language
        prompt = text(lang, "confirm_prompt", name=candidate["name"])
        if reason:
            prompt = f"{reason} {prompt}"
        data = self._confirmation(run, prompt)
        run.state["phase"] = "awaiting_confirmation"
        run.state["pendingInput"] = {"kind": "deployment_confirmation", "stepId": MATERIALIZE, "prompt": prompt}
        await run.record(MATERIALIZE, status="running", plan_status="awaiting_confirmation")
        said = "\n".join([
            prompt, data["solution_summary"], text(lang, "confirm_template", url=data["template_url"] or
                                                   run.state["template"]["filename"]),
            text(lang, "confirm_cost", cost=data["cost"]["total_monthly_cost"], disclaimer=self.prices.disclaimer),
            text(lang, "confirm_params", params=json.dumps(data["effective_deployment_parameters"], ensure_ascii=False)),
            *[f"{i}. {o['label']}" for i, o in enumerate(data["options"], start=1)], text(lang, "confirm_howto")])
        await run.ask(MATERIALIZE, data, said, verbatim=True)

    def _plan(self, run: RunTurn, status: str) -> dict[str, Any]:
        """The ``selected_plan`` conclusion."""
        candidate, template = self._candidate(run), run.state["template"]
        effective = self._effective(run)
        return {"status": status, "candidate_name": candidate["name"], "candidate_index": candidate["candidate_index"],
                "template_filename": template["filename"], "template_url": template["url"],
                "template_task_id": template["task_id"], "cost": template["cost"],
                "hard_constraints_met": not template["constraint_problems"],
                "effective_deployment_parameters": effective,
                "parameter_overrides": dict(run.state.get("overrides", {})),
                "preview_ready_for_create": all(name in effective for name in template["declared"])}

    async def _answer_confirmation(self, run: RunTurn) -> None:
        lang = run.language
        answer = run.turn.prompt
        options = [{"action": action} for action, _ in CONFIRM_ACTIONS]
        parsed = parse_confirmation(answer, options)
        if not parsed.action:
            await self._ask_confirmation(run, text(lang, parsed.error, answer=answer.strip()[:20], count=len(options)))
            return
        overrides = dict(parsed.parameter_overrides or {})
        if parsed.action == "adjust" and not overrides:
            await self._ask_confirmation(run, text(lang, "adjust_empty"))
            return
        rollbacks = int(run.state.get("rollbacks", 0))
        if parsed.action == "reselect" and rollbacks >= MAX_ROLLBACKS:
            await self._ask_confirmation(run, text(lang, "rollback_limit", limit=MAX_ROLLBACKS))
            return
        await run.emit("input_received", "step", "working", {
            "kind": "deployment_confirmation", "step_id": MATERIALIZE, "answer_text_length": len(answer),
            "action": parsed.action, "parameter_overrides": overrides}, extra={"step": run.step(MATERIALIZE)})
        run.state["phase"] = "running"
        run.state.pop("pendingInput", None)
        if overrides and parsed.action in ("confirm", "adjust"):
            run.state["overrides"] = {**run.state.get("overrides", {}), **overrides}
        if parsed.action == "adjust":
            await self._ask_confirmation(run, text(lang, "adjusted", params=json.dumps(overrides, ensure_ascii=False)))
        elif parsed.action == "confirm":
            await run.step_completed(MATERIALIZE, self._plan(run, "confirmed"))
            await self._deploy(run)
        elif parsed.action == "cancel":
            await run.step_completed(MATERIALIZE, self._plan(run, "cancelled"))
            await self.finish(run, "canceled", text(lang, "canceled"))
        else:
            await self._rollback(run, rollbacks + 1)

    async def _rollback(self, run: RunTurn, count: int) -> None:
        """``reselect``: the plan is recorded as ``reselect_requested`` and the run goes back to step 1."""
        await run.step_completed(MATERIALIZE, self._plan(run, "reselect_requested"))
        steps = run.state["steps"]
        for step_id in (SELECT, MATERIALIZE):
            steps[step_id] = {"attempt": int(steps.get(step_id, {}).get("attempt", 1)) + 1, "status": "pending"}
        run.state["rollbacks"] = count
        run.state.pop("template", None)
        run.state.pop("selected", None)
        run.state["overrides"] = {}
        await run.record(SELECT, status="pending")
        await run.emit("rollback_completed", "step", "working", {
            "rollback_scope": "parent", "from_step_id": MATERIALIZE, "to_step": SELECT, "to_step_id": SELECT,
            "reason": "reselect_requested", "rollback_count": count, "max_rollbacks": MAX_ROLLBACKS},
            extra={"step": run.step(SELECT)})
        await self._continue(run)

    # ------------------------------------------------------------------ step 3: deploy

    async def _deploy(self, run: RunTurn) -> None:
        candidate, template = self._candidate(run), run.state["template"]
        await run.step_started(DEPLOY)
        if self.deployer == "ros":
            await deploy_with_ros(self, run, DEPLOY, self.deploy_plan(run))
            return
        message = await self.no_deployer(run, DEPLOY, candidate, template)
        await run.step_completed(DEPLOY, {
            "status": "cancelled", "deployed": False, "reason": "no_deployer_configured", "deployer": "none",
            "candidate_name": candidate["name"], "template_artifact": template["filename"],
            "template_url": template["url"], "template_task_id": template["task_id"],
            "effective_deployment_parameters": self._effective(run)})
        run.say(message)
        await self.finish(run, "completed", message)

    def deploy_plan(self, run: RunTurn) -> DeployPlan:
        """What ``deployer: ros`` deploys: the materialized template with the confirmed parameters (the same for a
        run's state every time: a resumed question asks the same call)."""
        candidate, template = self._candidate(run), run.state["template"]
        effective = self._effective(run)
        return DeployPlan(
            candidate["name"], candidate["candidate_index"], template, region_id=str(effective["region_id"]),
            stack_name=str(effective["stack_name"]),
            parameters={k: v for k, v in effective.items() if k not in ("region_id", "stack_name")},
            cost=template["cost"], conclusion={"template_url": template["url"],
                                               "effective_deployment_parameters": effective})

    def chosen_template(self, state: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
        template = state.get("template")
        candidate = next((c for c in state.get("candidates", []) if isinstance(template, Mapping)
                          and c["candidate_index"] == template.get("candidate_index") == state.get("selected")), None)
        return (candidate, template) if candidate is not None else None

    def rollback_state(self, run: RunTurn, target: str, candidates: tuple[int, ...]) -> None:
        """Going back (an interrupt): to step 1 drops the choice, its template and overrides; to step 2 the template."""
        if target == SELECT:
            run.state.pop("selected", None)
            run.state["overrides"] = {}
        if target in (SELECT, MATERIALIZE):
            run.state.pop("template", None)
