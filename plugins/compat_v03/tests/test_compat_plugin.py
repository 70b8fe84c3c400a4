"""The A2A 0.3 compatibility is one plugin: installed, 0.3 clients are answered; blocked, the server speaks 1.0 only.

Blocked (``disabled-plugins: [compat-v03]``), a 0.3 call gets the answer any A2A 1.0 server
gives it, on a real server: an unknown method over JSON-RPC (every transport), the version
refusal of the 1.0 route of a tenant named ``v1`` over HTTP+JSON, and the strict 1.0 card.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.api import ConfigProblems
from iac_code.testing import make_kernel, run_cli, start_server

BLOCKED = {"disabled-plugins": ["compat-v03"]}
V03_MESSAGE = {"message": {"messageId": "m-1", "role": "ROLE_USER", "content": [{"text": "hello"}]}}
V03_CARD_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"}


def unknown_method(request_id: Any, method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}}


@pytest.fixture
def socket_path() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="c03-", dir="/tmp")  # AF_UNIX paths are short
    try:
        yield str(Path(directory) / "a2a.sock")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: dict[str, Any]) -> Any:
    writer.write(json.dumps(frame).encode() + b"\n")
    await writer.drain()
    return json.loads(await asyncio.wait_for(reader.readline(), 30))


async def test_blocked_a_03_method_name_is_an_unknown_method_on_every_transport(
        socket_path: str, http: aiohttp.ClientSession) -> None:
    async with start_server({**BLOCKED, "transport": ["http", "unix"], "socket-path": socket_path}) as server:
        for headers in ({}, {"A2A-Version": "1.0"}, {"A2A-Version": "0.3"}):
            body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": V03_MESSAGE}
            async with http.post(server.url, json=body, headers=headers) as reply:
                assert reply.status == 200
                assert await reply.json() == unknown_method(1, "message/send")
        reader, writer = await asyncio.open_unix_connection(socket_path)
        try:
            # Not a streaming method without the plugin: one plain answer, no stream framing ("final").
            stream = {"jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": V03_MESSAGE}
            assert await exchange(reader, writer, stream) == unknown_method("s", "message/stream")
            get = {"jsonrpc": "2.0", "id": "g", "method": "tasks/get", "params": {"id": "nope"}}
            assert await exchange(reader, writer, get) == unknown_method("g", "tasks/get")
            listed = await exchange(reader, writer, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
            assert listed["result"]["tasks"] == []  # the connection serves 1.0 calls on
        finally:
            writer.close()


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "blocked"])
async def test_a_v1_route_is_03_only_with_the_plugin(installed: bool, http: aiohttp.ClientSession,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default workspace
    async with start_server({} if installed else BLOCKED) as server:
        base = server.url.rstrip("/")
        async with http.post(base + "/v1/message:send", json=V03_MESSAGE) as reply:  # no A2A-Version: 0.3
            body = await reply.json()
            if installed:
                assert reply.status == 200 and body["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            else:  # the 1.0 route of tenant "v1", which refuses the missing version as every 1.0 route does
                assert reply.status == 400
                assert body["error"]["status"] == "FAILED_PRECONDITION"
                assert body["error"]["message"].startswith(
                    "A2A version '0.3' (no A2A-Version header) is not supported by this handler.")
                assert body["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
        async with http.get(base + "/v1/card") as reply:
            assert reply.status == (200 if installed else 404)
        async with http.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
                                               "params": {"id": "nope"}}) as reply:
            error = (await reply.json())["error"]
            assert (error["code"], error["message"]) == ((-32001, "Task not found") if installed else
                                                         (-32601, "Method not found: tasks/get"))


async def test_the_card_fields_are_the_plugins(http: aiohttp.ClientSession) -> None:
    with pytest.raises(ConfigProblems, match="unknown configuration key 'card-legacy-fields'"):
        make_kernel({**BLOCKED, "card-legacy-fields": True})
    async with start_server({"card-legacy-fields": True}) as server:
        async with http.get(server.url + ".well-known/agent-card.json") as reply:
            card = await reply.json()
        assert V03_CARD_FIELDS <= set(card) and card["protocolVersion"] == "0.3"
    async with start_server(BLOCKED) as server:
        async with http.get(server.url + ".well-known/agent-card.json") as reply:
            card = await reply.json()
        assert not V03_CARD_FIELDS & set(card) and card["supportedInterfaces"]


async def test_listed_as_its_own_distribution(tmp_path: Path) -> None:
    listed = await run_cli("a2a", "--plugins", "list", "--output", "json", cwd=tmp_path)
    assert listed.code == 0, listed.err
    row = next(row for row in listed.json()["plugins"] if row["name"] == "compat-v03")
    assert (row["distribution"], row["version"], row["status"], row["kind"]) == (
        "iac-code-compat-v03", "0.1.0", "active", "installed")
    assert row["hooks"] == ["iac_code_config_model", "iac_code_protocol_adapters"]
    config = tmp_path / "blocked.yml"
    config.write_text("disabled-plugins: [compat-v03]\n")
    listed = await run_cli("a2a", "--config", str(config), "--plugins", "list", "--output", "json", cwd=tmp_path)
    assert next(row for row in listed.json()["plugins"] if row["name"] == "compat-v03")["status"] == "blocked"
