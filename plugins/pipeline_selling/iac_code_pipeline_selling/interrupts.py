"""Interrupts: user text that reaches a pipeline while its turn runs (since-0.13 §2.5).

The kernel offers a pipeline-mode message for a context whose turn is running to the runtime's ``interrupt``
(:class:`iac_code.api.Interrupt`). The pipeline running that context takes it (:func:`receive`): it publishes
``interrupt_received`` and, after a deterministic classification (:func:`classify`), ``interrupt_classified``;
an action it cannot take (a limit reached, no such candidate, ...) adds a ``pipeline_warning`` and changes nothing.
Otherwise the action waits, recorded in the run's state, for the run's next checkpoint:

* ``restart_candidate``: that candidate's sub-pipeline ``evaluate_candidate`` is abandoned at its next sub-step
  boundary (or, when it is done, re-opened) with ``candidate_restart_requested`` and runs again as attempt + 1
  (at most :data:`MAX_CANDIDATE_ROLLBACKS` times per candidate); once ``evaluate_candidates`` has completed, the
  restart is a parent rollback to it that re-runs only that candidate;
* ``rollback``: at the next parent-step boundary (the running candidates stop at theirs) the steps from the target
  on get a new attempt, ``rollback_completed`` is published and the run goes on from the target (at most
  :data:`MAX_ROLLBACKS` times per run, the pipeline's ``max_rollbacks``);
* ``pause``: at the next boundary the turn stops on an ``input_required`` of kind ``pipeline_pause_confirmation``
  (``paused: true``); the next message resumes the run (or, with ``cancel``, cancels it);
* ``continue``: nothing changes.

Checkpoints: before every parent step starts (:meth:`RunTurn.step_started`), before a turn stops on a question
(:meth:`RunTurn.ask`), between a candidate's sub-steps (:meth:`Interrupts.candidate_checkpoint`) and when the
parallel candidates are done (:func:`evaluate_candidates`). A turn no longer takes interrupts once it stops on a
question or finishes; a message then is an answer (or a new turn), as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from iac_code.api import Interrupt, mark_pipeline_waiting
from iac_code_pipeline_selling.texts import text

# :class:`.runner.RunTurn` and :class:`.runner.PipelineRuntime`: runner imports this module, so they are not imported here.
RunTurn = Any
PipelineRuntime = Any

logger = logging.getLogger(__name__)

MAX_ROLLBACKS = 3  # per run: the parent pipeline's max_rollbacks (both pipelines)
MAX_CANDIDATE_ROLLBACKS = 5  # per candidate: the sub-pipeline evaluate_candidate's max_rollbacks
USER_INPUT_LIMIT = 4000  # characters of the interrupt's text echoed in interrupt_received
EVALUATE = "evaluate_candidates"
FIRST_SUB_STEP = "template_generating"

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "pause_prompt": "The pipeline is paused before step {step}. Resume it, or cancel the run?",
        "opt_resume": "Resume",
        "opt_cancel_run": "Cancel the run",
        "pause_howto": "Answer `resume` (or anything else) to go on, or `cancel`.",
        "rollback_limit_reached": "The pipeline has already gone back {limit} times, its limit; the run goes on.",
        "rollback_target_not_reached": "The run has not reached step {step} yet, so it cannot go back to it; "
                                       "the run goes on.",
        "candidate_restart_limit_reached": "Candidate {index} has already been restarted {limit} times, its limit; "
                                           "the run goes on.",
        "candidate_not_found": "There is no candidate {index}; the run goes on.",
        "candidate_restart_unavailable": "There are no candidates to restart at this point; the run goes on.",
        "interrupt_not_applied": "The run reached its end before this interrupt could take effect.",
    },
    "zh": {
        "pause_prompt": "流水线已在步骤 {step} 之前暂停。继续运行，还是取消？",
        "opt_resume": "继续",
        "opt_cancel_run": "取消运行",
        "pause_howto": "回复“继续”（或任意其他内容）继续运行，回复“取消”结束。",
        "rollback_limit_reached": "流水线已经回退 {limit} 次，达到上限；继续运行。",
        "rollback_target_not_reached": "运行尚未到达步骤 {step}，无法回退到它；继续运行。",
        "candidate_restart_limit_reached": "方案 {index} 已经重做 {limit} 次，达到上限；继续运行。",
        "candidate_not_found": "没有方案 {index}；继续运行。",
        "candidate_restart_unavailable": "目前还没有可以重做的方案；继续运行。",
        "interrupt_not_applied": "这条插话生效之前，运行已经结束。",
    },
}


def _text(language: str, key: str, **values: Any) -> str:
    table = TEXTS.get(language, TEXTS["en"])
    return table.get(key, TEXTS["en"][key]).format(**values)


# --------------------------------------------------------------------------- classification

_LATIN = re.IGNORECASE
_CANDIDATE = re.compile(
    r"(?:\b(?:candidate|candidato|candidat|kandidat|option|op[cç][aã]o|opci[oó]n|variante|alternative|plan)\s*"
    r"(?:#|no\.?|nr\.?|n[º°]\.?)?\s*|方案\s*|候选\s*|候補\s*|第\s*)(\d+)", _LATIN)
_REDO = re.compile(r"\b(?:redo|re-do|restart|regenerate|re-generate|retry|again|rework|rebuild|recreate|"
                   r"neu|nochmal|noch mal|erneut|wiederhol\w*|refazer|refa[cç]a|refaz|repetir|repita|rehacer|rehaz\w*|"
                   r"refaire|refais|recommence\w*)\b", _LATIN)
_CHANGE = re.compile(r"\b(?:change|modify|update|switch|replace|use|using|instead|"
                     r"[äa]ndere?\w*|verwende\w*|benutze\w*|nimm|statt|mude|mudar|altere?\w*|troque|trocar|usar|use|"
                     r"em vez|cambia\w*|utiliza\w*|en lugar|change[rz]?|utilise[rz]?|au lieu)\b", _LATIN)
_REDO_CJK = ("重做", "重新", "再做", "やり直", "再生成", "再作成")
_CHANGE_CJK = ("改", "换", "換", "修改", "使用", "变更", "変更", "使って", "替换")
_PAUSE = re.compile(r"\b(?:pause|pausa|pausar|pausiere\w*|wait|hold on|hold up|hang on|warte\w*|anhalten|halt an|"
                    r"espere|espera|aguarde|aguarda|attends|attendez|un moment)\b", _LATIN)
_PAUSE_CJK = ("暂停", "等一下", "等等", "先停", "稍等", "一時停止", "待って", "ちょっと待")
_START_OVER = re.compile(r"\b(?:start over|start again|from scratch|begin again|restart everything|"
                         r"von vorne|von vorn|neu anfangen|von neuem|recome[cç]ar|recome[cç]e|come[cç]ar de novo|"
                         r"comece de novo|do zero|empezar de nuevo|empieza de nuevo|desde cero|recommencer|"
                         r"depuis le d[ée]but|[àa] z[ée]ro)\b", _LATIN)
_START_OVER_CJK = ("重新开始", "从头", "從頭", "最初から", "はじめから", "一からやり直")
_GO_BACK = re.compile(r"\b(?:go back|back to|return to|revert to|roll ?back|step back|zur[üu]ck|"
                      r"voltar|volte|volta|retornar|retorne|volver|vuelve|regresa\w*|revenir|reviens|retourne\w*|"
                      r"retour)\b", _LATIN)
_GO_BACK_CJK = ("回到", "返回", "退回", "回退", "戻", "回滚")

# Topics a rollback names, each with the parent steps it means (the first one the pipeline has wins).
_TOPICS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("intent", "requirement", "request", "需求", "意图", "anforderung", "requisit", "exig", "要件", "要求"),
     ("intent_parsing", "solution_planning_and_selection")),
    (("planning", "plan", "architect", "design", "规划", "架构", "设计", "planung", "architektur", "entwurf",
      "planejamento", "planeamento", "arquitet", "arquitect", "planifica", "conception", "設計", "アーキテクチャ",
      "計画"),
     ("architecture_planning", "solution_planning_and_selection")),
    (("evaluat", "candidates", "template", "cost", "评估", "模板", "成本", "费用", "bewert", "vorlage", "kosten",
      "avalia", "evalua", "modelo", "plantilla", "custo", "coste", "évalu", "modèle", "coût", "評価",
      "テンプレート"),
     ("evaluate_candidates", "materialize_selected_candidate")),
    (("select", "choice", "choose", "选择", "auswahl", "sele", "escolh", "choix", "選択"),
     ("confirm_and_select", "solution_planning_and_selection")),
)


@dataclass(frozen=True)
class Verdict:
    """What an interrupt asks for: ``action`` (``continue``, ``restart_candidate``, ``rollback``, ``pause``),
    the parent step it targets, the candidate (1-based index) and why; ``instruction`` is the user's change
    to that candidate (``change candidate 2 to use ...``), empty for a plain redo."""

    action: str
    target_step_id: str = ""
    candidate_index: int | None = None
    reason: str = ""
    instruction: str = ""


def _has(text: str, pattern: re.Pattern[str], cjk: tuple[str, ...]) -> bool:
    return bool(pattern.search(text)) or any(word in text for word in cjk)


def _topic_step(text: str, steps: tuple[str, ...]) -> str:
    """The parent step a rollback names (the topic mentioned first), ``""`` for none."""
    low = text.lower()
    best: tuple[int, str] | None = None
    for words, step_ids in _TOPICS:
        step = next((s for s in step_ids if s in steps), "")
        if not step:
            continue
        for word in words:
            found = re.search(r"\b" + re.escape(word), low) if word.isascii() else None
            position = found.start() if found else (low.find(word) if not word.isascii() else -1)
            if position >= 0 and (best is None or position < best[0]):
                best = (position, step)
    return best[1] if best else ""


def classify(text: str, steps: tuple[str, ...], current_step: str) -> Verdict:
    """The offline runtime's verdict on an interrupt, by keywords (English, Chinese, German, Portuguese, Spanish,
    French, Japanese), in this order: a named candidate with a redo or change word restarts that candidate;
    ``start over`` rolls back to the first step and ``go back (to <step>)`` to the named step (else the one
    before the current); ``pause`` / ``wait`` pauses; anything else continues."""
    current = current_step if current_step in steps else steps[0]
    candidate = _CANDIDATE.search(text)
    changed = _has(text, _CHANGE, _CHANGE_CJK)
    if candidate and (changed or _has(text, _REDO, _REDO_CJK)):
        return Verdict("restart_candidate", EVALUATE if EVALUATE in steps else current, int(candidate.group(1)),
                       "user_requested_candidate_restart", text.strip() if changed else "")
    if _has(text, _START_OVER, _START_OVER_CJK):
        return Verdict("rollback", steps[0], reason="user_requested_start_over")
    if _has(text, _GO_BACK, _GO_BACK_CJK):
        target = _topic_step(text, steps) or steps[max(0, steps.index(current) - 1)]
        return Verdict("rollback", target, reason="user_requested_rollback")
    if _has(text, _PAUSE, _PAUSE_CJK):
        return Verdict("pause", current, reason="user_requested_pause")
    return Verdict("continue", current, reason="no_change_requested")


# --------------------------------------------------------------------------- one turn's interrupts


@dataclass
class Directive:
    """An accepted interrupt waiting for the run's next checkpoint (kept in the run's state until applied)."""

    id: str
    action: str
    target_step_id: str
    candidate_index: int | None
    reason: str
    instruction: str = ""
    ready: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "action": self.action, "targetStepId": self.target_step_id,
                "candidateIndex": self.candidate_index, "reason": self.reason, "instruction": self.instruction}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Directive:
        directive = cls(str(data.get("id", "")), str(data.get("action", "")), str(data.get("targetStepId", "")),
                        data.get("candidateIndex") if isinstance(data.get("candidateIndex"), int) else None,
                        str(data.get("reason", "")), str(data.get("instruction", "")))
        directive.ready.set()
        return directive


class Paused(Exception):  # noqa: N818 - control flow inside the run
    """A pause takes effect: the turn stops before (or at) ``step_id`` with the pause confirmation."""

    def __init__(self, step_id: str) -> None:
        super().__init__(step_id)
        self.step_id = step_id


class RolledBack(Exception):  # noqa: N818 - control flow inside the run
    """A rollback takes effect: the run goes back to ``directive.target_step_id`` (``candidates``: only these
    candidates are evaluated again)."""

    def __init__(self, directive: Directive, candidates: tuple[int, ...] = ()) -> None:
        super().__init__(directive.target_step_id)
        self.directive = directive
        self.candidates = candidates


class Halt(Exception):  # noqa: N818 - control flow inside a candidate
    """A pause or rollback is pending: a candidate stops at its sub-step boundary."""


class CandidateRestart(Exception):  # noqa: N818 - control flow inside a candidate
    """The candidate's sub-pipeline restarts (``directive``)."""

    def __init__(self, directive: Directive) -> None:
        super().__init__(directive.id)
        self.directive = directive


