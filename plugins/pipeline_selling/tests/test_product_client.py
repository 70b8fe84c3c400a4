"""A client that knows only the product's wire format drives both selling pipelines end to end.

:class:`ProductClient` is written from the behaviour digest alone (``since-0.13.md`` §1-§3 and §10,
``input-and-permissions.md`` §2.2 and §3): it sends text messages with ``metadata.iac_code`` keys the digest names
(``run_mode``, ``pipeline_name``, ``candidatePresentation``, ``cwd``), reads pipeline events from
``metadata.iac_code.pipeline`` and ``metadata.iac_code.pipelineBatch.events`` by their envelope fields
(``eventType``, ``sequence``, ``eventId``, ``step.id``, ``candidate.index``, ``data``), answers pauses with the
digest's formats (the selection JSON text, ``方案 2``, the ``deployment_confirmation`` JSON, an option number, free
text) and permission questions with the §3.1 DataPart, and reads ``GET /iac-code/pipeline/state``. It never looks at
the server's files or internals. a2a-sdk's client carries it over JSON-RPC and over HTTP+JSON (REST).

Servers: the default configuration plus ``mode: pipeline`` (``server``), or the default configuration in normal
mode with ``run_mode: pipeline`` on every request (``request``); ``deployer: ros`` (against ``fake_ros.py``) where a
deploy is the point. Every session's events must be strictly increasing and gapless and equal the state endpoint's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import pytest
import yaml
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict, ParseDict

from iac_code.testing import A2A_HEADERS, connect_client, start_server
from iac_code_pipeline_selling.runner import lifecycle


PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
EXTENSION_URI = "urn:iac-code:a2a:pipeline-events:v1"
SELLING_STEPS = ["intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select", "deploying"]
RICH_OPTION = {"name", "summary", "candidate_index", "architecture_diagram", "total_monthly_cost", "cost_items"}
CONFIRMATION = {"kind", "stepId", "prompt", "options", "solution_summary", "template_url", "cost",
                "effective_deployment_parameters", "parameter_overrides", "preview_ready_for_create"}
STACK_PROGRESS = {"toolUseId", "stackId", "stackName", "regionId", "status", "progressPercentage", "resources",
                  "elapsedSeconds"}
Event = dict[str, Any]


# --------------------------------------------------------------------------- the client


class Turn:
    """What one request streamed: the pipeline events (in stream order), the last task state and message, the
    pending input of the last status (``metadata.iac_code.input``), the artifacts."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.state = ""
        self.text = ""
        self.input: Event | None = None
        self.task_id = ""
        self.context_id = ""
        self.artifacts: list[Event] = []

    def of(self, event_type: str) -> list[Event]:
        return [e for e in self.events if e["eventType"] == event_type]

    @property
    def types(self) -> list[str]:
        return lifecycle([e["eventType"] for e in self.events])

    @property
    def question(self) -> Event:
        """The ``input_required`` event the turn stopped on."""
        assert self.state == "TASK_STATE_INPUT_REQUIRED", self.state
        assert self.events and self.events[-1]["eventType"] == "input_required", self.types
        return self.events[-1]


