"""The resource selector's derived selectors, critical backup and remaining refusals (§9) on a real server:
``agent-runtime: llm`` against the scripted OpenAI-compatible server, a2a-sdk's client for every message.

* a derived selector (``vswitch_zone_id`` from a ``vswitch_id`` answer) asks with ``source`` and takes only an
  answer carrying that very ``source`` and a value its profile and ``associationPropertyMetadata`` allow;
* with ``IAC_CODE_CONFIG_BACKUP_DIR`` the checkpoint is backed up before the question is published, and a failed
  backup means no question;
* ``runtime is unavailable``, ``input already pending`` and the integrity-on-resume reasons of a checkpoint edited
  while the server was stopped.
"""

from __future__ import annotations

import json
import re
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, start_server
from iac_code_resource_selector.profiles import PROFILE_HASH
from iac_code_resource_selector.store import payload_digest
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks

ENV = "IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED"
BACKUP_ENV = "IAC_CODE_CONFIG_BACKUP_DIR"
CAPABILITY = {"schemaVersion": 1, "queryMode": "ros_api_json", "profileHash": PROFILE_HASH}
CREDENTIAL_ENV = ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN")
ASK = {"selector": "vpc_id", "question": "Which VPC?", "association_property_metadata": {"RegionId": "cn-hangzhou"}}
SOURCE = {"selector_id": "vswitch_id", "value": "vsw-abc123"}
DERIVED = {"selector": "vswitch_zone_id", "question": "Use the zone of that vSwitch?", "source": SOURCE,
           "association_property_metadata": {"RegionId": "cn-hangzhou"}}


def _settings(stub: OpenAIStub, state: Path) -> dict[str, Any]:
    return {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test-key-000",
            "llm-retry-backoff": 0.01, "llm-timeout": 5, "persistence-dir": str(state)}


def _select(ask: dict[str, Any], call_id: str = "call-sel") -> Reply:
    return Reply.stream([*tool_call_chunks(0, call_id, "select_cloud_resource", json.dumps(ask)),
                         finish_chunk("tool_calls")])


def _done(text: str = "Done.") -> Reply:
    return Reply.stream([text_chunk(text), finish_chunk("stop")])


def _request(text: str, iac_code: dict[str, Any] | None = None, **ids: str) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)], **ids)
    message.metadata.update({"iac_code": iac_code if iac_code is not None else {
        "capabilities": {"resourceSelector": CAPABILITY}}})
    return SendMessageRequest(message=message)


async def _updates(client: Any, request: SendMessageRequest) -> list[dict[str, Any]]:
    events = [MessageToDict(e) async for e in client.send_message(request)]
    return [e["statusUpdate"] for e in events if "statusUpdate" in e]


def _meta(update: dict[str, Any]) -> dict[str, Any]:
    return update.get("metadata", {}).get("iac_code", {})


def _tool_result(request: Any, call_id: str) -> dict[str, Any]:
    [message] = [m for m in request.body["messages"] if m.get("role") == "tool" and m["tool_call_id"] == call_id]
    return json.loads(message["content"])


def _answer(asked: dict[str, Any], **changes: Any) -> dict[str, Any]:
    response = {"schemaVersion": 1, "kind": "cloud_resource_selection", "status": "selected",
                "requestTaskId": asked["requestTaskId"], "contextId": asked["contextId"], "inputId": asked["inputId"],
                "toolUseId": asked["toolUseId"], "selectorId": asked["selector"]["id"], "value": "vpc-abc123"}
    if asked["selector"]["source"] is not None:
        response.update(value="cn-hangzhou-h", source=asked["selector"]["source"])
    response.update(changes)
    return {key: value for key, value in response.items() if value is not None}


async def _ask(client: Any) -> tuple[dict[str, str], dict[str, Any]]:
    final = (await _updates(client, _request("Create an ECS instance")))[-1]
    assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", final
    return {"task_id": final["taskId"], "context_id": final["contextId"]}, _meta(final)["inputRequired"]


async def _refused(client: Any, answer: dict[str, Any], ids: dict[str, str]) -> str:
    with pytest.raises(InvalidParamsError) as caught:
        await _updates(client, _request("x", {"inputResponse": answer}, **ids))
    return str(caught.value.message)


@pytest.fixture(autouse=True)
def _enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An enabled selector without cloud credentials (values pattern-checked) and without backups unless set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "on")
    monkeypatch.delenv(BACKUP_ENV, raising=False)
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)


def _record(state: Path, input_id: str) -> Path:
    return state / "resource-selections" / f"{input_id}.json"


