"""kill -9 of a real ``iac-code a2a`` server (``deployer: ros``, credentials from the environment) in the middle of a
deploy, then a restart on the same persistence directory: the next message resumes the deploy, the stack is
created exactly once (the fake ROS counts), ``sequence`` stays gapless, the state endpoint equals what was streamed.

Cuts: after CreateStack was sent but before ROS answered it (the resume sends it again with the same ClientToken:
ROS answers with the same stack), and while the stack is being polled (the resume polls the recorded stack); the same
for a ``cleanupOnly`` continuation's DeleteStack. And while the deploy's (or the cleanup's) permission question waits:
a durable permission wait (since-0.13 §4), so after the restart the task is still INPUT_REQUIRED with the same
question, its answer resumes exactly that call (allow: CreateStack / DeleteStack once; deny: declined as without the
crash) and the same answer again is only acknowledged (``duplicate: true``), nothing run twice. And the deploy's
further attempts (``continue_create``, ``delete_and_create``): cut while ROS holds an answer, or while the attempt's
question waits."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import A2A_HEADERS, ServerProcess, connect_client, permission_answer_request
from iac_code.testing import server_process as iac_code_process
from iac_code_pipeline_selling.runner import lifecycle

from pipeline_selling_test_streams import pipeline_events


PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
KEY_ID = "LTAI5tCrashTestKeyId"
SECRET = "crash-secret-7d1e2f"
Event = dict[str, Any]


def server_process(config: Path, workspace: Path) -> AbstractAsyncContextManager[ServerProcess]:
    """``iac-code a2a --config <config>`` as its own process with ROS credentials in its environment (none of this
    environment's ``IAC_CODE_*``/``ALIBABA_CLOUD_*``); its start-up log never shows the secret."""
    return iac_code_process(config=config, cwd=workspace, drop_env=("IACCODE_A2A_", "IAC_CODE_", "ALIBABA_CLOUD_"),
                            env={"IAC_CODE_CONFIG_DIR": str(config.parent), "ALIBABA_CLOUD_ACCESS_KEY_ID": KEY_ID,
                                 "ALIBABA_CLOUD_ACCESS_KEY_SECRET": SECRET},
                            on_startup_line=_no_secret)


def _no_secret(line: str) -> None:
    assert SECRET not in line


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
                    e.get("candidateStep", {}).get("runId"), e["data"].get("stepId")) for e in lifecycle(events)
                   if e["eventType"] not in ("input_required", "pipeline_resumed", "stack_progress", "cleanup_progress",
                                             "permission_requested", "permission_resolved"))
    assert not {k: c for k, c in once.items() if c > 1}


CUTS = ["CreateStack unanswered", "CreateStack unanswered, token expired", "stack polling"]


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
            answering = asyncio.create_task(
                collect(client, permission_answer_request(envelope, "allow_once", message_id="allow"), answered))
            if cut.startswith("CreateStack unanswered"):
                await until(fake_ros.create_received.is_set, "CreateStack")
            else:
                await until(lambda: any(e["eventType"] == "stack_progress" for e in pipeline_events(answered)),
                            "the first stack_progress")
            proc.kill()  # SIGKILL: whatever the turn was doing is cut
            await proc.wait()
            answering.cancel()
            await asyncio.gather(answering, return_exceptions=True)
            streamed += pipeline_events(answered)
    assert fake_ros.created == 1

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
            rest: list[Event] = []
            await collect(client, text_request("continue", 3, context_id), rest)
            more = pipeline_events(rest)
            assert more[0]["eventType"] == "pipeline_resumed"
            assert "permission_requested" not in lifecycle([e["eventType"] for e in more])  # the allow was recorded
        assert more[0]["sequence"] == journaled[-1]["sequence"] + 1
        types = lifecycle([e["eventType"] for e in more])
        assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"], types
        assert lifecycle(more)[-3]["data"]["conclusion"]["status"] == "success"
        assert lifecycle(more)[-3]["data"]["conclusion"]["stack_id"] == next(iter(fake_ros.stacks))

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


