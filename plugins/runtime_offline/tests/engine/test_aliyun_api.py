"""ROS API calls against a local stand-in ROS endpoint (never the internet).

The stand-in is a real aiohttp server on an ephemeral 127.0.0.1 port.  It
records what Alibaba Cloud's SDK sends (the action arrives in the
``x-acs-action`` header with ACS3 signing; parameters in the query string and,
for TemplateBody, the form body) and answers the way ROS does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from iac_code_runtime_offline.engine import aliyun_api
from iac_code_runtime_offline.engine.aliyun_api import (
    DEFAULT_ENDPOINT,
    READ_ONLY_ACTIONS,
    SUPPORTED_ACTIONS,
    Credentials,
    call_ros,
    credentials_from,
    is_read_only,
    resolve_endpoint,
    sanitise,
)

SECRET = "s3cr3t-AK-SECRET-value"
CREDS = Credentials(access_key_id="LTAI-test-id", access_key_secret=SECRET, region_id="cn-shanghai")


@dataclass
class Seen:
    """One request as the stand-in received it."""

    action: str
    query: dict[str, str]
    form: dict[str, str]
    headers: dict[str, str]


@dataclass
class StandIn:
    """The running stand-in: its endpoint and the requests it recorded."""

    endpoint: str
    requests: list[Seen] = field(default_factory=list)


def _answer(action: str, query: dict[str, str]) -> web.Response:
    """Answer like ROS for each supported action."""
    rid = {"RequestId": "req-1"}
    if action == "GetStack" and query.get("StackId") != "stack-123":
        body = {"Code": "StackNotFound", "Message": f"The Stack ({query.get('StackId')}) could not be found.", **rid}
        return web.json_response(body, status=404)
    if action == "ValidateTemplate" and query.get("ClientToken") == "echo-secret":
        body = {"Code": "InvalidTemplate", "Message": f"bad template; AccessKeySecret={SECRET} at /srv/ros/app.py", **rid}
        return web.json_response(body, status=400)
    bodies: dict[str, dict[str, Any]] = {
        "ValidateTemplate": {"Description": "ok", "Parameters": [], **rid},
        "PreviewStack": {"Stack": {"StackName": query.get("StackName"), "Resources": []}, **rid},
        "CreateStack": {"StackId": "stack-123", **rid},
        "UpdateStack": {"StackId": query.get("StackId"), **rid},
        "DeleteStack": rid,
        "GetStack": {"StackId": "stack-123", "Status": "CREATE_COMPLETE", "StackName": "demo", **rid},
        "ListStacks": {"Stacks": [{"StackId": "stack-123", "StackName": "demo"}], "TotalCount": 1, **rid},
    }
    if action not in bodies:
        return web.json_response({"Code": "InvalidAction.NotFound", "Message": "no such action", **rid}, status=400)
    return web.json_response(bodies[action])


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxies, no ambient credentials, and a dead local default endpoint: nothing can reach the internet."""
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy",
                 "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(aliyun_api.ENDPOINT_ENV, "127.0.0.1:9")


@pytest.fixture
async def ros() -> AsyncIterator[StandIn]:
    """Start the stand-in ROS endpoint on an ephemeral loopback port."""
    state = StandIn(endpoint="")

    async def handle(request: web.Request) -> web.Response:
        action = request.headers.get("x-acs-action") or request.query.get("Action", "")
        form = {k: str(v) for k, v in (await request.post()).items()}
        state.requests.append(Seen(action, dict(request.query), form, dict(request.headers)))
        return _answer(action, dict(request.query))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state.endpoint = f"127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()


def test_action_tables() -> None:
    assert SUPPORTED_ACTIONS == ("ValidateTemplate", "PreviewStack", "CreateStack", "UpdateStack", "DeleteStack",
                                 "GetStack", "ListStacks")
    assert READ_ONLY_ACTIONS == {"ValidateTemplate", "PreviewStack", "GetStack", "ListStacks"}
    assert is_read_only("GetStack") and is_read_only("ListStacks")
    assert not is_read_only("CreateStack") and not is_read_only("DeleteStack") and not is_read_only("Nope")


