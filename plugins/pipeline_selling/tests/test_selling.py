"""The selling pipeline driven turn by turn, as the kernel drives it, with a tiny deterministic stand-in IaC engine and chat runtime, and a driver that plays turns like the kernel does."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from iac_code.api import (
    GeneratedTemplate,
    PipelineServices,
    Progress,
    TextDelta,
    ToolCompleted,
    TurnRequest,
    Understanding,
)
from iac_code_pipeline_selling.journal import JournalStore
from iac_code_pipeline_selling.pricing import PriceTable
from iac_code_pipeline_selling.selling import SellingPipeline
from iac_code_pipeline_selling.state_route import state_body
from iac_code_pipeline_selling.runner import lifecycle


class StandInEngine:
    """Reads a handful of keywords; writes resources for the phrases the candidates' prompts use."""

    name = "stand-in"

    def understand(self, prompt: str, language: str = "en") -> Understanding:
        low = prompt.lower()
        if not any(w in low for w in ("deploy", "create", "website", "web", "database", "ecs", "部署", "网站")):
            return Understanding(is_infra_intent=False, category="chat", confidence="high")
        other = "aws" if "aws" in low else ""
        if low.strip() in ("deploy my app", "部署我的应用"):
            return Understanding(is_infra_intent=True, category="generation", confidence="low")
        resources: list[dict[str, Any]] = [{"type": "ALIYUN::ECS::Instance", "count": 1}]
        if "mysql" in low or "database" in low or "数据库" in low:
            resources.append({"type": "ALIYUN::RDS::DBInstance", "count": 1})
        return Understanding(is_infra_intent=True, category="generation", confidence="high", resources=tuple(resources),
                             summary=prompt[:80], other_cloud=other, region="cn-hangzhou")

    def generate(self, prompt: str, language: str = "en") -> GeneratedTemplate:
        resources: list[dict[str, Any]] = []
        if "Function Compute" in prompt:
            resources += [{"name": "Service", "type": "ALIYUN::FC::Service", "properties": {}},
                          {"name": "Function", "type": "ALIYUN::FC::Function", "properties": {}},
                          {"name": "Group", "type": "ALIYUN::ApiGateway::Group", "properties": {}},
                          {"name": "Api", "type": "ALIYUN::ApiGateway::Api", "properties": {}},
                          {"name": "Bucket", "type": "ALIYUN::OSS::Bucket", "properties": {}}]
        else:
            resources.append({"name": "Vpc", "type": "ALIYUN::ECS::VPC", "properties": {}})
            zones = ["cn-hangzhou-h", "cn-hangzhou-i"] if "two vSwitches" in prompt else ["cn-hangzhou-h"]
            resources += [{"name": f"VSwitch{i + 1}", "type": "ALIYUN::ECS::VSwitch", "properties": {"ZoneId": z}}
                          for i, z in enumerate(zones)]
            count = int(re.search(r"(\d+) ECS", prompt)[1])  # type: ignore[index]
            resources.append({"name": "Servers", "type": "ALIYUN::ECS::InstanceGroup", "properties": {"MaxAmount": count}})
            if "SLB" in prompt:
                resources.append({"name": "Slb", "type": "ALIYUN::SLB::LoadBalancer", "properties": {}})
            if "RDS" in prompt:
                category = "HighAvailability" if "HighAvailability" in prompt else "Basic"
                resources.append({"name": "Db", "type": "ALIYUN::RDS::DBInstance", "properties": {"Category": category}})
        body = {"ROSTemplateFormatVersion": "2015-09-01",
                "Resources": {r["name"]: {"Type": r["type"], "Properties": r["properties"]} for r in resources}}
        return GeneratedTemplate(text=json.dumps(body, indent=2), filename="template.json", media_type="application/json",
                                 resources=tuple(resources))

    def review(self, template: str, language: str = "en") -> list[Any]:
        return []


class EchoChat:
    """The chat runtime after the handoff: says what it got."""

    name = "echo"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[Any]:
        self.prompts.append(turn.prompt)
        yield TextDelta(f"chat: {turn.prompt}")


