"""kill -9 of a real ``iac-code a2a`` server in pipeline mode at every step boundary of both pipelines (inside the
parallel candidates and while a deployed stack is polled too), then a restart on the same persistence directory:
the journal stays gapless without a duplicated event, the run continues from the last completed step (nothing that
had completed is done again), the user's answers after the restart reach the handoff, the state endpoint equals
what was streamed, and the stack is created exactly once (the fake ROS counts)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.testing import A2A_HEADERS, ServerProcess, next_sse_data, send_message_body
from iac_code.testing import server_process as iac_code_process
from iac_code_pipeline_selling.runner import lifecycle


PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
Event = dict[str, Any]


def server_process(config: Path, workspace: Path) -> AbstractAsyncContextManager[ServerProcess]:
    """``iac-code a2a --config <config>`` as its own process, none of this environment's ``IAC_CODE_*`` settings."""
    return iac_code_process(config=config, cwd=workspace, env={"IAC_CODE_CONFIG_DIR": str(config.parent)},
                            drop_env=("IACCODE_A2A_", "IAC_CODE_"))


def _carried(result: Event) -> tuple[list[Event], Event | None]:
    """The pipeline events of one streamed result (single or batched) and its status update, if it is one."""
    update = result.get("statusUpdate")
    if update is None:
        return [], None
    section = update.get("metadata", {}).get("iac_code", {})
    if "pipeline" in section:
        return [section["pipeline"]], update
    return list(section.get("pipelineBatch", {}).get("events", [])), update


async def stream_turn(http: aiohttp.ClientSession, url: str, text: str, *, n: int, context_id: str = "",
                      stop: Callable[[list[Event]], bool] | None = None, metadata: Event | None = None,
                      task_id: str = "") -> tuple[list[Event], Event | None, bool]:
    """One streamed turn: its pipeline events, its last status update, and whether ``stop`` (given the turn's events
    so far) cut it short (the caller then kills the server: the stream is left as it is)."""
    fields: Event = {"contextId": context_id} if context_id else {}
    if task_id:
        fields["taskId"] = task_id
    if metadata:
        fields["metadata"] = metadata
    body = send_message_body(text, message_id=f"m-{n}", request_id=n, method="SendStreamingMessage", **fields)
    events: list[Event] = []
    last: Event | None = None
    async with http.post(url, json=body, headers=A2A_HEADERS) as response:
        assert response.status == 200
        while True:
            try:
                data = await next_sse_data(response.content)
            except EOFError:
                return events, last, False
            assert "error" not in data, data
            carried, update = _carried(data["result"])
            last = update or last
            events.extend(carried)
            if stop is not None and carried and stop(events):
                return events, last, True
            if update is not None and update.get("final") is True:
                return events, last, False
            if update is not None and update["status"]["state"] in ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_FAILED"):
                return events, last, False


async def pipeline_state(http: aiohttp.ClientSession, url: str, context_id: str) -> Event:
    async with http.get(url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id},
                        headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return await reply.json()  # type: ignore[no-any-return]


LIFECYCLE = {"pipeline_started", "step_started", "step_completed", "step_failed", "candidate_started",
             "candidate_completed", "candidate_failed", "candidate_step_started", "candidate_step_completed",
             "candidate_step_failed", "artifact_created", "pipeline_warning", "pipeline_completed", "pipeline_canceled",
             "pipeline_failed", "pipeline_handoff_ready", "stack_current_changed"}


def assert_journal_sound(events: list[Event]) -> None:
    """Gapless increasing sequences from 1, no event twice, no lifecycle event of the same step, candidate or
    candidate step (their run ids) twice: nothing that completed was done twice."""
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["eventId"] for e in events}) == len(events)
    once: Counter[tuple[Any, ...]] = Counter()
    for e in events:
        if e["eventType"] in LIFECYCLE:
            once[(e["eventType"], e.get("step", {}).get("runId"), e.get("candidate", {}).get("runId"),
                  e.get("candidateStep", {}).get("runId"), e["data"].get("stepId"), e["data"].get("code"))] += 1
    repeated = {k: c for k, c in once.items() if c > 1}
    assert not repeated, repeated
    assert lifecycle([e["eventType"] for e in events]).count("pipeline_started") == 1