CLEANUP_CUTS = ["DeleteStack unanswered", "delete polling"]


@pytest.mark.parametrize("cut", CLEANUP_CUTS)
async def test_kill_9_in_the_middle_of_a_cleanup_deletes_the_stack_once(cut: str, tmp_path: Path,
                                                                        fake_ros: Any) -> None:
    """A ``cleanupOnly`` continuation cut by kill -9 after its allow is resumed by the next one: no new question;
    DeleteStack reaches ROS once; the stack is deleted once."""
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
            answering = asyncio.create_task(
                collect(client, permission_answer_request(envelope, "allow_once", message_id="allow"), answered))
            if cut == "DeleteStack unanswered":
                await until(fake_ros.delete_received.is_set, "DeleteStack")
            else:
                await until(lambda: any(e["eventType"] == "cleanup_progress" for e in pipeline_events(answered)),
                            "the first cleanup_progress")
            proc.kill()  # SIGKILL: whatever the turn was doing is cut
            await proc.wait()
            answering.cancel()
            await asyncio.gather(answering, return_exceptions=True)
            streamed += pipeline_events(answered)
    assert fake_ros.deletions == 1

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
            assert "permission_requested" not in lifecycle([e["eventType"] for e in more])  # the allow was recorded
        assert more[0]["sequence"] == journaled[-1]["sequence"] + 1
        assert lifecycle([e["eventType"] for e in more])[-2:] == ["stack_current_changed", "cleanup_completed"]
        assert lifecycle(more)[-1]["data"]["outcome"] == "deleted"
        final = await journal_of(url, context_id)
        assert final == journaled + more  # the state endpoint: the journal, as streamed
        assert_sound(final)
        assert len({e["data"]["cleanupId"] for e in final if e["eventType"] == "cleanup_started"}) == 1
        assert len([e for e in final if e["eventType"] == "cleanup_started"]) == 1  # the resume is the same cleanup

    assert fake_ros.created == 1 and fake_ros.deletions == 1 and not fake_ros.alive()
    assert fake_ros.calls.count("DeleteStack") == 1  # sent once, also across the cut


# ----------------------------------------------------------------------------- durable permission waits

SUSPENDED = {"status": "suspended", "resumable": True}


def statuses(results: list[Event]) -> list[Event]:
    return [r["statusUpdate"] for r in results if "statusUpdate" in r]


def boundaries(state_dir: Path) -> list[Event]:
    import json

    return [json.loads(p.read_text()) for p in sorted((state_dir / "permission-waits").glob("pwb_*.json"))]


async def task_of(client: Any, task_id: str) -> Event:
    from a2a.types.a2a_pb2 import GetTaskRequest

    return MessageToDict(await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), 30))


