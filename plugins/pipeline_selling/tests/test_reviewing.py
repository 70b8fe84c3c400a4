"""The ``reviewing`` sub-step (``enable_reviewing``, §2.1) through a running server in ``mode: pipeline``.

With the offline engine (its reviewer stands in for InfraGuard, which is not installed), and with a test engine
that can fix what its reviewer finds (``TemplateFixer``), registered in place of the offline runtime's
distribution, to see the fix rounds and their limit.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.api import Finding, GeneratedTemplate, IacEngineSpec, Understanding, hookimpl
from iac_code.testing import ScriptedRuntime, connect_client, start_server

from pipeline_selling_test_streams import pipeline_events as _pipeline

WEB_DB = "Deploy a web shop with a MySQL database in cn-hangzhou"
ENV = "IAC_CODE_PIPELINE_SELLING_ENABLE_REVIEWING"


async def _send(client: Any, text: str, *, context_id: str = "", task_id: str = "") -> list[dict[str, Any]]:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id, task_id=task_id)
    message.metadata.update({"iac_code": {"candidatePresentation": "rich-v1"}})
    return [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]


async def _run(settings: dict[str, Any], *, extra_plugins: dict[str, object] | None = None,
               prompt: str = WEB_DB) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    async with start_server({"mode": "pipeline", **settings}, extra_plugins=extra_plugins) as server, \
            connect_client(server) as client:
        events = await _send(client, prompt)
    return _pipeline(events), events


def _of(streamed: list[dict[str, Any]], event_type: str, step: str = "") -> list[dict[str, Any]]:
    return sorted((e for e in streamed if e["eventType"] == event_type
                   and (not step or e.get("candidateStep", {}).get("id") == step)),
                  key=lambda e: e.get("candidate", {}).get("index", 0))


async def test_reviewing_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    streamed, _ = await _run({})
    started = _of(streamed, "candidate_started")
    assert len(started) == 3 and all(c["candidate"]["totalSteps"] == 2 for c in started)
    assert not [e for e in streamed if e.get("candidateStep", {}).get("id") == "reviewing"]
    assert all(a["artifact"]["role"] == "final" for a in _of(streamed, "artifact_created", "template_generating"))


async def test_the_offline_reviewer_stands_in_for_infraguard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    streamed, events = await _run({"pipeline-selling-review-step": True})
    assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
    for started in _of(streamed, "candidate_started"):
        candidate = started["candidate"]
        assert candidate["totalSteps"] == 3
        assert [(s["id"], s["index"], s["total"], s["status"]) for s in candidate["steps"]] == [
            ("template_generating", 1, 3, "pending"), ("reviewing", 2, 3, "pending"), ("cost_estimating", 3, 3, "pending")]
    reviews = _of(streamed, "candidate_step_completed", "reviewing")
    assert len(reviews) == 3
    for review in reviews:
        assert review["candidateStep"]["index"] == 2 and review["candidateStep"]["total"] == 3
        data = review["data"]
        assert data["reviewer"] == "iac-code offline reviewer" and data["infraguard"] == "not installed"
        conclusion = data["conclusion"]
        assert conclusion["reviewer"] == "iac-code offline reviewer" and conclusion["infraguard"] == "not installed"
        assert conclusion["status"] == "passed" and conclusion["fix_rounds"] == 0 and conclusion["can_fix"] is False
        assert conclusion["finding_counts"]["high"] == 0 and conclusion["finding_counts"]["medium"] > 0
        assert {"severity": "medium", "rule": "IAC015"}.items() <= conclusion["findings"][0].items()
    for started in _of(streamed, "candidate_step_started", "reviewing"):
        assert started["data"]["infraguard"] == "not installed"
    costs = _of(streamed, "candidate_step_started", "cost_estimating")
    assert all(c["candidateStep"]["index"] == 3 for c in costs)
    # Each step of a candidate in order: the review comes between its template and its cost.
    for index in (1, 2, 3):
        order = [e["candidateStep"]["id"] for e in streamed
                 if e["eventType"] == "candidate_step_started" and e["candidate"]["index"] == index]
        assert order == ["template_generating", "reviewing", "cost_estimating"]
    drafts = _of(streamed, "artifact_created", "template_generating")
    finals = _of(streamed, "artifact_created", "reviewing")
    assert all("role" not in d["artifact"] for d in drafts)
    assert [f["artifact"]["role"] for f in finals] == ["final"] * 3
    for draft, final in zip(drafts, finals, strict=True):
        assert final["artifact"]["supersedesKey"] == draft["artifact"]["dedupeKey"]
        assert final["artifact"]["content"] == draft["artifact"]["content"]  # nothing to fix
        assert final["artifact"]["dedupeKey"] != draft["artifact"]["dedupeKey"]
    last = [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]
    assert last["metadata"]["iac_code"]["pipeline"]["data"]["kind"] == "candidate_selection"


@pytest.mark.parametrize(("config", "env", "expected"), [
    (False, "yes", 3), (False, " TRUE ", 3), (False, "1", 3),
    (True, "no", 2), (True, "0", 2), (True, "False", 2),
    (True, "maybe", 3), (False, "maybe", 2), (True, "", 3),
])
async def test_the_environment_wins_over_the_config_when_it_says_yes_or_no(
        config: bool, env: str, expected: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, env)
    streamed, _ = await _run({"pipeline-selling-review-step": config})
    assert {c["candidate"]["totalSteps"] for c in _of(streamed, "candidate_started")} == {expected}


async def test_enable_reviewing_is_fixed_when_the_run_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that started with reviewing keeps it after the setting changed (here: across its clarification)."""
    monkeypatch.setenv(ENV, "yes")
    async with start_server({"mode": "pipeline"}) as server, connect_client(server) as client:
        first = await _send(client, "Deploy my app on Alibaba Cloud")
        question = [e["statusUpdate"] for e in first if "statusUpdate" in e][-1]
        assert question["metadata"]["iac_code"]["pipeline"]["data"]["kind"] == "ask_user_question"
        monkeypatch.setenv(ENV, "no")
        second = await _send(client, "1", context_id=question["contextId"], task_id=question["taskId"])
        streamed = _pipeline(second)
        assert {c["candidate"]["totalSteps"] for c in _of(streamed, "candidate_started")} == {3}
        assert len(_of(streamed, "candidate_step_completed", "reviewing")) >= 2
        fresh = _pipeline(await _send(client, WEB_DB))  # a new context: a fresh run, reviewing now off
        assert {c["candidate"]["totalSteps"] for c in _of(fresh, "candidate_started")} == {2}