class Driver:
    """Plays turns of one context against a pipeline, keeping the session the way the kernel does (JSON)."""

    def __init__(self, pipeline: SellingPipeline, context_id: str = "ctx-1") -> None:
        self.pipeline = pipeline
        self.context_id = context_id
        self.session: dict[str, Any] = {}
        self.turns = 0

    async def turn(self, prompt: str, *, language: str = "en", metadata: dict[str, Any] | None = None,
                   run_mode: str = "pipeline") -> list[Any]:
        self.turns += 1
        session = json.loads(json.dumps(self.session))
        turn = TurnRequest(context_id=self.context_id, task_id=f"task-{self.turns}", prompt=prompt, cwd="/tmp",
                           language=language, session=session, metadata=metadata or {}, run_mode=run_mode,
                           pipeline_name="selling")
        events = [e async for e in self.pipeline.run_turn(turn)]
        self.session = json.loads(json.dumps(session))
        return events


def pipeline_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e.metadata["pipeline"] for e in events if isinstance(e, Progress)]


def types(events: list[Any]) -> list[str]:
    return lifecycle([e["eventType"] for e in pipeline_events(events)])


def make_pipeline(state_dir: Path | None, engine: Any = None, chat: Any = None) -> SellingPipeline:
    services = PipelineServices(context=SimpleNamespace(config=SimpleNamespace()), chat=chat or EchoChat(),
                                engine=engine or StandInEngine(), state_dir=state_dir)
    return SellingPipeline(services, JournalStore(state_dir))


@pytest.fixture
def pipeline(tmp_path: Path) -> SellingPipeline:
    return make_pipeline(tmp_path)


@pytest.fixture
def driver(pipeline: SellingPipeline) -> Driver:
    return Driver(pipeline)


# --------------------------------------------------------------------------- the tests

WEB_DB = "Deploy a web shop with a MySQL database"
PLAIN_KEYS = {"name", "summary", "candidate_index"}
RICH_KEYS = PLAIN_KEYS | {"architecture_diagram", "total_monthly_cost", "cost_items"}
FULL_FIRST_TURN = (
    ["pipeline_started", "step_started", "step_completed", "step_started", "step_completed", "step_started"]
)


def check_envelopes(events: list[dict[str, Any]], first_sequence: int = 1) -> None:
    for offset, event in enumerate(events):
        assert event["schemaVersion"] == "1.0"
        assert event["extensionUri"] == "urn:iac-code:a2a:pipeline-events:v1"
        assert re.fullmatch(r"evt-[0-9a-f]{32}", event["eventId"])
        assert event["sequence"] == first_sequence + offset
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", event["createdAt"])
        assert event["scope"] in ("pipeline", "step", "candidate", "candidate_step", "stack", "interrupt")
        assert event["pipelineName"] == "selling" and event["contextId"] == "ctx-1"
        assert event["status"] in ("working", "input_required", "completed", "failed", "canceled")
        assert all("_" not in key for key in event["data"]), event["data"]
        if "step" in event:
            step = event["step"]
            assert step["runId"] == f"step-{step['id']}-{step['attempt']}"
        if "candidate" in event:
            cand = event["candidate"]
            assert cand["runId"] == f"candidate-evaluate_candidate-{cand['index']}-{cand['attempt']}"
        if "candidateStep" in event:
            cstep = event["candidateStep"]
            assert cstep["runId"] == f"{event['candidate']['runId']}-{cstep['id']}-{cstep['attempt']}"
    assert len({e["eventId"] for e in events}) == len(events)