async def answered_twice(client: Any, envelope: Event, decision: str, journal: Callable[[], Any]) -> list[Event]:
    """Answer the recovered question (streamed), check the recovery's acknowledgements, then answer it again: only
    the duplicate acknowledgement, nothing published. Returns the answer's results."""
    results: list[Event] = []
    await collect(client, permission_answer_request(envelope, decision, message_id=f"{decision}-after"), results)
    assert results[0]["task"]["id"] == envelope["requestTaskId"]
    assert results[0]["task"]["metadata"]["iac_code"]["permissionWait"] == SUSPENDED
    updates = statuses(results)
    ids = {"inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"]}
    assert updates[0]["metadata"]["iac_code"]["permissionRecovered"] == ids
    assert updates[1]["metadata"]["iac_code"]["inputReceived"] == {
        "kind": "permission", **ids, "decision": decision, "recovered": True, "duplicate": False}
    assert updates[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    before = await journal()
    again: list[Event] = []
    await collect(client, permission_answer_request(envelope, decision, message_id=f"{decision}-again"), again)
    [ack] = again
    data = ack["message"]["parts"][0]["data"]
    assert data["kind"] == "permission_ack" and data["duplicate"] is True and data["decision"] == decision
    assert ack["message"]["metadata"]["iac_code"]["inputReceived"] == {
        "kind": "permission", **ids, "decision": decision, "recovered": True, "duplicate": True}
    assert await journal() == before  # nothing published (or run) again
    return results


async def check_suspended(client: Any, url: str, context_id: str, task_id: str, envelope: Event,
                          streamed: list[Event]) -> list[Event]:
    """After the restart: the task still INPUT_REQUIRED with the same question, its wait suspended; the journal as
    streamed; another message in the context is refused (the question wants its answer). Returns the journal."""
    task = await task_of(client, task_id)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["metadata"]["iac_code"]["input"] == envelope  # the same question: the same envelope and ids
    assert task["metadata"]["iac_code"]["permissionWait"] == SUSPENDED
    journaled = await journal_of(url, context_id)
    assert journaled == streamed and journaled[-1]["eventType"] == "permission_requested"
    assert_sound(journaled)
    from a2a.utils.errors import InvalidParamsError

    with pytest.raises(InvalidParamsError):
        await collect(client, text_request("continue", 90, context_id), [])
    assert await journal_of(url, context_id) == journaled  # not asked again, nothing published
    return journaled


def answers_to_deploy(pipeline: str) -> list[str]:
    """The user's answers from the first prompt's pause up to the deploy's permission question."""
    return ["candidate 1"] if pipeline == "selling" else ["1", '{"action": "confirm"}']


DEPLOY_WAITS = [("selling", "allow_once"), ("selling", "deny"), ("selling_solution_first", "allow_once"),
                ("selling_solution_first", "deny")]


@pytest.mark.parametrize(("pipeline", "decision"), DEPLOY_WAITS, ids=[f"{p}: {d}" for p, d in DEPLOY_WAITS])
async def test_kill_9_while_the_deploy_question_waits_then_its_answer_resumes_that_call(
        pipeline: str, decision: str, tmp_path: Path, fake_ros: Any) -> None:
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "pipeline-name": pipeline,
                                      "persistence-dir": str(state_dir), "deployer": "ros",
                                      "ros-endpoint": fake_ros.endpoint, "ros-poll-interval-seconds": 0.05}))
    async with server_process(config, workspace) as (proc, url):
        async with connect_client(url) as client:
            results: list[Event] = []
            await collect(client, text_request(PROMPT, 1), results)
            context_id, task_id = statuses(results)[-1]["contextId"], statuses(results)[-1]["taskId"]
            for n, answer in enumerate(answers_to_deploy(pipeline), start=2):
                await collect(client, text_request(answer, n, context_id, task_id), results)
            paused = statuses(results)[-1]
            assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            envelope = paused["metadata"]["iac_code"]["input"]
            assert envelope["toolName"] == "ros_deploy"
            assert paused["metadata"]["iac_code"]["permissionWait"] == {"status": "waiting", "resumable": True}
            streamed = pipeline_events(results)
            proc.kill()  # SIGKILL while the question waits
            await proc.wait()
    [boundary] = boundaries(state_dir)
    assert boundary["permissionClass"] == "pipeline" and boundary["toolName"] == "ros_deploy"
    assert (boundary["taskId"], boundary["inputId"], boundary["toolUseId"]) == (
        task_id, envelope["inputId"], envelope["toolUseId"])
    assert boundary["continuationFrame"]["operation"] == "deploy" and "CreateStack" not in fake_ros.calls

    async with server_process(config, workspace) as (_, url):
        async with connect_client(url) as client:
            journaled = await check_suspended(client, url, context_id, task_id, envelope, streamed)
            results = await answered_twice(client, envelope, decision, lambda: journal_of(url, context_id))
            more = pipeline_events(results)
            final = await journal_of(url, context_id)
    assert final == journaled + more  # the state endpoint: the journal, as streamed
    assert_sound(final)  # the sequence goes on from the question, gapless
    types = lifecycle([e["eventType"] for e in more])
    assert types[0] == "permission_resolved" and "permission_requested" not in types and "pipeline_resumed" not in types
    resolved = more[0]["data"]
    assert (resolved["inputId"], resolved["toolUseId"], resolved["decision"]) == (
        envelope["inputId"], envelope["toolUseId"], decision)
    assert "automatic" not in resolved and "timedOut" not in resolved
    deployment = next(e for e in more if e["eventType"] == "step_completed")["data"]["conclusion"]
    if decision == "allow_once":
        assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"], types
        assert deployment["status"] == "success" and deployment["stack_id"] == next(iter(fake_ros.stacks))
        assert deployment["tool_use_id"] == envelope["toolUseId"]
        assert fake_ros.created == 1 and fake_ros.calls.count("CreateStack") == 1  # exactly that call, once
    else:
        assert types == ["permission_resolved", "step_completed", "pipeline_canceled", "pipeline_handoff_ready"]
        assert deployment["status"] == "cancelled" and deployment["reason"] == "permission_denied"
        assert fake_ros.created == 0 and "CreateStack" not in fake_ros.calls
    [boundary] = boundaries(state_dir)
    assert boundary["phase"] == "RESOLVED" and boundary["recovered"] is True and boundary["decision"] == decision


