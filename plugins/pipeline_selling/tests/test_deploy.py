"""``deployer: ros`` end to end: a real server in ``mode: pipeline`` deploying through the official ROS SDK to a local
fake ROS (``fake_ros.py``), driven by a2a-sdk's client that reads events by the product's names and answers the
permission the deploy asks with the usual permission answer. Nothing is deployed without an explicit allow; the
stack is created once; the state endpoint returns exactly what was streamed; no secret leaves the server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, permission_answer_request, run_cli, start_server
from iac_code_pipeline_selling.runner import lifecycle

from pipeline_selling_test_streams import last_status, pipeline_events, sender, state_of


PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
KEY_ID = "LTAI5tFakeKeyIdForTests"
SECRET = "fake-secret-5f3c0b1e9d"  # must never be seen outside the server
Event = dict[str, Any]

send = sender("deploy")


def settings(fake: Any, **more: Any) -> dict[str, Any]:
    return {"mode": "pipeline", "deployer": "ros", "ros-endpoint": fake.endpoint, "ros-access-key-id": KEY_ID,
            "ros-access-key-secret": SECRET, "ros-poll-interval-seconds": 0.02, **more}


async def until_permission(client: Any, *, pipeline: str = "selling", rich: bool = True) -> tuple[list[Event], Event]:
    """Run a pipeline up to the deploy's permission question: every streamed event and the permission envelope."""
    meta: Event = {"candidatePresentation": "rich-v1"} if rich else {}
    if pipeline != "selling":
        meta["pipeline_name"] = pipeline
    first = await send(client, PROMPT, n=1, iac_code=meta)
    streamed = pipeline_events(first)
    last = last_status(first)
    context_id, task_id = last["contextId"], last["taskId"]
    if pipeline == "selling":
        second = await send(client, "方案 2", n=2, context_id=context_id, task_id=task_id)
    else:
        chosen = await send(client, "2", n=2, context_id=context_id, task_id=task_id, iac_code=meta)
        streamed += pipeline_events(chosen)
        assert streamed[-1]["data"]["kind"] == "deployment_confirmation"
        second = await send(client, '{"action": "confirm"}', n=3, context_id=context_id, task_id=task_id,
                            iac_code=meta)
    streamed += pipeline_events(second)
    paused = last_status(second)
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return streamed, paused["metadata"]["iac_code"]["input"]


def check_permission(events: list[Event], envelope: Event, stack_prefix: str) -> None:
    """The deploy's question: the kernel's permission envelope for ``ros_deploy`` (a cloud change, §6 operation),
    announced by ``permission_requested`` with that same envelope."""
    assert envelope["kind"] == "permission" and envelope["toolName"] == "ros_deploy"
    assert envelope["effect"] == "cloud_change" and envelope["isReadOnly"] is False
    assert [o["id"] for o in envelope["options"]] == ["allow_once", "deny"]
    operation = envelope["operation"]
    assert operation["product"] == "ros" and operation["action"] == "create" and operation["region"] == "cn-hangzhou"
    assert operation["target"]["type"] == "resource" and operation["target"]["name"].startswith(stack_prefix)
    assert operation["apiCalls"] == [{"product": "ROS", "action": "CreateStack", "effect": "change"},
                                     {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}]
    assert envelope["deploymentSummary"]["stackName"] == operation["target"]["name"]
    requested = events[-1]
    assert requested["eventType"] == "permission_requested" and requested["scope"] == "step"
    assert requested["data"] == {"toolName": "ros_deploy", "toolUseId": envelope["toolUseId"]}
    assert requested["permission"] == envelope
    assert requested["step"]["id"] == "deploying"


