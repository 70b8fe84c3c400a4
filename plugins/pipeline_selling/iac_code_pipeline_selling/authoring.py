"""The model's words in the selling pipelines: with a model-driven chat runtime (``agent-runtime: llm``, an
:class:`~iac_code.api.ModelWriter`) the model writes the intent (whether the request is infrastructure, its
category, confidence, region, other cloud and summary) and the candidates' summaries; the IaC engine still reads
the resources, writes the templates and the price source prices them.

Each model call is reported as a ``usage`` event. When the model cannot answer (an error, no JSON, a value out of
range) the engine's reading stands and a ``pipeline_warning`` (``code: "model_unavailable"``) says so. Without a
model-driven runtime nothing here runs: the pipelines stay deterministic.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from iac_code.api import ModelWriter, Understanding, Written

# The pipeline (runner.PipelineRuntime) and its turn (runner.RunTurn) are typed ``Any`` here: runner imports this.
PipelineRuntime = Any
RunTurn = Any

logger = logging.getLogger(__name__)

CATEGORIES = ("generation", "edit", "review", "conversion", "question", "stack_operation", "chat")
CONFIDENCES = ("high", "medium", "low")
CLOUDS = ("", "aws", "azure", "gcp")
MAX_SUMMARY = 1000
LANGUAGES = {"zh": "Chinese", "en": "English", "es": "Spanish", "fr": "French", "de": "German", "ja": "Japanese",
             "pt": "Portuguese"}

INTENT_INSTRUCTIONS = (
    "You read one request to an Infrastructure-as-Code assistant for Alibaba Cloud. Answer with one JSON object and "
    "nothing else: {{\"is_infra_intent\": true|false, \"category\": one of {categories}, \"confidence\": \"high\"|"
    "\"medium\"|\"low\", \"region\": an Alibaba Cloud region id or \"\", \"other_cloud\": \"aws\"|\"azure\"|\"gcp\"|"
    "\"\" (another provider the request is about), \"summary\": one sentence in {language} saying what the user "
    "wants}}. Use \"generation\" for a request to create infrastructure, and confidence \"low\" when it names "
    "nothing concrete to deploy."
)
SUMMARY_INSTRUCTIONS = (
    "You describe candidate architectures on Alibaba Cloud for a user's request. Answer with one JSON object and "
    "nothing else: {{\"summaries\": [one string per candidate, in the given order]}}. Each summary is one to three "
    "sentences in {language}: what the candidate deploys and its trade-off (cost, availability, operations). Do "
    "not invent resources the candidate does not have."
)


def writer_of(pipeline: PipelineRuntime) -> ModelWriter | None:
    """The chat runtime when it can write (a model-driven one), else ``None``."""
    chat = pipeline.services.chat
    return chat if isinstance(chat, ModelWriter) else None


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (alone, or in a fenced block); ``ValueError`` when there is none."""
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.DOTALL)
    body = fenced.group(1) if fenced else text[text.find("{"):text.rfind("}") + 1]
    value = json.loads(body) if body else None
    if not isinstance(value, dict):
        raise ValueError("no JSON object")
    return value


async def _usage(run: RunTurn, step_id: str, written: Written) -> None:
    await run.emit("usage", "step", "working", {
        "provider": written.provider, "model": written.model, "inputTokens": written.input_tokens,
        "outputTokens": written.output_tokens, "totalTokens": written.input_tokens + written.output_tokens,
        "cachedInputTokens": 0}, extra={"step": run.step(step_id)}, verbatim=True)


async def _unavailable(run: RunTurn, step_id: str, what: str, exc: BaseException) -> None:
    logger.warning("The model did not write the %s (%s): the engine's stands", what, type(exc).__name__)
    await run.emit("pipeline_warning", "step", "working", {
        "code": "model_unavailable", "source": step_id,
        "message": f"The model did not write the {what} ({type(exc).__name__}); the IaC engine's is used."},
        extra={"step": run.step(step_id)})


def _choice(data: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: Any = None) -> str:
    value = data.get(key, default)
    value = value.strip().lower() if isinstance(value, str) else value
    if value not in allowed:
        raise ValueError(f"{key} out of range")
    return str(value)


async def author_intent(pipeline: PipelineRuntime, run: RunTurn, step_id: str, prompt: str,
                        understanding: Understanding) -> Understanding:
    """``understanding`` with the model's intent (the engine's resources kept); unchanged without a model."""
    writer = writer_of(pipeline)
    if writer is None:
        return understanding
    language = LANGUAGES.get(run.language, "English")
    engine_read = ", ".join(f"{r.get('count', 1)}x {r.get('type')}" for r in understanding.resources) or "nothing"
    try:
        written = await writer.write(INTENT_INSTRUCTIONS.format(categories=", ".join(CATEGORIES), language=language),
                                     f"Request: {prompt}\n\nResources the template engine recognised: {engine_read}.",
                                     language=run.language, metadata=run.turn.metadata)
        await _usage(run, step_id, written)
        data = _json_object(written.text)
        infra = data.get("is_infra_intent")
        summary = data.get("summary")
        region = data.get("region") if isinstance(data.get("region"), str) else ""
        if not isinstance(infra, bool) or not isinstance(summary, str) or not summary.strip():
            raise ValueError("is_infra_intent or summary missing")
        return dataclasses.replace(
            understanding, is_infra_intent=infra, category=_choice(data, "category", CATEGORIES),
            confidence=_choice(data, "confidence", CONFIDENCES), other_cloud=_choice(data, "other_cloud", CLOUDS, ""),
            summary=summary.strip()[:MAX_SUMMARY],
            region=region.strip() if re.fullmatch(r"[a-z]{2,}-[a-z0-9-]+", region.strip()) else understanding.region)
    except Exception as exc:  # a model that cannot answer must not stop the run
        await _unavailable(run, step_id, "intent", exc)
        return understanding


async def author_summaries(pipeline: PipelineRuntime, run: RunTurn, step_id: str,
                           candidates: list[dict[str, Any]]) -> None:
    """Replace each candidate's ``summary`` with the model's (``summary_written_by: "model"``); unchanged without
    a model or when its answer does not fit."""
    writer = writer_of(pipeline)
    if writer is None or not candidates:
        return
    language = LANGUAGES.get(run.language, "English")
    facts = [{"name": c["name"], "components": c.get("components", {}), "hard_constraints": c.get("hard_constraints"),
              "draft_summary": c["summary"]} for c in candidates]
    request = run.state.get("intent", {}).get("prompt") or run.state.get("prompt", "")
    try:
        written = await writer.write(SUMMARY_INSTRUCTIONS.format(language=language),
                                     json.dumps({"request": request, "candidates": facts}, ensure_ascii=False),
                                     language=run.language, metadata=run.turn.metadata)
        await _usage(run, step_id, written)
        summaries = _json_object(written.text).get("summaries")
        if (not isinstance(summaries, list) or len(summaries) != len(candidates)
                or not all(isinstance(s, str) and s.strip() for s in summaries)):
            raise ValueError("not one summary per candidate")
    except Exception as exc:
        await _unavailable(run, step_id, "candidate summaries", exc)
        return
    for candidate, summary in zip(candidates, summaries, strict=True):
        candidate["summary"] = summary.strip()[:MAX_SUMMARY]
        candidate["summary_written_by"] = "model"
