"""A region-only ``alibaba_cloud_region_id`` (issue 37, since-0.13 §11), with the default configuration.

Given without an access key, the region must be a region id (else ``-32602`` ``Unsupported
Alibaba Cloud region ID.`` and no task), and it moves only the region of the server's own
credentials (here: the environment's), seen at a local stand-in of the ROS API; with no
server credentials it changes nothing; beside a lone key id or secret the metadata
credentials are ignored, its region included.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import A2A_HEADERS, RunningServer, start_server
from tests.ros_standin import StandIn, ros_standin

BAD_REGION = "Unsupported Alibaba Cloud region ID."


def _body(text: str, context_id: str, **iac_code: Any) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}],
               "contextId": context_id, "metadata": {"iac_code": iac_code}}
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "SendMessage", "params": {"message": message}}


async def _rpc(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as response:
        reply: dict[str, Any] = await response.json()
        return reply


@pytest.fixture
async def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[StandIn, RunningServer,
                                                                                       aiohttp.ClientSession]]:
    monkeypatch.chdir(tmp_path)
    for name in ("REGION_ID", "SECURITY_TOKEN"):
        monkeypatch.delenv(f"ALIBABA_CLOUD_{name}", raising=False)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAIserverkey0000")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "server-secret-value")
    async with ros_standin() as ros, start_server() as server, aiohttp.ClientSession() as http:
        monkeypatch.setenv("IACCODE_ALIYUN_ROS_ENDPOINT", ros.endpoint)
        yield ros, server, http


@pytest.mark.parametrize("region", ["CN-Hangzhou", "cn_hangzhou", "-cn-hangzhou", "cn hangzhou", "", "a" * 64,
                                    "cn-hangzhou\n", 42, ["cn-hangzhou"]])
async def test_a_malformed_region_alone_is_refused_before_any_task(
        cloud: tuple[StandIn, RunningServer, aiohttp.ClientSession], region: Any) -> None:
    ros, server, http = cloud
    reply = await _rpc(http, server, _body("list my stacks", "ctx-bad-region", alibaba_cloud_region_id=region))
    assert (reply["error"]["code"], reply["error"]["message"]) == (-32602, BAD_REGION)
    listed = await _rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks",
                                       "params": {"contextId": "ctx-bad-region"}})
    assert listed["result"]["tasks"] == [] and ros.requests == []


async def test_a_region_alone_moves_the_server_credentials(
        cloud: tuple[StandIn, RunningServer, aiohttp.ClientSession]) -> None:
    ros, server, http = cloud
    longest = "a" + "b" * 62  # 63 characters: the longest region id
    for region in ("cn-shanghai", longest):
        reply = await _rpc(http, server, _body("list my stacks", f"ctx-{region[:8]}", alibaba_cloud_region_id=region))
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [(r["Action"], r["RegionId"]) for r in ros.requests] == [("ListStacks", "cn-shanghai"),
                                                                    ("ListStacks", longest)]


async def test_beside_a_lone_key_half_the_metadata_credentials_are_ignored(
        cloud: tuple[StandIn, RunningServer, aiohttp.ClientSession]) -> None:
    ros, server, http = cloud
    for half in ({"alibaba_cloud_access_key_id": "LTAIcallerkey0000"},
                 {"alibaba_cloud_access_key_secret": "caller-secret"}):
        reply = await _rpc(http, server, _body("list my stacks", "ctx-half", alibaba_cloud_region_id="Not A Region",
                                               **half))
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [r["RegionId"] for r in ros.requests] == ["cn-hangzhou", "cn-hangzhou"]  # the server's own region


async def test_without_server_credentials_a_region_alone_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("ACCESS_KEY_ID", "ACCESS_KEY_SECRET", "SECURITY_TOKEN"):
        monkeypatch.delenv(f"ALIBABA_CLOUD_{name}", raising=False)
    async with ros_standin() as ros, start_server() as server, aiohttp.ClientSession() as http:
        monkeypatch.setenv("IACCODE_ALIYUN_ROS_ENDPOINT", ros.endpoint)
        reply = await _rpc(http, server, _body("list my stacks", "ctx-none", alibaba_cloud_region_id="cn-beijing"))
    text = "".join(p.get("text", "") for p in reply["result"]["task"]["status"]["message"]["parts"])
    assert "Alibaba Cloud credentials are not configured" in text and ros.requests == []