class Interrupts:
    """The interrupts of one pipeline turn: which are waiting for a checkpoint, whether more are taken."""

    def __init__(self, run: RunTurn) -> None:
        self.run = run
        self.accepting = True
        self.inflight: set[asyncio.Event] = set()  # interrupts being received (their events not all published)
        saved = run.state.get("interrupts", {}).get("pending", [])
        self.pending: list[Directive] = [Directive.from_json(d) for d in saved if isinstance(d, Mapping)]

    # ------------------------------------------------------------------ bookkeeping

    def _record(self) -> None:
        self.run.state.setdefault("interrupts", {})["pending"] = [d.to_json() for d in self.pending]

    async def _save(self) -> None:
        self._record()
        await self.run.pipeline.save_state(self.run.turn.context_id, self.run.state)

    async def _settled(self) -> None:
        """Wait until every interrupt being received has published its events."""
        for event in list(self.inflight):
            await event.wait()

    @property
    def halting(self) -> bool:
        """Whether a pause or rollback waits: running candidates stop at their next boundary."""
        return any(d.action in ("pause", "rollback") for d in self.pending)

    def restart_pending(self, index: int) -> bool:
        return any(d.action == "restart_candidate" and d.candidate_index == index for d in self.pending)

    async def take_restart(self, index: int) -> Directive | None:
        """The first waiting restart of candidate ``index``, removed from the waiting ones."""
        for directive in self.pending:
            if directive.action == "restart_candidate" and directive.candidate_index == index:
                await directive.ready.wait()
                self.pending.remove(directive)
                self._record()
                return directive
        return None

    # ------------------------------------------------------------------ checkpoints

    async def checkpoint(self, step_id: str, *, closing: bool = False) -> None:
        """A parent-step boundary (``closing``: the turn is about to stop on a question, so it takes no more
        interrupts): a waiting pause or rollback takes effect here (raises :class:`Paused` / :class:`RolledBack`),
        a restart of a candidate after ``evaluate_candidates`` completed becomes a rollback to it."""
        if closing:
            self.accepting = False
            await self._settled()
        run = self.run
        index = 0
        while index < len(self.pending):
            directive = self.pending[index]
            await directive.ready.wait()
            if directive.action == "restart_candidate":
                if run.status_of(EVALUATE) != "completed":
                    index += 1  # the candidates' own loop takes it (evaluate_candidates has not finished)
                    continue
                self.pending.pop(index)
                self._record()
                raise RolledBack(Directive(directive.id, "rollback", EVALUATE, directive.candidate_index,
                                           directive.reason, directive.instruction),
                                 candidates=(directive.candidate_index or 0,))
            self.pending.pop(index)
            self._record()
            if directive.action == "pause":
                raise Paused(step_id)
            if directive.action == "rollback":
                raise RolledBack(directive)

    async def candidate_checkpoint(self, candidate: Mapping[str, Any]) -> None:
        """A boundary between a candidate's sub-steps: raises :class:`Halt` when a pause or rollback waits,
        :class:`CandidateRestart` when this candidate's restart does (and its limit allows it)."""
        if self.halting:
            raise Halt()
        index = int(candidate["candidate_index"])
        while self.restart_pending(index):
            directive = await self.take_restart(index)
            if directive is None:
                break
            if await admit_restart(self.run, candidate, directive):
                raise CandidateRestart(directive)

    async def close(self, *, keep: bool = False) -> None:
        """The turn ends: no more interrupts; actions still waiting are kept for the next turn when the run is
        paused (``keep``), else each gets a ``pipeline_warning`` (``interrupt_not_applied``)."""
        self.accepting = False
        await self._settled()
        if keep or not self.pending:
            return
        left, self.pending = self.pending, []
        self._record()
        for directive in left:
            await warn(self.run, "interrupt_not_applied", _text(self.run.language, "interrupt_not_applied"),
                       directive.id, action=directive.action)
        await self._save()