def check_progress(progress: list[Event], envelope: Event) -> None:
    """``stack_progress`` as §2.5 spells it, from CREATE_IN_PROGRESS to CREATE_COMPLETE."""
    assert len(progress) >= 2
    for event in progress:
        assert event["scope"] == "stack"
        assert set(event["data"]) == {"toolUseId", "stackId", "stackName", "regionId", "status", "progressPercentage",
                                      "resources", "elapsedSeconds"}
        assert event["data"]["toolUseId"] == envelope["toolUseId"]
        assert event["data"]["stackName"] == envelope["operation"]["target"]["name"]
        assert event["data"]["regionId"] == "cn-hangzhou"
    assert progress[0]["data"]["status"] == "CREATE_IN_PROGRESS"
    final = progress[-1]["data"]
    assert final["status"] == "CREATE_COMPLETE" and final["progressPercentage"] == 100
    assert final["resources"] and all(r["status"] == "CREATE_COMPLETE" and r["physicalResourceId"]
                                      for r in final["resources"])
    percentages = [e["data"]["progressPercentage"] for e in progress]
    assert percentages == sorted(percentages)


async def test_a_selling_run_deploys_after_the_callers_allow(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros)) as server, connect_client(server) as client:
        before, envelope = await until_permission(client)
        check_permission(before, envelope, "iac-code-")
        assert fake_ros.created == 0 and fake_ros.calls == []  # asked before anything reached ROS
        waiting = (await state_of(server.url, envelope["contextId"]))["snapshot"]
        assert waiting["pendingInput"] == envelope and waiting["status"] == "input_required"
        assert lifecycle([e["eventType"] for e in before])[-4:] == ["input_received", "step_completed", "step_started",
                                                         "permission_requested"]

        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=10)
        after = pipeline_events(answered)
        types = lifecycle([e["eventType"] for e in after])
        assert types[0] == "permission_resolved"
        resolved = after[0]
        assert resolved["data"] == {"kind": "permission", "permissionId": envelope["inputId"],
                                    "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"],
                                    "toolName": "ros_deploy", "decision": "allow_once", "pending": False}
        assert resolved["permission"] == {k: v for k, v in resolved["data"].items() if k != "kind"}
        progress = [e for e in after if e["eventType"] == "stack_progress"]
        check_progress(progress, envelope)
        assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"]
        deployment = lifecycle(after)[-3]["data"]["conclusion"]
        assert deployment["status"] == "success" and deployment["deployed"] is True
        assert deployment["stack_status"] == "CREATE_COMPLETE"
        assert deployment["stack_id"] == progress[-1]["data"]["stackId"] == next(iter(fake_ros.stacks))
        assert deployment["tool_use_id"] == envelope["toolUseId"]
        assert after[-1]["data"]["outcome"] == "completed"
        assert fake_ros.created == 1 and fake_ros.key_ids == {KEY_ID}
        assert fake_ros.calls[0] == "CreateStack" and "GetStack" in fake_ros.calls
        stack = next(iter(fake_ros.stacks.values()))
        assert stack.name == envelope["operation"]["target"]["name"] and stack.region == "cn-hangzhou"
        final = last_status(answered)
        assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert stack.stack_id in final["status"]["message"]["parts"][0]["text"]

        context_id = envelope["contextId"]
        state = await state_of(server.url, context_id)
        assert state["events"] == before + after  # the state endpoint: exactly what was streamed
        assert [e["sequence"] for e in state["events"]] == list(range(1, len(state["events"]) + 1))
        assert state["snapshot"]["stack"] == progress[-1]["data"] and state["snapshot"]["pendingInput"] is None

        chat = await send(client, "Add a second vSwitch to the template", n=11, context_id=context_id)
        assert not pipeline_events(chat) and fake_ros.created == 1  # chat now; the deploy is not repeated
        everything = json.dumps([before, after, answered, state])
        assert SECRET not in everything


