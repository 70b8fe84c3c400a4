"""The selling pipelines with ``agent-runtime: llm``: the model (a scripted OpenAI-compatible server on 127.0.0.1,
:mod:`tests.openai_stub`) writes the intent and the candidates' summaries; the offline engine still writes the
templates and the price table prices them. a2a-sdk's client over JSON-RPC reads the events by the digest's names.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, start_server
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, usage_chunk

WEB_DB = "Deploy a web shop with a MySQL database"
INTENT = {"is_infra_intent": True, "category": "generation", "confidence": "high", "region": "cn-shanghai",
          "other_cloud": "", "summary": "The user wants an online shop backed by MySQL, in Shanghai."}
SUMMARIES = ["One zone, cheapest.", "Two zones behind a load balancer, survives a zone outage.",
             "Functions and a bucket, pay per request."]


def _settings(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    return {"mode": "pipeline", "agent-runtime": "llm", "llm-base-url": stub.base_url,
            "llm-api-key": "sk-test-key-000", "llm-retry-backoff": 0.01, "llm-timeout": 5, **extra}


def _pipeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for event in events:
        section = event.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})
        for pipeline in [section["pipeline"]] if "pipeline" in section else section.get("pipelineBatch", {}).get(
                "events", []):
            if pipeline not in found:
                found.append(pipeline)
    return found


async def _send(client: Any, text: str, *, context_id: str = "", task_id: str = "",
                pipeline: str = "") -> list[dict[str, Any]]:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id, task_id=task_id)
    section: dict[str, Any] = {"candidatePresentation": "rich-v1"}
    if pipeline:
        section["pipeline_name"] = pipeline
    message.metadata.update({"iac_code": section})
    return [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]


def _json_reply(value: Any, tokens: tuple[int, int] = (50, 20)) -> Reply:
    text = json.dumps(value)
    return Reply.stream([text_chunk(text[:10]), text_chunk(text[10:]), finish_chunk("stop"), usage_chunk(*tokens)])


async def test_the_model_writes_the_intent_and_the_summaries() -> None:
    async with OpenAIStub([_json_reply(INTENT), _json_reply({"summaries": SUMMARIES}, (80, 40))]) as stub, \
            start_server(_settings(stub)) as server, connect_client(server) as client:
        events = await _send(client, WEB_DB)
        streamed = _pipeline(events)
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        intent = next(e for e in streamed if e["eventType"] == "step_completed"
                      and e["step"]["id"] == "intent_parsing")["data"]["conclusion"]
        assert intent["summary"] == INTENT["summary"] and intent["region"] == "cn-shanghai"
        assert {r["type"] for r in intent["resources"]} >= {"ALIYUN::RDS::DBInstance"}  # the engine's reading
        usage = [e for e in streamed if e["eventType"] == "usage"]
        assert [(u["step"]["id"], u["data"]["inputTokens"], u["data"]["outputTokens"], u["data"]["totalTokens"])
                for u in usage] == [("intent_parsing", 50, 20, 70), ("architecture_planning", 80, 40, 120)]
        assert usage[0]["data"]["model"] == "qwen-plus" and usage[0]["data"]["provider"] == "openai"
        planned = next(e for e in streamed if e["eventType"] == "step_completed"
                       and e["step"]["id"] == "architecture_planning")["data"]["conclusion"]["candidates"]
        assert [c["summary"] for c in planned] == SUMMARIES
        assert "cn-shanghai" in planned[0]["generation_prompt"]  # the model's region reaches the engine's prompt
        options = [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]["metadata"]["iac_code"][
            "pipeline"]["data"]["options"]
        assert [o["summary"] for o in options] == SUMMARIES
        assert all(o["total_monthly_cost"].startswith("CNY") for o in options)  # priced by the price table
        assert len([e for e in streamed if e["eventType"] == "artifact_created"]) == 3  # the engine's templates
        assert not [e for e in streamed if e["eventType"] == "pipeline_warning"]

        assert len(stub.requests) == 2
        first, second = (r.body for r in stub.requests)
        assert "tools" not in first and first["messages"][0]["role"] == "system"
        assert "is_infra_intent" in first["messages"][0]["content"] and WEB_DB in first["messages"][1]["content"]
        asked = json.loads(second["messages"][1]["content"])
        assert asked["request"] == WEB_DB and [c["name"] for c in asked["candidates"]] == [
            "Economy single zone", "High availability across two zones", "Serverless"]
        assert stub.requests[0].headers["Authorization"] == "Bearer sk-test-key-000"


async def test_the_solution_first_pipeline_takes_the_models_summaries_too() -> None:
    async with OpenAIStub([_json_reply(INTENT), _json_reply({"summaries": SUMMARIES})]) as stub, \
            start_server(_settings(stub)) as server, connect_client(server) as client:
        events = await _send(client, WEB_DB, pipeline="selling_solution_first")
        options = [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]["metadata"]["iac_code"][
            "pipeline"]["data"]["options"]
        assert [o["summary"] for o in options] == SUMMARIES


async def test_a_model_that_cannot_answer_leaves_the_engines_reading() -> None:
    async with OpenAIStub([Reply.stream([text_chunk("Sure! You want a shop."), finish_chunk("stop")]),
                           Reply.error(400)]) as stub, \
            start_server(_settings(stub)) as server, connect_client(server) as client:
        events = await _send(client, WEB_DB)
        streamed = _pipeline(events)
        warnings = [e["data"] for e in streamed if e["eventType"] == "pipeline_warning"]
        assert [(w["code"], w["source"]) for w in warnings] == [("model_unavailable", "intent_parsing"),
                                                               ("model_unavailable", "architecture_planning")]
        assert "ValueError" in warnings[0]["message"] and "ProviderError" in warnings[1]["message"]
        assert "sk-test" not in json.dumps(warnings) and stub.base_url not in json.dumps(warnings)
        intent = next(e for e in streamed if e["eventType"] == "step_completed"
                      and e["step"]["id"] == "intent_parsing")["data"]["conclusion"]
        assert intent["summary"].startswith("Infrastructure request: a template")  # the offline engine's words
        options = [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]["metadata"]["iac_code"][
            "pipeline"]["data"]["options"]
        assert len(options) == 3 and options[0]["summary"].startswith("Everything in one zone")
        assert len(stub.requests) == 2  # a 400 is not retried
