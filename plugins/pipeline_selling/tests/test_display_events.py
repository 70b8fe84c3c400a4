"""The pipelines' display and telemetry events (since-0.13 §2.5, §10) and the pending-permissions mirror
(input-and-permissions §2.1), through a real server and a2a-sdk's client: by default (``IAC_CODE_PIPELINE_DISPLAY_EVENTS=0`` turns them off)
the narration (``message_started`` / ``text_delta``) and the engine's tool calls (``tool_started`` / ``tool_result``,
the input as its redacted shape) are journaled and sequenced like every other pipeline event, the state endpoint's
``display.messages`` equal what was streamed, and a deploy's permission question is mirrored into
``metadata.iac_code.pendingPermissions`` while it waits (deployer ``ros`` against ``fake_ros.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, permission_answer_request, start_server

from pipeline_selling_test_streams import last_status, pipeline_events, sender, state_of

PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
KEY_ID = "LTAI5tFakeKeyIdForTests"
SECRET = "fake-secret-5f3c0b1e9d"
DISPLAY = {"message_started", "text_delta", "tool_started", "tool_result", "candidate_detail_shown", "diagram_shown"}
Event = dict[str, Any]

send = sender("display")


@pytest.fixture(autouse=True)
def display_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default configuration: display events on (no ``IAC_CODE_PIPELINE_DISPLAY_EVENTS`` in the environment)."""
    monkeypatch.delenv("IAC_CODE_PIPELINE_DISPLAY_EVENTS", raising=False)


def messages_of(events: list[Event]) -> list[Event]:
    """``display.messages`` as a client rebuilds it from the streamed narration."""
    messages: dict[str, Event] = {}
    for e in events:
        if e["eventType"] == "message_started":
            messages[e["data"]["messageId"]] = {"messageId": e["data"]["messageId"], "role": "assistant",
                                                "round": e["data"]["round"], "text": "", "segments": []}
        elif e["eventType"] == "text_delta":
            entry = messages[e["data"]["messageId"]]
            assert e["data"]["round"] == entry["round"]
            entry["text"] += e["data"]["delta"]
            entry["segments"].append({"type": "text", "text": e["data"]["delta"], "sequence": e["sequence"],
                                      "stepId": e["step"]["id"]})
    return list(messages.values())


def check_tools(events: list[Event], scope: str) -> None:
    started = [e for e in events if e["eventType"] == "tool_started"]
    results = [e for e in events if e["eventType"] == "tool_result"]
    assert started and len(started) == len(results)
    for begin in started:
        assert begin["scope"] == scope and begin["data"]["toolName"] == "generate_template"
        shape = begin["data"]["input"]
        assert shape["tool_name"] == "generate_template" and "fields" in shape
        assert "Deploy" not in json.dumps(shape) and "ECS" not in json.dumps(shape)  # the shape, never the values
        end = next(e for e in results if e["data"]["toolUseId"] == begin["data"]["toolUseId"])
        assert end["sequence"] > begin["sequence"] and end["data"]["isError"] is False
        conclusion = end["data"]["normalizedConclusion"]
        assert conclusion["filename"] == end["data"]["result"]["filename"] and len(conclusion["contentSha256"]) == 64
        if scope == "candidate_step":
            assert begin["candidateStep"]["id"] == end["candidateStep"]["id"] == "template_generating"
        # the template's artifact_created follows the tool's result
        created = [e for e in events if e["eventType"] == "artifact_created"
                   and e["artifact"]["filename"] == conclusion["filename"]]
        assert all(c["sequence"] > end["sequence"] for c in created)


