"""``cleanupOnly`` after a ``deployer: ros`` run: the stack the run created is removed through ROS DeleteStack behind the
kernel's permission system (tool ``ros_delete_stack``, asked by default), with ``cleanup_*`` events and
``stack_current_changed``; a deny removes nothing. A real server, the fake ROS (``fake_ros.py``), a2a-sdk's client
reading events by the digest's names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from iac_code.testing import connect_client, permission_answer_request, start_server
from iac_code_pipeline_selling.runner import lifecycle

from pipeline_selling_test_streams import last_status, pipeline_events, sender, state_of


PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
KEY_ID = "LTAI5tFakeCleanupKeyId"
SECRET = "cleanup-secret-0a9b8c7d"
CLEANUP = {"cleanupOnly": True}
Event = dict[str, Any]

send = sender("cleanup")


def settings(fake: Any, **more: Any) -> dict[str, Any]:
    """``deployer: ros`` against the fake; the deploy itself allowed by its exact rule (the cleanup is not)."""
    return {"mode": "pipeline", "deployer": "ros", "ros-endpoint": fake.endpoint, "ros-access-key-id": KEY_ID,
            "ros-access-key-secret": SECRET, "ros-poll-interval-seconds": 0.02,
            "permission-rules": {"allow": ["ros_deploy"]}, **more}


async def journal(url: str, context_id: str) -> list[Event]:
    return (await state_of(url, context_id))["events"]  # type: ignore[no-any-return]


def of(events: list[Event], event_type: str) -> list[Event]:
    return [e for e in events if e["eventType"] == event_type]


async def deployed(client: Any, fake: Any) -> tuple[list[Event], str]:
    """A ``selling`` run that deployed (its deploy allowed by rule): every streamed event and the context."""
    first = await send(client, PROMPT, n=1)
    last = last_status(first)
    context_id = last["contextId"]
    second = await send(client, "candidate 1", n=2, context_id=context_id, task_id=last["taskId"])
    events = pipeline_events(first) + pipeline_events(second)
    handoff = lifecycle(events)[-1]
    assert handoff["eventType"] == "pipeline_handoff_ready" and handoff["data"]["outcome"] == "completed"
    assert fake.created == 1
    return events, context_id


def check_current(event: Event, stack: Any, *, action: str, current: bool) -> None:
    assert event["scope"] == "stack" and event["status"] == "working"
    data = event["data"]
    expected = {"action", "stackId", "stackName", "regionId", "stackStatus", "isSuccess", "current"}
    assert set(data) == (expected if current else expected | {"cleared"})
    assert data["action"] == action and data["stackId"] == stack.stack_id and data["stackName"] == stack.name
    assert data["regionId"] == "cn-hangzhou" and data["isSuccess"] is True and data["current"] is current
    assert data["stackStatus"] == ("CREATE_COMPLETE" if current else "DELETE_COMPLETE")
    if not current:
        assert data["cleared"] is True


async def test_cleanup_only_deletes_the_deployed_stack_after_the_callers_allow(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros)) as server, connect_client(server) as client:
        before, context_id = await deployed(client, fake_ros)
        stack = next(iter(fake_ros.stacks.values()))
        [created] = of(before, "stack_current_changed")
        check_current(created, stack, action="create", current=True)
        assert lifecycle([e["eventType"] for e in before])[-4:] == ["stack_current_changed", "step_completed",
                                                         "pipeline_completed", "pipeline_handoff_ready"]
        assert (await state_of(server.url, context_id))["snapshot"]["currentStack"] == {
            "stackId": stack.stack_id, "stackName": stack.name, "regionId": "cn-hangzhou",
            "stackStatus": "CREATE_COMPLETE"}

        asked = await send(client, "clean up", n=3, context_id=context_id, iac_code=CLEANUP)
        paused = last_status(asked)
        assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        envelope = paused["metadata"]["iac_code"]["input"]
        assert envelope["toolName"] == "ros_delete_stack" and envelope["effect"] == "cloud_change"
        assert envelope["isReadOnly"] is False and envelope["contextId"] == context_id
        assert envelope["operation"] == {
            "product": "ros", "action": "delete", "region": "cn-hangzhou",
            "target": {"type": "resource", "name": stack.name, "id": stack.stack_id},
            "apiCalls": [{"product": "ROS", "action": "DeleteStack", "effect": "change"},
                         {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}]}
        assert stack.stack_id in envelope["target"] or stack.name in envelope["target"]
        first = pipeline_events(asked)
        assert lifecycle([e["eventType"] for e in first]) == ["cleanup_started", "permission_requested"]
        started = first[0]
        assert started["scope"] == "stack" and started["data"]["reason"] == "cleanup_only"
        assert started["data"]["cleanupId"].startswith("cleanup-")
        assert started["data"]["resources"] == [{"type": "ros_stack", "stackId": stack.stack_id,
                                                 "stackName": stack.name, "regionId": "cn-hangzhou",
                                                 "stackStatus": "CREATE_COMPLETE"}]
        assert first[1]["permission"] == envelope and first[1]["scope"] == "stack"
        assert (await state_of(server.url, context_id))["snapshot"]["pendingInput"] == envelope
        assert fake_ros.deletions == 0 and "DeleteStack" not in fake_ros.calls  # asked before anything reached ROS

        answered = await send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=4)
        after = pipeline_events(answered)
        types = lifecycle([e["eventType"] for e in after])
        assert types[0] == "permission_resolved" and after[0]["data"]["decision"] == "allow_once"
        assert types[-2:] == ["stack_current_changed", "cleanup_completed"], types
        progress = of(after, "cleanup_progress")
        assert progress[0]["data"]["status"] == "DELETE_IN_PROGRESS"
        assert progress[-1]["data"]["status"] == "DELETE_COMPLETE" and progress[-1]["data"]["progressPercentage"] == 100
        for event in progress:
            assert set(event["data"]) == {"cleanupId", "toolUseId", "stackId", "stackName", "regionId", "status",
                                          "progressPercentage", "elapsedSeconds"}
            assert event["data"]["toolUseId"] == envelope["toolUseId"]
            assert event["data"]["cleanupId"] == started["data"]["cleanupId"]
        check_current(lifecycle(after)[-2], stack, action="delete", current=False)
        completed = lifecycle(after)[-1]
        assert completed["status"] == "completed" and completed["data"]["outcome"] == "deleted"
        assert completed["data"]["cleaned"][0]["stackId"] == stack.stack_id and completed["data"]["remaining"] == []
        final = last_status(answered)
        assert final["metadata"]["iac_code"]["assistantFinal"]["cleanupOnly"] == completed["data"]
        assert stack.stack_id in final["status"]["message"]["parts"][0]["text"]
        assert fake_ros.deletions == 1 and fake_ros.calls.count("DeleteStack") == 1 and not fake_ros.alive()

        state = await state_of(server.url, context_id)
        assert state["snapshot"]["currentStack"] is None and state["snapshot"]["pendingInput"] is None
        everything = state["events"]
        assert everything == before + first + after  # the state endpoint: exactly what was streamed
        assert [e["sequence"] for e in everything] == list(range(1, len(everything) + 1))

        again = await send(client, "clean up again", n=5, context_id=context_id, iac_code=CLEANUP)
        nothing = pipeline_events(again)
        assert lifecycle([e["eventType"] for e in nothing]) == ["cleanup_started", "cleanup_completed"]
        assert nothing[1]["data"]["outcome"] == "nothing_to_clean" and nothing[0]["data"]["resources"] == []
        assert nothing[0]["data"]["cleanupId"] != started["data"]["cleanupId"]
        assert fake_ros.calls.count("DeleteStack") == 1
        assert SECRET not in json.dumps([before, asked, answered, again])


async def test_a_denied_cleanup_removes_nothing_and_can_be_asked_again(fake_ros: Any) -> None:
    async with start_server(settings(fake_ros)) as server, connect_client(server, binding="HTTP+JSON") as client:
        before, context_id = await deployed(client, fake_ros)
        asked = await send(client, "clean up", n=3, context_id=context_id, iac_code=CLEANUP)
        envelope = last_status(asked)["metadata"]["iac_code"]["input"]
        denied = await send(client, permission_answer_request(envelope, "deny", message_id="deny"), n=4)
        events = pipeline_events(denied)
        assert lifecycle([e["eventType"] for e in events]) == ["permission_resolved", "cleanup_completed"]
        done = events[1]
        assert done["status"] == "canceled" and done["data"]["outcome"] == "permission_denied"
        assert done["data"]["cleaned"] == [] and done["data"]["remaining"][0]["stackId"] == next(iter(fake_ros.stacks))
        assert "nothing was removed" in done["data"]["summary"]
        assert last_status(denied)["metadata"]["iac_code"]["assistantFinal"]["cleanupOnly"]["outcome"] == \
            "permission_denied"
        assert fake_ros.deletions == 0 and len(fake_ros.alive()) == 1

        again = await send(client, "clean up now", n=5, context_id=context_id, iac_code=CLEANUP)
        second = last_status(again)["metadata"]["iac_code"]["input"]
        assert second["toolName"] == "ros_delete_stack" and second["toolUseId"] != envelope["toolUseId"]
        allowed = await send(client, permission_answer_request(second, "allow_once", message_id="allow"), n=6)
        assert lifecycle(pipeline_events(allowed))[-1]["data"]["outcome"] == "deleted"
        assert fake_ros.deletions == 1 and not fake_ros.alive()
        everything = await journal(server.url, context_id)
        assert [e["sequence"] for e in everything] == list(range(1, len(everything) + 1))
        cleanups = {e["data"]["cleanupId"] for e in of(everything, "cleanup_started")}
        assert len(cleanups) == 2


@pytest.mark.parametrize("rules", [{"auto-approve-permissions": True}, {"permission-rules": {"allow": ["ros_deploy", "*"]}},
                                   {"permission-rules": {"allow": ["ros_deploy", "ros_delete_stack"]}}],
                         ids=["auto-approve", "blanket-allow", "exact-rule"])
async def test_only_a_rule_naming_ros_delete_stack_deletes_without_asking(rules: Event, fake_ros: Any) -> None:
    """Deleting a stack is a protected cloud change: auto-approval denies it, a wildcard rule asks, the exact rule
    allows it."""
    config = settings(fake_ros, **rules)
    if "auto-approve-permissions" in rules:  # the deploy itself still by its rule
        config["permission-rules"] = {"allow": ["ros_deploy"]}
    async with start_server(config) as server, connect_client(server) as client:
        _, context_id = await deployed(client, fake_ros)
        result = await send(client, "clean up", n=3, context_id=context_id, iac_code=CLEANUP)
        events = pipeline_events(result)
        if "auto-approve-permissions" in rules:
            resolved = of(events, "permission_resolved")[0]["data"]
            assert resolved["decision"] == "deny" and resolved["automatic"] is True
            assert lifecycle(events)[-1]["data"]["outcome"] == "permission_denied" and fake_ros.deletions == 0
        elif "*" in rules["permission-rules"]["allow"]:
            assert lifecycle(events)[-1]["eventType"] == "permission_requested"
            assert last_status(result)["metadata"]["iac_code"]["input"]["toolName"] == "ros_delete_stack"
            assert fake_ros.deletions == 0
        else:
            resolved = of(events, "permission_resolved")[0]["data"]
            assert resolved["decision"] == "allow_once" and resolved["automatic"] is True
            assert lifecycle(events)[-1]["data"]["outcome"] == "deleted" and fake_ros.deletions == 1
        assert [e["sequence"] for e in await journal(server.url, context_id)][-1] == events[-1]["sequence"]


async def test_a_failed_deploy_leaves_its_stack_to_clean_and_a_failed_delete_keeps_it(fake_ros: Any) -> None:
    fake_ros.final_status = "CREATE_ROLLBACK_COMPLETE"
    fake_ros.final_reason = "Resource [EcsInstance] failed"
    fake_ros.delete_final_status = "DELETE_FAILED"
    rules = {"permission-rules": {"allow": ["ros_deploy", "ros_delete_stack"]}}
    async with start_server(settings(fake_ros, **rules)) as server, connect_client(server) as client:
        first = await send(client, PROMPT, n=1)
        last = last_status(first)
        context_id = last["contextId"]
        second = pipeline_events(await send(client, "candidate 1", n=2, context_id=context_id, task_id=last["taskId"]))
        assert second[-1]["data"]["outcome"] == "failed"
        # the rule allows ros_deploy's delete_and_create too: the deploy's DeleteStack of the rolled-back stack
        # failed (DELETE_FAILED), so the stack stays, the step failed and the stack is the context's to clean
        assert [e["permission"]["operation"]["action"] for e in of(second, "permission_requested")] == [
            "create", "delete_and_create"]
        assert of(second, "step_failed")[0]["data"]["error"] == "delete_stack_failed" and fake_ros.deletions == 1
        [current] = of(second, "stack_current_changed")
        assert current["data"]["isSuccess"] is False and current["data"]["current"] is True
        assert current["data"]["stackStatus"] == "DELETE_FAILED"

        failed = pipeline_events(await send(client, "clean up", n=3, context_id=context_id, iac_code=CLEANUP))
        assert lifecycle(failed)[-1]["eventType"] == "cleanup_failed" and lifecycle(failed)[-1]["status"] == "failed"
        data = lifecycle(failed)[-1]["data"]
        assert data["outcome"] == "failed" and data["error"] == "stack_delete_failed" and data["cleaned"] == []
        assert "DELETE_FAILED" in data["message"] and data["remaining"][0]["stackId"] == current["data"]["stackId"]
        assert not of(failed, "stack_current_changed")

        fake_ros.delete_final_status = "DELETE_COMPLETE"
        retried = pipeline_events(await send(client, "clean up", n=4, context_id=context_id, iac_code=CLEANUP))
        assert retried[0]["data"]["resources"][0]["stackId"] == current["data"]["stackId"]  # still a target
        assert lifecycle(retried)[-1]["data"]["outcome"] == "deleted" and not fake_ros.alive()
        assert fake_ros.deletions == 3 and fake_ros.created == 1  # the deploy's, the failed cleanup's, this one


async def test_without_a_deploy_there_is_nothing_to_clean(fake_ros: Any) -> None:
    async with start_server({"mode": "pipeline"}) as server, connect_client(server) as client:
        first = await send(client, PROMPT, n=1)
        last = last_status(first)
        await send(client, "candidate 1", n=2, context_id=last["contextId"], task_id=last["taskId"])
        events = pipeline_events(await send(client, "clean up", n=3, context_id=last["contextId"], iac_code=CLEANUP))
        assert lifecycle([e["eventType"] for e in events]) == ["cleanup_started", "cleanup_completed"]
        assert events[1]["data"]["outcome"] == "nothing_to_clean"
        assert not of(await journal(server.url, last["contextId"]), "stack_current_changed")
        assert fake_ros.calls == []
