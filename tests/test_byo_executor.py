"""Bring your own a2a-sdk AgentExecutor: config reference or runtime plugin."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from iac_code.errors import StartupError
from iac_code.hookspecs import hookimpl
from iac_code.records import AgentRuntimeSpec
from iac_code.testing import A2A_HEADERS, make_kernel, send_message_body, start_server
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
    with pytest.raises(StartupError, match="Agent runtime 'nope' is not installed"):
        make_kernel({"agent-runtime": "nope"})
