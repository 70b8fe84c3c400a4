"""kill -9 of a real ``iac-code a2a`` server (``deployer: ros``, credentials from the environment) in the middle of a
deploy, then a restart on the same persistence directory: the next message resumes the deploy, the stack is
created exactly once (the fake ROS counts), ``sequence`` stays gapless, the state endpoint equals what was streamed.

Three cuts: while the permission question waits (no answer can reach the dead server: the deploy is asked again,
never run without an allow), after CreateStack was sent but before ROS answered it (the resume sends it again with
the same ClientToken: ROS answers with the same stack), and while the stack is being polled (the resume polls the
recorded stack)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import A2A_HEADERS, connect_client, permission_answer_request

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
LISTENING = re.compile(r"listening: (http://\S+) \(JSONRPC\)")
PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
KEY_ID = "LTAI5tCrashTestKeyId"
SECRET = "crash-secret-7d1e2f"
Event = dict[str, Any]


@asynccontextmanager
async def server_process(config: Path, workspace: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``iac-code a2a --config <config>`` as its own process with ROS credentials in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_", "ALIBABA_CLOUD_"))}
    env.update({"IAC_CODE_CONFIG_DIR": str(config.parent), "ALIBABA_CLOUD_ACCESS_KEY_ID": KEY_ID,
                "ALIBABA_CLOUD_ACCESS_KEY_SECRET": SECRET})
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--config", str(config), "--port", "0", env=env, cwd=workspace,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "server exited early"
            assert SECRET not in line
            match = LISTENING.search(line)
            if match:
                break
        yield proc, match.group(1)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


def pipeline_events(results: list[Event]) -> list[Event]:
    found: list[Event] = []
    for result in results:
        section = result.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})
        for event in [section["pipeline"]] if "pipeline" in section else section.get("pipelineBatch", {}).get("events", []):
            if event not in found:
                found.append(event)
    return found


def text_request(text: str, n: int, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=f"crash-{n}", role=Role.ROLE_USER, parts=[Part(text=text)],
                                              context_id=context_id, task_id=task_id))


async def collect(client: Any, request: SendMessageRequest, into: list[Event]) -> None:
    async for event in client.send_message(request):
        into.append(MessageToDict(event))


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.02)
    try:
        await asyncio.wait_for(wait(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def journal_of(url: str, context_id: str) -> list[Event]:
    async with aiohttp.ClientSession() as http, http.get(
            url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id}, headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return (await reply.json())["events"]  # type: ignore[no-any-return]


def assert_sound(events: list[Event]) -> None:
    """Gapless sequences from 1, each event once, every lifecycle event of a step at most once."""
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["eventId"] for e in events}) == len(events)
    once = Counter((e["eventType"], e.get("step", {}).get("runId"), e.get("candidate", {}).get("runId"),
                    e.get("candidateStep", {}).get("runId"), e["data"].get("stepId")) for e in events
                   if e["eventType"] not in ("input_required", "pipeline_resumed", "stack_progress", "cleanup_progress",
                                             "permission_requested", "permission_resolved"))
    assert not {k: c for k, c in once.items() if c > 1}


CUTS = ["permission question", "CreateStack unanswered", "CreateStack unanswered, token expired", "stack polling"]


@pytest.mark.parametrize("cut", CUTS)
async def test_kill_9_in_the_middle_of_a_deploy_creates_the_stack_once(cut: str, tmp_path: Path, fake_ros: Any) -> None:
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(state_dir), "deployer": "ros",
                                      "ros-endpoint": fake_ros.endpoint, "ros-poll-interval-seconds": 0.05}))
    if cut.startswith("CreateStack unanswered"):
        fake_ros.gate_create = asyncio.Event()
    if cut == "stack polling":
        fake_ros.hold = True

    async with server_process(config, workspace) as (proc, url):
        async with connect_client(url) as client:
            first: list[Event] = []
            await collect(client, text_request(PROMPT, 1), first)
            last = [r["statusUpdate"] for r in first if "statusUpdate" in r][-1]
            context_id, task_id = last["contextId"], last["taskId"]
            second: list[Event] = []
            await collect(client, text_request("candidate 1", 2, context_id, task_id), second)
            paused = [r["statusUpdate"] for r in second if "statusUpdate" in r][-1]
            envelope = paused["metadata"]["iac_code"]["input"]
            assert envelope["toolName"] == "ros_deploy"
            streamed = pipeline_events(first) + pipeline_events(second)
            answered: list[Event] = []
            answering = None
            if cut != "permission question":
                answering = asyncio.create_task(
                    collect(client, permission_answer_request(envelope, "allow_once", message_id="allow"), answered))
                if cut.startswith("CreateStack unanswered"):
                    await until(fake_ros.create_received.is_set, "CreateStack")
                else:
                    await until(lambda: any(e["eventType"] == "stack_progress" for e in pipeline_events(answered)),
                                "the first stack_progress")
            proc.kill()  # SIGKILL: whatever the turn was doing is cut
            await proc.wait()
            if answering is not None:
                answering.cancel()
                await asyncio.gather(answering, return_exceptions=True)
            streamed += pipeline_events(answered)
    assert fake_ros.created == (0 if cut == "permission question" else 1)

    if fake_ros.gate_create is not None:
        fake_ros.gate_create.set()  # the next CreateStack (the resume's) is answered at once
    if cut.endswith("token expired"):
        fake_ros.tokens.clear()  # ROS no longer matches the ClientToken: the stack is found by its name
    fake_ros.release()
    async with server_process(config, workspace) as (_, url):
        journaled = await journal_of(url, context_id)
        assert journaled[:len(streamed)] == streamed  # everything streamed had been journaled, as streamed
        assert_sound(journaled)
        async with connect_client(url) as client:
            n = 3
            if cut == "permission question":  # the dead server's question cannot be answered: it is asked again
                resumed: list[Event] = []
                await collect(client, text_request("continue", n, context_id), resumed)
                n += 1
                again = [r["statusUpdate"] for r in resumed if "statusUpdate" in r][-1]["metadata"]["iac_code"]["input"]
                assert again["toolName"] == "ros_deploy" and again["toolUseId"] != envelope["toolUseId"]
                assert fake_ros.created == 0
                more = pipeline_events(resumed)
                assert more[0]["eventType"] == "pipeline_resumed" and more[-1]["eventType"] == "permission_requested"
                rest: list[Event] = []
                await collect(client, permission_answer_request(again, "allow_once", message_id="allow-2"), rest)
                more += pipeline_events(rest)
            else:
                rest = []
                await collect(client, text_request("continue", n, context_id), rest)
                more = pipeline_events(rest)
                assert more[0]["eventType"] == "pipeline_resumed"
                assert "permission_requested" not in [e["eventType"] for e in more]  # the allow was recorded
        assert more[0]["sequence"] == journaled[-1]["sequence"] + 1
        types = [e["eventType"] for e in more]
        assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"], types
        assert more[-3]["data"]["conclusion"]["status"] == "success"
        assert more[-3]["data"]["conclusion"]["stack_id"] == next(iter(fake_ros.stacks))

        final = await journal_of(url, context_id)
        assert final == journaled + more  # the state endpoint: the journal, as streamed
        assert_sound(final)
        assert [e["data"]["stepId"] for e in final if e["eventType"] == "step_completed"].count("deploying") == 1
        progress = [e for e in final if e["eventType"] == "stack_progress"]
        assert progress[-1]["data"]["status"] == "CREATE_COMPLETE"
        assert {e["data"]["stackId"] for e in progress} == set(fake_ros.stacks)

    assert fake_ros.created == 1 and len(fake_ros.stacks) == 1  # exactly once
    if cut == "CreateStack unanswered":  # sent again with the same token: ROS answered with the same stack
        assert fake_ros.calls.count("CreateStack") == 2 and len(fake_ros.tokens) == 1
        assert "ListStacks" not in fake_ros.calls
    elif cut.endswith("token expired"):  # sent again, refused (the name exists): the stack of that name adopted
        assert fake_ros.calls.count("CreateStack") == 2 and "ListStacks" in fake_ros.calls
    else:
        assert fake_ros.calls.count("CreateStack") == 1
    assert fake_ros.key_ids == {KEY_ID}


CLEANUP_CUTS = ["delete permission question", "DeleteStack unanswered", "delete polling"]


@pytest.mark.parametrize("cut", CLEANUP_CUTS)
async def test_kill_9_in_the_middle_of_a_cleanup_deletes_the_stack_once(cut: str, tmp_path: Path,
                                                                        fake_ros: Any) -> None:
    """A ``cleanupOnly`` continuation cut by kill -9 is resumed by the next one: the question asked again when no
    decision was recorded, else no new question; DeleteStack reaches ROS once; the stack is deleted once."""
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(state_dir), "deployer": "ros",
                                      "ros-endpoint": fake_ros.endpoint, "ros-poll-interval-seconds": 0.05,
                                      "permission-rules": {"allow": ["ros_deploy"]}}))
    if cut == "DeleteStack unanswered":
        fake_ros.gate_delete = asyncio.Event()
    if cut == "delete polling":
        fake_ros.hold_delete = True
    cleanup_only = {"iac_code": {"cleanupOnly": True}}

    async with server_process(config, workspace) as (proc, url):
        async with connect_client(url) as client:
            first: list[Event] = []
            await collect(client, text_request(PROMPT, 1), first)
            last = [r["statusUpdate"] for r in first if "statusUpdate" in r][-1]
            context_id, task_id = last["contextId"], last["taskId"]
            second: list[Event] = []
            await collect(client, text_request("candidate 1", 2, context_id, task_id), second)
            streamed = pipeline_events(first) + pipeline_events(second)
            assert streamed[-1]["eventType"] == "pipeline_handoff_ready" and fake_ros.created == 1
            request = text_request("clean up", 3, context_id)
            request.message.metadata.update(cleanup_only)
            asked: list[Event] = []
            await collect(client, request, asked)
            envelope = [r["statusUpdate"] for r in asked if "statusUpdate" in r][-1]["metadata"]["iac_code"]["input"]
            assert envelope["toolName"] == "ros_delete_stack"
            streamed += pipeline_events(asked)
            answered: list[Event] = []
            answering = None
            if cut != "delete permission question":
                answering = asyncio.create_task(
                    collect(client, permission_answer_request(envelope, "allow_once", message_id="allow"), answered))
                if cut == "DeleteStack unanswered":
                    await until(fake_ros.delete_received.is_set, "DeleteStack")
                else:
                    await until(lambda: any(e["eventType"] == "cleanup_progress" for e in pipeline_events(answered)),
                                "the first cleanup_progress")
            proc.kill()  # SIGKILL: whatever the turn was doing is cut
            await proc.wait()
            if answering is not None:
                answering.cancel()
                await asyncio.gather(answering, return_exceptions=True)
            streamed += pipeline_events(answered)
    assert fake_ros.deletions == (0 if cut == "delete permission question" else 1)

    if fake_ros.gate_delete is not None:
        fake_ros.gate_delete.set()
    fake_ros.release()
    async with server_process(config, workspace) as (_, url):
        journaled = await journal_of(url, context_id)
        assert journaled[:len(streamed)] == streamed  # everything streamed had been journaled, as streamed
        assert_sound(journaled)
        async with connect_client(url) as client:
            request = text_request("clean up", 4, context_id)
            request.message.metadata.update(cleanup_only)
            resumed: list[Event] = []
            await collect(client, request, resumed)
            more = pipeline_events(resumed)
            if cut == "delete permission question":  # no decision was recorded: asked again, never taken as allowed
                again = [r["statusUpdate"] for r in resumed if "statusUpdate" in r][-1]["metadata"]["iac_code"]["input"]
                assert again["toolName"] == "ros_delete_stack" and again["toolUseId"] != envelope["toolUseId"]
                assert more[-1]["eventType"] == "permission_requested" and fake_ros.deletions == 0
                rest: list[Event] = []
                await collect(client, permission_answer_request(again, "allow_once", message_id="allow-2"), rest)
                more += pipeline_events(rest)
            else:
                assert "permission_requested" not in [e["eventType"] for e in more]  # the allow was recorded
        assert more[0]["sequence"] == journaled[-1]["sequence"] + 1
        assert [e["eventType"] for e in more][-2:] == ["stack_current_changed", "cleanup_completed"]
        assert more[-1]["data"]["outcome"] == "deleted"
        final = await journal_of(url, context_id)
        assert final == journaled + more  # the state endpoint: the journal, as streamed
        assert_sound(final)
        assert len({e["data"]["cleanupId"] for e in final if e["eventType"] == "cleanup_started"}) == 1
        assert len([e for e in final if e["eventType"] == "cleanup_started"]) == 1  # the resume is the same cleanup

    assert fake_ros.created == 1 and fake_ros.deletions == 1 and not fake_ros.alive()
    assert fake_ros.calls.count("DeleteStack") == 1  # sent once, also across the cut
