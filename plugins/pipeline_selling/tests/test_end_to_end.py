"""The selling pipeline end to end: a real server in ``mode: pipeline`` with the offline engine, a2a-sdk's client
over JSON-RPC and over HTTP+JSON (REST) reading events by the product's names (single or batched) and answering in the product's formats, then the state
endpoint, which must equal what was streamed."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import A2A_HEADERS, connect_client, start_server
from iac_code_pipeline_selling.runner import lifecycle


async def _send(client: Any, text: str, *, context_id: str = "", task_id: str = "", n: int,
                iac_code: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    message = Message(message_id=f"e2e-{n}", role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id, task_id=task_id)
    if iac_code:
        message.metadata.update({"iac_code": iac_code})
    return [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]


def _pipeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for event in events:
        update = event.get("statusUpdate") or event.get("task")
        if update is None:
            continue
        metadata = update.get("metadata", {}) if "statusUpdate" in event else update.get("status", {}).get("metadata", {})
        section = metadata.get("iac_code", {})
        batch = section.get("pipelineBatch", {}).get("events", [])
        for pipeline in [section["pipeline"]] if "pipeline" in section else batch:
            if pipeline not in found:
                found.append(pipeline)
    return found


def _last_status(events: list[dict[str, Any]]) -> dict[str, Any]:
    updates = [e["statusUpdate"] for e in events if "statusUpdate" in e]
    return updates[-1]


async def test_a_full_selling_run_over_json_rpc() -> None:
    async with start_server({"mode": "pipeline"}) as server, connect_client(server) as client:
        first = await _send(client, "Deploy a web shop with a MySQL database in cn-hangzhou", n=1,
                            iac_code={"candidatePresentation": "rich-v1"})
        streamed = _pipeline(first)
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        last = _last_status(first)
        assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        question = last["metadata"]["iac_code"]["pipeline"]
        assert question["eventType"] == "input_required" and question["data"]["kind"] == "candidate_selection"
        options = question["data"]["options"]
        assert len(options) == 3 and all(len(o) == 6 for o in options)
        assert "candidate 2" in last["status"]["message"]["parts"][0]["text"]
        artifacts = [e["artifactUpdate"]["artifact"] for e in first if "artifactUpdate" in e]
        assert sorted(a["name"] for a in artifacts) == sorted(
            e["artifact"]["filename"] for e in streamed if e["eventType"] == "artifact_created")
        context_id, task_id = last["contextId"], last["taskId"]

        second = await _send(client, "方案 2", context_id=context_id, task_id=task_id, n=2)
        more = _pipeline(second)
        assert lifecycle([e["eventType"] for e in more]) == [
            "input_received", "step_completed", "step_started", "pipeline_warning", "step_completed",
            "pipeline_completed", "pipeline_handoff_ready"]
        assert more[0]["sequence"] == streamed[-1]["sequence"] + 1
        handoff = lifecycle(more)[-1]["data"]
        assert handoff["action"] == "switch_to_normal" and handoff["outcome"] == "completed"
        assert lifecycle(more)[3]["data"]["artifact"]["name"].startswith("candidate-2-")

        async with aiohttp.ClientSession() as http, http.get(
                server.url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id},
                headers=A2A_HEADERS) as reply:
            assert reply.status == 200
            state = await reply.json()
        assert state["events"] == streamed + more
        assert state["snapshot"]["handoff"]["outcome"] == "completed"

        chat = await _send(client, "Add a second vSwitch to the template", context_id=context_id, n=3)
        assert not _pipeline(chat)
        assert _last_status(chat)["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED")


def _publications(events: list[dict[str, Any]]) -> list[str]:
    """How each status update carried pipeline events: ``single`` or ``batch:<n>`` (in stream order)."""
    shapes = []
    for event in events:
        section = event.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})
        if "pipeline" in section:
            shapes.append("single")
        elif "pipelineBatch" in section:
            shapes.append(f"batch:{len(section['pipelineBatch']['events'])}")
    return shapes


async def test_a_full_selling_run_over_rest() -> None:
    """HTTP+JSON with a2a-sdk's client: candidates, the choice as the §2.3 JSON text, the handoff; every pipeline
    event streamed once (single or batched, in sequence order) and the state endpoint's events exactly those."""
    async with start_server({"mode": "pipeline"}) as server, connect_client(server, binding="HTTP+JSON") as client:
        first = await _send(client, "Deploy a web shop with a MySQL database in cn-hangzhou", n=1,
                            iac_code={"candidatePresentation": "rich-v1"})
        streamed = _pipeline(first)
        assert [e["sequence"] for e in streamed] == list(range(1, len(streamed) + 1))
        shapes = _publications(first)
        assert shapes[-1] == "single"  # the question the turn stops on, merged into the last status
        assert sum(int(s.split(":")[1]) if ":" in s else 1 for s in shapes) == len(streamed)  # each event once
        assert all(int(s.split(":")[1]) <= 64 for s in shapes if ":" in s)
        assert any(s.startswith("batch:") for s in shapes)  # the parallel candidates' burst goes in batches
        types = lifecycle([e["eventType"] for e in streamed])
        assert types.count("candidate_started") == 3 and types.count("candidate_completed") == 3
        last = _last_status(first)
        assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        options = last["metadata"]["iac_code"]["pipeline"]["data"]["options"]
        assert [o["candidate_index"] for o in options] == [1, 2, 3]
        context_id, task_id = last["contextId"], last["taskId"]

        choice = json.dumps({"selected_candidate_name": options[2]["name"], "selected_candidate_index": 2})
        second = await _send(client, choice, context_id=context_id, task_id=task_id, n=2)
        more = _pipeline(second)
        assert lifecycle([e["eventType"] for e in more]) == [
            "input_received", "step_completed", "step_started", "pipeline_warning", "step_completed",
            "pipeline_completed", "pipeline_handoff_ready"]
        assert more[0]["data"]["selectedCandidateIndex"] == 2  # the index wins over the name
        assert more[0]["sequence"] == streamed[-1]["sequence"] + 1
        handoff = lifecycle(more)[-1]["data"]
        assert handoff == {**handoff, "action": "switch_to_normal", "targetMode": "normal", "outcome": "completed"}
        assert lifecycle(more)[3]["data"]["artifact"]["name"].startswith("candidate-2-")

        async with aiohttp.ClientSession() as http, http.get(
                server.url.rstrip("/") + "/iac-code/pipeline/state", params={"taskId": task_id},
                headers=A2A_HEADERS) as reply:
            assert reply.status == 200
            state = await reply.json()
        assert state["events"] == streamed + more
        assert state["snapshot"]["handoff"]["outcome"] == "completed"
        assert state["snapshot"]["lastSequence"] == more[-1]["sequence"]