async def test_full_run_steps_events_and_handoff(driver: Driver) -> None:
    first = await driver.turn(WEB_DB)
    evs = pipeline_events(first)
    check_envelopes(evs)
    kinds = types(first)
    assert kinds[:6] == FULL_FIRST_TURN
    assert [e["step"]["id"] for e in evs if e["eventType"] == "step_started"] == [
        "intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select"]
    assert kinds[-2:] == ["step_started", "input_required"]
    assert kinds.count("candidate_started") == kinds.count("candidate_completed") == 3
    assert kinds.count("artifact_created") == 3
    for index in (1, 2, 3):  # each candidate's own events come in the sub-pipeline's order
        mine = [e["eventType"] + ":" + e["data"].get("stepId", "") for e in lifecycle(evs)
                if e.get("candidate", {}).get("index") == index]
        assert mine == ["candidate_started:", "candidate_step_started:template_generating",
                        "artifact_created:template_generating", "candidate_step_completed:template_generating",
                        "candidate_step_started:cost_estimating", "candidate_step_completed:cost_estimating",
                        "candidate_completed:"]
    started = next(e for e in evs if e["eventType"] == "candidate_started")
    assert [s["id"] for s in started["candidate"]["steps"]] == ["template_generating", "cost_estimating"]
    tools = [e for e in first if isinstance(e, ToolCompleted)]
    assert len(tools) == 3 and all(t.artifact is not None for t in tools)
    final = [e for e in first if isinstance(e, Progress) and e.final]
    assert len(final) == 1 and final[0] is [e for e in first if isinstance(e, Progress)][-1]
    question = final[0].metadata["pipeline"]
    assert question["status"] == "input_required" and question["data"]["kind"] == "candidate_selection"
    assert set(question["data"]) == {"kind", "stepId", "prompt", "options"}
    assert [set(o) for o in question["data"]["options"]] == [PLAIN_KEYS] * 3
    names = [o["name"] for o in question["data"]["options"]]
    assert names == ["Economy single zone", "High availability across two zones", "Serverless"]
    said = "".join(e.text for e in first if isinstance(e, TextDelta))
    assert "candidate 2" in said and "Illustrative sample" in said and all(n in said for n in names)

    second = await driver.turn("candidate 2")
    evs2 = pipeline_events(second)
    check_envelopes(evs2, first_sequence=evs[-1]["sequence"] + 1)
    assert types(second) == ["input_received", "step_completed", "step_started", "pipeline_warning", "step_completed",
                             "pipeline_completed", "pipeline_handoff_ready"]
    received = evs2[0]["data"]
    assert received["selectedCandidateIndex"] == 2 and received["selectedCandidateName"] == names[1]
    warning = lifecycle(evs2)[3]["data"]
    assert warning["code"] == "no_deployer_configured"
    assert warning["artifact"]["name"] == "candidate-2-high-availability-across-two-zones.json"
    assert warning["artifact"]["name"] in warning["message"]
    assert lifecycle(evs2)[-1]["data"] == {"action": "switch_to_normal", "targetMode": "normal", "outcome": "completed",
                                "summary": warning["message"]}
    third = await driver.turn("make the servers bigger")
    assert third == [TextDelta("chat: make the servers bigger")]


async def test_candidates_really_differ_and_ha_has_two_zones(driver: Driver) -> None:
    evs = pipeline_events(await driver.turn(WEB_DB, metadata={"candidatePresentation": "rich-v1"}))
    options = evs[-1]["data"]["options"]
    assert [set(o) for o in options] == [RICH_KEYS] * 3
    economy, ha, serverless = options
    assert economy["architecture_diagram"].startswith("flowchart LR\n")
    assert "Zone B" in ha["architecture_diagram"] and "SLB" in ha["architecture_diagram"]
    assert "standby" in ha["architecture_diagram"]
    assert "Function Compute" in serverless["architecture_diagram"]
    costs = [float(o["total_monthly_cost"].split()[1].replace(",", "")) for o in options]
    assert costs[0] < costs[1] and len(set(costs)) == 3
    for option in options:
        assert all(set(i) <= {"name", "spec", "monthly_cost"} and {"name", "monthly_cost"} <= set(i)
                   for i in option["cost_items"])
    planned = next(e for e in evs if e["eventType"] == "step_completed" and e["data"]["stepId"] == "architecture_planning")
    assert planned["data"]["conclusion"]["candidates"][1]["hard_constraints"]["min_zones"] == 2


async def test_rich_metadata_under_iac_code_key(driver: Driver) -> None:
    evs = pipeline_events(await driver.turn(WEB_DB, metadata={"iac_code": {"candidatePresentation": "rich-v1"}}))
    assert [set(o) for o in evs[-1]["data"]["options"]] == [RICH_KEYS] * 3


@pytest.mark.parametrize("answer", [
    '{"selected_candidate_name": "High availability across two zones", "selected_candidate_index": 2}',
    '{"selected_candidate_name": "High availability across two zones"}',
    "方案 2", "candidate 2", "plan #2", "选 2", "2", "Candidate 2", "High availability across two zones",
    "high availability across two zones",
])
async def test_every_selection_answer_form(driver: Driver, answer: str) -> None:
    await driver.turn(WEB_DB)
    evs = pipeline_events(await driver.turn(answer))
    assert evs[0]["eventType"] == "input_received"
    assert evs[0]["data"]["selectedCandidateIndex"] == 2
    assert evs[0]["data"]["selectedEvaluatedCandidateIndex"] == 1
    assert evs[-1]["eventType"] == "pipeline_handoff_ready"