async def test_a_denied_deploy_creates_nothing(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros)) as server, connect_client(server) as client:
        before, envelope = await until_permission(client, rich=False)
        answered = await send(client, permission_answer_request(envelope, "deny", message_id="deny"), n=10)
        after = pipeline_events(answered)
        assert lifecycle([e["eventType"] for e in after]) == ["permission_resolved", "step_completed", "pipeline_canceled",
                                                   "pipeline_handoff_ready"]
        assert after[0]["data"]["decision"] == "deny"
        conclusion = after[1]["data"]["conclusion"]
        assert conclusion["status"] == "cancelled" and conclusion["deployed"] is False
        assert conclusion["reason"] == "permission_denied"
        assert after[-1]["data"]["outcome"] == "canceled"
        assert fake_ros.created == 0 and fake_ros.calls == []
        state = await state_of(server.url, envelope["contextId"])
        assert state["events"] == before + after
        chat = await send(client, "deploy it anyway", n=11, context_id=envelope["contextId"])
        assert not pipeline_events(chat) and fake_ros.created == 0


@pytest.mark.parametrize("config", [{"auto-approve-permissions": True},
                                    {"permission-rules": {"allow": ["*"]}}], ids=["auto-approve", "blanket-allow"])
async def test_auto_approval_and_blanket_rules_never_deploy(config: Event, fake_ros: Any) -> None:
    """A deploy is a protected cloud change: auto-approval denies it and a wildcard rule does not allow it (asks)."""
    async with start_server(settings(fake_ros, **config)) as server, connect_client(server) as client:
        first = await send(client, PROMPT, n=1)
        last = last_status(first)
        second = await send(client, "candidate 1", n=2, context_id=last["contextId"], task_id=last["taskId"])
        events = pipeline_events(second)
        if "auto-approve-permissions" in config:
            resolved = next(e for e in events if e["eventType"] == "permission_resolved")
            assert resolved["data"]["decision"] == "deny" and resolved["data"]["automatic"] is True
            assert events[-1]["eventType"] == "pipeline_handoff_ready" and events[-1]["data"]["outcome"] == "canceled"
        else:
            assert events[-1]["eventType"] == "permission_requested"
            assert last_status(second)["metadata"]["iac_code"]["input"]["toolName"] == "ros_deploy"
        assert fake_ros.created == 0


async def test_a_rule_naming_ros_deploy_allows_it_without_asking(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros, **{"permission-rules": {"allow": ["ros_deploy"]}})) as server, \
            connect_client(server) as client:
        first = await send(client, PROMPT, n=1)
        last = last_status(first)
        second = await send(client, "candidate 1", n=2, context_id=last["contextId"], task_id=last["taskId"])
        events = pipeline_events(second)
        resolved = next(e for e in events if e["eventType"] == "permission_resolved")
        assert resolved["data"]["decision"] == "allow_once" and resolved["data"]["automatic"] is True
        assert lifecycle(events)[-3]["data"]["conclusion"]["status"] == "success"
        assert fake_ros.created == 1


async def test_selling_solution_first_deploys_over_rest(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros)) as server, connect_client(server, binding="HTTP+JSON") as client:
        before, envelope = await until_permission(client, pipeline="selling_solution_first")
        check_permission(before, envelope, "iac-code-")
        assert before[-1]["pipelineName"] == "selling_solution_first"
        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=10)
        after = pipeline_events(answered)
        check_progress([e for e in after if e["eventType"] == "stack_progress"], envelope)
        assert lifecycle([e["eventType"] for e in after])[-3:] == ["step_completed", "pipeline_completed",
                                                                    "pipeline_handoff_ready"]
        deployment = lifecycle(after)[-3]["data"]["conclusion"]
        assert deployment["status"] == "success" and deployment["stack_status"] == "CREATE_COMPLETE"
        effective = deployment["effective_deployment_parameters"]
        assert deployment["stack_name"] == effective["stack_name"] and deployment["region_id"] == effective["region_id"]
        assert fake_ros.created == 1
        stack = next(iter(fake_ros.stacks.values()))
        assert set(stack.parameters) <= set(effective) - {"region_id", "stack_name"}  # declared parameters only
        assert (await state_of(server.url, envelope["contextId"]))["events"] == before + after