# --------------------------------------------------------------------------- receiving one


def _refusal(run: RunTurn, verdict: Verdict) -> tuple[str, str, dict[str, Any]] | None:
    """Why the verdict cannot be acted on (warning code, message, details), ``None`` when it can."""
    lang, state, steps = run.language, run.state, run.layout.steps
    rollbacks = int(state.get("rollbacks", 0))
    if verdict.action == "rollback":
        current = state.get("currentStep", steps[0])
        current = current if current in steps else steps[0]
        if steps.index(verdict.target_step_id) > steps.index(current):
            return ("rollback_target_not_reached", _text(lang, "rollback_target_not_reached",
                                                        step=verdict.target_step_id),
                    {"to_step_id": verdict.target_step_id})
        if rollbacks >= MAX_ROLLBACKS:
            return ("rollback_limit_reached", _text(lang, "rollback_limit_reached", limit=MAX_ROLLBACKS),
                    {"rollback_count": rollbacks, "max_rollbacks": MAX_ROLLBACKS})
    if verdict.action == "restart_candidate":
        candidates = state.get("candidates") or []
        if EVALUATE not in steps or not candidates:
            return ("candidate_restart_unavailable", _text(lang, "candidate_restart_unavailable"), {})
        candidate = next((c for c in candidates if c.get("candidate_index") == verdict.candidate_index), None)
        if candidate is None:
            return ("candidate_not_found", _text(lang, "candidate_not_found", index=verdict.candidate_index),
                    {"candidate_index": verdict.candidate_index})
        restarts = int(candidate.get("evaluation", {}).get("restarts", 0))
        if restarts >= MAX_CANDIDATE_ROLLBACKS:
            return ("candidate_restart_limit_reached",
                    _text(lang, "candidate_restart_limit_reached", index=verdict.candidate_index,
                          limit=MAX_CANDIDATE_ROLLBACKS),
                    {"candidate_index": verdict.candidate_index, "restart_count": restarts,
                     "max_rollbacks": MAX_CANDIDATE_ROLLBACKS})
        if run.status_of(EVALUATE) == "completed" and rollbacks >= MAX_ROLLBACKS:
            return ("rollback_limit_reached", _text(lang, "rollback_limit_reached", limit=MAX_ROLLBACKS),
                    {"rollback_count": rollbacks, "max_rollbacks": MAX_ROLLBACKS})
    return None


