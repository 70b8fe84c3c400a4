"""``selling_solution_first`` (§2.2): driven turn by turn as the kernel drives it (on the offline runtime's engine),
and end to end on a real server with a2a-sdk's client selecting it by ``metadata.iac_code.pipeline_name``."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.api import PipelineServices, Progress, TextDelta, ToolCompleted, TurnRequest
from iac_code.testing import A2A_HEADERS, connect_client, start_server
from iac_code_pipeline_selling.batching import unbatched
from iac_code_pipeline_selling.journal import JournalStore
from iac_code_pipeline_selling.solution_first import SolutionFirstPipeline
from iac_code_pipeline_selling.runner import lifecycle


NAME = "selling_solution_first"
REQUEST = "Deploy a web shop with a MySQL database in cn-hangzhou"
CONFIRMATION_KEYS = {"kind", "stepId", "prompt", "options", "solution_summary", "template_url", "cost",
                     "effective_deployment_parameters", "parameter_overrides", "preview_ready_for_create"}
SELECT, MATERIALIZE = "solution_planning_and_selection", "materialize_selected_candidate"


def offline_engine() -> Any:
    """The offline runtime plugin's engine, found through its entry point like the kernel finds it."""
    plugin = next(e for e in entry_points(group="iac_code") if e.name == "runtime-offline").load()
    return plugin.iac_code_iac_engines()[0].create(None)


class EchoChat:
    """The chat runtime after the handoff: says what it got."""

    name = "echo"

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[Any]:
        yield TextDelta(f"chat: {turn.prompt}")


class Driver:
    """Plays turns of one context like the kernel: the session kept as JSON, each artifact stored (its reference
    filled in before the runtime's next event, with a URL like the kernel's)."""

    def __init__(self, pipeline: SolutionFirstPipeline, context_id: str = "ctx-sf") -> None:
        self.pipeline = pipeline
        self.context_id = context_id
        self.session: dict[str, Any] = {}
        self.turns = 0
        self.urls: list[str] = []

    async def turn(self, prompt: str, *, language: str = "en", metadata: dict[str, Any] | None = None) -> list[Any]:
        self.turns += 1
        session = json.loads(json.dumps(self.session))
        turn = TurnRequest(context_id=self.context_id, task_id=f"task-{self.turns}", prompt=prompt, cwd="/tmp",
                           language=language, session=session, metadata=metadata or {}, run_mode="pipeline",
                           pipeline_name=NAME)
        events = []
        async for event in self.pipeline.run_turn(turn):
            if isinstance(event, ToolCompleted) and event.artifact is not None:
                artifact_id = uuid.uuid4().hex
                url = f"http://127.0.0.1:1/iac-code/artifacts/{artifact_id}/{event.artifact.name}"
                event.artifact.stored.update(artifactId=artifact_id, name=event.artifact.name, url=url)
                self.urls.append(url)
            events.append(event)
        self.session = json.loads(json.dumps(session))
        return events


def pipeline_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e.metadata["pipeline"] for e in events if isinstance(e, Progress)]


def kinds(events: list[Any]) -> list[str]:
    return lifecycle([e["eventType"] for e in pipeline_events(events)])