class ProductClient:
    """One conversation (context) as a product client holds it."""

    def __init__(self, a2a: Any, base_url: str, *, defaults: Mapping[str, Any]) -> None:
        self.a2a = a2a
        self.base_url = base_url.rstrip("/")
        self.defaults = dict(defaults)  # metadata.iac_code sent with every text message
        self.context_id = ""
        self.task_id = ""
        self.seen: dict[str, Event] = {}  # eventId → event: every pipeline event of this session
        self._n = 0

    def _message_id(self) -> str:
        self._n += 1
        return f"product-{id(self)}-{self._n}"

    async def say(self, text: str, *, task: bool = True, **iac_code: Any) -> Turn:
        """A text message on the conversation (on its task while one waits, unless ``task`` is false)."""
        message = Message(message_id=self._message_id(), role=Role.ROLE_USER, parts=[Part(text=text)],
                          context_id=self.context_id, task_id=self.task_id if task else "")
        message.metadata.update({"iac_code": {**self.defaults, **iac_code}})
        return await self._send(SendMessageRequest(message=message))

    async def allow(self, envelope: Mapping[str, Any], decision: str = "allow_once") -> Turn:
        """The §3.1 permission answer: one ``application/json`` DataPart naming the request."""
        wire = {"message": {
            "messageId": self._message_id(), "role": "ROLE_USER", "taskId": envelope["requestTaskId"],
            "contextId": envelope["contextId"],
            "parts": [{"mediaType": "application/json", "data": {
                "schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
                "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": decision}}]}}
        return await self._send(ParseDict(wire, SendMessageRequest()))

    async def _send(self, request: SendMessageRequest, turn: Turn | None = None) -> Turn:
        turn = turn or Turn()
        async for item in self.a2a.send_message(request):
            self.read(MessageToDict(item), turn)
        return turn

    def read(self, item: Event, turn: Turn) -> None:
        """One streamed result into ``turn``: pipeline events (single or batched), status, artifacts."""
        if "task" in item:
            turn.task_id, turn.context_id = item["task"]["id"], item["task"]["contextId"]
            self.context_id = self.context_id or turn.context_id
        update = item.get("statusUpdate")
        if update is not None:
            turn.task_id, turn.context_id = update["taskId"], update["contextId"]
            self.context_id = self.context_id or turn.context_id
            section = update.get("metadata", {}).get("iac_code", {})
            carried = [section["pipeline"]] if "pipeline" in section else \
                section.get("pipelineBatch", {}).get("events", [])
            for event in carried:
                self._event(event, turn)
            turn.state = update["status"]["state"]
            parts = update["status"].get("message", {}).get("parts", [])
            turn.text = "".join(p.get("text", "") for p in parts) or turn.text
            turn.input = section.get("input") if turn.state == "TASK_STATE_INPUT_REQUIRED" else None
            self.task_id = turn.task_id if turn.state == "TASK_STATE_INPUT_REQUIRED" else ""
        artifact = item.get("artifactUpdate", {}).get("artifact")
        if artifact is not None:
            texts = [p["text"] for p in artifact.get("parts", []) if "text" in p]
            turn.artifacts.append({"name": artifact.get("name", ""), "text": texts[0] if texts else ""})

    def _event(self, event: Event, turn: Turn) -> None:
        assert event["schemaVersion"] == "1.0" and event["extensionUri"] == EXTENSION_URI
        assert event["eventId"].startswith("evt-") and len(event["eventId"]) == 36
        assert event["contextId"] == turn.context_id and event["taskId"] == turn.task_id
        known = self.seen.get(event["eventId"])
        if known is not None:  # the same event on another stream of the session: identical
            assert known == event
            return
        if turn.events:
            assert event["sequence"] > turn.events[-1]["sequence"], "sequence must increase within a stream"
        self.seen[event["eventId"]] = event
        turn.events.append(event)

    @property
    def session_events(self) -> list[Event]:
        return sorted(self.seen.values(), key=lambda e: e["sequence"])

    async def pipeline_state(self) -> Event:
        async with aiohttp.ClientSession() as http, http.get(
                self.base_url + "/iac-code/pipeline/state", params={"contextId": self.context_id},
                headers=A2A_HEADERS) as reply:
            assert reply.status == 200
            return await reply.json()  # type: ignore[no-any-return]

    async def check_session(self) -> list[Event]:
        """Gapless from 1, each event once, and exactly what the state endpoint returns."""
        events = self.session_events
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        assert (await self.pipeline_state())["events"] == events
        return events

    async def answer_permissions(self, turn: Turn, decision: str = "allow_once") -> Turn:
        """Answer every permission question a (chat) turn stops on."""
        for _ in range(5):
            if turn.input is None or turn.input.get("kind") != "permission":
                return turn
            answered = await self.allow(turn.input, decision)
            answered.artifacts = turn.artifacts + answered.artifacts
            turn = answered
        raise AssertionError("too many permission questions")


# --------------------------------------------------------------------------- servers


