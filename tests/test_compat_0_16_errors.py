"""The product's 0.16 error texts (``since-0.13.md``) that no other test asserts, on a real server.

Every text the spec names was looked up in the tests first (exact string). This module asserts the
ones we produce that were not asserted anywhere, and the bindings that were missing for the others:

* §1 ``Unsupported run mode.`` / ``Unsupported pipeline name.`` and §11 ``Unsupported Alibaba Cloud
  region ID.``: JSON-RPC in ``tests/test_run_modes.py`` and ``tests/test_cloud_region.py``; here also
  HTTP+JSON (REST) through a2a-sdk's client, and "no ``data``" for the run mode.
* §1 ``This session already runs pipeline {durable}; it cannot switch to {requested}.`` with its
  ``data``: 1.0 JSON-RPC in ``tests/test_run_modes.py``; here REST (ErrorInfo metadata), a2a-sdk's
  client on both bindings (``exc.data``), and the v0.3 JSON-RPC adapter (``message/send`` and
  ``message/stream``), whose ``-32602`` keeps its ``data`` (§11 "JSON-RPC error data passthrough").
* §4.1 ``permission-wait`` start-up texts: ``tests/test_permission_waits.py`` (our kebab-case key spelling).
* §4.3/§4.4 ``permission_resume_invalid: permission_task_owner_changed``, ``… permission response
  conflicts with checkpoint.``, ``… permission decision conflicts with receipt.``, ``… suspended permission
  is unavailable.``, ``input_response_mismatch: permission task context changed.``:
  ``tests/test_permission_waits.py`` (JSON-RPC); here ``legacy_permission_identity``,
  ``permission_task_context_changed`` and ``canonical permission request changed.`` on JSON-RPC and REST.
* §5 the three ``Permission responses …`` texts: ``tests/test_permission_text_part.py`` (all bindings).
* §7/§8 execution control: every 400/404/409 text in ``plugins/execution_control/tests/``; here the 503
  ``Session restore is unavailable.`` (HTTP route and JSON-RPC method, ``task-store: redis``).
* §9 ``resource_selection_resume_invalid: …`` and ``Task belongs to a different owner``:
  ``tests/test_resource_selector.py``, ``tests/test_resource_selector_resume.py``.
* §10 ``afterSequence must be a non-negative integer``: ``plugins/pipeline_selling/tests/test_state_route.py``.

Not produced by this server (see ``docs/compatibility.md``), so not asserted: ``Pipeline already running.
Resume task {task_id}.``, ``Session backup is still synchronizing. Retry after 3 seconds.`` /
``SESSION_BACKUP_NOT_READY``, the STS/OAuth identity codes, ``permission checkpoint is unavailable.``,
``session transcript is unavailable.``, ``permission generation changed``. Produced but not asserted (no
deterministic way to reach them from outside): ``Execution control is unavailable.`` (only between the
controller's stop and the transports' close, which close first), ``Unable to restore the A2A session.`` (an
unreadable context snapshot), ``permission decision conflicts with active
recovery.`` (a second, different answer while a resumed turn runs).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from iac_code.testing import A2A_HEADERS, RunningServer, connect_client, redis_url, start_server

SECONDS = 30.0
BINDINGS = ("JSONRPC", "HTTP+JSON")
V03 = {"Content-Type": "application/json"}  # no A2A-Version header: an A2A 0.3 client
PIPELINE_PROMPT = "Deploy a website with a VPC, two ECS instances and an SLB in cn-hangzhou."
SWITCH = "This session already runs pipeline selling; it cannot switch to selling_solution_first."
SWITCH_DATA = {"durablePipelineName": "selling", "requestedPipelineName": "selling_solution_first"}
SWITCH_METADATA = {"iac_code": {"run_mode": "pipeline", "pipeline_name": "selling_solution_first"}}
INVALID = "permission_resume_invalid: "


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the default workspace: where a turn writes its template
    return work


def _request(text: str, *, message_id: str, context_id: str = "", task_id: str = "",
             metadata: dict[str, Any] | None = None, parts: list[Part] | None = None) -> SendMessageRequest:
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=parts or [Part(text=text)],
                      context_id=context_id, task_id=task_id)
    if metadata is not None:
        message.metadata.update(metadata)
    return SendMessageRequest(message=message)


async def _events(client: Client, request: SendMessageRequest) -> list[Any]:
    async def collect() -> list[Any]:
        return [event async for event in client.send_message(request)]

    return await asyncio.wait_for(collect(), SECONDS)


async def _refusal(client: Client, request: SendMessageRequest) -> InvalidParamsError:
    try:
        result = await _events(client, request)
    except InvalidParamsError as exc:
        return exc
    raise AssertionError(f"expected -32602, got {result!r}")


async def _task(client: Client, request: SendMessageRequest) -> Task:
    [reply] = await _events(client, request)
    assert reply.WhichOneof("payload") == "task", reply
    return reply.task


def _iac_code(item: Any) -> dict[str, Any]:
    return MessageToDict(item.metadata).get("iac_code", {})


# ----------------------------------------------------------------------------- §1, §11: request checks


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(("metadata", "text"), [
    ({"run_mode": "fast"}, "Unsupported run mode."),
    ({"runMode": "pipeline", "run_mode": "turbo"}, "Unsupported run mode."),  # run_mode wins
    ({"run_mode": " Pipeline ", "pipeline_name": "selling_v2"}, "Unsupported pipeline name."),
    ({"run_mode": "pipeline", "pipeline_name": ["selling"]}, "Unsupported pipeline name."),
    ({"alibaba_cloud_region_id": "CN_HANGZHOU"}, "Unsupported Alibaba Cloud region ID."),
    ({"alibaba_cloud_region_id": "-cn-hangzhou"}, "Unsupported Alibaba Cloud region ID."),
])
async def test_request_checks_on_jsonrpc_and_rest(binding: str, metadata: dict[str, Any], text: str,
                                                   workspace: Path) -> None:
    async with start_server() as server, connect_client(server, binding=binding, streaming=False) as client:
        refused = await _refusal(client, _request("hello", message_id=f"m-{uuid.uuid4().hex}",
                                                  metadata={"iac_code": metadata}))
        assert refused.message == text
        assert not getattr(refused, "data", None)  # §1: "(no data)"
        # nothing was created: the same context then takes an ordinary turn
        ok = await _task(client, _request("hello", message_id=f"m-{uuid.uuid4().hex}"))
        assert ok.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_run_mode_error_has_no_data_of_its_own(workspace: Path) -> None:
    """§1 "(no data)": 1.0 JSON-RPC carries only A2A 1.0's standard ErrorInfo (empty metadata); 0.3 no data."""
    message = {"messageId": "m-rm", "role": "ROLE_USER", "parts": [{"text": "x"}],
               "metadata": {"iac_code": {"run_mode": "fast"}}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    v03 = {"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": {
        "kind": "message", "role": "user", "messageId": "m-rm-03", "parts": [{"kind": "text", "text": "x"}],
        "metadata": {"iac_code": {"run_mode": "fast"}}}}}
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
            assert (await reply.json())["error"] == {"code": -32602, "message": "Unsupported run mode.", "data": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_PARAMS",
                 "domain": "a2a-protocol.org", "metadata": {}}]}
        async with http.post(server.url, json=v03, headers=V03) as reply:
            assert (await reply.json())["error"] == {"code": -32602, "message": "Unsupported run mode."}