async def test_a_stack_that_fails_fails_the_step_with_a_sanitised_reason(fake_ros: Any) -> None:
    fake_ros.final_status = "CREATE_ROLLBACK_COMPLETE"
    fake_ros.final_reason = (f"Resource [EcsInstance] failed: InvalidParameter AccessKeySecret={SECRET} "
                             f"key {KEY_ID} file /home/admin/ros/engine/stack.py")
    async with start_server(settings(fake_ros)) as server, connect_client(server) as client:
        before, envelope = await until_permission(client, rich=False)
        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=10)
        asked = pipeline_events(answered)
        again = last_status(answered)["metadata"]["iac_code"]["input"]  # the next attempt: delete_and_create
        assert asked[-1]["eventType"] == "permission_requested" and again["operation"]["action"] == "delete_and_create"
        denied = await send(client, permission_answer_request(again, "deny", message_id="deny"), n=11)
        after = asked + pipeline_events(denied)
        types = lifecycle([e["eventType"] for e in after])
        assert types[-3:] == ["step_failed", "pipeline_failed", "pipeline_handoff_ready"]
        failed = lifecycle(after)[-3]["data"]
        assert failed["error"] == "stack_create_failed" and failed["stepId"] == "deploying"
        assert failed["deployment"]["stack_status"] == "CREATE_ROLLBACK_COMPLETE"
        assert "InvalidParameter" in failed["message"] and "<path>" in failed["message"]
        assert after[-1]["data"]["outcome"] == "failed"
        everything = json.dumps([after, answered, denied, await state_of(server.url, envelope["contextId"])])
        for secret in (SECRET, KEY_ID, "/home/admin"):
            assert secret not in everything
        assert fake_ros.created == 1


async def test_a_stack_name_taken_by_another_stack_fails_without_adopting_it(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros)) as server, connect_client(server) as client:
        _, envelope = await until_permission(client, rich=False)
        theirs = fake_ros.add_stack(envelope["operation"]["target"]["name"])
        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=10)
        after = pipeline_events(answered)
        assert lifecycle([e["eventType"] for e in after]) == ["permission_resolved", "step_failed", "pipeline_failed",
                                                   "pipeline_handoff_ready"]
        failed = after[1]["data"]
        assert failed["error"] == "create_stack_failed" and failed["rosCode"] == "StackExists"
        assert "stack_id" not in failed["deployment"] and theirs not in json.dumps(after)
        assert fake_ros.created == 0 and list(fake_ros.stacks) == [theirs] and "ListStacks" not in fake_ros.calls


