"""The deploy's further attempts (since-0.13 §6 ``ros_deploy`` actions): a stack that failed its creation is not the
end of the step; the step asks again, each attempt behind its own ``ros_deploy`` permission with the §6
``operation.action`` and ``apiCalls``: ``continue_create`` for a ``CREATE_FAILED`` stack, ``delete_and_create`` for a
rolled-back one, ``wait`` for one still in progress when the wait ran out. A deny calls nothing. Driven by a2a-sdk's
client against a real server and the fake ROS (``fake_ros.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from iac_code.testing import connect_client, permission_answer_request, start_server
from iac_code_pipeline_selling.runner import lifecycle


def _helpers() -> Any:
    """``test_deploy.py``'s helpers (the tests run with --import-mode=importlib: loaded by its path)."""
    name = "iac_code_pipeline_selling_tests_deploy_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_deploy.py"))
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


deploy = _helpers()
Event = dict[str, Any]
POLL = {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}


async def failed_once(client: Any, fake_ros: Any) -> tuple[Event, Event, list[Event]]:
    """Up to the second question: the first allow, the stack failing, the further attempt's envelope."""
    _, envelope = await deploy.until_permission(client, rich=False)
    answered = await deploy.send(client, permission_answer_request(envelope, "allow_once", message_id="allow"), n=10)
    events = deploy.pipeline_events(answered)
    status = deploy.last_status(answered)
    assert status["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", events[-3:]
    again = status["metadata"]["iac_code"]["input"]
    assert again["toolName"] == "ros_deploy" and again["toolUseId"] != envelope["toolUseId"]
    assert events[-1]["eventType"] == "permission_requested" and events[-1]["permission"] == again
    assert fake_ros.created == 1
    stack_id = next(iter(fake_ros.stacks))
    assert again["operation"]["target"] == {"type": "resource", "name": envelope["operation"]["target"]["name"],
                                            "id": stack_id}
    return envelope, again, events


def completed(events: list[Event]) -> Event:
    types = lifecycle([e["eventType"] for e in events])
    assert types[0] == "permission_resolved" and types[-3:] == ["step_completed", "pipeline_completed",
                                                                 "pipeline_handoff_ready"], types
    conclusion = lifecycle(events)[-3]["data"]["conclusion"]
    assert conclusion["status"] == "success" and conclusion["stack_status"] == "CREATE_COMPLETE"
    return conclusion


async def test_a_create_failed_stack_is_continued_after_the_callers_allow(fake_ros: Any) -> None:
    fake_ros.final_status, fake_ros.final_reason = "CREATE_FAILED", "Resource [EcsInstance] failed: Throttling"
    async with start_server(deploy.settings(fake_ros)) as server, connect_client(server) as client:
        _, again, before = await failed_once(client, fake_ros)
        assert again["operation"]["action"] == "continue_create"
        assert again["operation"]["apiCalls"] == [
            {"product": "ROS", "action": "ContinueCreateStack", "effect": "change"}, POLL]
        assert "ContinueCreateStack" not in fake_ros.calls  # asked first
        answered = await deploy.send(client, permission_answer_request(again, "allow_once", message_id="go"), n=11)
        after = deploy.pipeline_events(answered)
        conclusion = completed(after)
        stack_id = next(iter(fake_ros.stacks))
        assert conclusion["stack_id"] == stack_id and conclusion["tool_use_id"] == again["toolUseId"]
        progress = [e["data"] for e in after if e["eventType"] == "stack_progress"]
        assert progress[0]["status"] == "CREATE_IN_PROGRESS" and progress[-1]["status"] == "CREATE_COMPLETE"
        assert fake_ros.calls.count("ContinueCreateStack") == 1 and fake_ros.continuations == 1
        assert fake_ros.created == 1 and fake_ros.calls.count("CreateStack") == 1 and fake_ros.deletions == 0
        state = await deploy.state_of(server.url, again["contextId"])
        assert state["events"][-len(after) - len(before):] == before + after  # as streamed


async def test_a_rolled_back_stack_is_deleted_and_created_again(fake_ros: Any) -> None:
    fake_ros.final_status = "CREATE_ROLLBACK_COMPLETE"
    async with start_server(deploy.settings(fake_ros)) as server, connect_client(server) as client:
        _, again, _ = await failed_once(client, fake_ros)
        first = next(iter(fake_ros.stacks))
        assert again["operation"]["action"] == "delete_and_create"
        assert again["operation"]["apiCalls"] == [{"product": "ROS", "action": "DeleteStack", "effect": "change"},
                                                  {"product": "ROS", "action": "CreateStack", "effect": "change"},
                                                  POLL]
        assert fake_ros.deletions == 0
        fake_ros.final_status = "CREATE_COMPLETE"
        answered = await deploy.send(client, permission_answer_request(again, "allow_once", message_id="go"), n=11)
        conclusion = completed(deploy.pipeline_events(answered))
        assert fake_ros.deletions == 1 and fake_ros.created == 2 and fake_ros.calls.count("CreateStack") == 2
        assert fake_ros.stacks[first].status == "DELETE_COMPLETE"
        [alive] = fake_ros.alive()
        assert conclusion["stack_id"] == alive.stack_id != first and alive.status == "CREATE_COMPLETE"
        assert alive.token and alive.token != fake_ros.stacks[first].token  # a new ClientToken
        assert "ContinueCreateStack" not in fake_ros.calls
        snapshot = (await deploy.state_of(server.url, again["contextId"]))["snapshot"]
        assert snapshot["stack"]["stackId"] == alive.stack_id


async def test_a_denied_further_attempt_calls_nothing(fake_ros: Any) -> None:
    fake_ros.final_status = "CREATE_FAILED"
    async with start_server(deploy.settings(fake_ros)) as server, connect_client(server) as client:
        _, again, _ = await failed_once(client, fake_ros)
        calls = list(fake_ros.calls)
        answered = await deploy.send(client, permission_answer_request(again, "deny", message_id="no"), n=11)
        after = deploy.pipeline_events(answered)
        assert lifecycle([e["eventType"] for e in after])[-3:] == ["step_failed", "pipeline_failed", "pipeline_handoff_ready"]
        assert after[0]["data"]["decision"] == "deny"
        failed = lifecycle(after)[-3]["data"]
        assert failed["error"] == "stack_create_failed" and failed["deployment"]["stack_status"] == "CREATE_FAILED"
        assert fake_ros.calls == calls  # nothing reached ROS after the question
        assert fake_ros.continuations == 0 and fake_ros.deletions == 0 and fake_ros.created == 1
        state = await deploy.state_of(server.url, again["contextId"])
        assert state["snapshot"]["pendingInput"] is None


async def test_a_stack_still_in_progress_is_waited_for(fake_ros: Any) -> None:
    """The wait ran out with the stack CREATE_IN_PROGRESS: the next attempt is ``wait``, GetStack polling only."""
    fake_ros.hold = True
    config = deploy.settings(fake_ros, **{"ros-wait-timeout-seconds": 0.3})
    async with start_server(config) as server, connect_client(server) as client:
        _, again, _ = await failed_once(client, fake_ros)
        assert again["operation"]["action"] == "wait" and again["operation"]["apiCalls"] == [POLL]
        calls = len(fake_ros.calls)
        fake_ros.release()
        answered = await deploy.send(client, permission_answer_request(again, "allow_once", message_id="go"), n=11)
        completed(deploy.pipeline_events(answered))
        assert set(fake_ros.calls[calls:]) <= {"GetStack", "ListStackResources"}
        assert fake_ros.created == 1
        assert (await deploy.state_of(server.url, again["contextId"]))["snapshot"]["stack"]["status"] == \
            "CREATE_COMPLETE"