async def test_the_pipeline_comes_from_iac_code_pipeline_name_unless_the_session_has_one(workspace: Path) -> None:
    """§1: requested, else persisted, else ``IAC_CODE_PIPELINE_NAME``; then the session keeps its pipeline."""
    environ = {"IAC_CODE_PIPELINE_NAME": "selling_solution_first"}
    async with start_server(environ=environ) as server, aiohttp.ClientSession() as http:
        await _pipeline_session(server, http, "ctx-env")
        async with http.get(server.url + "iac-code/pipeline/state", params={"contextId": "ctx-env"}) as reply:
            events = (await reply.json())["events"]
        assert {e["pipelineName"] for e in events} == {"selling_solution_first"}
        body = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
            "messageId": "m-env-2", "role": "ROLE_USER", "contextId": "ctx-env", "parts": [{"text": "x"}],
            "metadata": {"iac_code": {"run_mode": "pipeline", "pipeline_name": "selling"}}}}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
            assert (await reply.json())["error"]["data"] == {"durablePipelineName": "selling_solution_first",
                                                             "requestedPipelineName": "selling"}


# ----------------------------------------------------------------------------- §1 + §11: data passthrough


async def _pipeline_session(server: RunningServer, http: aiohttp.ClientSession, context_id: str) -> None:
    """A context whose session now runs the ``selling`` pipeline (its first turn stops for an answer)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": f"m-{context_id}", "role": "ROLE_USER", "contextId": context_id,
        "parts": [{"text": PIPELINE_PROMPT}], "metadata": {"iac_code": {"run_mode": "pipeline"}}}}}
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
        task = (await reply.json())["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def _v03_message(context_id: str, message_id: str) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "messageId": message_id, "contextId": context_id,
            "parts": [{"kind": "text", "text": "use the other pipeline"}], "metadata": SWITCH_METADATA}


async def _v03_rpc(http: aiohttp.ClientSession, server: RunningServer, context_id: str, method: str) -> Any:
    body = {"jsonrpc": "2.0", "id": f"r-{method}", "method": method,
            "params": {"message": _v03_message(context_id, f"m-{method}")}}
    async with http.post(server.url, json=body, headers=V03) as reply:
        assert reply.status == 200
        return json.loads(await reply.text())


async def _v10_rest(http: aiohttp.ClientSession, server: RunningServer, context_id: str) -> Any:
    body = {"message": {"messageId": "m-rest", "role": "ROLE_USER", "contextId": context_id,
                        "parts": [{"text": "use the other pipeline"}], "metadata": SWITCH_METADATA}}
    async with http.post(server.url + "message:send", json=body, headers=A2A_HEADERS) as reply:
        assert reply.status == 400
        return await reply.json()


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
async def test_v03_jsonrpc_keeps_the_data_of_invalid_params(method: str, workspace: Path) -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        await _pipeline_session(server, http, "ctx-v03")
        reply = await _v03_rpc(http, server, "ctx-v03", method)
        assert reply == {"jsonrpc": "2.0", "id": f"r-{method}",
                         "error": {"code": -32602, "message": SWITCH, "data": SWITCH_DATA}}


async def test_rest_carries_the_data_as_error_info(workspace: Path) -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        await _pipeline_session(server, http, "ctx-rest")
        body = await _v10_rest(http, server, "ctx-rest")
        assert body["error"]["message"] == SWITCH and body["error"]["status"] == "INVALID_ARGUMENT"
        [info] = body["error"]["details"]
        assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" and info["metadata"] == SWITCH_DATA
        # the 0.3 REST routes answer 0.3's {"message"} body (no data there in 0.3 either)
        v03 = {"message": {"messageId": "m-rest-03", "role": "ROLE_USER", "contextId": "ctx-rest",
                           "content": [{"text": "x"}], "metadata": SWITCH_METADATA}}
        async with http.post(server.url + "v1/message:send", json=v03, headers=V03) as reply:
            assert (reply.status, await reply.json()) == (422, {"message": SWITCH})


@pytest.mark.parametrize("binding", BINDINGS)
async def test_sdk_clients_see_the_switch_data(binding: str, workspace: Path) -> None:
    async with start_server() as server, aiohttp.ClientSession() as http, \
            connect_client(server, binding=binding, streaming=False) as client:
        await _pipeline_session(server, http, "ctx-sdk")
        refused = await _refusal(client, _request("x", message_id="m-switch", context_id="ctx-sdk",
                                                  metadata=SWITCH_METADATA))
        assert refused.message == SWITCH
        # REST: the ErrorInfo metadata. JSON-RPC: the product's plain-object ``data`` (asserted on the wire in
        # tests/test_run_modes.py and above), which a2a-sdk's 1.0 JSON-RPC client does not read (it reads only
        # an ErrorInfo list): docs/compatibility.md says so.
        assert refused.data == (SWITCH_DATA if binding == "HTTP+JSON" else None)


# ----------------------------------------------------------------------------- §10: lean


async def test_lean_drops_the_tool_results_and_other_values_answer_in_full(
        workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    """§10 ``lean``: ``1``/``true`` (trimmed, any case) drop ``snapshot.display.toolResults``; anything else answers
    in full and is logged."""
    async with start_server() as server, aiohttp.ClientSession() as http:
        await _pipeline_session(server, http, "ctx-lean")

        async def display(**query: str) -> dict[str, Any]:
            async with http.get(server.url + "iac-code/pipeline/state",
                                params={"contextId": "ctx-lean", **query}) as reply:
                assert reply.status == 200
                return (await reply.json())["snapshot"]["display"]  # type: ignore[no-any-return]

        full = await display()
        assert full["toolResults"], full  # the candidates' templates
        for lean in ("1", "true", " TRUE "):
            assert "toolResults" not in await display(lean=lean), lean
        with caplog.at_level("INFO", logger="iac_code_pipeline_selling.state_route"):
            for other in ("0", "false", "yes", ""):
                assert await display(lean=other) == full, other
        assert any("unknown lean value 'yes'" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------------------- §8: session restore


async def test_session_restore_is_unavailable_with_a_shared_task_store(workspace: Path) -> None:
    settings = {"task-store": "redis", "task-store-redis-url": redis_url(),
                "task-store-key-prefix": f"compat-{uuid.uuid4().hex[:12]}:"}
    restore = {"cwd": str(workspace), "sessionId": "ctx-any"}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        async with http.post(server.url + "iac-code/session/ensure-restored", json=restore) as reply:
            assert (reply.status, await reply.json()) == (503, {"error": "Session restore is unavailable."})
        rpc = {"jsonrpc": "2.0", "id": 7, "method": "iac-code/session/ensure-restored", "params": restore}
        async with http.post(server.url, json=rpc, headers=A2A_HEADERS) as reply:
            assert (await reply.json())["error"] == {"code": -32603, "message": "Session restore is unavailable.",
                                                     "data": {"httpStatus": 503}}


# ----------------------------------------------------------------------------- §4: recovered permission answers

SUSPEND_FAST = {"permission-wait": {"resident-timeout-seconds": 0.2, "timeout-grace-seconds": 0}}
VPC_PROMPT = "Create a VPC with two vSwitches."


def _answer(envelope: dict[str, Any], *, message_id: str) -> SendMessageRequest:
    data = Struct()
    data.update({"schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
                 "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": "allow_once"})
    part = Part(data=Value(struct_value=data), media_type="application/json")
    return _request("", message_id=message_id, parts=[part], task_id=envelope["requestTaskId"],
                    context_id=envelope["contextId"])


async def _until(condition: Callable[[], Awaitable[bool]]) -> None:
    deadline = time.monotonic() + SECONDS
    while not await condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def _boundary_files(state: Path) -> dict[str, Path]:
    """The checkpoint files by task id."""
    return {json.loads(p.read_text())["taskId"]: p for p in (state / "permission-waits").glob("pwb_*.json")}


def _edit(path: Path, **changes: Any) -> None:
    record = json.loads(path.read_text())
    record.update(changes)
    path.write_text(json.dumps(record))  # the same file: its owner-only mode stays


EDITS: dict[str, tuple[dict[str, Any], str]] = {
    "legacy": ({"identitySchema": 0}, INVALID + "legacy_permission_identity"),
    "context": ({"contextId": "ctx-somewhere-else"}, INVALID + "permission_task_context_changed"),
    "digest": ({"payloadDigest": "sha256:" + "0" * 64}, INVALID + "canonical permission request changed."),
}


@pytest.fixture
async def edited_waits(tmp_path: Path, workspace: Path) -> AsyncIterator[tuple[RunningServer, dict[str, Any]]]:
    """A server restarted on suspended permission waits whose checkpoints were changed while it was down:
    one task per :data:`EDITS` entry (``{name: envelope}``)."""
    state = tmp_path / "state"
    settings = {**SUSPEND_FAST, "persistence-dir": str(state)}
    envelopes: dict[str, dict[str, Any]] = {}
    async with start_server(settings) as server, connect_client(server, streaming=False) as client:
        for name in EDITS:
            task = await _task(client, _request(VPC_PROMPT, message_id=f"m-{name}", context_id=f"ctx-{name}"))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            envelopes[name] = _iac_code(task)["input"]

            async def suspended(task_id: str = task.id) -> bool:
                now = await client.get_task(GetTaskRequest(id=task_id))
                return _iac_code(now).get("permissionWait") == {"status": "suspended", "resumable": True}

            await _until(suspended)
    files = _boundary_files(state)
    for name, (changes, _) in EDITS.items():
        _edit(files[envelopes[name]["requestTaskId"]], **changes)
    async with start_server(settings) as server:
        yield server, envelopes


@pytest.mark.parametrize("binding", BINDINGS)
async def test_recovered_answers_refuse_a_changed_checkpoint(
        binding: str, edited_waits: tuple[RunningServer, dict[str, Any]], workspace: Path) -> None:
    server, envelopes = edited_waits
    async with connect_client(server, binding=binding, streaming=False) as client:
        for name, (_, text) in EDITS.items():
            refused = await _refusal(client, _answer(envelopes[name], message_id=f"a-{name}-{binding}"))
            assert refused.message == text, name
            # nothing changed: the task still waits, suspended, and the tool did not run
            task = await client.get_task(GetTaskRequest(id=envelopes[name]["requestTaskId"]))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert _iac_code(task)["permissionWait"] == {"status": "suspended", "resumable": True}
    phases = {json.loads(p.read_text())["phase"] for p in _boundary_files(server.kernel.state_dir).values()}
    assert phases == {"SUSPENDED"}
    assert not (workspace / "template.ros.yaml").exists()


# ----------------------------------------------------------------------------- §11: the card's batching limits


async def test_the_card_states_its_batch_limits_as_integers(workspace: Path) -> None:
    """§11 batching: card ``maxBatchEvents``/``maxBatchBytes``/``maxBatchDelayMs`` are the integers 1024,
    1048576, 20 (protobuf Struct numbers are doubles; the served JSON must not say ``1024.0``)."""
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + ".well-known/agent-card.json") as reply:
            text = await reply.text()
    card = json.loads(text)
    [params] = [e["params"] for e in card["capabilities"]["extensions"]
                if e["uri"] == "urn:iac-code:a2a:pipeline-events:v1"]
    limits = {key: params[key] for key in ("maxBatchEvents", "maxBatchBytes", "maxBatchDelayMs")}
    assert limits == {"maxBatchEvents": 1024, "maxBatchBytes": 1048576, "maxBatchDelayMs": 20}
    assert all(type(value) is int for value in limits.values()), limits
    assert '"maxBatchEvents":1024,' in text or '"maxBatchEvents":1024}' in text