class FixingEngine:
    """Writes templates with SSH open to the world; its reviewer reports that as high severity and its fixer
    closes it, except in serverless templates, where every fix leaves it open (the fix rounds run out)."""

    name = "fixing"

    def __init__(self) -> None:
        self.fix_calls: list[int] = []

    def understand(self, prompt: str, language: str = "en") -> Understanding:
        return Understanding(is_infra_intent=True, category="generation", confidence="high", region="cn-hangzhou",
                             resources=({"type": "ALIYUN::ECS::Instance", "count": 1},
                                        {"type": "ALIYUN::RDS::DBInstance", "count": 1}), summary=prompt[:80])

    def generate(self, prompt: str, language: str = "en") -> GeneratedTemplate:
        resources: list[dict[str, Any]]
        if "Function Compute" in prompt:
            resources = [{"name": "Function", "type": "ALIYUN::FC::Function", "properties": {}}]
        else:
            zones = ["cn-hangzhou-h", "cn-hangzhou-i"] if "two vSwitches" in prompt else ["cn-hangzhou-h"]
            resources = [{"name": f"VSwitch{i}", "type": "ALIYUN::ECS::VSwitch", "properties": {"ZoneId": z}}
                         for i, z in enumerate(zones, start=1)]
            resources.append({"name": "Web", "type": "ALIYUN::ECS::Instance", "properties": {}})
            if "SLB" in prompt:
                resources.append({"name": "Slb", "type": "ALIYUN::SLB::LoadBalancer", "properties": {}})
        resources.append({"name": "Ssh", "type": "ALIYUN::ECS::SecurityGroupIngress",
                          "properties": {"SourceCidrIp": "0.0.0.0/0", "PortRange": "22/22"}})
        return self._template(resources)

    @staticmethod
    def _template(resources: list[dict[str, Any]]) -> GeneratedTemplate:
        body = {"ROSTemplateFormatVersion": "2015-09-01",
                "Resources": {r["name"]: {"Type": r["type"], "Properties": r["properties"]} for r in resources}}
        return GeneratedTemplate(text=json.dumps(body, indent=2), filename="template.json",
                                 media_type="application/json", resources=tuple(resources))

    def review(self, template: str, language: str = "en") -> list[Finding]:
        findings = [Finding("medium", "IAC015", "no tags", "Web")]
        if "0.0.0.0/0" in template:
            findings.insert(0, Finding("high", "IAC001", "SSH open to the world", "Ssh"))
        return findings

    def fix(self, template: str, findings: list[Finding], language: str = "en") -> GeneratedTemplate | None:
        body = json.loads(template)
        resources = [{"name": n, "type": r["Type"], "properties": r["Properties"]} for n, r in body["Resources"].items()]
        self.fix_calls.append(len(self.fix_calls))
        ssh = next(r for r in resources if r["name"] == "Ssh")
        if any(r["type"].startswith("ALIYUN::FC") for r in resources):
            ssh["properties"]["Description"] = f"attempt {len(self.fix_calls)}"  # changed, still open
        else:
            ssh["properties"]["SourceCidrIp"] = "10.0.0.0/8"
        return self._template(resources)