def deploy_settings(fake: Any) -> dict[str, Any]:
    return {"deployer": "ros", "ros-endpoint": fake.endpoint, "ros-access-key-id": "LTAI5tProductClientKey",
            "ros-access-key-secret": "product-client-secret", "ros-poll-interval-seconds": 0.02}


def server_settings(mode_source: str, **more: Any) -> dict[str, Any]:
    """The default configuration plus ``mode: pipeline``, or plain default (normal mode) for per-request mode."""
    return {**({"mode": "pipeline"} if mode_source == "server" else {}), **more}


def defaults(mode_source: str, workspace: Any, **more: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"cwd": str(workspace), **more}
    if mode_source == "request":
        meta["run_mode"] = "pipeline"
    return meta


# --------------------------------------------------------------------------- what the digest promises


def check_selling_first_turn(turn: Turn, *, rich: bool) -> Event:
    """Up to the choice: §2.1's steps, the parallel candidates, the §2.3 options; the question event."""
    assert turn.events[0]["eventType"] == "pipeline_started" and turn.events[0]["sequence"] == 1
    started = [e["step"]["id"] for e in turn.of("step_started")]
    assert started == SELLING_STEPS[:4]
    evaluate = next(e for e in turn.of("step_started") if e["step"]["id"] == "evaluate_candidates")
    assert evaluate["step"]["type"] == "parallel_sub_pipeline"
    assert sorted(e["candidate"]["index"] for e in turn.of("candidate_started")) == [1, 2, 3]
    assert sorted(e["candidate"]["index"] for e in turn.of("candidate_completed")) == [1, 2, 3]
    sub_steps = {e["candidateStep"]["id"] for e in turn.of("candidate_step_completed")}
    assert {"template_generating", "cost_estimating"} <= sub_steps
    question = turn.question
    assert question["status"] == "input_required" and question["step"]["id"] == "confirm_and_select"
    assert question["step"]["uiMode"] == "candidate_selection"
    data = question["data"]
    assert data["kind"] == "candidate_selection" and data["stepId"] == "confirm_and_select" and data["prompt"]
    assert [o["candidate_index"] for o in data["options"]] == [1, 2, 3]
    for option in data["options"]:
        if rich:
            assert set(option) == RICH_OPTION
            assert option["architecture_diagram"].split()[0] in ("flowchart", "graph")
            assert isinstance(option["total_monthly_cost"], str) and option["total_monthly_cost"]
            assert option["cost_items"] and all({"name", "monthly_cost"} <= set(i) for i in option["cost_items"])
        else:
            assert set(option) == {"name", "summary", "candidate_index"}
    assert all(o["name"] in turn.text for o in data["options"])  # a generic client reads the choice as text
    return question


def template_of(turn_or_events: Any, index: int) -> str:
    """The template candidate ``index`` generated (its ``artifact_created`` event's ``artifact.content``)."""
    events = turn_or_events.events if isinstance(turn_or_events, Turn) else turn_or_events
    return next(e["artifact"]["content"] for e in events
                if e["eventType"] == "artifact_created" and e["candidate"]["index"] == index)


def resource_types(template_text: str) -> list[str]:
    return sorted(r["Type"] for r in yaml.safe_load(template_text)["Resources"].values())


def check_handoff(turn: Turn, outcome: str, terminal: str) -> None:
    assert turn.types[-2:] == [terminal, "pipeline_handoff_ready"], turn.types
    handoff = turn.events[-1]
    assert handoff["scope"] == "pipeline"
    assert {k: handoff["data"][k] for k in ("action", "targetMode", "outcome")} == {
        "action": "switch_to_normal", "targetMode": "normal", "outcome": outcome}


# --------------------------------------------------------------------------- selling with a deploy


PICKS = {"json": lambda o: json.dumps({"selected_candidate_name": o["name"],
                                       "selected_candidate_index": o["candidate_index"]}, ensure_ascii=False),
         "方案 2": lambda o: "方案 2"}


@pytest.mark.parametrize(("binding", "mode_source", "pick"), [
    ("JSONRPC", "server", "json"), ("HTTP+JSON", "server", "方案 2"),
    ("JSONRPC", "request", "方案 2"), ("HTTP+JSON", "request", "json")])