def _first(event_type: str, step_id: str = "", *, nth: int = 1, **data: Any) -> Callable[[list[Event]], bool]:
    """The stream so far holds the ``nth`` event of ``event_type`` (on ``step_id``, with these ``data`` values)."""
    def seen(events: list[Event]) -> bool:
        hits = [e for e in events if e["eventType"] == event_type
                and (not step_id or e["data"].get("stepId") == step_id or e.get("step", {}).get("id") == step_id)
                and all(e["data"].get(k) == v for k, v in data.items())]
        return len(hits) >= nth
    return seen


def _sub(event_type: str, sub_step: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(e["eventType"] == event_type and e.get("candidateStep", {}).get("id") == sub_step
                              for e in events)


# Every step boundary of a run that deploys (deployer: ros against the fake ROS, the deploy allowed by the rule
# ros_deploy): the kill lands right after the client saw that event. "(held)": the fake keeps the stack in progress
# until the server is dead, so the kill lands while the stack is being polled. "(asked)": no rule allows the deploy,
# and the kill lands once the task is INPUT_REQUIRED on the deploy's permission question (a durable wait: after the
# restart the user answers that same question).
NEVER: Callable[[list[Event]], bool] = lambda events: False
SELLING = {
    "pipeline_started": _first("pipeline_started"),
    "intent_parsing started": _first("step_started", "intent_parsing"),
    "intent_parsing completed": _first("step_completed", "intent_parsing"),
    "architecture_planning started": _first("step_started", "architecture_planning"),
    "architecture_planning completed": _first("step_completed", "architecture_planning"),
    "evaluate_candidates started": _first("step_started", "evaluate_candidates"),
    "first candidate started": _first("candidate_started"),
    "first template written": _first("artifact_created"),
    "first template_generating completed": _sub("candidate_step_completed", "template_generating"),
    "first cost_estimating started": _sub("candidate_step_started", "cost_estimating"),
    "first candidate completed": _first("candidate_completed"),
    "second candidate completed": _first("candidate_completed", nth=2),
    "evaluate_candidates completed": _first("step_completed", "evaluate_candidates"),
    "confirm_and_select started": _first("step_started", "confirm_and_select"),
    "confirm_and_select input_required": _first("input_required"),
    "choice received": _first("input_received"),
    "confirm_and_select completed": _first("step_completed", "confirm_and_select"),
    "deploying started": _first("step_started", "deploying"),
    "deploy question waits (asked)": NEVER,
    "stack polling (held)": _first("stack_progress"),
    "stack current": _first("stack_current_changed"),
    "deploying completed": _first("step_completed", "deploying"),
    "pipeline_completed": _first("pipeline_completed"),
    "pipeline_handoff_ready": _first("pipeline_handoff_ready"),
}
SOLUTION_FIRST = {
    "pipeline_started": _first("pipeline_started"),
    "selection started": _first("step_started", "solution_planning_and_selection"),
    "selection input_required": _first("input_required"),
    "choice received": _first("input_received"),
    "selection completed": _first("step_completed", "solution_planning_and_selection"),
    "materialize started": _first("step_started", "materialize_selected_candidate"),
    "confirmation input_required": _first("input_required", nth=2),
    "confirmation received": _first("input_received", nth=2),
    "materialize completed": _first("step_completed", "materialize_selected_candidate"),
    "deploying started": _first("step_started", "deploying"),
    "deploy question waits (asked)": NEVER,
    "stack polling (held)": _first("stack_progress"),
    "stack current": _first("stack_current_changed"),
    "deploying completed": _first("step_completed", "deploying"),
    "pipeline_completed": _first("pipeline_completed"),
    "pipeline_handoff_ready": _first("pipeline_handoff_ready"),
}
CASES = [("selling", b) for b in SELLING] + [("selling_solution_first", b) for b in SOLUTION_FIRST]
STEPS = {"selling": ("intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select",
                     "deploying"),
         "selling_solution_first": ("solution_planning_and_selection", "materialize_selected_candidate", "deploying")}


def task_of(pending: Event | None, asked: bool) -> str:
    """The task a permission answer names (a permission question's envelope names it), else none."""
    return str((pending or {}).get("requestTaskId", "")) if asked and (pending or {}).get("kind") == "permission" \
        else ""


def answer_to(pipeline: str, pending: Event | None, asked: bool = False) -> str:
    """What the user sends next: the answer to what the run waits for, else any text (the run resumes). A permission
    envelope is answered only where the deploy asks (``asked``): where a rule decides it, a cut between the journaled
    ``permission_requested`` and its ``permission_resolved`` leaves an envelope no task waits on."""
    kind = (pending or {}).get("kind")
    if kind == "permission" and asked:  # the deploy's question: the text answer
        return "allow"
    if kind == "candidate_selection":
        return "方案 2" if pipeline == "selling" else "2"
    if kind == "deployment_confirmation":
        return json.dumps({"action": "confirm"})
    return "continue"


@pytest.mark.parametrize(("pipeline", "boundary"), CASES, ids=[f"{p}: {b}" for p, b in CASES])
async def test_kill_9_at_every_step_boundary_then_the_run_resumes(pipeline: str, boundary: str, tmp_path: Path,
                                                                   fake_ros: Any) -> None:
    stop = (SELLING if pipeline == "selling" else SOLUTION_FIRST)[boundary]
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    asked = "(asked)" in boundary
    config.write_text(yaml.safe_dump({
        "mode": "pipeline", "persistence-dir": str(state_dir), "pipeline-name": pipeline, "deployer": "ros",
        "ros-endpoint": fake_ros.endpoint, "ros-access-key-id": "LTAI5tCrashLoopKeyId",
        "ros-access-key-secret": "crash-loop-secret", "ros-poll-interval-seconds": 0.05,
        "permission-rules": {"allow": ["ros_delete_stack"] if asked else ["ros_deploy", "ros_delete_stack"]}}))
    fake_ros.hold = "(held)" in boundary
    rich = {"iac_code": {"candidatePresentation": "rich-v1"}}
    async with aiohttp.ClientSession() as http:
        streamed: list[Event] = []
        context_id = ""
        async with server_process(config, workspace) as (proc, url):
            n, cut = 1, False
            while not cut:  # the run as a user drives it, up to the boundary
                pending = (await pipeline_state(http, url, context_id))["snapshot"]["pendingInput"] if context_id \
                    else None
                assert n < 6, lifecycle([e["eventType"] for e in streamed])
                text = answer_to(pipeline, pending) if context_id else PROMPT
                events, last, cut = await stream_turn(http, url, text, n=n, context_id=context_id, metadata=rich,
                                                      stop=lambda events, seen=list(streamed): stop(seen + events))
                if asked and (last or {}).get("metadata", {}).get("iac_code", {}).get("input", {}).get(
                        "toolName") == "ros_deploy":
                    assert last is not None and last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                    cut = True  # the question is published: kill while it waits
                streamed += events
                context_id = context_id or streamed[0]["contextId"]
                n += 1
            proc.kill()  # SIGKILL: whatever the turn was doing is cut
            await proc.wait()
        fake_ros.release()

        async with server_process(config, workspace) as (_, url):
            state = await pipeline_state(http, url, context_id)
            journaled = state["events"]
            assert journaled[:len(streamed)] == streamed  # everything streamed was journaled, as streamed
            assert_journal_sound(journaled)
            after: list[Event] = []
            resumed_from = state["snapshot"]
            while "handoff" not in state["snapshot"]:  # the user goes on until the pipeline hands off
                assert len(after) < 400 and n < 12, lifecycle([e["eventType"] for e in after])
                pending = state["snapshot"]["pendingInput"]
                more, _, _ = await stream_turn(http, url, answer_to(pipeline, pending, asked), n=n,
                                               context_id=context_id, task_id=task_of(pending, asked))
                n += 1
                if not after and not resumed_from["pendingInput"]:  # cut mid-run: the next message resumes it
                    if more[0]["eventType"] != "pipeline_resumed":
                        # ... unless the cut fell between journaling an answer and recording it: the question is
                        # asked again (the step is redone), never taken as answered twice
                        last_question = max(i for i, e in enumerate(journaled) if e["eventType"] == "input_required")
                        assert more[0]["eventType"] == "input_required", lifecycle([e["eventType"] for e in more])
                        assert more[0]["data"]["kind"] == journaled[last_question]["data"]["kind"]
                        assert lifecycle([e["eventType"] for e in journaled[last_question:]])[:2] == ["input_required",
                                                                                          "input_received"]
                after += more
                state = await pipeline_state(http, url, context_id)
            if after:
                assert after[0]["sequence"] == journaled[-1]["sequence"] + 1
            if asked:  # the same question, answered after the restart: the deploy goes on from it
                assert resumed_from["pendingInput"]["toolName"] == "ros_deploy"
                assert journaled[-1]["eventType"] == "permission_requested"
                assert after[0]["eventType"] == "permission_resolved" and after[0]["data"]["toolUseId"] == \
                    resumed_from["pendingInput"]["toolUseId"]
                assert "permission_requested" not in lifecycle([e["eventType"] for e in after])
            final = state["events"]
            assert final == journaled + after  # the state endpoint: the journal, as streamed
            assert_journal_sound(final)

            # The handoff survived the crash for the kernel too: a cleanupOnly continuation is accepted and removes
            # the stack (the deletion allowed by its rule).
            cleanup, _, _ = await stream_turn(http, url, "clean up", n=n, context_id=context_id,
                                              metadata={"iac_code": {"cleanupOnly": True}})
            assert lifecycle([e["eventType"] for e in cleanup])[-2:] == ["stack_current_changed", "cleanup_completed"], cleanup
            assert lifecycle(cleanup)[-1]["data"]["outcome"] == "deleted"
            assert (await pipeline_state(http, url, context_id))["events"] == final + cleanup

    assert final[-1]["eventType"] == "pipeline_handoff_ready" and final[-1]["data"]["outcome"] == "completed"
    completed = [e["data"]["stepId"] for e in final if e["eventType"] == "step_completed"]
    assert sorted(completed) == sorted(STEPS[pipeline])  # every step once, none redone after it completed
    deployment = next(e for e in final if e["eventType"] == "step_completed" and e["data"]["stepId"] == "deploying")
    assert deployment["data"]["conclusion"]["status"] == "success"
    if pipeline == "selling":
        for event_type in ("candidate_started", "artifact_created", "candidate_completed"):
            assert sorted(e["candidate"]["index"] for e in final if e["eventType"] == event_type) == [1, 2, 3]
    assert fake_ros.created == 1 and len(fake_ros.stacks) == 1 and len(fake_ros.tokens) == 1  # the stack once
    assert deployment["data"]["conclusion"]["stack_id"] == next(iter(fake_ros.stacks))
    assert fake_ros.deletions == 1 and not fake_ros.alive()


async def test_the_journal_publishes_a_lifecycle_event_once_and_questions_every_time(tmp_path: Path) -> None:
    """What makes a redone step safe: the same lifecycle event (same run ids) is neither journaled nor published
    twice, also after the journal is read back; questions and resumptions are new events each time."""
    from iac_code_pipeline_selling.journal import JournalStore, envelope

    published: list[Event] = []

    def build(event_type: str, step_run: str) -> Callable[[int], Event]:
        return lambda seq: envelope(seq, event_type=event_type, scope="step", status="working", data={"step_id": "x"},
                                    run_id="run-1", task_id="t", context_id="c", pipeline_name="selling",
                                    extra={"step": {"id": "x", "runId": step_run, "attempt": 1}})

    store = JournalStore(tmp_path)
    first = await store.publish("c", build("step_started", "step-x-1"), published.append)
    assert await store.publish("c", build("step_started", "step-x-1"), published.append) == first
    await store.publish("c", build("step_started", "step-x-2"), published.append)  # another attempt: a new event
    await store.publish("c", build("input_required", "step-x-2"), published.append)
    await store.publish("c", build("input_required", "step-x-2"), published.append)
    again = JournalStore(tmp_path)  # after a restart
    assert await again.publish("c", build("step_started", "step-x-1"), published.append) == first
    assert [e["sequence"] for e in published] == [1, 2, 3, 4]
    assert again.journal("c").events == published
