"""Bring your own a2a-sdk AgentExecutor: config reference or runtime plugin."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from iac_code.base.errors import StartupError
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import AgentRuntimeSpec
from iac_code.testing import A2A_HEADERS, make_kernel, next_sse_data, parse_sse, send_message_body, start_server
from tests.byo_agent import ShoutExecutor

CARD = {"name": "shouter", "description": "Shouts back.", "version": "9.9.9",
        "skills": [{"id": "shout", "name": "Shout", "description": "Upper-cases text.", "tags": ["demo"]}]}


async def _rpc(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


@pytest.mark.parametrize("reference", ["tests.byo_agent:ShoutExecutor", "tests.byo_agent:make_executor"])
async def test_executor_from_config(reference: str) -> None:
    async with start_server({"agent-executor": reference, "agent-card": CARD}) as server, \
            aiohttp.ClientSession() as http:
        async with http.get(server.url + ".well-known/agent-card.json") as r:
            card = await r.json()
        assert card["name"] == "shouter" and card["version"] == "9.9.9"
        assert [s["id"] for s in card["skills"]] == ["shout"]
        task = (await _rpc(http, server.url, send_message_body("hello")))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "HELLO"
        assert task["status"]["message"]["parts"][0]["text"] == "HELLO"


async def test_sdk_input_required_keeps_a2a_meaning() -> None:
    """For a brought-in executor INPUT_REQUIRED is interrupted and live: cancel works."""
    async with start_server({"agent-executor": "tests.byo_agent:ShoutExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        task = (await _rpc(http, server.url, send_message_body("why?")))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        cancel = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 2, "method": "CancelTask",
                                               "params": {"id": task["id"]}})
        assert cancel["result"]["status"]["state"] == "TASK_STATE_CANCELED"


class ShoutRuntimePlugin:
    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="shout", create_executor=lambda kernel: ShoutExecutor())]


async def test_executor_from_runtime_plugin() -> None:
    async with start_server({"agent-runtime": "shout"}, extra_plugins={"shout": ShoutRuntimePlugin()}) as server, \
            aiohttp.ClientSession() as http:
        body = send_message_body("streamed", method="SendStreamingMessage")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            text = await r.text()
        assert "artifactUpdate" in text and "TASK_STATE_COMPLETED" in text


@pytest.mark.parametrize(("reference", "fragment"), [
    ("no_colon", "must look like"),
    ("tests.no_such_module:X", "Cannot load agent-executor"),
    ("tests.byo_agent:Missing", "Cannot load agent-executor"),
    ("tests.byo_agent:__all__", "is not an a2a-sdk AgentExecutor"),
])
def test_bad_executor_reference(reference: str, fragment: str) -> None:
    with pytest.raises(StartupError, match=fragment):
        make_kernel({"agent-executor": reference})


def test_unknown_runtime() -> None:
    with pytest.raises(StartupError, match="Unknown agent runtime 'nope'"):
        make_kernel({"agent-runtime": "nope"})


async def test_tracing_is_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # No collector listens here: without this, stopping the server waits for the OTLP exporter's retries.
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    async with start_server() as plain:
        assert type(plain.kernel.request_handler).__name__ == "KernelRequestHandler"
    async with start_server({"tracing": True}) as traced, aiohttp.ClientSession() as http:
        handler = traced.kernel.request_handler
        assert type(handler).__name__ == "TracedKernelRequestHandler"
        assert hasattr(type(handler).on_message_send, "__wrapped__")
        task = (await _rpc(http, traced.url, send_message_body("hello")))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_sdk_subscription_follows_the_next_turn() -> None:
    """A2A meaning: subscribing to an INPUT_REQUIRED task streams through the next turn to the end."""
    async with start_server({"agent-executor": "tests.byo_agent:ShoutExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        task = (await _rpc(http, server.url, send_message_body("why?")))["result"]["task"]
        sub = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": task["id"]}}
        async with http.post(server.url, json=sub, headers=A2A_HEADERS) as stream:
            head = await next_sse_data(stream.content)
            assert head["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            follow = send_message_body("fine", message_id="m2", taskId=task["id"], contextId=task["contextId"])
            done = (await _rpc(http, server.url, follow))["result"]["task"]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            events, _ = parse_sse(await asyncio.wait_for(stream.text(), 10))
        states = [e["result"]["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e["result"]]
        assert states[-1] == "TASK_STATE_COMPLETED"
        assert any("artifactUpdate" in e["result"] for e in events)


async def test_executor_of_the_older_contract_runs_unchanged() -> None:
    """Its first event is a status update: the task is created from it, and streams still begin with the Task."""
    async with start_server({"agent-executor": "tests.byo_agent:StatusFirstExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        task = (await _rpc(http, server.url, send_message_body("hello", message_id="u-1")))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["history"][0]["messageId"] == "u-1" and task["history"][0]["role"] == "ROLE_USER"
        assert task["artifacts"][0]["parts"][0]["text"] == "legacy output"

        body = send_message_body("hello again", message_id="u-2", method="SendStreamingMessage")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            events, _ = parse_sse(await asyncio.wait_for(r.text(), 10))
        kinds = [next(iter(e["result"])) for e in events]
        assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
        assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert events[0]["result"]["task"]["history"][0]["messageId"] == "u-2"
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_failing_executor_errors_are_ours_and_observed(caplog: pytest.LogCaptureFixture) -> None:
    import gc

    async with start_server({"agent-executor": "tests.byo_agent:StatusFirstExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        unary = await _rpc(http, server.url, send_message_body("boom", message_id="b-1"))
        assert (unary["error"]["code"], unary["error"]["message"]) == (-32603, "Agent execution failed")
        body = send_message_body("boom", message_id="b-2", method="SendStreamingMessage")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            events, _ = parse_sse(await asyncio.wait_for(r.text(), 10))
        assert (events[-1]["error"]["code"], events[-1]["error"]["message"]) == (-32603, "Agent execution failed")
        states = [e["result"]["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e.get("result", {})]
        assert states[-1] == "TASK_STATE_FAILED"
        listed = await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}})
        assert {t["status"]["state"] for t in listed["result"]["tasks"]} == {"TASK_STATE_FAILED"}
        assert "/srv/secret" not in json.dumps([unary, events, listed])
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_return_immediately_answers_with_the_new_task() -> None:
    """A2A §3.2.2: ``returnImmediately`` returns the task as soon as it exists; the default waits for the end."""
    async with start_server({"agent-executor": "tests.byo_agent:ShoutExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        body = send_message_body("hello", message_id="r-1")
        body["params"]["configuration"] = {"returnImmediately": True}
        early = (await _rpc(http, server.url, body))["result"]["task"]
        assert early["status"]["state"] == "TASK_STATE_SUBMITTED"
        sub = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": early["id"]}}
        async with http.post(server.url, json=sub, headers=A2A_HEADERS) as r:
            if r.content_type == "text/event-stream":
                await asyncio.wait_for(r.text(), 10)  # follows the task to its end
        done = (await _rpc(http, server.url, {"jsonrpc": "2.0", "id": 2, "method": "GetTask",
                                              "params": {"id": early["id"]}}))["result"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        blocking = (await _rpc(http, server.url, send_message_body("hello", message_id="r-2")))["result"]["task"]
        assert blocking["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_follow_ups_are_kept_in_history_even_with_a_reused_message_id() -> None:
    async with start_server({"agent-executor": "tests.byo_agent:ShoutExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        task = (await _rpc(http, server.url, send_message_body("first?", message_id="same")))["result"]["task"]
        for text in ("second?", "third"):
            body = send_message_body(text, message_id="same", taskId=task["id"])
            reply = (await _rpc(http, server.url, body))["result"]["task"]
        users = [m["parts"][0]["text"] for m in reply["history"] if m["role"] == "ROLE_USER"]
        assert users == ["first?", "second?", "third"]
        assert reply["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_agent_event_errors_are_in_our_words() -> None:
    async with start_server({"agent-executor": "tests.byo_agent:WrongContextExecutor"}) as server, \
            aiohttp.ClientSession() as http:
        reply = await _rpc(http, server.url, send_message_body("hello"))
    assert reply["error"]["code"] == -32006
    assert reply["error"]["message"] == "The agent produced an event for another task or context."
    assert "TaskManager" not in json.dumps(reply)