@pytest.mark.parametrize("decision", ["allow_once", "deny"])
async def test_kill_9_while_the_cleanup_question_waits_then_its_answer_resumes_that_call(
        decision: str, tmp_path: Path, fake_ros: Any) -> None:
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(state_dir), "deployer": "ros",
                                      "ros-endpoint": fake_ros.endpoint, "ros-poll-interval-seconds": 0.05,
                                      "permission-rules": {"allow": ["ros_deploy"]}}))
    async with server_process(config, workspace) as (proc, url):
        async with connect_client(url) as client:
            results: list[Event] = []
            await collect(client, text_request(PROMPT, 1), results)
            context_id, task_id = statuses(results)[-1]["contextId"], statuses(results)[-1]["taskId"]
            await collect(client, text_request("candidate 1", 2, context_id, task_id), results)
            assert fake_ros.created == 1
            request = text_request("clean up", 3, context_id)
            request.message.metadata.update({"iac_code": {"cleanupOnly": True}})
            await collect(client, request, results)
            paused = statuses(results)[-1]
            envelope = paused["metadata"]["iac_code"]["input"]
            assert envelope["toolName"] == "ros_delete_stack"
            streamed = pipeline_events(results)
            proc.kill()  # SIGKILL while the question waits
            await proc.wait()
    [boundary] = boundaries(state_dir)
    assert boundary["toolName"] == "ros_delete_stack" and boundary["continuationFrame"]["operation"] == "cleanup"
    cleanup_task = envelope["requestTaskId"]

    async with server_process(config, workspace) as (_, url):
        async with connect_client(url) as client:
            journaled = await check_suspended(client, url, context_id, cleanup_task, envelope, streamed)
            results = await answered_twice(client, envelope, decision, lambda: journal_of(url, context_id))
            more = pipeline_events(results)
            final = await journal_of(url, context_id)
            assert (await task_of(client, cleanup_task))["metadata"]["iac_code"]["assistantFinal"]["cleanupOnly"][
                "outcome"] == ("deleted" if decision == "allow_once" else "permission_denied")
    assert final == journaled + more
    assert_sound(final)
    types = lifecycle([e["eventType"] for e in more])
    assert types[0] == "permission_resolved" and "cleanup_started" not in types  # the same cleanup goes on
    assert {e["data"]["cleanupId"] for e in final if e["eventType"].startswith("cleanup_")} == {
        next(e for e in final if e["eventType"] == "cleanup_started")["data"]["cleanupId"]}
    if decision == "allow_once":
        assert types[-2:] == ["stack_current_changed", "cleanup_completed"]
        assert lifecycle(more)[-1]["data"]["outcome"] == "deleted"
        assert fake_ros.deletions == 1 and fake_ros.calls.count("DeleteStack") == 1 and not fake_ros.alive()
    else:
        assert types == ["permission_resolved", "cleanup_completed"]
        assert lifecycle(more)[-1]["data"]["outcome"] == "permission_denied" and lifecycle(more)[-1]["status"] == "canceled"
        assert fake_ros.deletions == 0 and "DeleteStack" not in fake_ros.calls and fake_ros.alive()
    [boundary] = boundaries(state_dir)
    assert boundary["phase"] == "RESOLVED" and boundary["recovered"] is True