def _step_extra(run: RunTurn) -> dict[str, Any]:
    current = run.state.get("currentStep", "")
    return {"step": run.step(current)} if current in run.layout.steps else {}


async def warn(run: RunTurn, code: str, message: str, interrupt_id: str, **details: Any) -> None:
    """A ``pipeline_warning`` about the interrupt ``interrupt_id`` (``source: "interrupt"``)."""
    await run.emit("pipeline_warning", "interrupt", "working",
                   {"code": code, "message": message, "source": "interrupt", "interrupt_id": interrupt_id, **details},
                   extra=_step_extra(run))


async def receive(pipeline: PipelineRuntime, run: RunTurn, interrupt: Interrupt) -> bool:
    """Take user text for ``run`` (whose turn runs): publish ``interrupt_received`` and ``interrupt_classified``
    (and a warning when the action is refused), record the action for the next checkpoint; ``False`` when the
    turn takes no more interrupts (it is stopping)."""
    control = run.interrupts
    if not control.accepting:
        return False
    steps = run.layout.steps
    verdict = classify(interrupt.text, steps, str(run.state.get("currentStep", steps[0])))
    refusal = _refusal(run, verdict)
    directive = Directive(f"int-{uuid.uuid4().hex}", verdict.action, verdict.target_step_id, verdict.candidate_index,
                          verdict.reason, verdict.instruction)
    done = asyncio.Event()
    control.inflight.add(done)
    if refusal is None and verdict.action != "continue":
        control.pending.append(directive)  # now, so a checkpoint that comes meanwhile waits for it (ready)
    try:
        text = interrupt.text
        await run.emit("interrupt_received", "interrupt", "working",
                       {"message_length": len(text), "user_input": text[:USER_INPUT_LIMIT]}, extra=_step_extra(run))
        await run.emit("interrupt_classified", "interrupt", "working", {
            "action": verdict.action, "target_step_id": verdict.target_step_id,
            "candidate_scope": f"candidate-{verdict.candidate_index}" if verdict.candidate_index else "",
            "reason": verdict.reason, "paused": verdict.action == "pause" and refusal is None},
            extra=_step_extra(run))
        if refusal is not None:
            code, message, details = refusal
            await warn(run, code, message, directive.id, action=verdict.action, **details)
        count = run.state.setdefault("interrupts", {})
        count["received"] = int(count.get("received", 0)) + 1
        await control._save()  # acknowledged means durable: the action is in the state file before the reply
    except BaseException:
        if directive in control.pending:
            control.pending.remove(directive)
        raise
    finally:
        directive.ready.set()
        done.set()
        control.inflight.discard(done)
    return True