@pytest.mark.parametrize("answer", ["方案 9", "candidate 0", '{"selected_candidate_index": 7}', "the cheap one", "{oops"])
async def test_bad_selection_asks_again_and_changes_nothing(driver: Driver, answer: str) -> None:
    first = pipeline_events(await driver.turn(WEB_DB, language="zh"))
    before = json.loads(json.dumps(driver.session))
    again = await driver.turn(answer, language="zh")
    evs = pipeline_events(again)
    assert lifecycle([e["eventType"] for e in evs]) == ["input_required"]
    assert evs[0]["sequence"] == first[-1]["sequence"] + 1
    [question] = lifecycle(evs)
    assert question["data"]["options"] == first[-1]["data"]["options"]
    assert question["data"]["prompt"] != first[-1]["data"]["prompt"]
    assert "请选择" in question["data"]["prompt"]
    assert isinstance(again[-1], Progress) and again[-1].final
    after = driver.session["pipeline"]
    for key in ("candidates", "steps", "phase", "pipelineRunId"):
        assert after[key] == before["pipeline"][key], key
    done = pipeline_events(await driver.turn("方案 1", language="zh"))
    assert done[0]["data"]["selectedCandidateIndex"] == 1


async def test_early_exit_hands_off_to_chat(driver: Driver) -> None:
    events = await driver.turn("hello, how are you?")
    assert types(events) == ["pipeline_started", "step_started", "step_completed", "pipeline_completed",
                             "pipeline_handoff_ready"]
    evs = pipeline_events(events)
    assert evs[2]["data"]["conclusion"]["is_infra_intent"] is False
    assert evs[-1]["data"]["outcome"] == "early_exit" and evs[-1]["data"]["targetMode"] == "normal"
    assert events[-1] == TextDelta("chat: hello, how are you?")
    assert await driver.turn("and now?") == [TextDelta("chat: and now?")]


async def test_normal_run_mode_goes_to_chat(driver: Driver) -> None:
    assert await driver.turn(WEB_DB, run_mode="normal") == [TextDelta(f"chat: {WEB_DB}")]
    assert "pipeline" not in driver.session


async def test_vague_request_clarified_by_number(driver: Driver) -> None:
    asked = await driver.turn("deploy my app")
    evs = pipeline_events(asked)
    assert types(asked) == ["pipeline_started", "step_started", "input_required"]
    question = evs[-1]
    data = question["data"]
    assert data["kind"] == "ask_user_question" and data["inputId"] == f"ask-{data['toolUseId']}"
    assert data["prompt"] == data["question"] and data["allowFreeText"] is True
    assert set(data) == {"kind", "inputId", "toolUseId", "question", "prompt", "options", "allowFreeText", "freeTextPrompt"}
    assert question["input"] == {**data, "required": True}
    assert [o["id"] for o in data["options"]] == ["web_app", "http_api", "static_site"]
    assert "1. " in "".join(e.text for e in asked if isinstance(e, TextDelta))
    answered = await driver.turn("1")
    evs2 = pipeline_events(answered)
    received = evs2[0]
    assert received["eventType"] == "input_received"
    assert received["data"] == {
        "kind": "ask_user_question", "inputId": data["inputId"], "toolUseId": data["toolUseId"], "answerTextLength": 1,
        "selectedId": "web_app", "selectedLabel": data["options"][0]["label"], "freeText": "", "freeTextLength": 0,
        "question": data["question"], "options": data["options"], "allowFreeText": True}
    assert lifecycle([e["eventType"] for e in evs2])[1:3] == ["step_completed", "step_started"]
    assert evs2[-1]["data"]["kind"] == "candidate_selection"
    check_envelopes(pipeline_events(asked) + evs2)


async def test_other_cloud_clarified_by_free_text(driver: Driver) -> None:
    asked = pipeline_events(await driver.turn("Deploy my AWS web stack"))
    assert asked[-1]["data"]["kind"] == "ask_user_question" and "AWS" in asked[-1]["data"]["question"]
    answer = "  a website with a MySQL database on ECS  "
    evs = pipeline_events(await driver.turn(answer))
    assert evs[0]["data"]["freeText"] == answer and evs[0]["data"]["selectedId"] == ""
    assert evs[0]["data"]["freeTextLength"] == len(answer)
    assert evs[-1]["data"]["kind"] == "candidate_selection"