@pytest.mark.parametrize(
    ("action", "params", "expected_query", "expected_form"),
    [
        ("ValidateTemplate", {"TemplateBody": '{"ROSTemplateFormatVersion": "2015-09-01"}'}, {},
         {"TemplateBody": '{"ROSTemplateFormatVersion": "2015-09-01"}'}),
        ("PreviewStack", {"StackName": "demo", "TemplateBody": "{}", "TimeoutInMinutes": 30,
                          "Parameters": [{"ParameterKey": "Zone", "ParameterValue": "cn-shanghai-b"}]},
         {"StackName": "demo", "TimeoutInMinutes": "30", "Parameters.1.ParameterKey": "Zone",
          "Parameters.1.ParameterValue": "cn-shanghai-b"}, {"TemplateBody": "{}"}),
        ("CreateStack", {"StackName": "demo", "TemplateBody": {"ROSTemplateFormatVersion": "2015-09-01"},
                         "Parameters": {"A": 1}, "DisableRollback": True},
         {"StackName": "demo", "DisableRollback": "true", "Parameters.1.ParameterKey": "A",
          "Parameters.1.ParameterValue": "1"}, {"TemplateBody": '{"ROSTemplateFormatVersion": "2015-09-01"}'}),
        ("UpdateStack", {"StackId": "stack-123", "TemplateBody": "{}"}, {"StackId": "stack-123"}, {"TemplateBody": "{}"}),
        ("DeleteStack", {"StackId": "stack-123", "RetainAllResources": False},
         {"StackId": "stack-123", "RetainAllResources": "false"}, {}),
        ("GetStack", {"StackId": "stack-123"}, {"StackId": "stack-123"}, {}),
        ("ListStacks", {"PageSize": 10, "StackName": ["demo"]},
         {"PageSize": "10", "StackName.1": "demo"}, {}),
    ],
)
async def test_each_action_reaches_the_stand_in(
    ros: StandIn, action: str, params: dict[str, Any], expected_query: dict[str, str], expected_form: dict[str, str]
) -> None:
    result = await call_ros(action, params, CREDS, endpoint=ros.endpoint)
    assert result["ok"] is True, result
    assert result["action"] == action
    assert result["result"]["RequestId"] == "req-1"
    assert len(ros.requests) == 1
    seen = ros.requests[0]
    assert seen.action == action
    assert seen.query["RegionId"] == "cn-shanghai"  # defaulted from the credentials
    for key, value in expected_query.items():
        assert seen.query[key] == value
    assert seen.form == expected_form
    assert seen.headers["Host"] == ros.endpoint
    assert "Credential=LTAI-test-id" in seen.headers["Authorization"]
    assert SECRET not in str(seen.headers) + str(seen.query) + str(seen.form)


async def test_results_are_the_response_bodies(ros: StandIn) -> None:
    created = await call_ros("CreateStack", {"StackName": "demo", "TemplateBody": "{}"}, CREDS, endpoint=ros.endpoint)
    assert created["result"]["StackId"] == "stack-123"
    listed = await call_ros("ListStacks", {}, CREDS, endpoint=ros.endpoint)
    assert listed["result"]["TotalCount"] == 1
    assert listed["result"]["Stacks"][0]["StackId"] == "stack-123"
    got = await call_ros("GetStack", {"StackId": "stack-123"}, CREDS, endpoint=ros.endpoint)
    assert got["result"]["Status"] == "CREATE_COMPLETE"


async def test_explicit_region_id_wins(ros: StandIn) -> None:
    await call_ros("ListStacks", {"RegionId": "eu-central-1"}, CREDS, endpoint=ros.endpoint)
    assert ros.requests[0].query["RegionId"] == "eu-central-1"


async def test_security_token_is_sent(ros: StandIn) -> None:
    creds = Credentials("LTAI-sts", SECRET, "cn-hangzhou", security_token="sts-token-xyz")
    result = await call_ros("ListStacks", {}, creds, endpoint=ros.endpoint)
    assert result["ok"] is True
    headers = ros.requests[0].headers
    assert "sts-token-xyz" in (headers.get("x-acs-security-token", "") + ros.requests[0].query.get("SecurityToken", ""))


async def test_error_mapping(ros: StandIn) -> None:
    result = await call_ros("GetStack", {"StackId": "stack-missing"}, CREDS, endpoint=ros.endpoint)
    assert result["ok"] is False
    assert result["code"] == "StackNotFound"
    assert "could not be found" in result["error"]
    assert result["status"] == 404