# --------------------------------------------------------------------------- applying them


async def admit_restart(run: RunTurn, candidate: Mapping[str, Any], directive: Directive) -> bool:
    """Whether a candidate may restart now (its limit); a refusal is published as a warning."""
    restarts = int(candidate.get("evaluation", {}).get("restarts", 0))
    if restarts < MAX_CANDIDATE_ROLLBACKS:
        return True
    await warn(run, "candidate_restart_limit_reached",
               _text(run.language, "candidate_restart_limit_reached", index=candidate["candidate_index"],
                     limit=MAX_CANDIDATE_ROLLBACKS),
               directive.id, action="restart_candidate", candidate_index=candidate["candidate_index"], restart_count=restarts,
               max_rollbacks=MAX_CANDIDATE_ROLLBACKS)
    return False


async def restart_candidate(pipeline: Any, run: RunTurn, candidate: dict[str, Any], directive: Directive) -> None:
    """``candidate_restart_requested``, then the candidate's sub-pipeline starts over as attempt + 1 (with the
    user's change added to its generation prompt)."""
    evaluation = candidate.get("evaluation") or {"attempt": 0}
    attempt = int(evaluation.get("attempt", 1))
    index = candidate["candidate_index"]
    await run.emit("candidate_restart_requested", "candidate", "working", {
        "candidate_scope": f"candidate-{index}", "target_candidate_step_id": FIRST_SUB_STEP,
        "next_candidate_attempt": attempt + 1, "reason": directive.reason},
        extra={"candidate": pipeline._candidate_obj(candidate)})
    if directive.instruction:
        candidate["generation_prompt"] = f"{candidate['generation_prompt']}\n{directive.instruction}"
    candidate["evaluation"] = {"attempt": attempt + 1, "status": "running", "steps": {},
                               "restarts": int(evaluation.get("restarts", 0)) + 1}
    await pipeline.save_state(run.turn.context_id, run.state)