async def test_a_derived_selector_carries_its_source_and_takes_only_a_matching_answer(tmp_path: Path) -> None:
    ask = {**DERIVED, "association_property_metadata": {"RegionId": "cn-hangzhou", "ZoneId": "cn-hangzhou-h"}}
    async with OpenAIStub([_select(ask), _done("Zone taken.")]) as stub, \
            start_server(_settings(stub, tmp_path / "state")) as server, connect_client(server) as client:
        ids, asked = await _ask(client)
        assert asked["selector"] == {"id": "vswitch_zone_id", "associationProperty": "ALIYUN::ECS::ZoneId",
                                     "outputKind": "derived_value", "source": SOURCE, "profileHash": PROFILE_HASH,
                                     "associationPropertyMetadata": ask["association_property_metadata"],
                                     "valueCheck": "pattern"}
        prefix = "resource_selection_resume_invalid: "
        for changes, reason in [({"source": None}, "source mismatch"),
                                ({"source": {**SOURCE, "value": "vsw-other1"}}, "source mismatch"),
                                ({"source": {"selector_id": "vpc_id", "value": "vpc-abc123"}}, "source mismatch"),
                                ({"source": "vsw-abc123"}, "source is invalid"),
                                ({"source": {**SOURCE, "value": ""}}, "source is invalid"),
                                ({"value": "not a zone"}, "selector value is invalid"),
                                ({"value": "cn-hangzhou-i"}, "selector value is invalid"),  # not the question's ZoneId
                                ({"selectorId": "vswitch_id"}, "selector mismatch")]:
            assert await _refused(client, _answer(asked, **changes), ids) == prefix + reason, changes
        assert json.loads(_record(tmp_path / "state", asked["inputId"]).read_text())["state"] == "pending"
        updates = await _updates(client, _request("ok", {"inputResponse": _answer(asked)}, **ids))
        assert [_meta(u)["inputReceived"]["replayed"] for u in updates if "inputReceived" in _meta(u)] == [False]
    assert _tool_result(stub.requests[1], "call-sel") == {"result": {
        "status": "selected", "selectorId": "vswitch_zone_id", "value": "cn-hangzhou-h"}}


@pytest.mark.parametrize(("ask", "error"), [
    ({**DERIVED, "source": None}, "invalid source: vswitch_zone_id derives from a vswitch_id answer"),
    ({**DERIVED, "source": {"selector_id": "vpc_id", "value": "vpc-abc123"}},
     "invalid source: vswitch_zone_id derives from a vswitch_id answer"),
    ({**ASK, "source": SOURCE}, "invalid source: vpc_id is not a derived selector"),
])
async def test_a_question_with_a_wrong_source_is_not_asked(ask: dict[str, Any], error: str, tmp_path: Path) -> None:
    ask = {k: v for k, v in ask.items() if v is not None}
    async with OpenAIStub([_select(ask), _done("Could not ask.")]) as stub, \
            start_server(_settings(stub, tmp_path / "state")) as server, connect_client(server) as client:
        updates = await _updates(client, _request("Create an ECS instance"))
    assert "inputRequired" not in _meta(updates[-1])
    assert _tool_result(stub.requests[1], "call-sel")["error"].startswith(error)
    assert not (tmp_path / "state" / "resource-selections").exists() or \
        not list((tmp_path / "state" / "resource-selections").iterdir())


