"""Artifacts a remote client can read: served over HTTP, inline when small, no server path anywhere.

A generating turn of the built-in runtime (default configuration: the write asks
permission, answered as a standard client answers) stores ``template.ros.yaml``.
Its artifact's first part is the URL of ``GET /iac-code/artifacts/{id}/{name}``
(same authentication and owner scope as the task), the second the text itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import (
    A2A_HEADERS,
    RunningServer,
    free_port,
    parse_sse,
    permission_answer_body,
    permission_envelope,
    send_message_body,
    start_server,
)
from tests.test_push_delivery import receiver

PROMPT = "Create a VPC with two vSwitches"


async def generate(http: aiohttp.ClientSession, server: RunningServer,
                   headers: dict[str, str] | None = None, **params: Any) -> list[dict[str, Any]]:
    """Stream a generating turn, answer its write permission; every event of both streams."""
    headers = {**A2A_HEADERS, **(headers or {})}
    body = send_message_body(PROMPT, message_id=uuid.uuid4().hex, method="SendStreamingMessage")
    body["params"].update(params)
    async with http.post(server.url, json=body, headers=headers) as r:
        events, _ = parse_sse(await r.text())
    envelope = permission_envelope(events[-1]["result"]["statusUpdate"])
    assert envelope is not None and envelope["toolName"] == "write_file"
    answer = permission_answer_body(envelope, method="SendStreamingMessage", message_id=uuid.uuid4().hex)
    async with http.post(server.url, json=answer, headers=headers) as r:
        events += parse_sse(await r.text())[0]
    return events


def artifact_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    (update,) = [e["result"]["artifactUpdate"] for e in events if "artifactUpdate" in e["result"]]
    return update  # type: ignore[no-any-return]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_a_template_artifact_is_served_over_http_and_inline(server: RunningServer,
                                                                  http: aiohttp.ClientSession) -> None:
    update = artifact_of(await generate(http, server))
    artifact = update["artifact"]
    url_part, text_part = artifact["parts"]
    artifact_id = artifact["artifactId"]
    assert url_part["url"] == f"{server.url}iac-code/artifacts/{artifact_id}/template.ros.yaml"
    assert url_part["filename"] == text_part["filename"] == "template.ros.yaml"
    assert url_part["mediaType"] == text_part["mediaType"] == "text/yaml"
    content = text_part["text"].encode()
    assert b"ALIYUN::ECS::VSwitch" in content
    digest = hashlib.sha256(content).hexdigest()
    described = {"mediaType": "text/yaml", "byteSize": len(content), "sha256": digest}
    assert url_part["metadata"] == text_part["metadata"] == described
    assert artifact["metadata"]["iac_code"]["artifact"] == {
        "artifactId": artifact_id, "name": "template.ros.yaml", "url": url_part["url"], **described}

    async with http.get(url_part["url"]) as r:  # the default configuration: no credentials
        assert r.status == 200 and await r.read() == content
        assert r.headers["Content-Type"] == "text/yaml; charset=utf-8"
        assert r.headers["ETag"] == f'"{digest}"'
    async with http.get(url_part["url"], headers={"If-None-Match": f'"{digest}"'}) as r:
        assert r.status == 304 and r.headers["ETag"] == f'"{digest}"'
    async with http.get(url_part["url"], headers={"If-None-Match": '"other"'}) as r:
        assert r.status == 200

    stored = [p for p in server.kernel.config.resolved_artifact_dir().rglob("template.ros.yaml")]
    assert len(stored) == 1 and stored[0].read_bytes() == content
    assert stat.S_IMODE(stored[0].stat().st_mode) == 0o600

    got = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": update["taskId"]}})
    assert got["result"]["artifacts"][0]["parts"] == artifact["parts"]


async def test_artifact_inline_bytes_zero_gives_the_url_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server({"artifact-inline-bytes": 0}) as server:
        (part,) = artifact_of(await generate(http, server))["artifact"]["parts"]
        async with http.get(part["url"]) as r:
            assert r.status == 200 and hashlib.sha256(await r.read()).hexdigest() == part["metadata"]["sha256"]


async def test_artifact_urls_are_built_on_the_public_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    port = free_port()
    public = f"http://localhost:{port}/agent"  # as a proxy that strips "/agent" would publish this server
    async with start_server({"port": port, "public-url": public}) as advertised:
        server = RunningServer(advertised.kernel, f"http://127.0.0.1:{port}/")
        part = artifact_of(await generate(http, server))["artifact"]["parts"][0]
        assert part["url"].startswith(f"{public}/iac-code/artifacts/")
        async with http.get(server.url + part["url"].removeprefix(f"{public}/")) as r:
            assert r.status == 200


async def test_only_a_caller_who_may_read_the_task_gets_its_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    bearer, api_key = {"Authorization": "Bearer t0ken"}, {"X-API-Key": "k3y"}
    async with start_server({"token": "t0ken", "api-key": "k3y"}) as server:
        url = artifact_of(await generate(http, server, bearer))["artifact"]["parts"][0]["url"]
        async with http.get(url, headers=bearer) as r:
            assert r.status == 200
        async with http.get(url) as r:
            assert r.status == 401 and r.headers.getall("WWW-Authenticate")[0] == 'Bearer realm="iac-code"'
        async with http.get(url, headers=api_key) as r:  # another owner: as if there were no such artifact
            assert r.status == 404
            other_owner = await r.read()
        base, artifact_id, _ = url.rsplit("/", 2)
        for missing in (f"{base}/{artifact_id}/other.yaml", f"{base}/{uuid.uuid4().hex}/template.ros.yaml",
                        f"{base}/..%2F..%2Fetc/passwd", f"{base}/{artifact_id}/..%2F.by-id"):
            async with http.get(missing, headers=bearer) as r:
                assert r.status == 404 and await r.read() == other_owner, missing


async def rpc(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()  # type: ignore[no-any-return]


async def test_no_server_path_in_any_task_event_or_push(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        http: aiohttp.ClientSession) -> None:
    monkeypatch.chdir(tmp_path)
    settings = {"push-notifications": True, "push-allowed-hosts": ["127.0.0.1"], "push-events": "all",
                "persistence-dir": str(tmp_path / "state")}
    async with receiver() as hook, start_server(settings) as server:
        config = {"taskPushNotificationConfig": {"url": hook.url, "id": "hook"}}
        events = await generate(http, server, configuration=config)
        task_id = artifact_of(events)["taskId"]
        task = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}})
        listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 3, "method": "ListTasks",
                                          "params": {"includeArtifacts": True}})
        async with http.get(f"{server.url}tasks/{task_id}", headers=A2A_HEADERS) as r:
            rest = await r.json()
        assert task["result"]["artifacts"] and listed["result"]["tasks"][0]["artifacts"] and rest["artifacts"]
        pushes = await hook.wait_for(len(events) - 1)  # the answer's stream repeats the task it resumes
        text = json.dumps([events, task, listed, rest, [p.body for p in pushes]])
        assert any("artifactUpdate" in p.body for p in pushes)
        artifact_dir = server.kernel.config.resolved_artifact_dir()
        for path in (tmp_path, artifact_dir, artifact_dir.resolve(), server.kernel.state_dir, Path.home(),
                     Path(os.getcwd())):
            assert str(path) not in text, path
        assert "file://" not in text and "/.by-id" not in text