async def evaluate_candidates(pipeline: Any, run: RunTurn) -> None:
    """Run every candidate's sub-pipeline in parallel (``pipeline._evaluate``), restarting those an interrupt
    names, until none is left to run; a waiting pause or rollback then takes effect (raises)."""
    control = run.interrupts
    attempts = run.state.get("candidateAttempts", {})

    async def one(candidate: dict[str, Any]) -> None:
        index = candidate["candidate_index"]
        if "evaluation" not in candidate:  # attempts go on across parent rollbacks (run ids stay unique)
            candidate["evaluation"] = {"attempt": int(attempts.get(str(index), 0)) + 1, "status": "running",
                                       "steps": {}}
        while True:
            if candidate["evaluation"].get("status") in ("completed", "failed"):
                if control.halting:
                    return
                directive = await control.take_restart(index)
                if directive is None:
                    return
                if not await admit_restart(run, candidate, directive):
                    continue
                await restart_candidate(pipeline, run, candidate, directive)
                continue
            try:
                await pipeline._evaluate(run, candidate)
            except CandidateRestart as restart:
                await restart_candidate(pipeline, run, candidate, restart.directive)
            except Halt:
                return

    while True:
        await asyncio.gather(*(one(c) for c in run.state["candidates"]))
        if control.halting or not any(control.restart_pending(c["candidate_index"]) for c in run.state["candidates"]):
            break
    await control.checkpoint(EVALUATE)


