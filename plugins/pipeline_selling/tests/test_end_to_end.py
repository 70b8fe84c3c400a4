"""The selling pipeline end to end: a real server in ``mode: pipeline`` with the offline engine, a2a-sdk's client
over JSON-RPC reading events by the product's names and answering in the product's formats, then the state
endpoint, which must equal what was streamed."""

from __future__ import annotations

from typing import Any

import aiohttp
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import A2A_HEADERS, connect_client, start_server


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
        pipeline = metadata.get("iac_code", {}).get("pipeline")
        if pipeline is not None and pipeline not in found:
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
        assert [e["eventType"] for e in more] == ["input_received", "step_completed", "step_started", "pipeline_warning",
                                                  "step_completed", "pipeline_completed", "pipeline_handoff_ready"]
        assert more[0]["sequence"] == streamed[-1]["sequence"] + 1
        assert more[-1]["data"]["action"] == "switch_to_normal" and more[-1]["data"]["outcome"] == "completed"
        assert more[3]["data"]["artifact"]["name"].startswith("candidate-2-")

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
