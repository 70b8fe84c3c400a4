"""Project-server answers are durable: ``iac-code a2a`` runs as its own process on a persistence directory and
is killed with SIGKILL (``kill -9``); after the restart a denied ``.mcp.json`` server stays denied without a
question, an approved one starts without a question, a new context (or a changed definition) is asked, and a
question that was still open when the process died leaves its task interrupted (it is not a durable wait); a paused
MCP tool call is a durable wait: answered after the restart, the call runs once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import stat
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import ServerProcess, connect_client, permission_answer_request, server_process

from iac_code_mcp.approvals import FILE_NAME, ApprovalStore, approval_key

SERVER = str(Path(__file__).with_name("demo_server.py"))
SECRET = "S3CRET-mcp-restart-41c9"
PROMPT = "use the proj MCP server to echo text=hi"


def _process(config_dir: Path, workspace: Path) -> contextlib.AbstractAsyncContextManager[ServerProcess]:
    """``iac-code a2a`` in its default configuration (state under ``config_dir``/a2a, workspace ``workspace``)."""
    return server_process(cwd=workspace, env={"IAC_CODE_CONFIG_DIR": str(config_dir)},
                          drop_env=("IACCODE_A2A_", "IAC_CODE_A2A_SAFE_MODE"), start_timeout=60)


def _meta(update: dict[str, Any]) -> dict[str, Any]:
    return update.get("metadata", {}).get("iac_code", {})


def _updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e]


def _all(events: list[dict[str, Any]], key: str) -> list[Any]:
    return [_meta(u)[key] for u in _updates(events) if key in _meta(u)]


def _said(events: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for u in _updates(events)
                   for p in u.get("status", {}).get("message", {}).get("parts", []))


async def _send(client: Any, text: str, context_id: str) -> list[dict[str, Any]]:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
                      context_id=context_id)
    return [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]


async def _turn(client: Any, context_id: str, decision: str = "allow_once") -> list[dict[str, Any]]:
    """Ask for the demo echo; answer every question with ``decision``; every event of the turn."""
    events = await _send(client, PROMPT, context_id)
    for _ in range(4):
        updates = _updates(events)
        envelope = _meta(updates[-1]).get("input") if updates else None
        if not envelope or updates[-1]["status"]["state"] != "TASK_STATE_INPUT_REQUIRED":
            return events
        answer = permission_answer_request(envelope, decision, message_id=f"answer-{uuid.uuid4().hex}")
        events += [MessageToDict(e) async for e in client.send_message(answer)]
    raise AssertionError("too many questions")


def _proj(events: list[dict[str, Any]]) -> dict[str, Any]:
    [proj] = _all(events, "mcpStatus")[-1]["servers"]
    return proj


def _write_project(workspace: Path, *extra: str) -> None:
    server = {"command": sys.executable, "args": [SERVER, "stdio", f"--token={SECRET}", *extra],
              "env": {"DEMO_SECRET": SECRET}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": server}}))


async def _kill_9(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGKILL)
    await asyncio.wait_for(proc.wait(), 30)


@pytest.mark.timeout(300)
async def test_project_server_answers_survive_kill_9(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_dir, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    monkeypatch.delenv("IAC_CODE_A2A_SAFE_MODE", raising=False)
    _write_project(workspace)

    async with _process(config_dir, workspace) as (proc, url), connect_client(url, timeout=60) as client:
        denied = await _turn(client, "ctx-deny", decision="deny")
        assert [a["toolName"] for a in _all(denied, "input")] == ["mcp_project_server_approval"]
        assert _proj(denied)["approvalState"] == "denied"
        approved = await _turn(client, "ctx-allow")
        assert [a["toolName"] for a in _all(approved, "input")] == ["mcp_project_server_approval"]
        assert _proj(approved)["approvalState"] == "approved" and "echo: hi" in _said(approved)
        await _kill_9(proc)

    kept = config_dir / "a2a" / FILE_NAME
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    text = kept.read_text()
    assert len(json.loads(text)["decisions"]) == 2
    assert SECRET not in text and "ctx-deny" not in text and str(workspace) not in text and "proj" not in text

    async with _process(config_dir, workspace) as (proc, url), connect_client(url, timeout=60) as client:
        still = await _turn(client, "ctx-deny")
        assert _all(still, "input") == []  # denied stays denied: no question
        assert _proj(still)["approvalState"] == "denied" and _proj(still)["connectionState"] == "disabled"
        assert "echo: hi" not in _said(still)
        again = await _turn(client, "ctx-allow")
        assert _all(again, "input") == []  # approved: starts without asking
        assert _proj(again)["approvalState"] == "approved" and _proj(again)["connectionState"] == "connected"
        assert "echo: hi" in _said(again)
        fresh = await _turn(client, "ctx-new", decision="deny")  # the answers hold per context
        assert [a["toolName"] for a in _all(fresh, "input")] == ["mcp_project_server_approval"]

        # A question still open when the process dies is not a durable wait: its task is interrupted and
        # nothing was decided, so the context's next turn asks again.
        open_question = await _send(client, PROMPT, "ctx-open")
        [envelope] = _all(open_question, "input")
        assert envelope["toolName"] == "mcp_project_server_approval"
        assert "permissionWait" not in _meta(_updates(open_question)[-1])
        await _kill_9(proc)

    _write_project(workspace)  # unchanged definition
    async with _process(config_dir, workspace) as (proc, url), connect_client(url, timeout=60) as client:
        task = await client.get_task(GetTaskRequest(id=envelope["requestTaskId"]))
        assert MessageToDict(task)["status"]["state"] == "TASK_STATE_FAILED"
        late = permission_answer_request(envelope, "allow_once", message_id="late-answer")
        with pytest.raises(InvalidParamsError) as refused:
            [e async for e in client.send_message(late)]
        assert refused.value.message == "permission_resume_invalid: pending permission is not active."
        asked = await _turn(client, "ctx-open", decision="deny")
        assert [a["toolName"] for a in _all(asked, "input")] == ["mcp_project_server_approval"]
        assert _all(await _turn(client, "ctx-new"), "input") == []  # denied before the kill: still denied

        _write_project(workspace, "--changed")  # another definition: the answer does not hold for it
        changed = await _turn(client, "ctx-allow")
        assert [a["toolName"] for a in _all(changed, "input")] == ["mcp_project_server_approval"]
        assert "echo: hi" in _said(changed)


async def test_the_kept_answers_are_bounded_and_an_unreadable_file_allows_nothing(tmp_path: Path) -> None:
    keys = [approval_key(f"ctx-{n}", "/w", "proj", "f" * 16) for n in range(3)]
    store = ApprovalStore(tmp_path, limit=2)
    await store.put(keys[0], False)
    await store.put(keys[1], True)
    assert store.get(keys[0]) is False  # now the most recently used
    await store.put(keys[2], True)
    assert len(store) == 2 and store.get(keys[1]) is None

    reread = ApprovalStore(tmp_path, limit=2)
    assert (reread.get(keys[0]), reread.get(keys[2])) == (False, True)
    assert len(ApprovalStore(tmp_path, limit=1)) == 1  # a lower limit than when written

    (tmp_path / FILE_NAME).write_text('{"version": 1, "decisions": [{"key": "x", "decision": "approved"}]}')
    broken = ApprovalStore(tmp_path, limit=2)
    assert broken.get(keys[2]) is None and len(broken) == 0
    await broken.put(keys[0], True)
    assert json.loads((tmp_path / FILE_NAME).read_text())["decisions"][0]["decision"] == "approved"
    assert ApprovalStore(tmp_path, limit=2).get(keys[0]) is True


@pytest.mark.timeout(300)
async def test_a_paused_mcp_call_is_answered_after_kill_9_and_runs_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resumed runtime starts its MCP servers again (publishing ``mcpStatus``) before it asks the same call's
    permission: the answer still resumes exactly that call."""
    config_dir, workspace, marker = tmp_path / "home", tmp_path / "work", tmp_path / "marker"
    workspace.mkdir()
    config_dir.mkdir()
    monkeypatch.delenv("IAC_CODE_A2A_SAFE_MODE", raising=False)
    server = {"command": sys.executable, "args": [SERVER, "stdio"], "env": {"DEMO_MARKER": str(marker)}}
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": {"demo": server}}))

    async with _process(config_dir, workspace) as (proc, url), connect_client(url, timeout=60) as client:
        paused = await _send(client, "use the demo MCP server to count_up steps=2", "ctx-paused")
        [envelope] = _all(paused, "input")
        assert envelope["toolName"] == "mcp__demo__count_up"
        assert _updates(paused)[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await _kill_9(proc)
    assert not marker.exists()

    async with _process(config_dir, workspace) as (proc, url), connect_client(url, timeout=60) as client:
        task = MessageToDict(await client.get_task(GetTaskRequest(id=envelope["requestTaskId"])))
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        answer = permission_answer_request(envelope, "allow_once", message_id="after-restart")
        resumed = [MessageToDict(e) async for e in client.send_message(answer)]
        assert _all(resumed, "permissionRecovered") == [
            {"inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"]}]
        [received] = _all(resumed, "inputReceived")
        assert received["recovered"] is True and received["duplicate"] is False
        assert "counted to 2" in _said(resumed)
        assert _all(resumed, "mcpStatus"), "the restarted server's status is published after the recovery"
        again = permission_answer_request(envelope, "allow_once", message_id="after-restart-again")
        repeated = [MessageToDict(e) async for e in client.send_message(again)]
        assert repeated and "counted to 2" not in _said(repeated)
    assert marker.read_text().split() == ["counted"]  # the call ran exactly once
