"""Contexts, workspaces, message metadata, ids, ListTasks and artifacts.

Most scenarios run twice: over the real HTTP server and straight through the
kernel's transport-neutral dispatcher, since every transport must behave alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.security.auth import ANONYMOUS_PRINCIPAL
from iac_code.protocol.dispatcher import CallInfo
from iac_code.testing import (
    A2A_HEADERS,
    RunningServer,
    parse_sse,
    permission_answer_body,
    permission_envelope,
    send_and_answer,
    send_message_body,
    start_server,
)
from tests.runtimes import GatedRuntimePlugin, ProbePlugin


class Caller:
    """Sends JSON-RPC requests over HTTP or straight to the dispatcher."""

    def __init__(self, server: RunningServer, http: aiohttp.ClientSession | None) -> None:
        self.server = server
        self.http = http

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.http is not None:
            async with self.http.post(self.server.url, json=body, headers=A2A_HEADERS) as r:
                return await r.json()
        dispatcher = self.server.kernel.dispatcher
        assert dispatcher is not None
        result = await dispatcher.dispatch(json.dumps(body).encode(),
                                          CallInfo(ANONYMOUS_PRINCIPAL, {"a2a-version": "1.0"}, [], "direct"))
        assert isinstance(result, dict)
        return result


@pytest.fixture(params=["http", "dispatcher"])
async def probe(request: pytest.FixtureRequest) -> AsyncIterator[Caller]:
    async with start_server({"agent-runtime": "probe"}, extra_plugins={"probe": ProbePlugin()}) as server, \
            aiohttp.ClientSession() as http:
        yield Caller(server, http if request.param == "http" else None)


def message(text: str, message_id: str, **fields: Any) -> dict[str, Any]:
    metadata = fields.pop("iac_code", None)
    body = send_message_body(text, message_id=message_id, **fields)
    if metadata is not None:
        body["params"]["message"]["metadata"] = {"iac_code": metadata}
    return body


def answer(reply: dict[str, Any]) -> Any:
    task = reply["result"]["task"]
    return json.loads(task["status"]["message"]["parts"][0]["text"]) if "message" in task["status"] \
        else json.loads([m for m in task["history"] if m["role"] == "ROLE_AGENT"][-1]["parts"][0]["text"])


# ----------------------------------------------------------------------------- contexts


async def test_new_context_and_follow_up_sees_earlier_turn(probe: Caller) -> None:
    first = await probe(message("first question", "m1"))
    context_id = first["result"]["task"]["contextId"]
    assert context_id
    second = await probe(message("second question", "m2", contextId=context_id))
    assert second["result"]["task"]["contextId"] == context_id
    assert second["result"]["task"]["id"] != first["result"]["task"]["id"]
    seen = answer(second)
    assert [h["text"] for h in seen["history"] if h["role"] == "user"] == ["first question"]
    assert seen["sessionTurns"] == 2
    other = answer(await probe(message("elsewhere", "m3")))
    assert other["history"] == [] and other["sessionTurns"] == 1


async def test_offline_runtime_follow_up_edits_the_template(server: RunningServer,
                                                             http: aiohttp.ClientSession) -> None:
    caller = Caller(server, http)
    first = await send_and_answer(caller, message("Create a VPC with two vSwitches", "m1"))
    follow = await send_and_answer(caller, message("add another vSwitch", "m2", contextId=first["contextId"]))
    text = follow["status"]["message"]["parts"][0]["text"]  # the turn's answer
    template = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert [r["Type"] for r in template["Resources"].values()].count("ALIYUN::ECS::VSwitch") == 3
    fresh = await send_and_answer(caller, message("add another vSwitch", "m3"))
    assert "ALIYUN::ECS::VSwitch" not in json.dumps(fresh)


async def test_same_context_other_workspace_is_refused(probe: Caller, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first = await probe(message("hi", "m1", iac_code={"cwd": str(one)}))
    context_id = first["result"]["task"]["contextId"]
    assert answer(first)["cwd"] == str(one.resolve())
    refused = await probe(message("hi", "m2", contextId=context_id, iac_code={"cwd": str(two)}))
    assert refused["error"]["code"] == -32602
    assert refused["error"]["message"] == "A2A context belongs to a different workspace."
    assert str(two) not in json.dumps(refused)
    again = await probe(message("hi", "m3", contextId=context_id, iac_code={"cwd": str(one)}))
    assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_concurrent_message_to_one_context_is_refused_other_contexts_run_in_parallel() -> None:
    plugin = GatedRuntimePlugin()
    async with start_server({"agent-runtime": "gated"}, extra_plugins={"gated": plugin}) as server, \
            aiohttp.ClientSession() as http:
        caller = Caller(server, http)
        first = asyncio.ensure_future(caller(message("one", "m1", contextId="ctx-busy")))
        await asyncio.wait_for(plugin.runtime.started.wait(), 10)
        busy = await caller(message("two", "m2", contextId="ctx-busy"))
        assert busy["error"]["code"] == -32004
        assert busy["error"]["message"] == "Task is already working."
        others = [asyncio.ensure_future(caller(message(f"n{i}", f"p{i}", contextId=f"ctx-{i}"))) for i in range(20)]
        await asyncio.sleep(0)
        plugin.runtime.release.set()
        results = await asyncio.wait_for(asyncio.gather(first, *others), 20)
        assert {r["result"]["task"]["status"]["state"] for r in results} == {"TASK_STATE_INPUT_REQUIRED"}
        listed = await caller({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": "ctx-busy"}})
        assert len(listed["result"]["tasks"]) == 1  # the refused message left no task behind
        after = await caller(message("three", "m3", contextId="ctx-busy"))
        assert after["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_idle_context_is_evicted_and_restored() -> None:
    async with start_server({"agent-runtime": "probe", "context-idle-timeout": 0.1},
                            extra_plugins={"probe": ProbePlugin()}) as server, aiohttp.ClientSession() as http:
        caller = Caller(server, http)
        await caller(message("remember me", "m1", contextId="ctx-evict", iac_code={"channel": "ops"}))
        contexts = server.kernel.contexts
        for _ in range(200):
            if not contexts.loaded("", "ctx-evict"):
                break
            await asyncio.sleep(0.02)
        assert not contexts.loaded("", "ctx-evict")
        seen = answer(await caller(message("and now?", "m2", contextId="ctx-evict")))
        assert [h["text"] for h in seen["history"] if h["role"] == "user"] == ["remember me"]
        assert seen["channel"] == "ops" and seen["sessionTurns"] == 2


async def test_contexts_beyond_the_cache_size_are_unloaded_and_restored() -> None:
    async with start_server({"agent-runtime": "probe", "context-cache-size": 3},
                            extra_plugins={"probe": ProbePlugin()}) as server, aiohttp.ClientSession() as http:
        caller = Caller(server, http)
        await caller(message("remember me", "m1", contextId="ctx-0", iac_code={"channel": "ops"}))
        for n in range(1, 10):
            await caller(message("hi", f"m1-{n}", contextId=f"ctx-{n}"))
        await server.kernel.writer.flush()
        contexts = server.kernel.contexts
        assert len(contexts) <= 3 and not contexts.loaded("", "ctx-0")
        seen = answer(await caller(message("and now?", "m2", contextId="ctx-0")))
        assert [h["text"] for h in seen["history"] if h["role"] == "user"] == ["remember me"]
        assert seen["channel"] == "ops" and seen["sessionTurns"] == 2


# ----------------------------------------------------------------------------- ids


@pytest.mark.parametrize("bad", ["", "has space", "slash/inside", "x" * 129, "ünïcode", "semi;colon"])
async def test_invalid_ids_are_invalid_params(probe: Caller, bad: str) -> None:
    if bad:
        reply = await probe(message("hi", "m1", contextId=bad))
        assert reply["error"]["code"] == -32602
        reply = await probe(message("hi", "m2", taskId=bad))
        assert reply["error"]["code"] == -32602
    for method in ("GetTask", "CancelTask"):
        reply = await probe({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": bad}})
        assert reply["error"]["code"] == -32602, method


async def test_longest_valid_id(probe: Caller) -> None:
    context_id = "a.b:c_d-" + "x" * 120
    reply = await probe(message("hi", "m1", contextId=context_id))
    assert reply["result"]["task"]["contextId"] == context_id


# ----------------------------------------------------------------------------- metadata


async def test_workspace_rules(probe: Caller, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = Path("/")  # not under the server cwd or the temp dir
    link = tmp_path / "escape"
    link.symlink_to(outside)
    bad = ["relative/dir", str(tmp_path / "missing"), "/etc", str(link), f"{tmp_path}/../../../etc",
           str(tmp_path / "file.txt")]
    (tmp_path / "file.txt").write_text("x")
    for index, cwd in enumerate(bad):
        reply = await probe(message("hi", f"w{index}", iac_code={"cwd": cwd}))
        status = reply["result"]["task"]["status"]
        assert status["state"] == "TASK_STATE_FAILED", cwd
        assert status["message"]["parts"][0]["text"] == "Invalid A2A workspace metadata."
        assert cwd not in json.dumps(reply["result"]["task"]["status"])
    ok = await probe(message("hi", "ok", iac_code={"cwd": str(tmp_path)}))
    assert answer(ok)["cwd"] == str(tmp_path.resolve())
    default = await probe(message("hi", "default"))
    assert answer(default)["cwd"] == os.path.realpath(os.getcwd())
    monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", str(tmp_path / "only"))
    (tmp_path / "only").mkdir()
    allowed = await probe(message("hi", "a1", iac_code={"cwd": str(tmp_path / "only")}))
    assert allowed["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    denied = await probe(message("hi", "a2", iac_code={"cwd": str(tmp_path)}))
    assert denied["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"


async def test_channel_binding(probe: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer(await probe(message("hi", "c0", contextId="ch-none")))["channel"] == "unknown"
    monkeypatch.setenv("IAC_CODE_CHANNEL", "from-env")
    assert answer(await probe(message("hi", "c1", contextId="ch-env")))["channel"] == "from-env"
    long = "  " + "c" * 200 + "  "
    assert answer(await probe(message("hi", "c2", contextId="ch", iac_code={"channel": long})))["channel"] == "c" * 128
    assert answer(await probe(message("hi", "c3", contextId="ch")))["channel"] == "c" * 128
    for ignored in ("   ", 42, None):
        seen = answer(await probe(message("hi", f"c4{ignored}", contextId="ch", iac_code={"channel": ignored})))
        assert seen["channel"] == "c" * 128
    assert answer(await probe(message("hi", "c5", contextId="ch", iac_code={"channel": "slack"})))["channel"] == "slack"
    assert answer(await probe(message("hi", "c6", contextId="ch")))["channel"] == "slack"


@pytest.mark.parametrize(("value", "expected"), [("zh-CN", "zh"), (" DE ", "de"), ("pt_BR", "pt"), ("ja", "ja"),
                                                 ("xx", "en"), (7, "en"), (None, "en")])
async def test_preferred_language_is_per_turn(probe: Caller, value: Any, expected: str) -> None:
    seen = answer(await probe(message("hi", "l1", contextId="lang", iac_code={"preferredLanguage": value})))
    assert seen["language"] == expected
    assert answer(await probe(message("hi", "l2", contextId="lang")))["language"] == "en"


# ----------------------------------------------------------------------------- tasks


async def _seed_tasks(probe: Caller, count: int) -> list[dict[str, Any]]:
    tasks = []
    for i in range(count):
        reply = await probe(message(f"t{i}", f"s{i}", contextId="ctx-a" if i % 2 == 0 else "ctx-b"))
        tasks.append(reply["result"]["task"])
    return tasks


async def test_list_tasks_order_filters_and_pages(probe: Caller) -> None:
    tasks = await _seed_tasks(probe, 7)
    failed = await probe(message("x", "bad-ws", contextId="ctx-c", iac_code={"cwd": "relative"}))
    assert failed["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
    everything = (await probe({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))["result"]
    listed = everything["tasks"]
    keys = [(t["status"]["timestamp"], t["id"]) for t in listed]
    assert keys == sorted(keys, reverse=True)
    assert everything["totalSize"] == 8 and everything["nextPageToken"] == ""
    assert "artifacts" not in json.dumps(listed)
    only_a = (await probe({"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {"contextId": "ctx-a"}}))
    assert {t["id"] for t in only_a["result"]["tasks"]} == {t["id"] for t in tasks[::2]}
    failed_only = await probe({"jsonrpc": "2.0", "id": 3, "method": "ListTasks",
                               "params": {"status": "TASK_STATE_FAILED"}})
    assert [t["contextId"] for t in failed_only["result"]["tasks"]] == ["ctx-c"]

    seen: list[str] = []
    token = ""
    for _ in range(10):
        params: dict[str, Any] = {"pageSize": 3, "historyLength": 1}
        if token:
            params["pageToken"] = token
        page = (await probe({"jsonrpc": "2.0", "id": 4, "method": "ListTasks", "params": params}))["result"]
        assert all(len(t.get("history", [])) <= 1 for t in page["tasks"])
        seen += [t["id"] for t in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == [t["id"] for t in listed]

    first = (await probe({"jsonrpc": "2.0", "id": 5, "method": "ListTasks", "params": {"pageSize": 2}}))["result"]
    token = first["nextPageToken"]
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for bad in (tampered, "not-a-token", token.split(".")[0]):
        reply = await probe({"jsonrpc": "2.0", "id": 6, "method": "ListTasks", "params": {"pageToken": bad}})
        assert reply["error"]["code"] == -32602
    for size in (0, 101):
        reply = await probe({"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {"pageSize": size}})
        assert reply["error"]["code"] == -32602, size


async def test_list_tasks_include_artifacts(server: RunningServer, http: aiohttp.ClientSession) -> None:
    caller = Caller(server, http)
    task = await send_and_answer(caller, message("Create a VPC with two vSwitches", "m1"))
    plain = (await caller({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))["result"]["tasks"]
    assert "artifacts" not in plain[0]
    full = await caller({"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {"includeArtifacts": True}})
    assert full["result"]["tasks"][0]["artifacts"] == task["artifacts"]


async def test_subscribe_to_a_terminal_task_fails_at_once(probe: Caller) -> None:
    failed = (await probe(message("hi", "m2", iac_code={"cwd": "relative"})))["result"]["task"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    reply = await asyncio.wait_for(probe({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                                          "params": {"id": failed["id"]}}), 5)
    assert reply["error"]["code"] == -32004  # UnsupportedOperationError, not a stream
    assert reply["error"]["message"] == f"Task {failed['id']} is in terminal state: TASK_STATE_FAILED"


# ----------------------------------------------------------------------------- artifacts and errors


async def test_template_artifact_is_an_http_url(server: RunningServer, http: aiohttp.ClientSession) -> None:
    body = message("Create a VPC with two vSwitches", "m1")
    body["method"] = "SendStreamingMessage"
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        events, _ = parse_sse(await r.text())
    envelope = permission_envelope(events[-1]["result"]["statusUpdate"])  # the stream ended at the write's question
    assert envelope is not None and envelope["toolName"] == "write_file"
    answer = permission_answer_body(envelope, method="SendStreamingMessage")
    async with http.post(server.url, json=answer, headers=A2A_HEADERS) as r:
        events += parse_sse(await r.text())[0]
    updates = [e["result"]["artifactUpdate"] for e in events if "artifactUpdate" in e["result"]]
    assert len(updates) == 1
    part = updates[0]["artifact"]["parts"][0]
    assert part["url"].startswith(server.url + "iac-code/artifacts/") and part["mediaType"] == "text/yaml"
    async with http.get(part["url"]) as r:
        content = await r.read()
    assert part["metadata"] == {"mediaType": "text/yaml", "byteSize": len(content),
                                "sha256": hashlib.sha256(content).hexdigest()}
    assert b"ALIYUN::ECS::VSwitch" in content
    tools = [e["result"]["statusUpdate"]["metadata"]["iac_code"]["tool"] for e in events
             if "statusUpdate" in e["result"] and "tool" in e["result"]["statusUpdate"].get("metadata", {}).get(
                 "iac_code", {})]
    completed = [t for t in tools if t["status"] == "completed" and t["name"] == "write_file"][0]
    assert "ALIYUN::ECS::VSwitch" not in json.dumps(completed)
    assert completed["artifact"]["sha256"] == hashlib.sha256(content).hexdigest()
    assert completed["artifact"]["url"] == part["url"]
    task_id = updates[0]["taskId"]
    got = await Caller(server, http)({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}})
    assert got["result"]["artifacts"][0]["parts"][0]["url"] == part["url"]


async def test_runtime_error_is_sanitised() -> None:
    async with start_server({"agent-runtime": "failing"}, extra_plugins={"probe": ProbePlugin()}) as server, \
            aiohttp.ClientSession() as http:
        reply = await Caller(server, http)(message("hi", "m1"))
    status = reply["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    text = json.dumps(reply)
    assert "/home/secret" not in text and "sk-live" not in text and "Traceback" not in text