async def apply_rollback(pipeline: PipelineRuntime, run: RunTurn, rolled: RolledBack) -> None:
    """Go back to the directive's step: it and the later steps that ran get a new attempt, the pipeline drops
    what they produced (``rollback_state``), ``rollback_completed`` is published and recorded."""
    state, steps = run.state, run.layout.steps
    directive = rolled.directive
    target = directive.target_step_id
    count = int(state.get("rollbacks", 0))
    if count >= MAX_ROLLBACKS:
        await warn(run, "rollback_limit_reached", _text(run.language, "rollback_limit_reached", limit=MAX_ROLLBACKS),
                   directive.id, action=directive.action, rollback_count=count, max_rollbacks=MAX_ROLLBACKS)
        return
    for index in rolled.candidates:
        candidate = next((c for c in state.get("candidates", []) if c.get("candidate_index") == index), None)
        if candidate is not None and await admit_restart(run, candidate, directive):
            await restart_candidate(pipeline, run, candidate, directive)
            candidate["evaluation"]["status"] = "pending"
    from_step = str(state.get("currentStep", target))
    for step_id in steps[steps.index(target):]:  # the target and every later step that ran since the last time
        record = state["steps"].get(step_id)
        if step_id == target or (record is not None and record.get("status") != "pending"):
            attempt = int((record or {}).get("attempt", 1))
            state["steps"][step_id] = {"attempt": attempt + 1, "status": "pending"}
    pipeline.rollback_state(run, target, rolled.candidates)
    state["rollbacks"] = count + 1
    state["phase"] = "running"
    state["currentStep"] = target
    state.pop("pendingInput", None)
    mark_pipeline_waiting(run.turn.session, None)
    await run.emit("rollback_completed", "step", "working", {
        "rollback_scope": "parent", "to_step_id": target, "reason": directive.reason, "to_step": target,
        "from_step_id": from_step, "rollback_count": count + 1, "max_rollbacks": MAX_ROLLBACKS},
        extra={"step": run.step(target)})
    await pipeline.save_state(run.turn.context_id, state)


def selling_rollback_state(run: RunTurn, target: str, candidates: tuple[int, ...]) -> None:
    """What going back to ``target`` drops in a ``selling`` run: the candidates (re-planned; their attempt
    numbers go on) when it is planning or earlier, their evaluations (or only ``candidates``') when it is
    ``evaluate_candidates``, and the choice."""
    state, steps = run.state, run.layout.steps
    if steps.index(target) <= steps.index("architecture_planning"):
        memory = state.setdefault("candidateAttempts", {})
        for candidate in state.get("candidates", []):
            key = str(candidate["candidate_index"])
            memory[key] = max(int(memory.get(key, 0)), int(candidate.get("evaluation", {}).get("attempt", 0)))
        state["candidates"] = []
    elif target == EVALUATE and not candidates:
        for candidate in state.get("candidates", []):
            evaluation = candidate.get("evaluation", {})
            candidate["evaluation"] = {"attempt": int(evaluation.get("attempt", 0)) + 1, "status": "pending",
                                       "steps": {}, "restarts": int(evaluation.get("restarts", 0))}
    state.pop("selected", None)