async def test_selling_rich_v1_deploys_hands_off_and_chat_edits_the_chosen_template(
        binding: str, mode_source: str, pick: str, fake_ros: Any, tmp_path: Any) -> None:
    settings = server_settings(mode_source, **deploy_settings(fake_ros))
    async with start_server(settings) as server, connect_client(server, binding=binding) as a2a:
        client = ProductClient(a2a, server.url, defaults=defaults(mode_source, tmp_path))
        first = await client.say(PROMPT, candidatePresentation="rich-v1")
        question = check_selling_first_turn(first, rich=True)
        chosen = question["data"]["options"][1]

        selected = await client.say(PICKS[pick](chosen))
        assert selected.types[:4] == ["input_received", "step_completed", "step_started", "permission_requested"]
        conclusion = lifecycle(selected.events)[1]["data"]["conclusion"]
        assert lifecycle(selected.events)[1]["step"]["id"] == "confirm_and_select"
        assert conclusion["selected_candidate_index"] == 2 and conclusion["selected_candidate_name"] == chosen["name"]
        assert lifecycle(selected.events)[2]["step"]["id"] == "deploying"
        requested = lifecycle(selected.events)[3]
        assert requested["data"]["toolName"] == "ros_deploy"
        envelope = selected.input
        assert selected.state == "TASK_STATE_INPUT_REQUIRED" and envelope is not None
        assert envelope["kind"] == "permission" and envelope["toolUseId"] == requested["data"]["toolUseId"]
        assert [o["id"] for o in envelope["options"]] == ["allow_once", "deny"]
        assert envelope["operation"]["product"] == "ros" and envelope["operation"]["action"] == "create"
        assert {"product": "ROS", "action": "CreateStack", "effect": "change"} in envelope["operation"]["apiCalls"]
        assert fake_ros.created == 0  # nothing without the caller's allow

        deployed = await client.allow(envelope)
        assert deployed.types[0] == "permission_resolved"
        assert deployed.events[0]["data"]["decision"] == "allow_once"
        progress = deployed.of("stack_progress")
        assert progress and all(set(e["data"]) == STACK_PROGRESS for e in progress)
        assert progress[-1]["data"]["status"] == "CREATE_COMPLETE" and progress[-1]["data"]["progressPercentage"] == 100
        [current] = deployed.of("stack_current_changed")
        assert current["scope"] == "stack" and current["data"]["current"] is True
        assert current["data"]["stackId"] == progress[-1]["data"]["stackId"] and current["data"]["isSuccess"] is True
        done = deployed.of("step_completed")[-1]
        assert done["step"]["id"] == "deploying" and done["data"]["conclusion"]["status"] == "success"
        check_handoff(deployed, "completed", "pipeline_completed")
        assert fake_ros.created == 1

        chat = await client.answer_permissions(await client.say("add a tag env=prod to the VPC"))
        assert chat.events == [] and chat.state == "TASK_STATE_INPUT_REQUIRED"  # normal chat now: no pipeline events
        [edited] = [a for a in chat.artifacts if a["text"].lstrip().startswith("ROSTemplateFormatVersion")]
        document = yaml.safe_load(edited["text"])
        vpc = next(r for r in document["Resources"].values() if r["Type"] == "ALIYUN::ECS::VPC")
        assert {"Key": "env", "Value": "prod"} in vpc["Properties"]["Tags"]
        assert resource_types(edited["text"]) == resource_types(template_of(first, 2))  # the chosen one, edited
        assert fake_ros.created == 1

        events = await client.check_session()
        assert events[-1]["eventType"] == "pipeline_handoff_ready"
        assert {e["taskId"] for e in events} == {first.task_id}


# --------------------------------------------------------------------------- deployer: none, a denied deploy


