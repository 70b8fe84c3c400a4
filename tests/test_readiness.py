"""``GET /iac-code/readiness`` (issue 37, since-0.13 §11): model and cloud readiness, no secret, no network.

Beside ``/ready``: whether the configured agent runtime has its model and the server its
Alibaba Cloud credentials, from configuration and environment alone; behind the same
authentication as every route.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import RunningServer, start_server
from tests.openai_stub import OpenAIStub

CLOUD_ENV = ("ACCESS_KEY_ID", "ACCESS_KEY_SECRET", "SECURITY_TOKEN", "REGION_ID")
OFFLINE = {"ready": True, "source": "builtin", "provider": "offline", "providerDisplay": "iac-code offline engine",
           "model": None, "missing": []}


@pytest.fixture(autouse=True)
def no_cloud_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in CLOUD_ENV:
        monkeypatch.delenv(f"ALIBABA_CLOUD_{name}", raising=False)
    monkeypatch.delenv("IAC_CODE_API_KEY", raising=False)
    monkeypatch.delenv("IAC_CODE_MODEL", raising=False)


async def _readiness(server: RunningServer, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(server.url + "iac-code/readiness",
                                                          headers=headers or {}) as response:
        return response.status, await response.json()


async def test_default_configuration_without_cloud_credentials() -> None:
    async with start_server() as server:
        status, body = await _readiness(server)
    assert status == 200
    assert body == {"schemaVersion": 1, "llm": OFFLINE, "cloud": {
        "ready": False, "provider": "aliyun", "mode": None, "regionId": "cn-hangzhou", "missing": ["credentials"]}}


@pytest.mark.parametrize(("env", "cloud"), [
    ({"ACCESS_KEY_ID": "LTAIkey000000000", "ACCESS_KEY_SECRET": "the-secret-value"},
     {"ready": True, "provider": "aliyun", "mode": "AK", "regionId": "cn-hangzhou", "missing": []}),
    ({"ACCESS_KEY_ID": "STS.key000000000", "ACCESS_KEY_SECRET": "the-secret-value",
      "SECURITY_TOKEN": "the-sts-token-value", "REGION_ID": "cn-shanghai"},
     {"ready": True, "provider": "aliyun", "mode": "StsToken", "regionId": "cn-shanghai", "missing": []}),
    ({"ACCESS_KEY_ID": "LTAIkey000000000"},
     {"ready": False, "provider": "aliyun", "mode": "AK", "regionId": "cn-hangzhou", "missing": ["access_key_secret"]}),
    ({"ACCESS_KEY_SECRET": "the-secret-value", "REGION_ID": "ap-southeast-1"},
     {"ready": False, "provider": "aliyun", "mode": "AK", "regionId": "ap-southeast-1", "missing": ["access_key_id"]}),
])
async def test_cloud_readiness_from_the_server_credentials(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                           cloud: dict[str, Any]) -> None:
    async with start_server() as server:
        for name, value in env.items():
            monkeypatch.setenv(f"ALIBABA_CLOUD_{name}", value)
        status, body = await _readiness(server)
    assert status == 200 and body["cloud"] == cloud and body["llm"] == OFFLINE
    text = json.dumps(body)
    assert "the-secret-value" not in text and "the-sts-token-value" not in text and "key000000000" not in text


async def test_llm_runtime_readiness_without_a_network_call(monkeypatch: pytest.MonkeyPatch) -> None:
    async with OpenAIStub([]) as stub:
        base = {"agent-runtime": "llm", "llm-base-url": stub.base_url}
        async with start_server(base) as server:
            _, missing = await _readiness(server)
            monkeypatch.setenv("IAC_CODE_API_KEY", "sk-from-the-environment")
        async with start_server({**base, "llm-api-key": "sk-from-the-config", "llm-model": "qwen-max",
                                 "llm-provider": "dashscope"}) as server:
            _, configured = await _readiness(server)
        async with start_server(base) as server:
            _, from_env = await _readiness(server)
    assert missing["llm"] == {"ready": False, "source": None, "provider": "openai",
                              "providerDisplay": "OpenAI-compatible API", "model": "qwen-plus", "missing": ["api_key"]}
    assert configured["llm"] == {"ready": True, "source": "config", "provider": "dashscope",
                                 "providerDisplay": "Alibaba Cloud Model Studio (DashScope)", "model": "qwen-max",
                                 "missing": []}
    assert from_env["llm"]["ready"] is True and from_env["llm"]["source"] == "environment"
    assert "sk-from" not in json.dumps([missing, configured, from_env])
    assert stub.requests == []  # readiness never calls the provider


async def test_readiness_needs_the_same_authentication_as_every_route() -> None:
    async with start_server({"token": "t0ken"}) as server:
        refused, _ = await _readiness(server)
        allowed, body = await _readiness(server, {"Authorization": "Bearer t0ken"})
    assert refused == 401 and allowed == 200 and body["schemaVersion"] == 1