# ----------------------------------------------------------------------------- further attempts (since-0.13 §6)

ATTEMPT_CUTS = ["ContinueCreateStack unanswered", "DeleteStack unanswered (delete_and_create)",
                "CreateStack unanswered (delete_and_create)"]


@pytest.mark.parametrize("cut", ATTEMPT_CUTS)
async def test_kill_9_in_the_middle_of_a_further_attempt_calls_ros_once(cut: str, tmp_path: Path,
                                                                       fake_ros: Any) -> None:
    """A stack that failed its creation, the further attempt allowed by a rule naming ``ros_deploy``, the server
    killed while ROS holds the answer to ContinueCreateStack (or the DeleteStack of a ``delete_and_create``): the
    resume asks GetStack, sees ROS heard the call and polls; the call reaches ROS once."""
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(state_dir), "deployer": "ros",
                                      "ros-endpoint": fake_ros.endpoint, "ros-poll-interval-seconds": 0.05,
                                      "permission-rules": {"allow": ["ros_deploy"]}}))
    continuing = cut.startswith("ContinueCreateStack")
    if continuing:
        fake_ros.final_status, fake_ros.gate_continue = "CREATE_FAILED", asyncio.Event()
    elif cut.startswith("DeleteStack"):
        fake_ros.final_status, fake_ros.gate_delete = "CREATE_ROLLBACK_COMPLETE", asyncio.Event()
    else:  # the second CreateStack's answer held: the first stack is deleted, the new one created
        fake_ros.final_status, fake_ros.gate_create, fake_ros.gate_create_after = (
            "CREATE_ROLLBACK_COMPLETE", asyncio.Event(), 1)
    cut_at: dict[str, Callable[[], bool]] = {
        "ContinueCreateStack unanswered": fake_ros.continue_received.is_set,
        "DeleteStack unanswered (delete_and_create)": fake_ros.delete_received.is_set,
        "CreateStack unanswered (delete_and_create)": lambda: fake_ros.created == 2}

    async with server_process(config, workspace) as (proc, url):
        async with connect_client(url) as client:
            first: list[Event] = []
            await collect(client, text_request(PROMPT, 1), first)
            last = statuses(first)[-1]
            context_id, task_id = last["contextId"], last["taskId"]
            second: list[Event] = []
            running = asyncio.create_task(collect(client, text_request("candidate 1", 2, context_id, task_id),
                                                  second))
            await until(cut_at[cut], "the further attempt's call")
            proc.kill()  # SIGKILL: ROS heard the call, its answer never reached the server
            await proc.wait()
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            streamed = pipeline_events(first) + pipeline_events(second)
    first_stack = next(iter(fake_ros.stacks))
    asked = [e for e in streamed if e["eventType"] == "permission_requested"]
    assert [e["permission"]["operation"]["action"] for e in asked] == [
        "create", "continue_create" if continuing else "delete_and_create"]

    fake_ros.final_status = "CREATE_COMPLETE"
    for gate in (fake_ros.gate_continue, fake_ros.gate_delete, fake_ros.gate_create):
        if gate is not None:
            gate.set()
    async with server_process(config, workspace) as (_, url):
        journaled = await journal_of(url, context_id)
        assert journaled[:len(streamed)] == streamed
        assert_sound(journaled)
        async with connect_client(url) as client:
            rest: list[Event] = []
            await collect(client, text_request("continue", 3, context_id), rest)
            more = pipeline_events(rest)
        types = lifecycle([e["eventType"] for e in more])
        assert types[0] == "pipeline_resumed" and "permission_requested" not in types  # the allow was recorded
        assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"], types
        conclusion = lifecycle(more)[-3]["data"]["conclusion"]
        assert conclusion["status"] == "success" and conclusion["stack_status"] == "CREATE_COMPLETE"
        final = await journal_of(url, context_id)
        assert final == journaled + more
        assert_sound(final)

    if continuing:
        assert fake_ros.calls.count("ContinueCreateStack") == 1 and fake_ros.continuations == 1
        assert fake_ros.created == 1 and conclusion["stack_id"] == first_stack
    else:
        assert fake_ros.calls.count("DeleteStack") == 1 and fake_ros.deletions == 1
        assert fake_ros.created == 2  # the new stack once: sent again with its own ClientToken, the same answer
        assert fake_ros.calls.count("CreateStack") == (2 if cut.startswith("DeleteStack") else 3)
        assert len(fake_ros.tokens) == 2
        [alive] = fake_ros.alive()
        assert conclusion["stack_id"] == alive.stack_id != first_stack


