"""``GET /iac-code/pipeline/state`` on a real server: authentication, the caller's tasks, the 400/404 answers.

Until the kernel runs pipeline turns itself, the test plays a pipeline run into the journals of the server's
pipeline store for a task the server really holds (made by an ordinary message).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import aiohttp

from iac_code.api import PipelineServices, Progress, TextDelta, TurnRequest
from iac_code.testing import A2A_HEADERS, ScriptedRuntime, send_message_body, start_server
from iac_code_pipeline_selling.batching import unbatched
from iac_code_pipeline_selling.plugin import create_selling, store_for


class _Engine:
    name = "tiny"

    def understand(self, prompt: str, language: str = "en") -> Any:
        from iac_code.api import Understanding

        return Understanding(is_infra_intent=False, category="chat", confidence="high")


async def _task_of_a_real_turn(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> tuple[str, str]:
    async with session.post(url, json=send_message_body("hi"), headers=headers) as response:
        task = (await response.json())["result"]["task"]
    return task["id"], task["contextId"]


async def test_state_endpoint_over_http() -> None:
    chat = ScriptedRuntime(["hello"], [TextDelta("chat")])
    async with start_server({**chat.settings, "api-key": "k-123"}, extra_plugins={"chat": chat}) as server:
        kernel = server.kernel
        pipeline = create_selling(PipelineServices(context=kernel, chat=chat, engine=_Engine(),
                                                   state_dir=kernel.state_dir))
        assert store_for(kernel) is pipeline.store
        base = server.url.rstrip("/")
        key = {**A2A_HEADERS, "X-API-Key": "k-123"}
        async with aiohttp.ClientSession() as session:
            task_id, context_id = await _task_of_a_real_turn(session, server.url, key)
            turn = TurnRequest(context_id=context_id, task_id=task_id, prompt="hello there", cwd="/tmp", session={},
                               run_mode="pipeline", pipeline_name="selling")
            streamed = [p for e in [e async for e in pipeline.run_turn(turn)] if isinstance(e, Progress)
                        for p in unbatched(e.metadata)]
            assert [e["eventType"] for e in streamed][-1] == "pipeline_handoff_ready"
            state = f"{base}/iac-code/pipeline/state"
            async with session.get(state, params={"contextId": context_id}) as response:
                assert response.status == 401
            async with session.get(state, params={"contextId": context_id}, headers=key) as response:
                assert response.status == 200
                body = await response.json()
            assert body["events"] == json.loads(json.dumps(streamed))
            assert body["snapshot"]["schemaVersion"] == "1.2" and body["snapshot"]["handoff"]["outcome"] == "early_exit"
            async with session.get(state, params={"taskId": task_id, "includeSnapshot": "false", "afterSequence": "2"},
                                   headers=key) as response:
                body = await response.json()
            assert body["events"] == streamed[2:] and body["fromSequence"] == 2
            assert body["lastSequence"] == streamed[-1]["sequence"] and "snapshot" not in body
            for params, status, error in [
                ({}, 400, "contextId or taskId is required"),
                ({"contextId": context_id, "afterSequence": "x"}, 400, "afterSequence must be a non-negative integer"),
                ({"contextId": context_id, "includeSnapshot": "0"}, 400, "afterSequence must be a non-negative integer"),
                ({"contextId": "no-such-context"}, 404, None),
                ({"taskId": "no-such-task"}, 404, None),
            ]:
                async with session.get(state, params=params, headers=key) as response:
                    assert response.status == status, params
                    if error:
                        assert await response.json() == {"error": error}
