"""What a pipeline that deploys through :mod:`.deploy` adds to :class:`~.runner.PipelineRuntime`: the cloud
resources its run created (the ROS stack) as cleanup targets, the ``cleanupOnly`` continuation that removes them
(:mod:`.cleanup`), its stored templates' text (the chosen one is handed to normal chat at the handoff), and the
resumption of a deploy or cleanup permission question cut by a restart or a suspension (durable waits).

A mixin, listed before ``PipelineRuntime`` in a pipeline's bases, so the runner itself depends on neither the deploy
nor the cleanup (no import circle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iac_code_pipeline_selling import cleanup
from iac_code_pipeline_selling.deploy import FRAME_KIND, DeployPlan, deploy_with_ros, settings_of, stored_template_text

DEPLOY_STEP = "deploying"  # the step both selling pipelines deploy on


class DeployedResources:
    """Cleanup targets, the ``cleanupOnly`` continuation, stored templates and resumed permission questions of a
    deploying pipeline."""

    def deploy_plan(self, run: Any) -> DeployPlan:
        """What ``deployer: ros`` deploys for the run's state (each pipeline says)."""
        raise NotImplementedError

    def cleanup_targets(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The stack a ``deployer: ros`` deploy created, until a cleanup deleted it (none without a deployer)."""
        return cleanup.targets_of(state)

    async def clean_up(self, run: Any) -> None:
        """The ``cleanupOnly`` continuation of a handed-off run (:mod:`.cleanup`)."""
        await cleanup.clean_up(self, run)  # type: ignore[arg-type]

    async def template_text(self, context_id: str, template: Mapping[str, Any]) -> str | None:
        """A stored template's text (the artifact store, else its ``artifact_created`` event; SHA-256 checked)."""
        return await stored_template_text(self, context_id, template)  # type: ignore[arg-type]

    async def resume_ready(self, run: Any, frame: Mapping[str, Any]) -> bool:
        """Whether the run's state still shows the question ``frame`` paused on, and the deploy (or cleanup) can go
        straight back to asking it: nothing is published and nothing recorded before the question is asked again."""
        state = run.state
        operation = frame.get("operation")
        record = state.get("deploy" if operation == "deploy" else "cleanup")
        if frame.get("kind") != FRAME_KIND or not isinstance(record, dict) or record.get("phase") != "permission" or (
                record.get("toolUseId"), record.get("inputId")) != (frame.get("toolUseId"), frame.get("inputId")):
            return False
        if settings_of(self).credentials is None:  # type: ignore[arg-type]
            return False
        if operation == "cleanup":
            return (state.get("phase") == "handed_off" and not record.get("done")
                    and record.get("cleanupId") == frame.get("cleanupId") and bool(record.get("targets")))
        if operation != "deploy" or getattr(self, "deployer", "none") != "ros" or state.get("phase") == "handed_off" \
                or frame.get("stepId") != DEPLOY_STEP:
            return False
        plan = self.deploy_plan(run)
        if plan.candidate_index != record.get("candidateIndex"):
            return False
        return await self.template_text(run.turn.context_id, plan.template) is not None

    async def resume_question(self, run: Any, frame: Mapping[str, Any]) -> None:
        """Go on from the deploy (or cleanup) question ``frame`` paused on (checked by :meth:`resume_ready`)."""
        if frame.get("operation") == "cleanup":
            await cleanup.clean_up(self, run)  # type: ignore[arg-type]
        else:
            await deploy_with_ros(self, run, DEPLOY_STEP, self.deploy_plan(run))  # type: ignore[arg-type]