def said(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def last_question(events: list[Any]) -> dict[str, Any]:
    final = [e for e in events if isinstance(e, Progress) and e.final]
    assert len(final) == 1 and final[0] is [e for e in events if isinstance(e, Progress)][-1]
    event = final[0].metadata["pipeline"]
    assert event["eventType"] == "input_required" and event["status"] == "input_required"
    assert event["input"] == {**event["data"], "required": True}
    return event


@pytest.fixture
def driver(tmp_path: Path) -> Driver:
    services = PipelineServices(context=SimpleNamespace(config=SimpleNamespace()), chat=EchoChat(),
                                engine=offline_engine(), state_dir=tmp_path)
    return Driver(SolutionFirstPipeline(services, JournalStore(tmp_path)))


def check_sequence(events: list[dict[str, Any]]) -> None:
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    for event in events:
        assert event["pipelineName"] == NAME and event["extensionUri"] == "urn:iac-code:a2a:pipeline-events:v1"
        assert re.fullmatch(r"evt-[0-9a-f]{32}", event["eventId"])
        if "step" in event:
            step = event["step"]
            assert step["runId"] == f"step-{step['id']}-{step['attempt']}" and step["total"] == 3


async def picked(driver: Driver, answer: str = "2", **kw: Any) -> tuple[list[Any], list[Any]]:
    first = await driver.turn(REQUEST, **kw)
    second = await driver.turn(answer, **kw)
    return first, second


async def test_pick_then_confirm_hands_off(driver: Driver) -> None:
    first, second = await picked(driver)
    assert kinds(first) == ["pipeline_started", "step_started", "input_required"]
    question = last_question(first)
    assert question["step"] == {"id": SELECT, "runId": f"step-{SELECT}-1", "attempt": 1, "index": 1, "total": 3,
                                "uiMode": "candidate_selection"}
    assert set(question["data"]) == {"kind", "stepId", "prompt", "options"}
    assert question["data"]["kind"] == "candidate_selection"
    assert [o["candidate_index"] for o in question["data"]["options"]] == [1, 2, 3]
    assert "candidate 2" not in said(first) and "2. High availability" in said(first)
    assert not [e for e in first if isinstance(e, ToolCompleted)]  # no template before the choice

    assert kinds(second) == ["input_received", "step_completed", "step_started", "input_required"]
    evs = pipeline_events(second)
    selection = evs[1]["data"]["conclusion"]
    assert selection["status"] == "selected" and selection["continue_pipeline"] is True
    assert selection["selected_candidate_index"] == 2 and len(selection["architecture"]["candidates"]) == 3
    confirm = last_question(second)
    assert confirm["step"]["uiMode"] == "deployment_confirmation" and confirm["step"]["id"] == MATERIALIZE
    data = confirm["data"]
    assert set(data) == CONFIRMATION_KEYS and data["kind"] == "deployment_confirmation" and data["stepId"] == MATERIALIZE
    assert [o["action"] for o in data["options"]] == ["confirm", "adjust", "reselect", "cancel"]
    tools = [e for e in second if isinstance(e, ToolCompleted)]
    assert len(tools) == 1 and tools[0].artifact is not None
    assert tools[0].artifact.name == "candidate-2-high-availability-across-two-zones.yaml"
    assert data["template_url"] == driver.urls[-1]
    assert data["cost"]["total_monthly_cost"].startswith("CNY") and "not official" in data["cost"]["disclaimer"]
    assert data["effective_deployment_parameters"]["region_id"] == "cn-hangzhou"
    assert data["parameter_overrides"] == {} and isinstance(data["preview_ready_for_create"], bool)
    assert "artifact_created" not in kinds(second)  # §2.2: step 2 has no pipeline artifacts
    text = said(second)
    assert data["template_url"] in text and "1. Confirm and deploy" in text

    third = await driver.turn('{"action": "confirm"}')
    assert kinds(third) == ["input_received", "step_completed", "step_started", "pipeline_warning", "step_completed",
                            "pipeline_completed", "pipeline_handoff_ready"]
    evs3 = pipeline_events(third)
    assert evs3[0]["data"]["action"] == "confirm"
    plan = evs3[1]["data"]["conclusion"]
    assert plan["status"] == "confirmed" and plan["template_url"] == data["template_url"]
    assert evs3[3]["data"]["code"] == "no_deployer_configured"
    assert evs3[3]["data"]["artifact"]["name"] == tools[0].artifact.name
    deployment = evs3[4]["data"]["conclusion"]
    assert deployment["status"] in ("success", "failed", "cancelled") and deployment["deployed"] is False
    assert evs3[-1]["data"] == {"action": "switch_to_normal", "targetMode": "normal", "outcome": "completed",
                                "summary": evs3[3]["data"]["message"]}
    check_sequence(pipeline_events(first) + evs + evs3)
    assert await driver.turn("make it bigger") == [TextDelta("chat: make it bigger")]


@pytest.mark.parametrize("answer", ['{"action":"cancel"}', "cancel", "取消", "4"])
async def test_cancel_ends_the_run(driver: Driver, answer: str) -> None:
    await picked(driver)
    events = await driver.turn(answer)
    assert kinds(events) == ["input_received", "step_completed", "pipeline_canceled", "pipeline_handoff_ready"]
    evs = pipeline_events(events)
    assert evs[1]["data"]["conclusion"]["status"] == "cancelled"
    assert evs[-1]["status"] == "canceled" and evs[-1]["data"]["outcome"] == "canceled"
    assert "canceled" in said(events)


@pytest.mark.parametrize("answer", ['{"action":"confirm"}', "1", "confirm", "yes", "确认", "Yes, deploy!"])
async def test_every_confirm_form(driver: Driver, answer: str) -> None:
    await picked(driver)
    evs = pipeline_events(await driver.turn(answer))
    assert evs[0]["data"]["action"] == "confirm" and evs[-1]["eventType"] == "pipeline_handoff_ready"


async def test_reselect_then_confirm(driver: Driver) -> None:
    await picked(driver)
    events = await driver.turn("换一个")
    assert kinds(events) == ["input_received", "step_completed", "rollback_completed", "step_started", "input_required"]
    evs = pipeline_events(events)
    assert evs[1]["data"]["conclusion"]["status"] == "reselect_requested"
    rollback = evs[2]["data"]
    assert rollback["toStepId"] == SELECT and rollback["rollbackScope"] == "parent"
    assert rollback["reason"] == "reselect_requested" and rollback["maxRollbacks"] == 3
    assert evs[3]["step"]["runId"] == f"step-{SELECT}-2"
    assert last_question(events)["data"]["kind"] == "candidate_selection" and said(events)
    again = await driver.turn("方案 1")
    confirm = last_question(again)
    assert confirm["step"]["runId"] == f"step-{MATERIALIZE}-2"
    assert "economy" in confirm["data"]["template_url"] and confirm["data"]["template_url"] == driver.urls[-1]
    done = pipeline_events(await driver.turn("1"))
    assert done[1]["data"]["conclusion"]["candidate_index"] == 1 and done[-1]["eventType"] == "pipeline_handoff_ready"


async def test_adjust_merges_overrides_and_asks_again(driver: Driver) -> None:
    await picked(driver)
    events = await driver.turn('{"action":"adjust","parameter_overrides":{"InstanceType":"ecs.g7.xlarge"}}')
    assert kinds(events) == ["input_received", "input_required"]
    data = last_question(events)["data"]
    assert data["parameter_overrides"] == {"InstanceType": "ecs.g7.xlarge"}
    assert data["effective_deployment_parameters"]["InstanceType"] == "ecs.g7.xlarge"
    assert "ecs.g7.xlarge" in said(events)
    events = await driver.turn("set InstanceCount=3 please")
    data = last_question(events)["data"]
    assert pipeline_events(events)[0]["data"]["action"] == "adjust"
    assert data["parameter_overrides"] == {"InstanceType": "ecs.g7.xlarge", "InstanceCount": 3}
    evs = pipeline_events(await driver.turn("confirm"))
    plan = evs[1]["data"]["conclusion"]
    assert plan["effective_deployment_parameters"]["InstanceCount"] == 3 and plan["status"] == "confirmed"


@pytest.mark.parametrize("answer", ["9", "maybe later", '{"action":"deploy"}', "{oops", '{"action":"adjust"}'])
async def test_unreadable_confirmation_asks_again_and_changes_nothing(driver: Driver, answer: str) -> None:
    _, second = await picked(driver)
    before = json.loads(json.dumps(driver.session["pipeline"]))
    events = await driver.turn(answer)
    assert kinds(events) == ["input_required"]
    data = last_question(events)["data"]
    assert data["prompt"] != last_question(second)["data"]["prompt"] and said(events)
    after = driver.session["pipeline"]
    for key in ("steps", "template", "overrides", "selected", "candidates"):
        assert after.get(key) == before.get(key), key


async def test_a_fourth_reselect_is_refused(driver: Driver) -> None:
    await picked(driver)
    for n in range(3):
        assert "rollback_completed" in kinds(await driver.turn("reselect"))
        assert last_question(await driver.turn("2"))["data"]["kind"] == "deployment_confirmation"
    refused = await driver.turn("reselect")
    assert kinds(refused) == ["input_required"]
    data = last_question(refused)["data"]
    assert data["kind"] == "deployment_confirmation" and "limit" in data["prompt"] and "limit" in said(refused)
    assert pipeline_events(await driver.turn("cancel"))[-1]["eventType"] == "pipeline_handoff_ready"


@pytest.mark.parametrize("answer", ["none", "都不要", "cancel"])
async def test_rejecting_every_solution_ends_the_run(driver: Driver, answer: str) -> None:
    await driver.turn(REQUEST)
    events = await driver.turn(answer)
    assert kinds(events) == ["input_received", "step_completed", "pipeline_canceled", "pipeline_handoff_ready"]
    conclusion = pipeline_events(events)[1]["data"]["conclusion"]
    assert conclusion["status"] == "rejected" and conclusion["continue_pipeline"] is False


async def test_rich_options_and_bad_choice(driver: Driver) -> None:
    first = await driver.turn(REQUEST, metadata={"iac_code": {"candidatePresentation": "rich-v1"}})
    options = last_question(first)["data"]["options"]
    assert [set(o) for o in options] == [{"name", "summary", "candidate_index", "architecture_diagram",
                                          "total_monthly_cost", "cost_items"}] * 3
    assert options[1]["architecture_diagram"].startswith("flowchart LR")
    bad = await driver.turn("方案 7")
    assert kinds(bad) == ["input_required"] and "7" in last_question(bad)["data"]["prompt"]


async def test_vague_request_asks_first(driver: Driver) -> None:
    asked = await driver.turn("deploy my app")
    assert last_question(asked)["data"]["kind"] == "ask_user_question"
    answered = await driver.turn("1")
    assert kinds(answered)[0] == "input_received" and last_question(answered)["data"]["kind"] == "candidate_selection"


async def test_state_file_resumes_the_confirmation(tmp_path: Path, driver: Driver) -> None:
    _, second = await picked(driver)
    services = PipelineServices(context=SimpleNamespace(config=SimpleNamespace()), chat=EchoChat(),
                                engine=offline_engine(), state_dir=tmp_path)
    fresh = Driver(SolutionFirstPipeline(services, JournalStore(tmp_path)))  # the session is lost, the file is not
    fresh.turns = driver.turns
    evs = pipeline_events(await fresh.turn("1"))
    assert evs[0]["sequence"] == pipeline_events(second)[-1]["sequence"] + 1
    assert evs[-1]["eventType"] == "pipeline_handoff_ready"


# --------------------------------------------------------------------------- end to end

async def _send(client: Any, text: str, *, n: int, context_id: str = "", task_id: str = "",
                iac_code: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    message = Message(message_id=f"sf-{n}-{uuid.uuid4().hex[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id, task_id=task_id)
    if iac_code:
        message.metadata.update({"iac_code": iac_code})
    return [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]


def _streamed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for event in events:
        update = event.get("statusUpdate")
        for pipeline in unbatched((update or {}).get("metadata", {}).get("iac_code", {})):  # single or batched
            if pipeline not in found:
                found.append(pipeline)
    return found


def _last(events: list[dict[str, Any]]) -> dict[str, Any]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]


def _question(events: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    last = _last(events)
    assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    event = last["metadata"]["iac_code"]["pipeline"]
    assert event["eventType"] == "input_required"
    return event["data"], last["status"]["message"]["parts"][0]["text"]


async def test_solution_first_end_to_end_over_json_rpc() -> None:
    async with start_server({"mode": "pipeline"}) as server, connect_client(server) as client:
        n = iter(range(100))
        first = await _send(client, REQUEST, n=next(n), iac_code={"pipeline_name": NAME})
        choice, text = _question(first)
        assert choice["kind"] == "candidate_selection" and choice["stepId"] == SELECT and "2. " in text
        last = _last(first)
        ctx, task = last["contextId"], last["taskId"]
        streamed = _streamed(first)
        assert {e["pipelineName"] for e in streamed} == {NAME}

        async def say(answer: str) -> list[dict[str, Any]]:
            events = await _send(client, answer, n=next(n), context_id=ctx, task_id=task)
            streamed.extend(_streamed(events))
            return events

        picked = await say("方案 2")
        data, text = _question(picked)
        assert set(data) == CONFIRMATION_KEYS and data["kind"] == "deployment_confirmation"
        artifacts = [e["artifactUpdate"]["artifact"] for e in picked if "artifactUpdate" in e]
        assert len(artifacts) == 1
        assert data["template_url"] == artifacts[0]["metadata"]["iac_code"]["artifact"]["url"]
        assert data["template_url"].startswith(server.url.rstrip("/") + "/iac-code/artifacts/")
        assert data["template_url"] in text
        async with aiohttp.ClientSession() as http, http.get(data["template_url"], headers=A2A_HEADERS) as reply:
            assert reply.status == 200 and "ROSTemplateFormatVersion" in await reply.text()

        adjusted, _ = _question(await say('{"action":"adjust","parameter_overrides":{"InstanceCount":3}}'))
        assert adjusted["effective_deployment_parameters"]["InstanceCount"] == 3
        back = await say("reselect")
        assert "rollback_completed" in lifecycle([e["eventType"] for e in _streamed(back)])
        assert _question(back)[0]["kind"] == "candidate_selection"
        economy, _ = _question(await say("1"))
        assert economy["template_url"] != data["template_url"] and economy["parameter_overrides"] == {}
        done = _streamed(await say("1"))  # a bare number: option 1's action, confirm
        assert lifecycle([e["eventType"] for e in done])[-3:] == ["step_completed", "pipeline_completed",
                                                                   "pipeline_handoff_ready"]
        assert done[-1]["data"]["outcome"] == "completed"
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        async with aiohttp.ClientSession() as http, http.get(
                server.url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": ctx},
                headers=A2A_HEADERS) as reply:
            assert reply.status == 200
            state = await reply.json()
        assert state["events"] == streamed and state["snapshot"]["pipelineName"] == NAME

        other = await _send(client, REQUEST, n=next(n), iac_code={"pipeline_name": NAME})
        ctx2, task2 = _last(other)["contextId"], _last(other)["taskId"]
        await _send(client, "2", n=next(n), context_id=ctx2, task_id=task2)
        canceled = _streamed(await _send(client, '{"action":"cancel"}', n=next(n), context_id=ctx2, task_id=task2))
        assert lifecycle([e["eventType"] for e in canceled])[-2:] == ["pipeline_canceled", "pipeline_handoff_ready"]
        assert canceled[-1]["data"]["outcome"] == "canceled"