async def test_kill_9_while_a_further_attempts_question_waits_then_its_answer_resumes_that_call(
        tmp_path: Path, fake_ros: Any) -> None:
    """The ``continue_create`` question is a durable wait too: after kill -9 and a restart the task still asks it,
    its allow sends ContinueCreateStack once."""
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(state_dir), "deployer": "ros",
                                      "ros-endpoint": fake_ros.endpoint, "ros-poll-interval-seconds": 0.05}))
    fake_ros.final_status = "CREATE_FAILED"
    async with server_process(config, workspace) as (proc, url):
        async with connect_client(url) as client:
            results: list[Event] = []
            await collect(client, text_request(PROMPT, 1), results)
            context_id, task_id = statuses(results)[-1]["contextId"], statuses(results)[-1]["taskId"]
            await collect(client, text_request("candidate 1", 2, context_id, task_id), results)
            created = statuses(results)[-1]["metadata"]["iac_code"]["input"]
            await collect(client, permission_answer_request(created, "allow_once", message_id="allow"), results)
            paused = statuses(results)[-1]
            envelope = paused["metadata"]["iac_code"]["input"]
            assert envelope["operation"]["action"] == "continue_create"
            assert paused["metadata"]["iac_code"]["permissionWait"] == {"status": "waiting", "resumable": True}
            streamed = pipeline_events(results)
            proc.kill()  # SIGKILL while the question waits
            await proc.wait()
    assert "ContinueCreateStack" not in fake_ros.calls
    [boundary] = [b for b in boundaries(state_dir) if b["inputId"] == envelope["inputId"]]
    assert boundary["continuationFrame"]["operation"] == "deploy"

    async with server_process(config, workspace) as (_, url):
        async with connect_client(url) as client:
            journaled = await check_suspended(client, url, context_id, envelope["requestTaskId"], envelope,
                                              streamed)
            results = await answered_twice(client, envelope, "allow_once", lambda: journal_of(url, context_id))
            more = pipeline_events(results)
            final = await journal_of(url, context_id)
    assert final == journaled + more
    assert_sound(final)
    types = lifecycle([e["eventType"] for e in more])
    assert types[0] == "permission_resolved" and "permission_requested" not in types
    assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"], types
    assert lifecycle(more)[-3]["data"]["conclusion"]["tool_use_id"] == envelope["toolUseId"]
    assert fake_ros.calls.count("ContinueCreateStack") == 1 and fake_ros.created == 1
