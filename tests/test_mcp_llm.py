"""The ``llm`` runtime with MCP tools (issue 32): a scripted OpenAI-compatible model calls the tools of a real MCP
server (the ``mcp`` SDK demo server of plugins/mcp/tests) through a real iac-code server and a2a-sdk's client; the
tools are offered as function tools with their schema, progress arrives as ``mcpProgress``, a non-read-only call
asks and is allowed or denied as answered, a read-only one does not ask; cancelling the task while the model's MCP call
runs sends ``notifications/cancelled`` to the MCP server."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, permission_answer_request, start_server
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks

SERVER = str(Path(__file__).resolve().parents[1] / "plugins" / "mcp" / "tests" / "demo_server.py")
SECRET = "S3CRET-mcp-llm-value-2b7c"


def _meta(update: dict[str, Any]) -> dict[str, Any]:
    return update.get("metadata", {}).get("iac_code", {})


def _updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e]


def _all(events: list[dict[str, Any]], key: str) -> list[Any]:
    return [_meta(u)[key] for u in _updates(events) if key in _meta(u)]


def _said(events: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for u in _updates(events)
                   for p in u.get("status", {}).get("message", {}).get("parts", []))


def _no_secret(events: list[dict[str, Any]]) -> None:
    assert SECRET not in json.dumps(events)


async def _turn(client: Any, text: str, context_id: str, decision: str = "allow_once") -> list[dict[str, Any]]:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id)
    events = [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]
    for _ in range(6):
        updates = _updates(events)
        envelope = _meta(updates[-1]).get("input") if updates else None
        if not envelope or updates[-1]["status"]["state"] != "TASK_STATE_INPUT_REQUIRED":
            return events
        answer = permission_answer_request(envelope, decision, message_id=f"answer-{uuid.uuid4().hex}")
        events += [MessageToDict(e) async for e in client.send_message(answer)]
    raise AssertionError("too many questions")


def _write_user_config(config_dir: Path, servers: dict[str, Any]) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def _stdio(marker: Path | None = None) -> dict[str, Any]:
    env = {"DEMO_SECRET": SECRET, **({"DEMO_MARKER": str(marker)} if marker is not None else {})}
    return {"command": sys.executable, "args": [SERVER, "stdio", f"--token={SECRET}"], "env": env}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("IAC_CODE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("IAC_CODE_A2A_SAFE_MODE", raising=False)
    return work


async def test_the_llm_runtime_offers_and_calls_mcp_tools(workspace: Path, tmp_path: Path) -> None:
    _write_user_config(tmp_path / "config", {"demo": _stdio()})

    def call(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
        return Reply.stream([*tool_call_chunks(0, call_id, name, json.dumps(arguments)), finish_chunk("tool_calls")])

    def done(text: str) -> Reply:
        return Reply.stream([text_chunk(text), finish_chunk("stop")])

    script = [call("c1", "mcp__demo__count_up", {"steps": 2}), done("Counted."),
              call("c2", "mcp__demo__count_up", {"steps": 4}), done("Not allowed."),
              call("c3", "mcp__demo__echo", {"text": "read"}), done("Echoed.")]
    async with OpenAIStub(script) as stub:
        settings = {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test-key-000",
                    "llm-retry-backoff": 0.01, "llm-timeout": 30}
        async with start_server(settings) as server, connect_client(server) as client:
            allowed = await _turn(client, "count to two", "ctx-l")
            offered = {t["function"]["name"]: t["function"] for t in stub.requests[0].body["tools"]}
            assert "mcp" not in offered, offered.keys()
            assert "mcp__demo__count_up" in offered, (offered.keys(), _all(allowed, "mcpStatus"), _said(allowed))
            assert offered["mcp__demo__count_up"]["parameters"]["properties"]["steps"]["type"] == "integer"
            assert offered["mcp__demo__count_up"]["description"].startswith("[MCP demo]")
            [asked] = _all(allowed, "input")
            assert asked["toolName"] == "mcp__demo__count_up" and asked["toolUseId"] == "c1"
            assert [p["progress"] for p in _all(allowed, "mcpProgress")] == [1, 2]
            [tool_message] = [m for m in stub.requests[1].body["messages"] if m.get("role") == "tool"]
            assert "counted to 2" in tool_message["content"]
            assert "Counted." in _said(allowed)

            denied = await _turn(client, "count to four", "ctx-l", decision="deny")
            assert _all(denied, "mcpProgress") == []
            tool_messages = [m for m in stub.requests[3].body["messages"] if m.get("role") == "tool"]
            assert "permission denied" in tool_messages[-1]["content"]

            read = await _turn(client, "echo", "ctx-l")
            assert _all(read, "input") == []  # read-only: no question
            tool_messages = [m for m in stub.requests[5].body["messages"] if m.get("role") == "tool"]
            assert "echo: read" in tool_messages[-1]["content"]
            _no_secret(allowed + denied + read)


async def test_cancelling_the_task_cancels_the_models_mcp_call(workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"  # the demo server writes "started", then "cancelled" when told
    _write_user_config(tmp_path / "config", {"demo": _stdio(marker)})
    script = [Reply.stream([*tool_call_chunks(0, "c-slow", "mcp__demo__slow", json.dumps({"seconds": 60})),
                            finish_chunk("tool_calls")]),
              Reply.stream([text_chunk("Stopped."), finish_chunk("stop")])]
    async with OpenAIStub(script) as stub:
        settings = {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test-key-000",
                    "llm-retry-backoff": 0.01, "llm-timeout": 30}
        async with start_server(settings) as server, connect_client(server) as client:
            message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text="wait a minute")],
                              context_id="ctx-cancel")
            events = [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]
            [envelope] = _all(events, "input")  # not read-only: it asks first
            assert envelope["toolName"] == "mcp__demo__slow" and envelope["toolUseId"] == "c-slow"
            answer = permission_answer_request(envelope, "allow_once", message_id="answer-slow")
            seen: list[dict[str, Any]] = []

            async def follow() -> None:
                async for event in client.send_message(answer):
                    seen.append(MessageToDict(event))

            follower = asyncio.create_task(follow())
            deadline = time.monotonic() + 60
            while not (marker.exists() and "started" in marker.read_text()):
                assert time.monotonic() < deadline, "the model's MCP call never started"
                assert not follower.done(), seen
                await asyncio.sleep(0.05)
            await client.cancel_task(CancelTaskRequest(id=envelope["requestTaskId"]))
            while "cancelled" not in marker.read_text():
                assert time.monotonic() < deadline, "the MCP server never heard the cancellation"
                await asyncio.sleep(0.05)
            await asyncio.wait_for(follower, 30)
            assert _updates(seen)[-1]["status"]["state"] == "TASK_STATE_CANCELED"
            assert len(stub.requests) == 1  # the model is not asked again after the cancellation
            _no_secret(events + seen)
