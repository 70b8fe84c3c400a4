"""What a pipeline that deploys through :mod:`.deploy` adds to :class:`~.runner.PipelineRuntime`: the cloud
resources its run created (the ROS stack) as cleanup targets, the ``cleanupOnly`` continuation that removes them
(:mod:`.cleanup`), and its stored templates' text (the chosen one is handed to normal chat at the handoff).

A mixin, listed before ``PipelineRuntime`` in a pipeline's bases, so the runner itself depends on neither the deploy
nor the cleanup (no import circle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iac_code_pipeline_selling import cleanup
from iac_code_pipeline_selling.deploy import stored_template_text


class DeployedResources:
    """Cleanup targets, the ``cleanupOnly`` continuation and stored templates of a deploying pipeline."""

    def cleanup_targets(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The stack a ``deployer: ros`` deploy created, until a cleanup deleted it (none without a deployer)."""
        return cleanup.targets_of(state)

    async def clean_up(self, run: Any) -> None:
        """The ``cleanupOnly`` continuation of a handed-off run (:mod:`.cleanup`)."""
        await cleanup.clean_up(self, run)  # type: ignore[arg-type]

    async def template_text(self, context_id: str, template: Mapping[str, Any]) -> str | None:
        """A stored template's text (the artifact store, else its ``artifact_created`` event; SHA-256 checked)."""
        return await stored_template_text(self, context_id, template)  # type: ignore[arg-type]