# --------------------------------------------------------------------------- the pause


_CANCEL = re.compile(r"^\s*(?:2|cancel|cancel the run|stop|abort|quit|abbrechen|stopp|cancelar|cancele|parar|"
                     r"annuler|arr[êe]ter|取消|算了|停止|终止|キャンセル|中止)\s*[.!。！]?\s*$", _LATIN)


async def ask_pause(pipeline: PipelineRuntime, run: RunTurn, step_id: str) -> None:
    """Stop the turn on the pause confirmation (``input_required``, ``pipeline_pause_confirmation``)."""
    lang = run.language
    prompt = _text(lang, "pause_prompt", step=step_id)
    options = [{"id": "resume", "label": _text(lang, "opt_resume")},
               {"id": "cancel", "label": _text(lang, "opt_cancel_run")}]
    data = {"kind": "pipeline_pause_confirmation", "stepId": step_id, "prompt": prompt, "options": options,
            "paused": True}
    run.state["phase"] = "paused"
    run.state["currentStep"] = step_id
    run.state["pendingInput"] = dict(data)
    await pipeline.save_state(run.turn.context_id, run.state)
    lines = [prompt] + [f"{i}. {o['label']}" for i, o in enumerate(options, start=1)] + [_text(lang, "pause_howto")]
    await run.ask(step_id, data, "\n".join(lines))


async def answer_pause(pipeline: PipelineRuntime, run: RunTurn) -> bool:
    """The message after a pause: ``cancel`` (or ``2``) cancels the run, anything else resumes it; ``True`` when
    the run goes on."""
    pending = run.state.get("pendingInput", {})
    step_id = str(pending.get("stepId", run.state.get("currentStep", run.layout.steps[0])))
    answer = run.turn.prompt
    action = "cancel" if _CANCEL.match(answer) else "resume"
    await run.emit("input_received", "step", "working", {
        "kind": "pipeline_pause_confirmation", "step_id": step_id, "answer_text_length": len(answer),
        "action": action, "paused": False}, extra={"step": run.step(step_id)})
    run.state["phase"] = "running"
    run.state.pop("pendingInput", None)
    if action == "cancel":
        await pipeline.finish(run, "canceled", text(run.language, "canceled"))
        return False
    await run.emit("pipeline_resumed", "pipeline", "working",
                   {"pipeline_name": run.layout.name, "step_id": step_id, "reason": "pause_resumed"})
    await pipeline.save_state(run.turn.context_id, run.state)
    return True


# --------------------------------------------------------------------------- the turn


async def drive(pipeline: PipelineRuntime, run: RunTurn) -> None:
    """Run the pipeline's part of a turn (``pipeline._drive``), applying interrupts at its checkpoints: a
    rollback goes on from its step (``pipeline._continue``), a pause stops the turn on its confirmation, and
    the message after a pause resumes (or cancels) the run."""
    control = run.interrupts
    action: tuple[str, str] | None = ("answer_pause", "") if run.state.get("phase") == "paused" else ("drive", "")
    try:
        while action is not None:
            kind, step_id = action
            action = None
            try:
                if kind == "answer_pause":
                    if await answer_pause(pipeline, run):
                        action = ("continue", "")
                elif kind == "drive":
                    await pipeline._drive(run)
                elif kind == "continue":
                    await pipeline._continue(run)
                else:
                    await ask_pause(pipeline, run, step_id)
            except Paused as paused:
                action = ("pause", paused.step_id)
            except RolledBack as rolled:
                control.accepting = True  # the run goes on: it takes interrupts again until it stops
                await apply_rollback(pipeline, run, rolled)
                action = ("continue", "")
    except asyncio.CancelledError:
        control.accepting = False
        raise
    finally:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await control.close(keep=run.state.get("phase") == "paused")
            except Exception:  # the turn's own outcome stands; the actions stay in the state
                logger.exception("Closing the interrupts of context %s failed", run.turn.context_id)