async def test_selling_narrates_shows_its_tool_calls_and_mirrors_the_pending_permission(fake_ros: Any) -> None:
    settings = {"mode": "pipeline", "deployer": "ros", "ros-endpoint": fake_ros.endpoint,
                "ros-access-key-id": KEY_ID, "ros-access-key-secret": SECRET, "ros-poll-interval-seconds": 0.02}
    async with start_server(settings) as server, connect_client(server) as client:
        first = await send(client, PROMPT, n=1, iac_code={"candidatePresentation": "rich-v1"})
        streamed = pipeline_events(first)
        last = last_status(first)
        context_id, task_id = last["contextId"], last["taskId"]
        assert streamed[-1]["eventType"] == "input_required"
        check_tools(streamed, "candidate_step")
        options = streamed[-1]["data"]["options"]
        details = [e for e in streamed if e["eventType"] == "candidate_detail_shown"]
        diagrams = [e for e in streamed if e["eventType"] == "diagram_shown"]
        assert [d["data"]["candidateIndex"] for d in details] == [o["candidate_index"] for o in options]
        assert [d["data"]["totalMonthlyCost"] for d in details] == [o["total_monthly_cost"] for o in options]
        assert [d["data"]["diagram"] for d in diagrams] == [o["architecture_diagram"] for o in options]
        assert all(d["data"]["format"] == "mermaid" and d["step"]["id"] == "confirm_and_select" for d in diagrams)
        # the choice's text is narrated before the question it asks
        narrated = [e for e in streamed if e["eventType"] in ("message_started", "text_delta")]
        assert narrated[0]["eventType"] == "message_started" and narrated[-1]["sequence"] < streamed[-1]["sequence"]
        assert "".join(e["data"]["delta"] for e in narrated[1:]) == last["status"]["message"]["parts"][0]["text"]

        second = await send(client, "方案 2", n=2, context_id=context_id, task_id=task_id)
        streamed += pipeline_events(second)
        paused = last_status(second)
        assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        envelope = paused["metadata"]["iac_code"]["input"]
        assert streamed[-1]["eventType"] == "permission_requested"
        # the pending-permissions mirror: on the pause and on the task while it waits
        assert paused["metadata"]["iac_code"]["pendingPermissions"] == [envelope]
        mirrored = envelope
        assert mirrored["operation"]["action"] == "create" and mirrored["toolName"] == "ros_deploy"
        task = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        assert task["metadata"]["iac_code"]["pendingPermissions"] == [envelope]
        waiting = (await state_of(server.url, context_id))["snapshot"]
        assert waiting["pendingInput"] == streamed[-1]["permission"]

        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=3)
        after = pipeline_events(answered)
        streamed += after
        assert after[0]["eventType"] == "permission_resolved"
        assert [e["eventType"] for e in after if e["eventType"] not in DISPLAY][-2:] == [
            "pipeline_completed", "pipeline_handoff_ready"]
        assert after[-1]["eventType"] == "pipeline_handoff_ready"  # the closing text is narrated before the end
        task = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        assert "pendingPermissions" not in task["metadata"].get("iac_code", {})
        assert all("pendingPermissions" not in r.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})
                   for r in answered)
        assert fake_ros.created == 1

        state = await state_of(server.url, context_id)
        assert state["events"] == streamed  # narration and tool events are journaled like every other event
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        messages = state["snapshot"]["display"]["messages"]
        assert messages == messages_of(streamed) and len(messages) == 3
        assert [m["round"] for m in messages] == [1, 2, 3]  # a round per turn that went on after user input
        assert state["snapshot"]["status"] == "completed" and state["snapshot"]["pendingInput"] is None
        assert SECRET not in json.dumps([streamed, state])


async def test_solution_first_narrates_and_a_clarification_answer_starts_a_new_round() -> None:
    async with start_server({"mode": "pipeline", "pipeline-name": "selling_solution_first"}) as server, \
            connect_client(server) as client:
        first = await send(client, "deploy my app", n=1)
        streamed = pipeline_events(first)
        last = last_status(first)
        context_id, task_id = last["contextId"], last["taskId"]
        assert streamed[-1]["data"]["kind"] == "ask_user_question"
        for n, answer in enumerate(["1", "2", '{"action": "confirm"}'], start=2):
            result = await send(client, answer, n=n, context_id=context_id, task_id=task_id)
            streamed += pipeline_events(result)
        check_tools(streamed, "step")
        details = [e for e in streamed if e["eventType"] == "candidate_detail_shown"]
        assert details and not [e for e in streamed if e["eventType"] == "diagram_shown"]  # plain: no diagrams
        assert streamed[-1]["eventType"] == "pipeline_handoff_ready"
        state = await state_of(server.url, context_id)
        assert state["events"] == streamed
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        messages = state["snapshot"]["display"]["messages"]
        assert messages == messages_of(streamed)
        rounds = [m["round"] for m in messages]
        assert rounds == list(range(1, len(rounds) + 1)) and len(rounds) == 4
        assert all(m["text"] for m in messages)


@pytest.mark.parametrize("off", ["0", "false", "no", "OFF"])
async def test_the_env_opt_out_leaves_the_lifecycle_events_only(monkeypatch: pytest.MonkeyPatch, off: str) -> None:
    monkeypatch.setenv("IAC_CODE_PIPELINE_DISPLAY_EVENTS", off)
    async with start_server({"mode": "pipeline"}) as server, connect_client(server) as client:
        first = await send(client, PROMPT, n=1, iac_code={"candidatePresentation": "rich-v1"})
        streamed = pipeline_events(first)
        last = last_status(first)
        assert streamed[-1]["eventType"] == "input_required" and streamed[-1]["data"]["kind"] == "candidate_selection"
        assert not DISPLAY & {e["eventType"] for e in streamed}
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        assert "candidate 2" in last["status"]["message"]["parts"][0]["text"]  # the text for generic clients stays
        state = await state_of(server.url, last["contextId"])
        assert state["events"] == streamed and state["snapshot"]["display"]["messages"] == []
