"""The resource selector's cloud queries on a real server: the official Alibaba Cloud SDKs (ECS, VPC) against a
local stand-in speaking their OpenAPI wire format (:mod:`tests.openapi_fake`), a2a-sdk's client for every message,
``agent-runtime: llm`` against the scripted OpenAI-compatible server.

With credentials the question's ``selector`` carries the options the cloud has (``valueCheck: "cloud"``, at most 100,
pages followed), an answer's value must be one the cloud has for that selector and metadata, nothing to pick means
no question, and a failed query is a sanitised error. The credentials never leave the process except towards the
cloud endpoint.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.testing import connect_client, start_server
from iac_code_resource_selector.profiles import PROFILE_HASH
from tests.openai_stub import OpenAIStub, Reply, finish_chunk, text_chunk, tool_call_chunks
from tests.openapi_fake import OpenApiFake, instance_zone, security_group, vpc, vswitch
from tests.test_cli import _env, run

ENV = "IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED"
CAPABILITY = {"schemaVersion": 1, "queryMode": "ros_api_json", "profileHash": PROFILE_HASH}
KEY_ID = "LTAI5tSelectorKeyId0001"
SECRET = "selector-secret-value-do-not-show-9f8e7d"
TOKEN = "selector-sts-token-do-not-show-1a2b3c"
REGION = "cn-shanghai"
INVALID = "resource_selection_resume_invalid: selector value is invalid"


@dataclass
class Served:
    cloud: OpenApiFake
    stub: OpenAIStub
    client: Any
    state: Path


def _settings(stub: OpenAIStub, cloud: OpenApiFake, state: Path, **extra: Any) -> dict[str, Any]:
    return {"agent-runtime": "llm", "llm-base-url": stub.base_url, "llm-api-key": "sk-test-key-000",
            "llm-retry-backoff": 0.01, "llm-timeout": 5, "persistence-dir": str(state),
            "resource-selector-ecs-endpoint": cloud.endpoint, "resource-selector-vpc-endpoint": cloud.endpoint,
            **extra}


def _select(ask: dict[str, Any]) -> Reply:
    return Reply.stream([*tool_call_chunks(0, "call-sel", "select_cloud_resource", json.dumps(ask)),
                         finish_chunk("tool_calls")])


def _done(text: str = "Done.") -> Reply:
    return Reply.stream([text_chunk(text), finish_chunk("stop")])


def _ask(selector: str, **metadata: str) -> dict[str, Any]:
    return {"selector": selector, "question": f"Which {selector}?",
            "association_property_metadata": {"RegionId": REGION, **metadata}}


def _request(text: str, iac_code: dict[str, Any], **ids: str) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)], **ids)
    message.metadata.update({"iac_code": iac_code})
    return SendMessageRequest(message=message)


async def _send(client: Any, request: SendMessageRequest) -> list[dict[str, Any]]:
    return [MessageToDict(e) async for e in client.send_message(request)]


def _final(events: list[dict[str, Any]]) -> dict[str, Any]:
    return [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]


def _asked(final: dict[str, Any]) -> dict[str, Any]:
    assert final["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return dict(final["metadata"]["iac_code"]["inputRequired"])


def _answer(asked: dict[str, Any], value: str) -> dict[str, Any]:
    return {"schemaVersion": 1, "kind": "cloud_resource_selection", "status": "selected",
            "requestTaskId": asked["requestTaskId"], "contextId": asked["contextId"], "inputId": asked["inputId"],
            "toolUseId": asked["toolUseId"], "selectorId": asked["selector"]["id"], "value": value}


def _tool_result(stub: OpenAIStub, index: int) -> dict[str, Any]:
    [message] = [m for m in stub.requests[index].body["messages"]
                 if m.get("role") == "tool" and m["tool_call_id"] == "call-sel"]
    return dict(json.loads(message["content"]))


def _record(state: Path, input_id: str) -> dict[str, Any]:
    return dict(json.loads((state / "resource-selections" / f"{input_id}.json").read_text()))


@pytest.fixture
async def cloud() -> AsyncIterator[OpenApiFake]:
    async with OpenApiFake() as fake:
        yield fake


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The selector enabled, STS credentials in the standard environment variables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "true")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", SECRET)
    monkeypatch.setenv("ALIBABA_CLOUD_SECURITY_TOKEN", TOKEN)


@asynccontextmanager
async def _serve(cloud: OpenApiFake, tmp_path: Path, replies: list[Reply],
                 **extra: Any) -> AsyncIterator[Served]:
    async with OpenAIStub(replies) as stub, \
            start_server(_settings(stub, cloud, tmp_path / "state", **extra)) as server, \
            connect_client(server) as client:
        yield Served(cloud, stub, client, tmp_path / "state")


async def _start(served: Served) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = await _send(served.client, _request("Create an ECS instance",
                                                 {"capabilities": {"resourceSelector": CAPABILITY}}))
    return _final(events), events


async def test_the_options_come_from_the_cloud_and_a_listed_value_resumes(
        credentials: None, cloud: OpenApiFake, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.vpcs[REGION] = [vpc(f"vpc-sh{i:03d}", f"vpc {i}", f"10.{i}.0.0/16") for i in range(120)]
    cloud.vpcs["cn-hangzhou"] = [vpc("vpc-hz001", "elsewhere")]
    async with _serve(cloud, tmp_path, [_select(_ask("vpc_id")), _done("Using it.")]) as served:
        final, events = await _start(served)
        asked = _asked(final)
        selector = asked["selector"]
        assert selector["valueCheck"] == "cloud" and selector["optionsComplete"] is False
        assert len(selector["options"]) == 100  # bounded; the region has 120
        assert selector["options"][0] == {"value": "vpc-sh000", "label": "vpc 0 · 10.0.0.0/16"}
        assert [o["value"] for o in selector["options"]] == [f"vpc-sh{i:03d}" for i in range(100)]
        # The spec's fields are unchanged.
        assert {k: selector[k] for k in ("id", "associationProperty", "outputKind", "associationPropertyMetadata",
                                         "source", "profileHash")} == {
            "id": "vpc_id", "associationProperty": "ALIYUN::ECS::VPC::VPCId", "outputKind": "resource_id",
            "associationPropertyMetadata": {"RegionId": REGION}, "source": None, "profileHash": PROFILE_HASH}
        # What reached the cloud: the SDK's RPC calls, two pages of 50 in the question's region, signed.
        assert cloud.actions() == ["DescribeVpcs", "DescribeVpcs"]
        assert [(r.params["RegionId"], r.params["PageNumber"], r.params["PageSize"]) for r in cloud.requests] == [
            (REGION, "1", "50"), (REGION, "2", "50")]
        first = cloud.requests[0]
        assert first.headers["x-acs-version"] == "2016-04-28"
        assert first.headers["Authorization"].startswith(f"ACS3-HMAC-SHA256 Credential={KEY_ID},")
        assert first.headers["x-acs-security-token"] == TOKEN

        # A value beyond the listed 100 is still the cloud's: checked with the id filter, taken.
        ids = {"task_id": final["taskId"], "context_id": final["contextId"]}
        answer = _answer(asked, "vpc-sh119")
        events += await _send(served.client, _request("vpc 119", {"inputResponse": answer}, **ids))
        assert cloud.requests[-1].action == "DescribeVpcs" and cloud.requests[-1].params["VpcId"] == "vpc-sh119"
        assert _tool_result(served.stub, 1) == {"result": {"status": "selected", "selectorId": "vpc_id",
                                                           "value": "vpc-sh119"}}
        assert _record(served.state, asked["inputId"])["state"] == "resolved"
        # A replay is acknowledged without asking the cloud again.
        calls = len(cloud.requests)
        events += await _send(served.client, _request("vpc 119", {"inputResponse": answer}, **ids))
        assert _final(events)["metadata"]["iac_code"]["inputReceived"]["replayed"] is True
        assert len(cloud.requests) == calls
        task = MessageToDict(await served.client.get_task(GetTaskRequest(id=final["taskId"])))
        files = "".join(p.read_text(errors="replace") for p in served.state.rglob("*") if p.is_file())
    # The credentials went to the cloud endpoint only: not in the events, the task, the state files or the logs.
    shown = json.dumps(events) + json.dumps(task) + files + caplog.text
    for secret in (KEY_ID, SECRET, TOKEN):
        assert secret not in shown


@pytest.mark.parametrize(("ask", "setup", "listed", "calls"), [
    (_ask("vswitch_id", VpcId="vpc-a", ZoneId=f"{REGION}-b"),
     lambda c: c.vswitches.__setitem__(REGION, [
         *[vswitch(f"vsw-a{i:02d}", "vpc-a", f"{REGION}-b", f"sw{i}") for i in range(60)],
         vswitch("vsw-other", "vpc-b", f"{REGION}-b"), vswitch("vsw-zone", "vpc-a", f"{REGION}-c")]),
     [f"vsw-a{i:02d}" for i in range(60)],
     [("DescribeVSwitches", {"VpcId": "vpc-a", "ZoneId": f"{REGION}-b", "PageNumber": "1", "PageSize": "50"}),
      ("DescribeVSwitches", {"VpcId": "vpc-a", "ZoneId": f"{REGION}-b", "PageNumber": "2", "PageSize": "50"})]),
    (_ask("security_group_id", VpcId="vpc-a"),
     lambda c: c.security_groups.__setitem__(REGION, [
         *[security_group(f"sg-a{i:02d}", "vpc-a") for i in range(70)], security_group("sg-b00", "vpc-b")]),
     [f"sg-a{i:02d}" for i in range(70)],
     [("DescribeSecurityGroups", {"VpcId": "vpc-a", "MaxResults": "50"}),
      ("DescribeSecurityGroups", {"VpcId": "vpc-a", "MaxResults": "50", "NextToken": "50"})]),
    (_ask("ecs_instance_type", ZoneId=f"{REGION}-b"),
     lambda c: c.zones.__setitem__(REGION, [
         instance_zone(f"{REGION}-b", {"ecs.g7.large": "Available", "ecs.c7.xlarge": "Available",
                                       "ecs.r7.large": "SoldOut"}),
         instance_zone(f"{REGION}-c", {"ecs.g8i.large": "Available"})]),
     ["ecs.c7.xlarge", "ecs.g7.large"],
     [("DescribeAvailableResource", {"DestinationResource": "InstanceType", "ZoneId": f"{REGION}-b",
                                     "InstanceChargeType": "PostPaid"})]),
])
async def test_each_selector_lists_what_its_metadata_narrows_to(
        ask: dict[str, Any], setup: Any, listed: list[str], calls: list[tuple[str, dict[str, str]]],
        credentials: None, cloud: OpenApiFake, tmp_path: Path) -> None:
    setup(cloud)
    async with _serve(cloud, tmp_path, [_select(ask), _done()]) as served:
        final, _ = await _start(served)
        selector = _asked(final)["selector"]
        assert [o["value"] for o in selector["options"]] == listed
        assert selector["optionsComplete"] is True
        assert [(r.action, {k: v for k, v in r.params.items() if k != "RegionId"}) for r in cloud.requests] == calls
        assert {r.params["RegionId"] for r in cloud.requests} == {REGION}


async def test_a_value_the_cloud_does_not_have_is_refused(credentials: None, cloud: OpenApiFake,
                                                         tmp_path: Path) -> None:
    cloud.vswitches[REGION] = [vswitch("vsw-a1", "vpc-a", f"{REGION}-b"), vswitch("vsw-b1", "vpc-b", f"{REGION}-b")]
    async with _serve(cloud, tmp_path, [_select(_ask("vswitch_id", VpcId="vpc-a")), _done("Using it.")]) as served:
        final, _ = await _start(served)
        asked = _asked(final)
        assert asked["selector"]["options"] == [{"value": "vsw-a1", "label": f"vsw-a1 · 172.16.0.0/24 · {REGION}-b"}]
        ids = {"task_id": final["taskId"], "context_id": final["contextId"]}
        for value in ("vsw-b1", "vsw-nowhere"):  # another VPC's vSwitch; one that does not exist
            with pytest.raises(InvalidParamsError, match=f"^{re.escape(INVALID)}$"):
                await _send(served.client, _request(value, {"inputResponse": _answer(asked, value)}, **ids))
            assert cloud.requests[-1].params["VSwitchId"] == value and cloud.requests[-1].params["VpcId"] == "vpc-a"
        assert _record(served.state, asked["inputId"])["state"] == "pending" and len(served.stub.requests) == 1
        # The pattern is still checked first, without a call.
        calls = len(cloud.requests)
        with pytest.raises(InvalidParamsError, match=f"^{re.escape(INVALID)}$"):
            await _send(served.client, _request("x", {"inputResponse": _answer(asked, "subnet-1")}, **ids))
        assert len(cloud.requests) == calls
        await _send(served.client, _request("vsw-a1", {"inputResponse": _answer(asked, "vsw-a1")}, **ids))
        assert _tool_result(served.stub, 1)["result"]["value"] == "vsw-a1"


async def test_nothing_to_pick_is_not_asked(credentials: None, cloud: OpenApiFake, tmp_path: Path) -> None:
    cloud.security_groups[REGION] = [security_group("sg-b00", "vpc-b")]
    async with _serve(cloud, tmp_path, [_select(_ask("security_group_id", VpcId="vpc-a")),
                                                 _done("You have no security group in that VPC.")]) as served:
        final, _ = await _start(served)
        assert "inputRequired" not in final.get("metadata", {}).get("iac_code", {})
        assert _tool_result(served.stub, 1) == {"result": {"status": "canceled", "selectorId": "security_group_id",
                                                           "optionsEmpty": True}}
        assert not (served.state / "resource-selections").exists() or \
            not list((served.state / "resource-selections").iterdir())


async def test_a_failed_query_is_a_sanitised_error(credentials: None, cloud: OpenApiFake, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.vpcs[REGION] = [vpc("vpc-sh1", "prod")]
    cloud.fail["DescribeVpcs"] = (403, {"Code": "Forbidden.RAM", "Message": f"User {KEY_ID} not authorized; "
                                        "see /etc/aliyun/credentials and https://ram.example/?Signature=abc"})
    replies = [_select(_ask("vpc_id")), _done("No access."), _select(_ask("vpc_id")), _done("Using it.")]
    async with _serve(cloud, tmp_path, replies) as served:
        # At question time: the call's error, with the cloud's code and nothing else.
        final, events = await _start(served)
        assert final["status"]["state"] != "TASK_STATE_FAILED"
        assert _tool_result(served.stub, 1) == {
            "error": "could not list the choices for vpc_id: VPC DescribeVpcs failed (Forbidden.RAM)"}
        # At answer time: the endpoint is gone; the selection still waits.
        del cloud.fail["DescribeVpcs"]
        ids = {"task_id": final["taskId"], "context_id": final["contextId"]}
        final = _final(await _send(served.client, _request("again", {"capabilities": {"resourceSelector": CAPABILITY}},
                                                             **ids)))
        asked = _asked(final)
        await cloud.stop()
        with pytest.raises(InvalidParamsError) as refused:
            await _send(served.client, _request("vpc-sh1", {"inputResponse": _answer(asked, "vpc-sh1")}, **ids))
        assert refused.value.message == ("resource_selection_resume_invalid: selector value cannot be checked now "
                                         "(the VPC endpoint could not be reached)")
        assert _record(served.state, asked["inputId"])["state"] == "pending"
    shown = json.dumps(events) + caplog.text + refused.value.message
    for secret in (KEY_ID, SECRET, TOKEN, "/etc/aliyun", "Signature=", "not authorized"):
        assert secret not in shown


async def test_a_slow_cloud_times_out(credentials: None, cloud: OpenApiFake, tmp_path: Path) -> None:
    cloud.hang = True
    async with _serve(cloud, tmp_path, [_select(_ask("ecs_instance_type")), _done("Timed out.")],
                               **{"resource-selector-query-timeout-seconds": 1}) as served:
        await _start(served)
        assert _tool_result(served.stub, 1) == {
            "error": "could not list the choices for ecs_instance_type: ECS DescribeAvailableResource timed out"}
        assert cloud.actions() == ["DescribeAvailableResource"]


async def test_credentials_from_the_configuration(cloud: OpenApiFake, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "1")
    for name in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    cloud.vpcs["cn-beijing"] = [vpc("vpc-bj1", "beijing")]
    keys = {"resource-selector-access-key-id": KEY_ID, "resource-selector-access-key-secret": SECRET,
            "resource-selector-region": "cn-beijing"}
    ask = {"selector": "vpc_id", "question": "Which VPC?"}  # no RegionId: the configured region
    async with _serve(cloud, tmp_path, [_select(ask), _done()], **keys) as served:
        selector = _asked((await _start(served))[0])["selector"]
        assert selector["options"] == [{"value": "vpc-bj1", "label": "beijing · 172.16.0.0/12"}]
        assert cloud.requests[0].params["RegionId"] == "cn-beijing"
        assert "x-acs-security-token" not in cloud.requests[0].headers


async def test_half_a_key_pair_is_a_start_up_error(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text(yaml.safe_dump({"resource-selector-access-key-id": KEY_ID}))
    code, _, err = await run("a2a", "--check-config", "--config", str(config), env=_env())
    assert code == 2, err
    assert "'resource-selector-access-key-id' and 'resource-selector-access-key-secret' go together" in err
    assert "Traceback" not in err


async def test_a_derived_selector_is_not_queried(credentials: None, cloud: OpenApiFake, tmp_path: Path) -> None:
    source = {"selector_id": "vpc_id", "value": "vpc-a"}
    async with _serve(cloud, tmp_path, [_select({**_ask("vpc_cidr_block"), "source": source}),
                                        _done("Carving from it.")]) as served:
        final, _ = await _start(served)
        asked = _asked(final)
        assert asked["selector"]["outputKind"] == "derived_value" and asked["selector"]["source"] == source
        assert asked["selector"]["valueCheck"] == "pattern" and "options" not in asked["selector"]
        ids = {"task_id": final["taskId"], "context_id": final["contextId"]}
        with pytest.raises(InvalidParamsError, match="^resource_selection_resume_invalid: source mismatch$"):
            await _send(served.client, _request("x", {"inputResponse": _answer(asked, "172.16.0.0/12")}, **ids))
        await _send(served.client, _request("ok", {"inputResponse": {**_answer(asked, "172.16.0.0/12"),
                                                                     "source": source}}, **ids))
        assert _tool_result(served.stub, 1)["result"]["value"] == "172.16.0.0/12"
        assert cloud.requests == []  # the client supplies a derived value; the cloud is not asked
