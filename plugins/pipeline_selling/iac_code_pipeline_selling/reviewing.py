"""The ``reviewing`` sub-step of ``evaluate_candidate`` (§2.1), between ``template_generating`` and
``cost_estimating`` when ``enable_reviewing`` is on.

``enable_reviewing``: off by default; ``pipeline-selling-review-step`` in the configuration; the environment's
``IAC_CODE_PIPELINE_SELLING_ENABLE_REVIEWING`` over both when it is ``true/1/yes`` or ``false/0/no`` (anything else
is ignored). A fresh run fixes the value in its state, so a run keeps its sub-steps across turns and restarts.

The product scans with InfraGuard; it is not installed here, so the IaC engine's own reviewer stands in and every
reviewing event says so (``reviewer``, ``infraguard``). While findings of high severity (the reviewer's errors)
remain, an engine that can fix (:class:`~iac_code.api.TemplateFixer`) gets at most five fix rounds; otherwise the
findings are reported as they are. The reviewed template is published as an artifact with ``role: final``
(superseding the generated draft), and stored again when a fix changed it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import ArtifactPayload, Finding, GeneratedTemplate, IacEngine, TemplateFixer, ToolCompleted, ToolStarted

if TYPE_CHECKING:
    from iac_code_pipeline_selling.runner import PipelineRuntime, RunTurn

REVIEW_ENV = "IAC_CODE_PIPELINE_SELLING_ENABLE_REVIEWING"
MAX_FIX_ROUNDS = 5
FINDINGS_SHOWN = 50
ERROR_SEVERITY = "high"  # the interface's scale for a reviewer's "error"
PLAIN_SUB_STEPS = ("template_generating", "cost_estimating")
REVIEWED_SUB_STEPS = ("template_generating", "reviewing", "cost_estimating")
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


class ReviewConfig(BaseModel):
    """The key that switches the ``reviewing`` sub-step on."""

    model_config = ConfigDict(extra="forbid")

    pipeline_selling_review_step: bool = Field(
        False, description="Review every candidate's template (sub-step reviewing) in the selling pipeline; env "
                           f"{REVIEW_ENV} (true/1/yes, false/0/no) wins over it. Fixed when a run starts.")


def reviewing_enabled(config: Any, environ: Mapping[str, str] | None = None) -> bool:
    """``enable_reviewing`` for a run starting now: default ``False`` < the config key < the environment."""
    env = os.environ if environ is None else environ
    raw = env.get(REVIEW_ENV)
    if raw is not None and raw.strip().lower() in _TRUE:
        return True
    if raw is not None and raw.strip().lower() in _FALSE:
        return False
    return bool(getattr(config, "pipeline_selling_review_step", False))


def sub_steps(candidate: Mapping[str, Any]) -> tuple[str, ...]:
    """The sub-steps of a candidate's ``evaluate_candidate`` run (fixed when its evaluation began)."""
    steps = candidate.get("evaluation", {}).get("sub_steps")
    return tuple(steps) if steps else PLAIN_SUB_STEPS


def reviewer_of(engine: IacEngine) -> dict[str, str]:
    """Who reviews, as every reviewing event says it: the engine's reviewer, standing in for InfraGuard."""
    found = shutil.which("infraguard") is not None
    return {"reviewer": f"iac-code {engine.name} reviewer",
            "infraguard": "installed, not used by this version" if found else "not installed"}


@dataclass(frozen=True)
class Review:
    """What the review loop ended with: the findings of the last text, the fix rounds, the fixed template (if any)."""

    findings: tuple[Finding, ...]
    rounds: int
    can_fix: bool
    fixed: GeneratedTemplate | None


def review_loop(engine: IacEngine, text: str, language: str) -> Review:
    """Review ``text``; while high-severity findings remain and the engine can fix, at most five fix rounds."""
    findings = tuple(engine.review(text, language))
    can_fix = isinstance(engine, TemplateFixer)
    rounds = 0
    fixed: GeneratedTemplate | None = None
    while can_fix and rounds < MAX_FIX_ROUNDS and any(f.severity == ERROR_SEVERITY for f in findings):
        rounds += 1
        result = engine.fix(text, [f for f in findings if f.severity == ERROR_SEVERITY], language)  # type: ignore[attr-defined]
        if result is None or not result.text or result.text == text:
            break
        fixed, text = result, result.text
        findings = tuple(engine.review(text, language))
    return Review(findings, rounds, can_fix, fixed)


def _finding(f: Finding) -> dict[str, str]:
    return {"severity": f.severity, "rule": f.rule, "message": f.message, "resource": f.resource}


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    counts = {"high": 0, "medium": 0, "low": 0, "info": 0}
    for f in findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    return counts


SubEvent = Callable[..., Awaitable[None]]


async def review_candidate(pipeline: PipelineRuntime, run: RunTurn, candidate: dict[str, Any],
                           sub_event: SubEvent, new_id: Callable[[], str]) -> dict[str, Any]:
    """The ``reviewing`` sub-step of one candidate; returns its (possibly fixed) template record."""
    evaluation = candidate["evaluation"]
    template: dict[str, Any] = evaluation["template"]
    engine = pipeline.engine
    assert engine is not None
    info = reviewer_of(engine)
    await sub_event("candidate_step_started", "reviewing", "working", dict(info))
    review = await asyncio.to_thread(review_loop, engine, template["text"], run.language)
    draft_key = f"{candidate['candidate_index']}:{template['filename']}:{template['sha256'][:16]}"
    if review.fixed is not None:
        fixed = review.fixed
        sha = hashlib.sha256(fixed.text.encode("utf-8")).hexdigest()
        tool_use_id = f"toolu_{new_id()[:24]}"
        payload = ArtifactPayload(template["filename"], template["media_type"], fixed.text)
        run.out.put_nowait(ToolStarted(tool_use_id, "fix_template"))
        run.out.put_nowait(ToolCompleted(tool_use_id, "fix_template",
                                         {"filename": template["filename"], "fixRounds": review.rounds},
                                         artifact=payload))
        await run.kernel_done()  # stored: the reviewed template's URL replaces the draft's
        template.update(text=fixed.text, sha256=sha, resources=[dict(r) for r in fixed.resources],
                        not_generated=list(fixed.not_generated))
        if payload.stored.get("url"):
            template.update(url=str(payload.stored["url"]), artifact_id=str(payload.stored.get("artifactId", "")))
    errors = [f for f in review.findings if f.severity == ERROR_SEVERITY]
    await sub_event("artifact_created", "reviewing", "working", {"source": "conclusion"}, artifact={
        "filename": template["filename"], "mediaType": template["media_type"], "content": template["text"],
        "role": "final", "supersedesKey": draft_key, "contentSha256": template["sha256"],
        "dedupeKey": f"{candidate['candidate_index']}:{template['filename']}:{template['sha256'][:16]}:final"})
    conclusion = {
        **info, "status": "passed" if not errors else "findings_remain", "passed": not errors,
        "fix_rounds": review.rounds, "max_fix_rounds": MAX_FIX_ROUNDS, "can_fix": review.can_fix,
        "fixed": review.fixed is not None, "filename": template["filename"],
        "finding_counts": _counts(review.findings),
        "findings": [_finding(f) for f in review.findings[:FINDINGS_SHOWN]]}
    await sub_event("candidate_step_completed", "reviewing", "working", {**info, "conclusion": conclusion})
    evaluation["review"] = {k: conclusion[k] for k in ("status", "fix_rounds", "finding_counts", "fixed")}
    evaluation["steps"]["reviewing"] = "completed"
    await pipeline.save_state(run.turn.context_id, run.state)
    return template