@pytest.mark.parametrize(("binding", "mode_source"), [("JSONRPC", "server"), ("HTTP+JSON", "request")])
async def test_selling_without_a_deployer_says_where_the_template_is(binding: str, mode_source: str,
                                                                      tmp_path: Any) -> None:
    async with start_server(server_settings(mode_source)) as server, connect_client(server, binding=binding) as a2a:
        client = ProductClient(a2a, server.url, defaults=defaults(mode_source, tmp_path))
        first = await client.say(PROMPT)
        check_selling_first_turn(first, rich=False)
        done = await client.say("candidate 1")
        [warning] = done.of("pipeline_warning")
        assert warning["data"]["code"] == "no_deployer_configured" and warning["step"]["id"] == "deploying"
        assert warning["data"]["artifact"]["name"].startswith("candidate-1-")
        check_handoff(done, "completed", "pipeline_completed")
        await client.check_session()


async def test_a_denied_deploy_creates_nothing(fake_ros: Any, tmp_path: Any) -> None:
    settings = server_settings("server", **deploy_settings(fake_ros))
    async with start_server(settings) as server, connect_client(server) as a2a:
        client = ProductClient(a2a, server.url, defaults=defaults("server", tmp_path))
        check_selling_first_turn(await client.say(PROMPT), rich=False)
        asked = await client.say("方案 1")
        assert asked.input is not None and asked.input["toolName"] == "ros_deploy"
        denied = await client.allow(asked.input, "deny")
        assert denied.events[0]["eventType"] == "permission_resolved"
        assert denied.events[0]["data"]["decision"] == "deny"
        conclusion = denied.of("step_completed")[-1]["data"]["conclusion"]
        assert conclusion["deployed"] is False and conclusion["status"] == "cancelled"
        check_handoff(denied, "canceled", "pipeline_canceled")
        assert fake_ros.created == 0 and not fake_ros.calls
        await client.check_session()


# --------------------------------------------------------------------------- selling_solution_first


@pytest.mark.parametrize(("binding", "mode_source"), [("HTTP+JSON", "server"), ("JSONRPC", "request")])
async def test_solution_first_reselect_then_cancel(binding: str, mode_source: str, tmp_path: Any) -> None:
    async with start_server(server_settings(mode_source)) as server, connect_client(server, binding=binding) as a2a:
        client = ProductClient(a2a, server.url,
                               defaults=defaults(mode_source, tmp_path, pipeline_name="selling_solution_first"))
        first = await client.say(PROMPT, candidatePresentation="rich-v1")
        assert first.events[0]["pipelineName"] == "selling_solution_first"
        selection = first.question
        assert selection["step"]["id"] == "solution_planning_and_selection"
        assert selection["data"]["kind"] == "candidate_selection"
        assert all(set(o) == RICH_OPTION for o in selection["data"]["options"])

        confirm = (await client.say("2")).question
        assert confirm["step"]["id"] == "materialize_selected_candidate"
        assert set(confirm["data"]) == CONFIRMATION and confirm["data"]["kind"] == "deployment_confirmation"
        assert [o["action"] for o in confirm["data"]["options"]] == ["confirm", "adjust", "reselect", "cancel"]
        assert confirm["data"]["template_url"]

        back = await client.say(json.dumps({"action": "reselect"}))
        [rollback] = back.of("rollback_completed")
        assert rollback["data"]["toStepId"] == "solution_planning_and_selection"
        assert back.question["data"]["kind"] == "candidate_selection"
        assert back.question["step"]["attempt"] == 2

        again = (await client.say("方案 1")).question
        assert again["data"]["kind"] == "deployment_confirmation"
        assert again["data"]["solution_summary"] != confirm["data"]["solution_summary"]  # candidate 1 now

        canceled = await client.say(json.dumps({"action": "cancel"}))
        check_handoff(canceled, "canceled", "pipeline_canceled")
        events = await client.check_session()
        assert [e["data"]["stepId"] for e in events if e["eventType"] == "step_completed"].count(
            "materialize_selected_candidate") == 2


# --------------------------------------------------------------------------- clarification questions


@pytest.mark.parametrize(("binding", "answer"), [("JSONRPC", "1"),
                                                 ("HTTP+JSON", "A static website with an OSS bucket in cn-hangzhou")])