class FixingEnginePlugin:
    def __init__(self) -> None:
        self.engine = FixingEngine()

    @hookimpl
    def iac_code_iac_engines(self) -> list[IacEngineSpec]:
        return [IacEngineSpec(name="fixing", create=lambda context: self.engine)]


async def test_fix_rounds_until_no_error_remains_at_most_five(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    chat = ScriptedRuntime()
    engine = FixingEnginePlugin()
    settings = {"mode": "pipeline", "pipeline-selling-review-step": True, "disabled-plugins": ["runtime-offline"],
                **chat.settings}
    async with start_server(settings, extra_plugins={"chat": chat, "engine": engine}) as server, \
            connect_client(server) as client:
        events = await _send(client, WEB_DB)
        streamed = _pipeline(events)
        last = [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]
        chosen = _pipeline(await _send(client, "1", context_id=last["contextId"], task_id=last["taskId"]))
    warning = next(e for e in chosen if e["eventType"] == "pipeline_warning")["data"]["artifact"]
    reviews = {r["candidate"]["index"]: r["data"]["conclusion"] for r in _of(streamed, "candidate_step_completed",
                                                                              "reviewing")}
    assert reviews[1]["reviewer"] == "iac-code fixing reviewer"
    for index in (1, 2):  # fixed in one round
        assert (reviews[index]["status"], reviews[index]["fix_rounds"], reviews[index]["fixed"]) == ("passed", 1, True)
        assert reviews[index]["finding_counts"]["high"] == 0
    serverless = reviews[3]  # every round leaves it open: five rounds, then the findings are reported
    assert (serverless["status"], serverless["fix_rounds"], serverless["passed"]) == ("findings_remain", 5, False)
    assert serverless["findings"][0] == {"severity": "high", "rule": "IAC001", "message": "SSH open to the world",
                                         "resource": "Ssh"}
    assert len(engine.engine.fix_calls) == 7
    finals = {a["candidate"]["index"]: a["artifact"] for a in _of(streamed, "artifact_created", "reviewing")}
    drafts = {a["candidate"]["index"]: a["artifact"] for a in _of(streamed, "artifact_created", "template_generating")}
    assert "10.0.0.0/8" in finals[1]["content"] and "0.0.0.0/0" in drafts[1]["content"]
    assert finals[1]["role"] == "final" and finals[1]["supersedesKey"] == drafts[1]["dedupeKey"]
    assert warning["sha256"] == finals[1]["contentSha256"] and "/artifacts/" in warning["url"]  # the reviewed one
    assert "attempt " in finals[3]["content"] and "0.0.0.0/0" in finals[3]["content"]  # the last fix, still open
    stored = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert len(stored) == 6  # three drafts and three fixed templates, each stored as an artifact
    fixed_texts = [p["text"] for a in stored for p in a["parts"] if "text" in p and "10.0.0.0/8" in p["text"]]
    assert len(fixed_texts) == 2
    costs = {c["candidate"]["index"]: c for c in _of(streamed, "candidate_step_completed", "cost_estimating")}
    assert set(costs) == {1, 2, 3}  # findings are reported; the candidates are still priced and offered
    assert re.match(r"CNY [0-9,.]+ / month", costs[1]["data"]["conclusion"]["total_monthly_cost"])
