"""Pipeline mode in the kernel: the run mode per request, the pipeline per session, Progress on the wire.

A pipeline plugin registered through the real hook stands in for the selling pipeline: it reports
what the kernel told it and yields Progress events. a2a-sdk's client reads the stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict, ParseDict

from iac_code.api import (
    PipelineServices,
    PipelineSpec,
    Progress,
    RuntimeEvent,
    StartupError,
    TextDelta,
    TurnRequest,
    hookimpl,
)
from iac_code.base.config import load_config
from iac_code.testing import A2A_HEADERS, send_message_body, start_server


class EchoPipeline:
    """Yields one working Progress and one final, and says what it was given."""

    def __init__(self, name: str, services: PipelineServices) -> None:
        self.name = name
        self.services = services

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        runs = int(turn.session.get(self.name, 0)) + 1
        turn.session[self.name] = runs
        yield Progress({"pipeline": {"eventType": "step_started", "pipelineName": turn.pipeline_name,
                                     "sequence": runs * 2 - 1}})
        yield Progress({"pipeline": {"eventType": "input_required", "pipelineName": turn.pipeline_name,
                                     "sequence": runs * 2}}, final=True)
        yield TextDelta(json.dumps({"pipeline": turn.pipeline_name, "mode": turn.run_mode, "runs": runs,
                                    "chat": services_chat_name(self.services)}))


def services_chat_name(services: PipelineServices) -> str:
    return str(getattr(services.chat, "name", ""))


class PipelinePlugin:
    @hookimpl
    def iac_code_pipelines(self) -> list[PipelineSpec]:
        return [PipelineSpec(name=name, create=lambda services, name=name: EchoPipeline(name, services))
                for name in ("selling", "selling_solution_first")]


PLUGINS = {"test-pipelines": PipelinePlugin()}
# The installed selling pipeline (iac-code-pipeline-selling) is blocked: the stand-in takes its name.
BLOCK = {"disabled-plugins": ["pipeline-selling"]}


async def rpc(url: str, text: str, **message: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.post(
            url, json=send_message_body(text, message_id=f"m-{text}-{id(message)}", **message),
            headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return await reply.json()  # type: ignore[no-any-return]


def extension(card: dict[str, Any]) -> dict[str, Any] | None:
    for ext in card["capabilities"].get("extensions", []):
        if ext["uri"] == "urn:iac-code:a2a:pipeline-events:v1":
            return ext.get("params")
    return None


async def fetch_card(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}.well-known/agent-card.json") as reply:
        return await reply.json()  # type: ignore[no-any-return]


async def test_the_card_says_the_servers_mode() -> None:
    async with start_server(BLOCK, extra_plugins=PLUGINS) as server:
        params = extension(await fetch_card(server.url))
        assert params is not None and params["enabled"] is False and params["mode"] == "normal"
        assert params["maxBatchEvents"] == 1024 and params["maxBatchBytes"] == 1048576
        assert params["stateEndpoint"] == "/iac-code/pipeline/state"
    async with start_server({**BLOCK, "mode": "pipeline"}, extra_plugins=PLUGINS) as server:
        params = extension(await fetch_card(server.url))
        assert params is not None and params["enabled"] is True and params["mode"] == "pipeline"


@pytest.mark.parametrize(("metadata", "message"), [
    ({"run_mode": "fast"}, "Unsupported run mode."),
    ({"runMode": 1}, "Unsupported run mode."),
    ({"run_mode": None}, "Unsupported run mode."),
    ({"run_mode": "normal", "runMode": "bogus"}, None),  # run_mode wins
    ({"run_mode": " Pipeline ", "pipeline_name": "other"}, "Unsupported pipeline name."),
    ({"run_mode": "pipeline", "pipeline_name": 7}, "Unsupported pipeline name."),
    ({"run_mode": "normal", "pipeline_name": "other"}, None),  # read only in pipeline mode
    ({"run_mode": "pipeline", "pipeline_name": "  "}, None),  # empty: no override
])
async def test_a_request_chooses_its_mode(metadata: dict[str, Any], message: str | None) -> None:
    async with start_server(BLOCK, extra_plugins=PLUGINS) as server:
        reply = await rpc(server.url, "hello", metadata={"iac_code": metadata})
        if message is None:
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", reply
        else:
            error = reply["error"]
            assert (error["code"], error["message"]) == (-32602, message)
            assert error["data"][0]["reason"] == "INVALID_PARAMS"  # A2A 1.0's ErrorInfo, as every A2A error
            listed = await rpc_list(server.url)
            assert listed == []  # refused before any task exists


async def rpc_list(url: str) -> list[Any]:
    body = {"jsonrpc": "2.0", "id": "l", "method": "ListTasks", "params": {}}
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=A2A_HEADERS) as reply:
        return list((await reply.json())["result"].get("tasks", []))


def _final_text(task: dict[str, Any]) -> dict[str, Any]:
    return json.loads(task["status"]["message"]["parts"][0]["text"])  # type: ignore[no-any-return]


async def test_pipeline_progress_reaches_a2a_sdk_clients_and_the_session_keeps_its_pipeline() -> None:
    async with start_server({**BLOCK, "mode": "pipeline"}, extra_plugins=PLUGINS) as server:
        card = await fetch_card(server.url)
        client = ClientFactory(ClientConfig(streaming=True)).create(
            ParseDict(card, AgentCard(), ignore_unknown_fields=True))
        try:
            request = SendMessageRequest(message=Message(message_id="p-1", role=Role.ROLE_USER,
                                                         parts=[Part(text="two ECS behind an SLB")]))
            events = [MessageToDict(e) async for e in client.send_message(request)]
        finally:
            await client.close()
        updates = [e["statusUpdate"] for e in events if "statusUpdate" in e]
        working = [u for u in updates if u["status"]["state"] == "TASK_STATE_WORKING"
                   and "pipeline" in u.get("metadata", {}).get("iac_code", {})]
        assert [u["metadata"]["iac_code"]["pipeline"]["eventType"] for u in working] == ["step_started"]
        last = updates[-1]
        assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert last["metadata"]["iac_code"]["pipeline"]["eventType"] == "input_required"
        assert last["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        said = json.loads(last["status"]["message"]["parts"][0]["text"])
        assert said == {"pipeline": "selling", "mode": "pipeline", "runs": 1, "chat": "offline"}
        context_id = last["contextId"]

        # The session is fixed to its pipeline: naming the other one is refused, naming none keeps it.
        refused = await rpc(server.url, "switch", contextId=context_id,
                            metadata={"iac_code": {"pipeline_name": "selling_solution_first"}})
        assert refused["error"] == {
            "code": -32602,
            "message": "This session already runs pipeline selling; it cannot switch to selling_solution_first.",
            "data": {"durablePipelineName": "selling", "requestedPipelineName": "selling_solution_first"}}
        again = await rpc(server.url, "go on", contextId=context_id)
        assert _final_text(again["result"]["task"])["runs"] == 2
        # A normal-mode request on the same context goes to the chat runtime.
        chat = await rpc(server.url, "hello", contextId=context_id, metadata={"iac_code": {"run_mode": "normal"}})
        assert "pipeline" not in json.dumps(chat["result"]["task"]["status"].get("message", {}))

        # Another context may name the other pipeline.
        other = await rpc(server.url, "x", metadata={"iac_code": {"pipeline_name": "selling_solution_first"}})
        assert _final_text(other["result"]["task"])["pipeline"] == "selling_solution_first"


async def test_normal_mode_by_default_and_per_request_pipeline() -> None:
    async with start_server(BLOCK, extra_plugins=PLUGINS) as server:
        chat = await rpc(server.url, "hello")
        assert "pipeline" not in json.dumps(chat["result"]["task"]["status"].get("metadata", {}))
        piped = await rpc(server.url, "hello", metadata={"iac_code": {"runMode": "pipeline"}})
        assert _final_text(piped["result"]["task"]) == {"pipeline": "selling", "mode": "pipeline", "runs": 1,
                                                         "chat": "offline"}


async def test_start_up_refuses_a_pipeline_it_cannot_run() -> None:
    with pytest.raises(StartupError, match="pipeline-name 'nope' is not an installed pipeline; installed: "
                                           "selling, selling_solution_first"):
        async with start_server({**BLOCK, "pipeline-name": "nope"}, extra_plugins=PLUGINS):
            pass


def test_the_environment_sets_the_default_mode() -> None:
    assert load_config(environ={"IAC_CODE_MODE": " PIPELINE "}).mode == "pipeline"
    assert load_config(environ={"IAC_CODE_MODE": "anything else"}).mode == "normal"
    assert load_config(raw={"mode": "normal"}, environ={"IAC_CODE_MODE": "pipeline"}).mode == "normal"
    assert load_config(environ={"IAC_CODE_PIPELINE_NAME": "selling_solution_first"}).pipeline_name == \
        "selling_solution_first"


class OnlySellingPlugin:
    @hookimpl
    def iac_code_pipelines(self) -> list[PipelineSpec]:
        return [PipelineSpec(name="selling", create=lambda services: EchoPipeline("selling", services))]


async def test_a_session_whose_pipeline_is_gone_runs_the_servers_own(tmp_path: Any) -> None:
    settings = {"persistence-dir": str(tmp_path / "state"), "disabled-plugins": ["pipeline-selling"]}
    async with start_server(settings, extra_plugins=PLUGINS) as server:
        first = await rpc(server.url, "x", metadata={"iac_code": {"run_mode": "pipeline",
                                                               "pipeline_name": "selling_solution_first"}})
        assert _final_text(first["result"]["task"])["pipeline"] == "selling_solution_first"
        context_id = first["result"]["task"]["contextId"]
    async with start_server(settings, extra_plugins={"only-selling": OnlySellingPlugin()}) as server:
        again = await rpc(server.url, "again", contextId=context_id, metadata={"iac_code": {"run_mode": "pipeline"}})
        assert _final_text(again["result"]["task"])["pipeline"] == "selling"


async def test_pipeline_mode_input_problems_are_the_requests_error() -> None:
    """Pipeline mode (tasks-and-context §14): a bad workspace or an empty message is -32602, and no task exists;
    normal mode keeps its failed task."""
    async with start_server(BLOCK, extra_plugins=PLUGINS) as server:
        bad_cwd = await rpc(server.url, "x", metadata={"iac_code": {"run_mode": "pipeline", "cwd": "relative/dir"}})
        assert bad_cwd["error"]["code"] == -32602
        assert bad_cwd["error"]["message"].startswith("Invalid A2A workspace metadata.")
        assert bad_cwd["error"]["data"] == {"code": "invalid_workspace", "reason": "not_absolute"}
        empty = await rpc(server.url, " ", metadata={"iac_code": {"run_mode": "pipeline"}})
        assert (empty["error"]["code"], empty["error"]["message"]) == (
            -32602, "A2A server currently accepts text input only.")
        assert await rpc_list(server.url) == []
        normal = await rpc(server.url, "x", metadata={"iac_code": {"cwd": "relative/dir"}})
        assert normal["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