async def test_other_cloud_cancel_by_label(driver: Driver) -> None:
    asked = pipeline_events(await driver.turn("Deploy my AWS web stack"))
    label = asked[-1]["data"]["options"][1]["label"]
    evs = pipeline_events(await driver.turn(label))
    assert lifecycle([e["eventType"] for e in evs]) == ["input_received", "pipeline_canceled", "pipeline_handoff_ready"]
    assert evs[-1]["status"] == "canceled" and evs[-1]["data"]["outcome"] == "canceled"


async def test_journal_recovers_the_sequence_after_a_restart(tmp_path: Path) -> None:
    driver = Driver(make_pipeline(tmp_path))
    first = pipeline_events(await driver.turn(WEB_DB))
    journal_file = next((tmp_path / "pipeline").glob("*.jsonl"))
    assert oct(journal_file.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "pipeline").stat().st_mode & 0o777) == "0o700"
    lines = [json.loads(line) for line in journal_file.read_text().splitlines()]
    assert lines == first
    with journal_file.open("ab") as handle:  # a torn append from a kill -9
        handle.write(b'{"schemaVersion":"1.0","seq')
    restarted = Driver(make_pipeline(tmp_path))
    restarted.session = driver.session
    restarted.turns = driver.turns
    second = pipeline_events(await restarted.turn("plan #1"))
    assert second[0]["sequence"] == first[-1]["sequence"] + 1
    check_envelopes(first + second)
    assert [json.loads(line) for line in journal_file.read_text().splitlines()] == first + second


async def test_state_file_resumes_a_run_the_session_lost(tmp_path: Path) -> None:
    driver = Driver(make_pipeline(tmp_path))
    first = pipeline_events(await driver.turn(WEB_DB))
    fresh = Driver(make_pipeline(tmp_path))  # the kernel lost the session: the state file still knows the run
    fresh.turns = driver.turns
    evs = pipeline_events(await fresh.turn("选 3"))
    assert evs[0]["eventType"] == "input_received" and evs[0]["sequence"] == first[-1]["sequence"] + 1
    assert evs[0]["pipelineRunId"] == first[0]["pipelineRunId"]


async def test_memory_only_without_state_dir() -> None:
    driver = Driver(make_pipeline(None))
    evs = pipeline_events(await driver.turn(WEB_DB)) + pipeline_events(await driver.turn("plan 2"))
    check_envelopes(evs)
    assert driver.pipeline.store.journal("ctx-1").events == evs


async def test_hard_constraint_violation_fails_the_candidate(tmp_path: Path) -> None:
    class OneZoneEngine(StandInEngine):
        def generate(self, prompt: str, language: str = "en") -> GeneratedTemplate:
            return super().generate(prompt.replace("two vSwitches", "vSwitches"), language)

    driver = Driver(make_pipeline(tmp_path, engine=OneZoneEngine()))
    events = await driver.turn(WEB_DB)
    evs = pipeline_events(events)
    failed = [e for e in evs if e["eventType"] == "candidate_step_failed"]
    assert len(failed) == 1 and failed[0]["candidate"]["index"] == 2 and failed[0]["status"] == "failed"
    assert "2 zone" in failed[0]["data"]["violations"][0]
    assert "candidate_failed" in types(events)
    assert [o["candidate_index"] for o in evs[-1]["data"]["options"]] == [1, 3]
    bad = pipeline_events(await driver.turn("candidate 2"))
    assert lifecycle([e["eventType"] for e in bad]) == ["input_required"]


def test_unknown_resource_is_reported_not_priced_zero() -> None:
    table = PriceTable.load()
    cost = table.estimate([{"name": "Mystery", "type": "ALIYUN::NEW::Thing"},
                           {"name": "Web", "type": "ALIYUN::ECS::Instance"}])
    mystery = cost["items"][0]
    assert mystery["priced"] is False and "missing from the price table" in mystery["monthly_cost"]
    assert cost["unpriced_types"] == ["ALIYUN::NEW::Thing"]
    assert cost["total"] == 180.0 and "excluding 1 unpriced" in cost["total_monthly_cost"]
    assert "not official" in cost["disclaimer"] and table.date in cost["disclaimer"] and table.source in cost["disclaimer"]


async def test_cost_step_names_the_price_source(driver: Driver) -> None:
    evs = pipeline_events(await driver.turn(WEB_DB))
    costs = [e["data"]["conclusion"] for e in evs
             if e["eventType"] == "candidate_step_completed" and e["data"]["stepId"] == "cost_estimating"]
    assert len(costs) == 3
    assert all(c["price_source"] and c["price_date"] and "not official" in c["disclaimer"] for c in costs)


