"""Interrupts, cleanup-only continuations and re-hydrated task ids, through the public surface: a real server in
``mode: pipeline``, a2a-sdk's client sending what a product client sends and reading events by the digest's names.

A run is held inside ``evaluate_candidates`` deterministically by the IaC engine: the offline runtime plugin is
registered as it is, except that its engine's template generation waits for a ticket the test hands out (the
``ticketed`` fixture, ``ticketed.py``); no sleeps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import A2A_HEADERS, connect_client, redis_url, run_cli, send_message_body, start_server
from iac_code_pipeline_selling.runner import lifecycle


Event = dict[str, Any]
PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"


def ticketed_server(plugin: Any) -> Any:
    return start_server({"mode": "pipeline", "disabled-plugins": ["runtime-offline"]},
                        extra_plugins={"ticketed-offline": plugin})


def message(text: str, n: int, *, context_id: str = "", task_id: str = "",
            iac_code: dict[str, Any] | None = None) -> Message:
    result = Message(message_id=f"int-{n}", role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id,
                     task_id=task_id)
    if iac_code:
        result.metadata.update({"iac_code": iac_code})
    return result


def pipeline_events(events: list[Event]) -> list[Event]:
    """The pipeline events the stream carried (single or batched), in order, each once."""
    found: list[Event] = []
    for event in events:
        if "statusUpdate" in event:
            section = event["statusUpdate"].get("metadata", {}).get("iac_code", {})
        elif "task" in event:
            section = event["task"].get("metadata", {}).get("iac_code", {})
        else:
            continue
        batch = section.get("pipelineBatch", {}).get("events", [])
        for pipeline in [section["pipeline"]] if "pipeline" in section else batch:
            if pipeline not in found:
                found.append(pipeline)
    return found


def of(events: list[Event], event_type: str) -> list[Event]:
    return [e for e in events if e["eventType"] == event_type]


class Stream:
    """One streamed SendMessage, read in the background: its events so far, and a bounded wait for a condition."""

    def __init__(self, client: Any, sent: Message) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(client, sent))

    async def _read(self, client: Any, sent: Message) -> None:
        try:
            async for event in client.send_message(SendMessageRequest(message=sent)):
                async with self._changed:
                    self.events.append(MessageToDict(event))
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self._changed.notify_all()

    @property
    def pipeline(self) -> list[Event]:
        return pipeline_events(self.events)

    async def until(self, condition: Callable[[list[Event]], bool], timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: condition(self.pipeline) or self._task.done())
        if not condition(self.pipeline):
            await self._task  # the stream ended (or failed) first: raise its error, else the condition is false
            raise AssertionError(f"stream ended without the condition; got {[e['eventType'] for e in self.pipeline]}")

    async def done(self, timeout: float = 60.0) -> list[Event]:
        async with asyncio.timeout(timeout):
            await self._task
        return self.events


def last_status(events: list[Event]) -> Event:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]


async def journal(server: Any, context_id: str) -> list[Event]:
    async with aiohttp.ClientSession() as http, http.get(
            server.url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id},
            headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return (await reply.json())["events"]


def assert_gapless(events: list[Event]) -> None:
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))


def count(events: list[Event], event_type: str, **where: Any) -> int:
    return sum(1 for e in of(events, event_type) if all(_get(e, k) == v for k, v in where.items()))


def _get(event: Event, path: str) -> Any:
    value: Any = event
    for key in path.split("."):
        value = value.get(key, {}) if isinstance(value, dict) else {}
    return value


def started_candidates(attempt: int) -> Callable[[list[Event]], bool]:
    """Every candidate of the run has started template generation in this attempt."""
    def condition(events: list[Event]) -> bool:
        return sum(1 for e in of(events, "candidate_step_started")
                   if e["candidate"]["attempt"] == attempt and e["candidateStep"]["id"] == "template_generating") == 3
    return condition


def classified(n: int = 1) -> Callable[[list[Event]], bool]:
    return lambda events: len(of(events, "interrupt_classified")) >= n


# --------------------------------------------------------------------------- restart a candidate


async def test_an_interrupt_restarts_a_candidate_and_the_choice_still_works(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as client, connect_client(server) as other:
        async with aiohttp.ClientSession() as http, http.get(
                server.url.rstrip("/") + "/.well-known/agent-card.json") as reply:
            card = await reply.json()
        extension = next(e for e in card["capabilities"]["extensions"]
                         if e["uri"] == "urn:iac-code:a2a:pipeline-events:v1")
        assert extension["params"]["supportsInterrupts"] is True

        run = Stream(client, message(PROMPT, 1, iac_code={"candidatePresentation": "rich-v1"}))
        await run.until(started_candidates(1))
        task_id = run.events[0]["task"]["id"]
        context_id = run.events[0]["task"]["contextId"]

        # Only the context: the kernel re-hydrates the running task and hands the text to its pipeline.
        interrupt = Stream(other, message("redo candidate 2", 2, context_id=context_id))
        await interrupt.until(classified())
        plugin.tickets.release(4)  # three first attempts and candidate 2's second
        first, followed = await run.done(), await interrupt.done()

        assert followed[0]["task"]["id"] == task_id and followed[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
        assert last_status(followed) == last_status(first)  # both end at the same stop: the choice
        events = pipeline_events(first)
        assert_gapless(events)
        assert events == await journal(server, context_id)
        received = of(events, "interrupt_received")[0]
        assert received["scope"] == "interrupt" and received["taskId"] == task_id
        assert received["data"] == {"messageLength": 16, "userInput": "redo candidate 2"}
        assert of(events, "interrupt_classified")[0]["data"] == {
            "action": "restart_candidate", "targetStepId": "evaluate_candidates", "candidateScope": "candidate-2",
            "reason": "user_requested_candidate_restart", "paused": False}
        [restart] = of(events, "candidate_restart_requested")
        assert restart["data"] == {"candidateScope": "candidate-2", "targetCandidateStepId": "template_generating",
                                   "nextCandidateAttempt": 2, "reason": "user_requested_candidate_restart"}
        assert restart["candidate"]["runId"] == "candidate-evaluate_candidate-2-1"
        assert count(events, "candidate_started", **{"candidate.runId": "candidate-evaluate_candidate-2-2",
                                                     "candidate.attempt": 2}) == 1
        assert count(events, "candidate_completed", **{"candidate.runId": "candidate-evaluate_candidate-2-2"}) == 1
        assert count(events, "candidate_completed", **{"candidate.runId": "candidate-evaluate_candidate-2-1"}) == 0
        assert count(events, "candidate_step_started", **{
            "candidateStep.runId": "candidate-evaluate_candidate-2-2-template_generating-1"}) == 1
        assert [e["candidate"]["runId"] for e in of(events, "candidate_completed")].count(
            "candidate-evaluate_candidate-1-1") == 1
        assert count(events, "step_completed", **{"step.runId": "step-evaluate_candidates-1"}) == 1
        question = last_status(first)
        assert question["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        options = question["metadata"]["iac_code"]["pipeline"]["data"]["options"]
        assert [o["candidate_index"] for o in options] == [1, 2, 3]

        task = await client.get_task(GetTaskRequest(id=task_id))
        assert "redo candidate 2" in [p.text for m in task.history for p in m.parts]  # the interrupt joined the task

        chosen = pipeline_events([MessageToDict(e) async for e in client.send_message(SendMessageRequest(
            message=message("方案 2", 3, context_id=context_id, task_id=task_id)))])
        assert chosen[0]["data"]["selectedCandidateIndex"] == 2
        assert chosen[-1]["eventType"] == "pipeline_handoff_ready" and chosen[-1]["data"]["outcome"] == "completed"
        assert_gapless(events + chosen)


async def test_a_candidate_restarts_at_most_five_times(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as client, \
            connect_client(server, streaming=False) as unary:
        run = Stream(client, message(PROMPT, 1))
        await run.until(started_candidates(1))
        task_id = run.events[0]["task"]["id"]
        context_id = run.events[0]["task"]["contextId"]
        for n in range(6):  # six restarts of one candidate wait while it generates
            replies = [MessageToDict(e) async for e in unary.send_message(SendMessageRequest(
                message=message("候选 2 重做", 10 + n, context_id=context_id, task_id=task_id),
                configuration=SendMessageConfiguration(return_immediately=True)))]
            # returnImmediately: the running task at once (its interrupt is durable by then)
            assert replies[-1]["task"]["id"] == task_id
            assert replies[-1]["task"]["status"]["state"] == "TASK_STATE_WORKING"
            await run.until(classified(n + 1))
        plugin.tickets.release(3 + 5)
        events = pipeline_events(await run.done())
        assert_gapless(events)
        assert [e["data"]["action"] for e in of(events, "interrupt_classified")] == ["restart_candidate"] * 6
        assert [e["data"]["nextCandidateAttempt"] for e in of(events, "candidate_restart_requested")] == [2, 3, 4, 5, 6]
        [warning] = of(events, "pipeline_warning")
        assert warning["scope"] == "interrupt"
        assert warning["data"]["code"] == "candidate_restart_limit_reached" and warning["data"]["maxRollbacks"] == 5
        assert count(events, "candidate_completed", **{"candidate.runId": "candidate-evaluate_candidate-2-6"}) == 1
        assert events[-1]["eventType"] == "input_required" and events[-1]["data"]["kind"] == "candidate_selection"


# --------------------------------------------------------------------------- roll back, and the limit


async def test_rollbacks_to_planning_and_their_limit_of_three(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as client, connect_client(server) as other:
        run = Stream(client, message(PROMPT, 1))
        await run.until(started_candidates(1))
        task_id = run.events[0]["task"]["id"]
        context_id = run.events[0]["task"]["contextId"]
        interrupts = []
        for n in range(3):
            interrupts.append(Stream(other, message("go back to planning", 20 + n, context_id=context_id,
                                                    task_id=task_id)))
            await run.until(classified(n + 1))
        plugin.tickets.release(3)  # the first attempts finish their templates, then stop: the rollbacks apply
        await run.until(started_candidates(2))  # planned again after three rollbacks; evaluating again
        refused = Stream(other, message("Geh zurück zur Planung", 30, context_id=context_id, task_id=task_id))
        await refused.until(lambda events: bool(of(events, "pipeline_warning")))
        plugin.tickets.release(3)
        events = pipeline_events(await run.done())
        for interrupt in [*interrupts, refused]:
            await interrupt.done()

        assert_gapless(events)
        assert events == await journal(server, context_id)
        verdicts = [e["data"] for e in of(events, "interrupt_classified")]
        assert [(v["action"], v["targetStepId"]) for v in verdicts] == [("rollback", "architecture_planning")] * 4
        rollbacks = of(events, "rollback_completed")
        assert [r["data"]["rollbackCount"] for r in rollbacks] == [1, 2, 3]
        assert all(r["data"]["rollbackScope"] == "parent" and r["data"]["toStepId"] == "architecture_planning"
                   and r["data"]["reason"] == "user_requested_rollback" for r in rollbacks)
        assert [r["step"]["runId"] for r in rollbacks] == [f"step-architecture_planning-{n}" for n in (2, 3, 4)]
        [warning] = of(events, "pipeline_warning")
        assert warning["data"]["code"] == "rollback_limit_reached"
        assert warning["data"]["rollbackCount"] == 3 and warning["data"]["maxRollbacks"] == 3
        assert warning["sequence"] > rollbacks[-1]["sequence"]
        # the first attempts stopped after their templates: no cost was estimated for them
        assert count(events, "candidate_step_started", **{"candidateStep.id": "cost_estimating",
                                                          "candidate.attempt": 1}) == 0
        assert count(events, "step_completed", **{"step.runId": "step-architecture_planning-4"}) == 1
        assert count(events, "step_started", **{"step.runId": "step-evaluate_candidates-2"}) == 1
        assert sorted(e["candidate"]["runId"] for e in of(events, "candidate_completed")) == [
            f"candidate-evaluate_candidate-{i}-2" for i in (1, 2, 3)]
        assert events[-1]["eventType"] == "input_required" and events[-1]["data"]["kind"] == "candidate_selection"


# --------------------------------------------------------------------------- pause and resume


async def test_pause_then_resume_over_rest_with_blocking_calls(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server, binding="HTTP+JSON") as client, \
            connect_client(server, binding="HTTP+JSON", streaming=False) as unary:
        run = Stream(client, message(PROMPT, 1))
        await run.until(started_candidates(1))
        task_id = run.events[0]["task"]["id"]
        context_id = run.events[0]["task"]["contextId"]

        async def blocking(text: str, n: int, **ids: str) -> Event:
            replies = [MessageToDict(e) async for e in unary.send_message(SendMessageRequest(
                message=message(text, n, **ids), configuration=SendMessageConfiguration()))]
            return replies[-1]["task"]

        pause = asyncio.create_task(blocking("wait, pause please", 2, context_id=context_id, task_id=task_id))
        await run.until(classified())
        plugin.tickets.release(3)
        paused_task = await pause  # the blocking call returns the running task at its next stop
        events = pipeline_events(await run.done())
        assert paused_task["id"] == task_id and paused_task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        question = paused_task["metadata"]["iac_code"]["pipeline"]
        assert question == events[-1]
        assert of(events, "interrupt_classified")[0]["data"] == {
            "action": "pause", "targetStepId": "evaluate_candidates", "candidateScope": "",
            "reason": "user_requested_pause", "paused": True}
        assert question["eventType"] == "input_required" and question["status"] == "input_required"
        assert question["data"]["kind"] == "pipeline_pause_confirmation" and question["data"]["paused"] is True
        assert question["data"]["stepId"] == "evaluate_candidates"
        assert [o["id"] for o in question["data"]["options"]] == ["resume", "cancel"]
        assert question["input"]["required"] is True
        assert "resume" in paused_task["status"]["message"]["parts"][0]["text"].lower()  # for text-only clients
        assert count(events, "candidate_step_completed", **{"candidateStep.id": "template_generating"}) == 3
        assert count(events, "candidate_step_started", **{"candidateStep.id": "cost_estimating"}) == 0

        # The answer names only the context: it continues the waiting task (re-hydrated), and resumes the run.
        resumed = await blocking("resume", 3, context_id=context_id)
        assert resumed["id"] == task_id
        after = pipeline_events([{"task": resumed}])
        state = await journal(server, context_id)
        assert_gapless(state)
        more = state[len(events):]
        assert lifecycle([e["eventType"] for e in more])[:2] == ["input_received", "pipeline_resumed"]
        assert more[0]["data"]["kind"] == "pipeline_pause_confirmation" and more[0]["data"]["action"] == "resume"
        assert all(e["taskId"] == task_id for e in more)
        assert count(more, "candidate_completed") == 3 and count(more, "candidate_started") == 0
        assert after[-1]["data"]["kind"] == "candidate_selection"


async def test_a_pause_can_cancel_the_run(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as client, connect_client(server) as other:
        run = Stream(client, message(PROMPT, 1))
        await run.until(started_candidates(1))
        task_id = run.events[0]["task"]["id"]
        context_id = run.events[0]["task"]["contextId"]
        pause = Stream(other, message("暂停一下", 2, context_id=context_id, task_id=task_id))
        await pause.until(classified())
        plugin.tickets.release(3)
        await run.done()
        assert pipeline_events(await pause.done())[-1]["data"]["kind"] == "pipeline_pause_confirmation"
        canceled = pipeline_events(await Stream(client, message("取消", 3, context_id=context_id)).done())
        assert lifecycle([e["eventType"] for e in canceled]) == ["input_received", "pipeline_canceled", "pipeline_handoff_ready"]
        assert canceled[0]["data"]["action"] == "cancel" and canceled[-1]["data"]["outcome"] == "canceled"
        assert_gapless(await journal(server, context_id))


# --------------------------------------------------------------------------- busy contexts outside pipeline mode


async def test_normal_mode_still_refuses_a_busy_context(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as client:
        run = Stream(client, message(PROMPT, 1))
        await run.until(started_candidates(1))
        context_id = run.events[0]["task"]["contextId"]
        async with aiohttp.ClientSession() as http:
            body = send_message_body("redo candidate 2", message_id="busy-1", contextId=context_id,
                                     metadata={"iac_code": {"run_mode": "normal"}})
            async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
                answer = await reply.json()
        assert answer["error"]["message"] == "Task is already working."
        plugin.tickets.release(3)
        events = pipeline_events(await run.done())
        assert not of(events, "interrupt_received")


# --------------------------------------------------------------------------- cleanupOnly and re-hydration


async def _rpc(http: aiohttp.ClientSession, server: Any, text: str, n: int, **fields: Any) -> Event:
    body = send_message_body(text, message_id=f"rpc-{n}", request_id=n, **fields)
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return await reply.json()


async def test_cleanup_only_needs_a_completed_handoff() -> None:
    cleanup = {"iac_code": {"cleanupOnly": True}}
    async with start_server({"mode": "pipeline"}) as server, aiohttp.ClientSession() as http:
        fresh = await _rpc(http, server, "clean up", 1, contextId="ctx-never-ran", metadata=cleanup)
        assert fresh["error"]["code"] == -32602
        assert fresh["error"]["message"] == "Cleanup-only continuation requires a completed Pipeline handoff."
        no_context = await _rpc(http, server, "clean up", 11, metadata=cleanup)
        assert no_context["error"]["code"] == -32602

        first = await _rpc(http, server, PROMPT, 2)
        task_id, context_id = first["result"]["task"]["id"], first["result"]["task"]["contextId"]
        assert first["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        waiting = await _rpc(http, server, "clean up", 3, contextId=context_id, metadata=cleanup)
        assert waiting["error"]["code"] == -32602
        assert waiting["error"]["message"] == "Cleanup-only continuation requires a completed Pipeline handoff."
        before = await journal(server, context_id)

        chosen = await _rpc(http, server, "2", 4, contextId=context_id, taskId=task_id)
        assert chosen["result"]["task"]["id"] == task_id
        handed_off = await journal(server, context_id)
        assert handed_off[-1]["eventType"] == "pipeline_handoff_ready"
        assert handed_off[:len(before)] == before  # the refused message changed nothing

        done = await _rpc(http, server, "clean up", 5, contextId=context_id, metadata=cleanup)
        task = done["result"]["task"]
        assert task["id"] != task_id  # after the handoff nothing waits: a new task of the context
        final = task["metadata"]["iac_code"]
        assert final["assistantFinal"]["complete"] is True
        assert final["assistantFinal"]["cleanupOnly"]["outcome"] == "nothing_to_clean"
        events = (await journal(server, context_id))[len(handed_off):]
        assert lifecycle([e["eventType"] for e in events]) == ["cleanup_started", "cleanup_completed"]
        assert events[1]["data"]["outcome"] == "nothing_to_clean" and events[1]["data"]["cleaned"] == []
        assert "Nothing to clean up" in task["status"]["message"]["parts"][0]["text"]
        assert_gapless(await journal(server, context_id))

        ignored = await _rpc(http, server, "hello", 6, contextId="ctx-normal",
                             metadata={"iac_code": {"cleanupOnly": True, "run_mode": "normal"}})
        assert "result" in ignored  # normal mode does not read cleanupOnly


async def test_an_omitted_task_id_continues_the_waiting_task() -> None:
    async with start_server({"mode": "pipeline"}) as server, aiohttp.ClientSession() as http:
        first = await _rpc(http, server, "deploy my app", 1)
        task_id, context_id = first["result"]["task"]["id"], first["result"]["task"]["contextId"]
        assert first["result"]["task"]["metadata"]["iac_code"]["pipeline"]["data"]["kind"] == \
            "ask_user_question"
        answered = await _rpc(http, server, "1", 2, contextId=context_id)  # no taskId: re-hydrated from the session
        assert answered["result"]["task"]["id"] == task_id
        question = answered["result"]["task"]["metadata"]["iac_code"]["pipeline"]
        assert question["data"]["kind"] == "candidate_selection" and question["taskId"] == task_id
        chosen = await _rpc(http, server, "candidate 1", 3, contextId=context_id)
        assert chosen["result"]["task"]["id"] == task_id
        events = await journal(server, context_id)
        assert events[-1]["eventType"] == "pipeline_handoff_ready"
        assert_gapless(events)
        assert {e["taskId"] for e in events} == {task_id}
        history = [p["text"] for m in chosen["result"]["task"]["history"] for p in m["parts"] if "text" in p]
        assert "1" in history and "candidate 1" in history

        chat = await _rpc(http, server, "Add a second vSwitch", 4, contextId=context_id)
        assert chat["result"]["task"]["id"] != task_id  # handed off: nothing waits, a new task answers

        normal = await _rpc(http, server, PROMPT, 5, contextId="ctx-rehydrate-2")
        waiting_id = normal["result"]["task"]["id"]
        other = await _rpc(http, server, "hello", 6, contextId="ctx-rehydrate-2",
                           metadata={"iac_code": {"run_mode": "normal"}})
        assert other["result"]["task"]["id"] != waiting_id  # normal mode never re-hydrates
        assert json.dumps(other).count("pipeline_handoff_ready") == 0


# --------------------------------------------------------------------------- selling_solution_first


async def test_solution_first_goes_back_to_the_selection_and_ignores_a_remark(ticketed: Any) -> None:
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as client, connect_client(server) as other:
        first = pipeline_events([MessageToDict(e) async for e in client.send_message(SendMessageRequest(
            message=message(PROMPT, 1, iac_code={"pipeline_name": "selling_solution_first"})))])
        assert first[-1]["data"]["kind"] == "candidate_selection"
        task_id, context_id = first[-1]["taskId"], first[-1]["contextId"]

        run = Stream(client, message("2", 2, context_id=context_id, task_id=task_id))
        await run.until(lambda events: bool(of(events, "step_started")))  # materializing: the engine waits
        remark = Stream(other, message("looks good so far", 3, context_id=context_id))
        await run.until(classified(1))
        back = Stream(other, message("go back to the selection", 4, context_id=context_id))
        await run.until(classified(2))
        plugin.tickets.release(1)
        events = pipeline_events(await run.done())
        await remark.done()
        await back.done()

        verdicts = [e["data"] for e in of(events, "interrupt_classified")]
        assert [(v["action"], v["targetStepId"]) for v in verdicts] == [
            ("continue", "materialize_selected_candidate"), ("rollback", "solution_planning_and_selection")]
        assert verdicts[0]["reason"] == "no_change_requested" and verdicts[0]["candidateScope"] == ""
        [rollback] = of(events, "rollback_completed")
        assert {k: rollback["data"][k] for k in ("rollbackScope", "toStepId", "reason")} == {
            "rollbackScope": "parent", "toStepId": "solution_planning_and_selection",
            "reason": "user_requested_rollback"}
        assert rollback["step"]["runId"] == "step-solution_planning_and_selection-2"
        assert events[-1]["eventType"] == "input_required" and events[-1]["data"]["kind"] == "candidate_selection"
        assert events[-1]["step"]["runId"] == "step-solution_planning_and_selection-2"
        assert not of(events, "pipeline_warning")
        everything = await journal(server, context_id)
        assert_gapless(everything)
        async with aiohttp.ClientSession() as http, http.get(
                server.url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id},
                headers=A2A_HEADERS) as reply:
            snapshot = (await reply.json())["snapshot"]
        assert snapshot["pendingInput"]["kind"] == "candidate_selection"
        assert snapshot["currentStep"] == "solution_planning_and_selection"

        plugin.tickets.release(1)
        chosen = pipeline_events([MessageToDict(e) async for e in client.send_message(SendMessageRequest(
            message=message("1", 5, context_id=context_id)))])  # re-hydrated to the waiting task
        assert chosen[-1]["data"]["kind"] == "deployment_confirmation" and chosen[-1]["taskId"] == task_id


async def test_the_terminal_client_shows_the_pause_question(tmp_path: Any, ticketed: Any) -> None:
    """``iac-code a2a-client call`` streaming a run that another client pauses: it ends on the pause
    confirmation as a pipeline question (exit 11, the answer's command)."""
    plugin = ticketed
    async with ticketed_server(plugin) as server, connect_client(server) as other:
        call = asyncio.create_task(run_cli("a2a-client", "call", "--url", server.url, "--context-id", "ctx-cli",
                                           "--mode", "pipeline", "-p", PROMPT, "--stream", "-o", "json",
                                           cwd=tmp_path))
        assert await asyncio.to_thread(plugin.tickets.entered.wait, 60)  # the run is inside evaluate_candidates
        pause = Stream(other, message("pause", 1, context_id="ctx-cli", iac_code={"cwd": str(tmp_path)}))
        await pause.until(classified())
        plugin.tickets.release(3)
        result = await call
        await pause.done()
        assert result.code == 11, result.err[-2000:]
        last = json.loads(result.out.strip().splitlines()[-1])
        assert last["pipelineQuestion"]["kind"] == "pipeline_pause_confirmation"


async def test_with_a_shared_backend_cleanup_only_reads_the_shared_session() -> None:
    """``task-store: redis``: the context's session lives in Redis between turns; the cleanup check reads it there.
    The card does not promise interrupts (a turn may run on another node)."""
    cleanup = {"iac_code": {"cleanupOnly": True}}
    settings = {"mode": "pipeline", "task-store": "redis", "task-store-redis-url": redis_url(),
                "task-store-key-prefix": f"iac-int-{uuid.uuid4().hex[:8]}"}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        async with http.get(server.url.rstrip("/") + "/.well-known/agent-card.json") as reply:
            card = await reply.json()
        extension = next(e for e in card["capabilities"]["extensions"]
                         if e["uri"] == "urn:iac-code:a2a:pipeline-events:v1")
        assert extension["params"]["supportsInterrupts"] is False
        first = await _rpc(http, server, PROMPT, 1)
        task_id, context_id = first["result"]["task"]["id"], first["result"]["task"]["contextId"]
        refused = await _rpc(http, server, "clean up", 2, contextId=context_id, metadata=cleanup)
        assert refused["error"]["code"] == -32602
        assert refused["error"]["message"] == "Cleanup-only continuation requires a completed Pipeline handoff."
        await _rpc(http, server, "1", 3, contextId=context_id, taskId=task_id)
        accepted = await _rpc(http, server, "clean up", 4, contextId=context_id, metadata=cleanup)
        assert accepted["result"]["task"]["metadata"]["iac_code"]["assistantFinal"]["cleanupOnly"]["outcome"] == \
            "nothing_to_clean"