async def test_a_clarification_question_answered_by_number_and_by_free_text(binding: str, answer: str,
                                                                             tmp_path: Any) -> None:
    async with start_server(server_settings("server")) as server, connect_client(server, binding=binding) as a2a:
        client = ProductClient(a2a, server.url, defaults=defaults("server", tmp_path))
        asked = (await client.say("deploy my app")).question
        data = asked["data"]
        assert data["kind"] == "ask_user_question" and data["inputId"] == f"ask-{data['toolUseId']}"
        assert data["question"] and data["prompt"] == data["question"] and data["allowFreeText"] is True
        assert data["options"] and all({"id", "label"} <= set(o) for o in data["options"])
        assert asked["input"] == {**data, "required": True}

        answered = await client.say(answer)
        received = answered.events[0]
        assert received["eventType"] == "input_received"
        got = received["data"]
        assert got["kind"] == "ask_user_question" and got["inputId"] == data["inputId"]
        assert got["answerTextLength"] == len(answer)
        if answer == "1":
            assert got["selectedId"] == data["options"][0]["id"] and got["selectedLabel"] == data["options"][0]["label"]
            assert got["freeText"] == "" and got["freeTextLength"] == 0
        else:
            assert got["selectedId"] == "" and got["freeText"] == answer and got["freeTextLength"] == len(answer)
        assert answered.question["data"]["kind"] == "candidate_selection"  # the run went on with the answer
        assert {e["taskId"] for e in await client.check_session()} == {answered.task_id}


# --------------------------------------------------------------------------- an interrupt restarts a candidate


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(wait(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_an_interrupt_restarts_a_candidate(ticketed: Any, ticketed_settings: Any, tmp_path: Any) -> None:
    """The run is held inside ``evaluate_candidates`` (template generation waits for tickets); a second client (REST)
    sends text naming only the context; the candidate restarts, the choice offers its new attempt."""
    async with start_server(ticketed_settings(), extra_plugins={"ticketed-offline": ticketed}) as server, \
            connect_client(server) as a2a, connect_client(server, binding="HTTP+JSON") as other_a2a:
        client = ProductClient(a2a, server.url, defaults=defaults("server", tmp_path))
        run = Turn()
        message = Message(message_id="interrupt-run", role=Role.ROLE_USER, parts=[Part(text=PROMPT)])
        message.metadata.update({"iac_code": {**client.defaults, "candidatePresentation": "rich-v1"}})
        running = asyncio.create_task(client._send(SendMessageRequest(message=message), run))
        await until(lambda: len([e for e in run.of("candidate_step_started")
                                 if e["candidateStep"]["id"] == "template_generating"]) == 3, "three generations")

        other = ProductClient(other_a2a, server.url, defaults=client.defaults)
        other.context_id = client.context_id
        other.seen = client.seen  # one session, two streams
        followed = asyncio.create_task(other.say("redo candidate 2", task=False))
        await until(lambda: bool(run.of("interrupt_classified")), "the verdict")
        ticketed.tickets.release(4)  # three first attempts and candidate 2's second
        await running
        interrupt_turn = await followed

        assert interrupt_turn.task_id == run.task_id  # the text joined the running task
        received = run.of("interrupt_received")[0]
        assert received["scope"] == "interrupt"
        assert received["data"] == {"messageLength": len("redo candidate 2"), "userInput": "redo candidate 2"}
        verdict = run.of("interrupt_classified")[0]["data"]
        assert verdict == {"action": "restart_candidate", "targetStepId": "evaluate_candidates",
                           "candidateScope": "candidate-2", "reason": verdict["reason"], "paused": False}
        [restart] = run.of("candidate_restart_requested")
        assert restart["data"]["candidateScope"] == "candidate-2"
        assert restart["data"]["targetCandidateStepId"] == "template_generating"
        assert restart["data"]["nextCandidateAttempt"] == 2
        second = [e for e in run.of("candidate_started") if e["candidate"]["index"] == 2]
        assert [e["candidate"]["attempt"] for e in second] == [1, 2]
        assert run.question["data"]["kind"] == "candidate_selection"
        assert [o["candidate_index"] for o in run.question["data"]["options"]] == [1, 2, 3]

        client.task_id = run.task_id
        done = await client.say("方案 2")
        check_handoff(done, "completed", "pipeline_completed")
        await client.check_session()