async def test_error_messages_never_contain_secrets_or_paths(ros: StandIn) -> None:
    result = await call_ros("ValidateTemplate", {"TemplateBody": "{}", "ClientToken": "echo-secret"}, CREDS,
                            endpoint=ros.endpoint)
    assert result["ok"] is False and result["code"] == "InvalidTemplate"
    assert SECRET not in str(result)
    assert "/srv/ros/app.py" not in result["error"]
    assert "bad template" in result["error"]


async def test_network_error_is_a_result() -> None:
    result = await call_ros("ListStacks", {}, CREDS, endpoint="127.0.0.1:9")
    assert result["ok"] is False
    assert result["error"]
    assert SECRET not in str(result)


async def test_missing_credentials_is_a_result() -> None:
    assert await call_ros("CreateStack", {"StackName": "x"}, None) == {
        "ok": False, "error": "Alibaba Cloud credentials are not configured"}


async def test_unknown_action_is_a_result(ros: StandIn) -> None:
    assert await call_ros("DeleteEverything", {}, CREDS, endpoint=ros.endpoint) == {
        "ok": False, "error": "Unsupported ROS action: DeleteEverything"}
    assert ros.requests == []


async def test_env_endpoint_is_the_default(ros: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(aliyun_api.ENDPOINT_ENV, ros.endpoint)
    result = await call_ros("ListStacks", {}, CREDS)
    assert result["ok"] is True
    assert ros.requests[0].headers["Host"] == ros.endpoint


def test_endpoint_resolution_and_default_public_endpoint() -> None:
    assert resolve_endpoint("127.0.0.1:1234", {}) == "127.0.0.1:1234"
    assert resolve_endpoint(None, {aliyun_api.ENDPOINT_ENV: "127.0.0.1:5"}) == "127.0.0.1:5"
    assert resolve_endpoint(None, {}) == DEFAULT_ENDPOINT == "ros.aliyuncs.com"
    # The public endpoint is used over https; checked on the client object, without any network call.
    client = aliyun_api._client(CREDS, DEFAULT_ENDPOINT)
    assert client._endpoint == "ros.aliyuncs.com" and client._protocol == "https"
    local = aliyun_api._client(CREDS, "127.0.0.1:1234")
    assert local._endpoint == "127.0.0.1:1234" and local._protocol == "http"


def test_credentials_from_metadata_beats_env() -> None:
    env = {"ALIBABA_CLOUD_ACCESS_KEY_ID": "env-id", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "env-secret",
           "ALIBABA_CLOUD_REGION_ID": "cn-beijing", "ALIBABA_CLOUD_SECURITY_TOKEN": "env-token"}
    meta = {"alibaba_cloud_access_key_id": " meta-id ", "alibaba_cloud_access_key_secret": "meta-secret",
            "alibaba_cloud_region_id": "cn-shenzhen"}
    assert credentials_from(meta, env) == Credentials("meta-id", "meta-secret", "cn-shenzhen", None)
    assert credentials_from({}, env) == Credentials("env-id", "env-secret", "cn-beijing", "env-token")
    # incomplete metadata (blank secret) falls back to the environment
    assert credentials_from({"alibaba_cloud_access_key_id": "m", "alibaba_cloud_access_key_secret": "  "}, env).access_key_id == (
        "env-id")
    assert credentials_from({}, {"ALIBABA_CLOUD_ACCESS_KEY_ID": "x"}) is None
    assert credentials_from({}, {}) is None
    only = credentials_from({}, {"ALIBABA_CLOUD_ACCESS_KEY_ID": "i", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "s"})
    assert only is not None and only.region_id == "cn-hangzhou" and only.security_token is None
    assert "meta-secret" not in repr(credentials_from(meta, env))


def test_sanitise() -> None:
    text = ("failed GET https://ros.aliyuncs.com/?AccessKeyId=LTAI&Signature=abc123 with "
            f"{SECRET} in /home/user/.venv/lib/python3.11/site.py and Signature=zzz")
    clean = sanitise(text, CREDS)
    assert SECRET not in clean and "abc123" not in clean and "zzz" not in clean
    assert "/home/user" not in clean
    assert "https://ros.aliyuncs.com/" in clean