async def test_the_checkpoint_is_backed_up_before_the_question(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    backup = tmp_path / "backup"
    monkeypatch.setenv(BACKUP_ENV, str(backup))
    async with OpenAIStub([_select(ASK), _done()]) as stub, \
            start_server(_settings(stub, tmp_path / "state")) as server, connect_client(server) as client:
        ids, asked = await _ask(client)
        copy = backup / "resource-selections" / f"{asked['inputId']}.json"
        assert json.loads(copy.read_text()) == json.loads(_record(tmp_path / "state", asked["inputId"]).read_text())
        assert json.loads(copy.read_text())["state"] == "pending"
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
        await _updates(client, _request("ok", {"inputResponse": _answer(asked)}, **ids))
        assert json.loads(copy.read_text())["state"] == "resolved"


async def test_a_failed_backup_means_no_question(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setenv(BACKUP_ENV, str(blocker / "backup"))
    async with OpenAIStub([_select(ASK), _done("I could not ask you.")]) as stub, \
            start_server(_settings(stub, tmp_path / "state")) as server, connect_client(server) as client:
        updates = await _updates(client, _request("Create an ECS instance"))
    assert all("inputRequired" not in _meta(u) for u in updates)
    error = _tool_result(stub.requests[1], "call-sel")["error"]
    assert error == ("the selection could not be backed up (the backup location is not a directory); "
                     "the question was not asked")
    assert str(tmp_path) not in json.dumps(updates)
    records = tmp_path / "state" / "resource-selections"
    assert not records.exists() or not list(records.iterdir())


async def test_an_answer_on_a_server_without_the_llm_runtime_is_refused(tmp_path: Path) -> None:
    async with OpenAIStub([_select(ASK), _done("Restarted, using it.")]) as stub:
        settings = _settings(stub, tmp_path / "state")
        async with start_server(settings) as server, connect_client(server) as client:
            ids, asked = await _ask(client)
        async with start_server({**settings, "agent-runtime": "offline"}) as server, \
                connect_client(server) as client:
            assert await _refused(client, _answer(asked), ids) == \
                "resource_selection_resume_invalid: runtime is unavailable"
        assert json.loads(_record(tmp_path / "state", asked["inputId"]).read_text())["state"] == "pending"
        async with start_server(settings) as server, connect_client(server) as client:  # back on llm: taken
            updates = await _updates(client, _request("ok", {"inputResponse": _answer(asked)}, **ids))
    assert [_meta(u)["inputReceived"]["replayed"] for u in updates if "inputReceived" in _meta(u)] == [False]


async def test_a_second_question_in_the_context_while_one_waits_is_not_asked(tmp_path: Path) -> None:
    async with OpenAIStub([_select(ASK), _select(ASK, "call-again"), _done("One at a time.")]) as stub, \
            start_server(_settings(stub, tmp_path / "state")) as server, connect_client(server) as client:
        ids, asked = await _ask(client)
        # A new task in the same context (the waiting task is left as it is): its model asks again.
        updates = await _updates(client, _request("And a database", context_id=ids["context_id"]))
        assert updates[-1]["taskId"] != ids["task_id"]
        assert all("inputRequired" not in _meta(u) for u in updates)
    assert _tool_result(stub.requests[2], "call-again") == {
        "error": "resource_selection_resume_invalid: input already pending"}
    assert json.loads(_record(tmp_path / "state", asked["inputId"]).read_text())["state"] == "pending"


def _edit(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record))
    return edit


def _resign(record: dict[str, Any]) -> None:
    record["payloadDigest"] = payload_digest(record)


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda path: path.write_text("{not json"), "checkpoint is unreadable"),
    (_edit(lambda r: r.pop("toolUseId")), "checkpoint is incomplete"),
    (_edit(lambda r: r.update(state="waiting")), "checkpoint contract is invalid"),
    (_edit(lambda r: r.update(tool="ask_user_question")), "selector tool changed"),
    (_edit(lambda r: r.update(prompt="Which security group?")), "selector payload changed"),
    (_edit(lambda r: r["selector"].update(id="vswitch_id")), "selector payload changed"),
    (_edit(lambda r: r.update(ownerRef="sha256:" + "1" * 64)), "selector payload changed"),
    (_edit(lambda r: (r["selector"].update(profileHash="sha256:" + "0" * 64), _resign(r))),
     "selector profile mismatch"),
], ids=["unreadable", "incomplete", "contract", "tool", "prompt", "selector", "owner", "profile"])
async def test_a_checkpoint_changed_while_the_server_was_down_is_refused(edit: Callable[[Path], None], reason: str,
                                                                        tmp_path: Path) -> None:
    async with OpenAIStub([_select(ASK), _done()]) as stub:
        settings = _settings(stub, tmp_path / "state")
        async with start_server(settings) as server, connect_client(server) as client:
            ids, asked = await _ask(client)
        path = _record(tmp_path / "state", asked["inputId"])
        edit(path)
        edited = path.read_bytes()
        async with start_server(settings) as server, connect_client(server) as client:
            message = await _refused(client, _answer(asked, selectorId="vpc_id"), ids)
        assert message == "resource_selection_resume_invalid: " + reason
        assert not re.search(r"/tmp|/work|Traceback", message)
        assert path.read_bytes() == edited and len(stub.requests) == 1  # nothing changed, nothing ran


async def test_an_answer_from_another_owner_is_refused(tmp_path: Path) -> None:
    settings_extra = {"token": "t-bearer", "api-key": "k-other-caller"}
    async with OpenAIStub([_select(ASK), _done("Taken.")]) as stub, \
            start_server({**_settings(stub, tmp_path / "state"), **settings_extra}) as server, \
            connect_client(server, headers={"Authorization": "Bearer t-bearer"}) as client, \
            connect_client(server, headers={"X-API-Key": "k-other-caller"}) as other:
        ids, asked = await _ask(client)
        record = json.loads(_record(tmp_path / "state", asked["inputId"]).read_text())
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", record["ownerRef"])
        # The answer as a new message of the other principal: the question is another owner's.
        assert await _refused(other, _answer(asked), {}) == "Task belongs to a different owner"
        # Sent on the task itself: owner scoping hides another owner's task (as for every message).
        with pytest.raises(TaskNotFoundError):
            await _updates(other, _request("x", {"inputResponse": _answer(asked)}, task_id=ids["task_id"]))
        # The owner's own answer without the task: not this task's (correlation), not an owner problem.
        assert await _refused(client, _answer(asked), {}) == "resource_selection_resume_invalid: correlation mismatch"
        assert json.loads(_record(tmp_path / "state", asked["inputId"]).read_text())["state"] == "pending"
        updates = await _updates(client, _request("ok", {"inputResponse": _answer(asked)}, **ids))
    assert [_meta(u)["inputReceived"]["replayed"] for u in updates if "inputReceived" in _meta(u)] == [False]
    assert len(stub.requests) == 2