async def test_state_body_replays_the_journal(driver: Driver) -> None:
    evs = pipeline_events(await driver.turn(WEB_DB)) + pipeline_events(await driver.turn("2"))
    journal = driver.pipeline.store.journal("ctx-1")
    status, body = state_body(journal, {})
    assert status == 200 and body["events"] == evs
    snap = body["snapshot"]
    assert snap["schemaVersion"] == "1.2" and "seenEventIds" not in snap
    assert snap["lastSequence"] == evs[-1]["sequence"] and snap["pendingInput"] is None
    assert [c["status"] for c in snap["candidates"]] == ["completed"] * 3
    assert len(snap["display"]["toolResults"]) == 3
    assert "toolResults" not in state_body(journal, {"lean": " TRUE "})[1]["snapshot"]["display"]
    assert "toolResults" in state_body(journal, {"lean": "maybe"})[1]["snapshot"]["display"]
    status, body = state_body(journal, {"includeSnapshot": "false", "afterSequence": "5"})
    assert status == 200 and "snapshot" not in body and body["events"] == evs[5:]
    assert body["fromSequence"] == 5 and body["lastSequence"] == evs[-1]["sequence"]
    assert state_body(journal, {"includeSnapshot": "0"}) == (400, {"error": "afterSequence must be a non-negative integer"})
    assert state_body(journal, {"afterSequence": "-1"})[0] == 400
    assert state_body(journal, {"afterSequence": "1" * 21})[0] == 400
    assert "snapshot" in state_body(journal, {"includeSnapshot": "nope"})[1]


# --------------------------------------------------------------------------- with the offline engine

def offline_engine() -> Any:
    """The offline runtime plugin's engine, found through its entry point like the kernel finds it."""
    from importlib.metadata import entry_points

    plugin = next(e for e in entry_points(group="iac_code") if e.name == "runtime-offline").load()
    return plugin.iac_code_iac_engines()[0].create(None)


@pytest.mark.parametrize("prompt", ["Deploy a web shop with a MySQL database in cn-hangzhou", "部署一个带数据库的网站"])
async def test_full_run_on_the_offline_engine(tmp_path: Path, prompt: str) -> None:
    driver = Driver(make_pipeline(tmp_path, engine=offline_engine()))
    first = await driver.turn(prompt, metadata={"candidatePresentation": "rich-v1"})
    evs = pipeline_events(first)
    check_envelopes(evs)
    options = evs[-1]["data"]["options"]
    assert [set(o) for o in options] == [RICH_KEYS] * 3
    assert "candidate_failed" not in types(first)
    ha = options[1]
    assert any("Database" == i["name"] for i in ha["cost_items"]) and "SLB" in ha["architecture_diagram"]
    second = pipeline_events(await driver.turn("方案 2"))
    check_envelopes(evs + second)
    assert second[-1]["eventType"] == "pipeline_handoff_ready" and second[-1]["data"]["outcome"] == "completed"


async def test_vague_request_on_the_offline_engine_asks(tmp_path: Path) -> None:
    driver = Driver(make_pipeline(tmp_path, engine=offline_engine()))
    evs = pipeline_events(await driver.turn("deploy my app"))
    assert evs[-1]["data"]["kind"] == "ask_user_question"
    evs = pipeline_events(await driver.turn("1"))
    assert evs[0]["data"]["selectedId"] == "web_app" and evs[-1]["data"]["kind"] == "candidate_selection"


def test_journals_in_memory_are_bounded_and_read_back(tmp_path: Path) -> None:
    """Memory holds a bounded number of journals; an evicted context's events come back from disk, in order."""
    import asyncio as _asyncio

    from iac_code_pipeline_selling.journal import JournalStore

    store = JournalStore(tmp_path, limit=3)

    async def fill() -> None:
        for n in range(8):
            for _ in range(2):
                await store.publish(f"ctx-{n}", lambda seq, n=n: {"sequence": seq, "taskId": f"t-{n}"}, lambda e: None)

    _asyncio.run(fill())
    assert len(store._journals) <= 3
    again = store.journal("ctx-0")
    assert [e["sequence"] for e in again.events] == [1, 2]
    assert len(store._journals) <= 3