async def test_deploy_settings_are_checked_and_the_secret_masked(tmp_path: Any) -> None:
    """``deployer: ros`` needs credentials; ROS keys do nothing without it; --check-config masks the secret."""
    env = {"IAC_CODE_CONFIG_DIR": str(tmp_path), "ALIBABA_CLOUD_ACCESS_KEY_ID": "", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ""}
    config = tmp_path / "config.yaml"
    config.write_text("deployer: ros\n")
    missing = await run_cli("a2a", "--config", str(config), "--check-config", env=env)
    assert missing.code != 0 and "ALIBABA_CLOUD_ACCESS_KEY_ID" in missing.err, missing
    from_env = await run_cli("a2a", "--config", str(config), "--check-config",
                             env={**env, "ALIBABA_CLOUD_ACCESS_KEY_ID": KEY_ID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": SECRET})
    assert from_env.code == 0, from_env.err
    assert SECRET not in from_env.out + from_env.err
    config.write_text("ros-endpoint: http://127.0.0.1:9\n")
    useless = await run_cli("a2a", "--config", str(config), "--check-config", env=env)
    assert useless.code != 0 and "'ros-endpoint' has no effect without 'deployer: ros'" in useless.err, useless
    config.write_text(f"deployer: ros\nros-access-key-id: {KEY_ID}\nros-access-key-secret: {SECRET}\n")
    good = await run_cli("a2a", "--config", str(config), "--check-config", env=env)
    assert good.code == 0, good.err
    assert SECRET not in good.out + good.err
    assert "ros-access-key-secret" in good.out


async def test_a_deploy_question_nobody_answers_is_suspended_and_its_answer_resumes_it(fake_ros: Any) -> None:
    """A durable wait (since-0.13 §4): past ``resident-timeout-seconds`` the deploy's question is suspended, not
    denied (the live turn ends, the task stays INPUT_REQUIRED); the answer resumes exactly that call."""
    import asyncio

    from a2a.types.a2a_pb2 import GetTaskRequest

    wait = {"permission-wait": {"resident-timeout-seconds": 0.2, "timeout-grace-seconds": 0}}
    async with start_server(settings(fake_ros, **wait)) as server, connect_client(server) as client:
        before, envelope = await until_permission(client, rich=False)

        async def suspended() -> Event:
            while True:
                task = MessageToDict(await client.get_task(GetTaskRequest(id=envelope["requestTaskId"])))
                if task["metadata"]["iac_code"].get("permissionWait", {}).get("status") == "suspended":
                    return task
                await asyncio.sleep(0.02)

        task = await asyncio.wait_for(suspended(), 30)
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and task["metadata"]["iac_code"]["input"] == envelope
        assert (await state_of(server.url, envelope["contextId"]))["events"] == before  # nothing denied or published
        assert fake_ros.calls == []

        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=10)
        updates = [r["statusUpdate"] for r in answered if "statusUpdate" in r]
        assert updates[0]["metadata"]["iac_code"]["permissionRecovered"] == {
            "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"]}
        after = pipeline_events(answered)
        types = lifecycle([e["eventType"] for e in after])
        assert types[0] == "permission_resolved" and after[0]["data"]["decision"] == "allow_once"
        assert types[-3:] == ["step_completed", "pipeline_completed", "pipeline_handoff_ready"]
        assert lifecycle(after)[-3]["data"]["conclusion"]["status"] == "success"
        state = await state_of(server.url, envelope["contextId"])
        assert state["events"] == before + after
        assert [e["sequence"] for e in state["events"]] == list(range(1, len(state["events"]) + 1))
    assert fake_ros.created == 1 and fake_ros.calls.count("CreateStack") == 1


async def test_a_deploy_question_the_restarted_server_cannot_ask_again_is_refused_and_kept(
        fake_ros: Any, tmp_path: Any) -> None:
    """A restart without the deployer: the run's state no longer leads to the deploy's question, so its answer is
    refused (``permission_resume_invalid: canonical permission request changed.``) with nothing published; the
    question keeps waiting, and with the deployer back its answer resumes it."""
    from a2a.utils.errors import InvalidParamsError

    state_dir = str(tmp_path / "state")
    async with start_server(settings(fake_ros, **{"persistence-dir": state_dir})) as server, \
            connect_client(server) as client:
        before, envelope = await until_permission(client, rich=False)
    answer = permission_answer_request(envelope, "allow_once", message_id="allow")
    async with start_server({"mode": "pipeline", "persistence-dir": state_dir}) as server, \
            connect_client(server) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await send(client, answer, n=10)
        assert refused.value.message == "permission_resume_invalid: canonical permission request changed."
        assert (await state_of(server.url, envelope["contextId"]))["events"] == before
    assert fake_ros.calls == []
    async with start_server(settings(fake_ros, **{"persistence-dir": state_dir})) as server, \
            connect_client(server) as client:
        after = pipeline_events(await send(client, answer, n=11))
        assert lifecycle([e["eventType"] for e in after])[-3:] == ["step_completed", "pipeline_completed",
                                                                    "pipeline_handoff_ready"]
        assert (await state_of(server.url, envelope["contextId"]))["events"] == before + after
    assert fake_ros.created == 1
