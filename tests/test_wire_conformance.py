"""Wire conformance over real HTTP: JSON numbers, bad bytes, encodings, auth words, versions, base64.

Every test talks to a server started with :func:`iac_code.testing.start_server`
on an ephemeral 127.0.0.1 port; push tests run a real aiohttp receiver.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from iac_code.base.errors import StartupError
from iac_code.testing import A2A_HEADERS, RunningServer, make_kernel, parse_sse, send_message_body, start_server

GET_UNKNOWN = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
LIST_TASKS = {"jsonrpc": "2.0", "id": "list", "method": "ListTasks", "params": {}}
INTERNALS = ("Traceback", ".py", "codec", "surrogates not allowed", "Failed to parse", "lf.a2a",
             "SendMessageRequest", "GetTaskRequest", "expected string", "ParseError")


async def post(http: aiohttp.ClientSession, server: RunningServer, body: Any, *,
               headers: dict[str, str] | None = None, path: str = "",
               status: int = 200) -> dict[str, Any]:
    """POST one JSON-RPC request; check the HTTP status and that the reply is UTF-8 JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.post(server.url + path, data=data, headers=A2A_HEADERS if headers is None else headers) as r:
        raw = await r.read()
        assert r.status == status, raw
        assert r.headers["Content-Type"].startswith("application/json")
    reply: dict[str, Any] = json.loads(raw.decode("utf-8"))
    return reply


def assert_no_internals(reply: dict[str, Any]) -> None:
    text = json.dumps(reply)
    for leak in INTERNALS:
        assert leak not in text, (leak, text)


# ----------------------------------------------------------------------------- 1. integers stay integers

DATA = {"schemaVersion": 1, "kind": "numbers", "nested": {"count": 63, "ratio": 2.5, "list": [0, -4, 1.25]}}


def data_message_body(method: str = "SendMessage") -> dict[str, Any]:
    body = send_message_body("numbers please", method=method, metadata={"schemaVersion": 1, "retries": 3})
    body["params"]["message"]["parts"].append({"data": DATA, "mediaType": "application/json"})
    return body


def assert_user_message_numbers(task: dict[str, Any]) -> None:
    user = next(m for m in task["history"] if m["role"] == "ROLE_USER")
    assert user["metadata"] == {"schemaVersion": 1, "retries": 3}
    assert type(user["metadata"]["schemaVersion"]) is int
    data = user["parts"][1]["data"]
    assert data == DATA
    assert type(data["schemaVersion"]) is int and type(data["nested"]["count"]) is int
    assert [type(v) for v in data["nested"]["list"]] == [int, int, float]
    assert type(data["nested"]["ratio"]) is float


def assert_usage_integers(update: dict[str, Any]) -> None:
    usage = update["metadata"]["iac_code"]["usage"]
    assert usage["totalTokens"] > 0
    assert all(type(v) is int for k, v in usage.items() if k.endswith("Tokens")), usage


async def test_integers_stay_integers_in_results(server: RunningServer, http: aiohttp.ClientSession) -> None:
    task = (await post(http, server, data_message_body()))["result"]["task"]
    assert_user_message_numbers(task)
    got = await post(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}})
    assert_user_message_numbers(got["result"])
    listed = await post(http, server, {**LIST_TASKS, "params": {"includeArtifacts": True}})
    assert_user_message_numbers(listed["result"]["tasks"][0])
    assert type(listed["result"]["pageSize"]) is int


async def test_integers_stay_integers_in_streams(server: RunningServer, http: aiohttp.ClientSession) -> None:
    async with http.post(server.url, json=data_message_body("SendStreamingMessage"), headers=A2A_HEADERS) as r:
        events, _ = parse_sse(await r.text())
    assert_user_message_numbers(events[0]["result"]["task"])
    with_usage = [e["result"]["statusUpdate"] for e in events[1:]
                  if "usage" in e["result"].get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})]
    assert with_usage
    for update in with_usage:
        assert_usage_integers(update)


# ----------------------------------------------------------------------------- 5. push delivery and allowed hosts

@asynccontextmanager
async def push_receiver() -> AsyncIterator[tuple[int, asyncio.Queue[tuple[dict[str, str], bytes]]]]:
    """A real HTTP receiver on 127.0.0.1; yields (port, queue of (headers, body))."""
    received: asyncio.Queue[tuple[dict[str, str], bytes]] = asyncio.Queue()

    async def hook(request: web.Request) -> web.Response:
        await received.put((dict(request.headers), await request.read()))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1], received
    finally:
        await runner.cleanup()


def push_message_body(url: str, token: str = "push-token") -> dict[str, Any]:
    body = data_message_body()
    body["params"]["configuration"] = {"taskPushNotificationConfig": {"url": url, "token": token}}
    return body


async def next_push(received: asyncio.Queue[tuple[dict[str, str], bytes]]) -> tuple[dict[str, str], dict[str, Any]]:
    headers, raw = await asyncio.wait_for(received.get(), 10)
    payload: dict[str, Any] = json.loads(raw)
    return headers, payload


async def pushes_until_usage(received: asyncio.Queue[tuple[dict[str, str], bytes]]) -> list[dict[str, Any]]:
    """Push payloads in arrival order, up to the first status update carrying token usage."""
    payloads = []
    while True:
        headers, payload = await next_push(received)
        assert headers["X-A2A-Notification-Token"] == "push-token"
        assert headers["Content-Type"] == "application/json"
        payloads.append(payload)
        metadata = payload.get("statusUpdate", {}).get("metadata", {})
        if "usage" in metadata.get("iac_code", {}):
            return payloads


@pytest.mark.parametrize(("allowed", "host"), [(["127.0.0.1"], "127.0.0.1"), (["127.0.0.0/8"], "127.0.0.1"),
                                               (["LOCALHOST"], "localhost")])
async def test_push_to_allowed_host_is_delivered_with_integers(allowed: list[str], host: str) -> None:
    async with push_receiver() as (port, received), \
            start_server({"push-notifications": True, "push-allowed-hosts": allowed, "push-events": "all"}) as server, \
            aiohttp.ClientSession() as http:
        url = f"http://{host}:{port}/hook"
        task = (await post(http, server, push_message_body(url)))["result"]["task"]
        payloads = await pushes_until_usage(received)
        assert_usage_integers(payloads[-1]["statusUpdate"])
        assert payloads[-1]["statusUpdate"]["taskId"] == task["id"]
        tasks = [p["task"] for p in payloads if "task" in p]
        assert tasks
        for pushed in tasks:
            assert_user_message_numbers(pushed)
        created = await post(http, server, {"jsonrpc": "2.0", "id": 3, "method": "CreateTaskPushNotificationConfig",
                                            "params": {"taskId": task["id"], "id": "hook-2", "url": url}})
        assert created["result"]["url"] == url


async def test_push_to_loopback_is_refused_without_the_setting() -> None:
    async with push_receiver() as (port, received), start_server({"push-notifications": True}) as server, \
            aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{port}/hook"
        refused = await post(http, server, push_message_body(url))
        assert (refused["error"]["code"], refused["error"]["message"]) == (
            -32602, "A2A push callback URL must not target private or local hosts")
        assert (await post(http, server, LIST_TASKS))["result"]["tasks"] == []
        task = (await post(http, server, data_message_body()))["result"]["task"]
        create = {"jsonrpc": "2.0", "id": 3, "method": "CreateTaskPushNotificationConfig",
                  "params": {"taskId": task["id"], "id": "hook", "url": url}}
        assert (await post(http, server, create))["error"]["code"] == -32602
        assert received.empty()


async def test_push_allowed_hosts_only_exempts_what_is_listed() -> None:
    settings = {"push-notifications": True, "push-allowed-hosts": ["push-hook.invalid", "10.1.0.0/16"]}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        task = (await post(http, server, data_message_body()))["result"]["task"]

        async def create(url: str) -> dict[str, Any]:
            return await post(http, server, {"jsonrpc": "2.0", "id": 3, "method": "CreateTaskPushNotificationConfig",
                                             "params": {"taskId": task["id"], "id": "hook", "url": url}})

        # A listed name is not resolved (".invalid" never resolves), a listed network admits its addresses.
        for url in ("http://push-hook.invalid/x", "https://PUSH-HOOK.invalid:8443/x", "http://10.1.2.3/x"):
            assert (await create(url))["result"]["url"] == url
        for url in ("http://127.0.0.1/x", "http://10.2.0.1/x", "http://other.invalid/x", "ftp://push-hook.invalid/x",
                    "http://push-hook.invalid:99999/x", "http://push-hook.invalid:0/x",
                    "http://169.254.169.254/latest"):
            assert (await create(url))["error"]["code"] == -32602, url


async def test_push_allowed_hosts_validation_and_warning(caplog: pytest.LogCaptureFixture) -> None:
    for bad in ("10.0.0.0/33", "not a host", "http://example.com/x"):
        with pytest.raises(StartupError, match="push-allowed-hosts"):
            make_kernel({"push-notifications": True, "push-allowed-hosts": [bad]})
    with caplog.at_level(logging.WARNING, logger="iac_code.server.kernel"):
        async with start_server({"push-notifications": True, "push-allowed-hosts": ["127.0.0.1", "hooks.internal"]}):
            pass
    assert any("push-allowed-hosts" in r.getMessage() and "127.0.0.1, hooks.internal" in r.getMessage()
               for r in caplog.records)


# ----------------------------------------------------------------------------- 2. lone surrogates, params texts

SURROGATE_BODIES = [
    rb'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"id":"x","\ud800":1}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER",'
    rb'"parts":[{"text":"hi \ud800 there"}]}}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER",'
    rb'"parts":[{"text":"hi"}],"metadata":{"\udc00":2}}}}',
    rb'{"jsonrpc":"2.0","id":"\ud800","method":"GetTask","params":{"id":"x"}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x\uDBFF"},"n":123456789012345678901234}',
]


@pytest.mark.parametrize("body", SURROGATE_BODIES)
async def test_unpaired_surrogate_is_a_parse_error(server: RunningServer, http: aiohttp.ClientSession,
                                                   body: bytes) -> None:
    reply = await post(http, server, body)
    assert reply["id"] is None
    assert reply["error"] == {"code": -32700,
                              "message": "Parse error: request body is not valid JSON (unpaired surrogate escape)"}
    assert (await post(http, server, LIST_TASKS))["result"]["tasks"] == []


async def test_paired_surrogates_still_work(server: RunningServer, http: aiohttp.ClientSession) -> None:
    body = json.dumps(send_message_body("smile \U0001F600", message_id="m-smile"), ensure_ascii=True).encode()
    assert b"\\ud83d\\ude00" in body
    task = (await post(http, server, body))["result"]["task"]
    assert task["history"][0]["parts"][0]["text"] == "smile \U0001F600"


INVALID_PARAMS = [
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": "x"}}},
     "Invalid params: field 'message.parts' has an invalid value"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "raw": "AA"}]}}},
     "Invalid params: field 'message.parts[0]' has an invalid value"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 5}]}}},
     "Invalid params: field 'message.parts.text' has an invalid value"),
    ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": {"nested": True}}},
     "Invalid params: field 'id' has an invalid value"),
    ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x", "historyLength": "abc"}},
     "Invalid params: field 'historyLength' has an invalid value"),
    ({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"statusTimestampAfter": "yesterday"}},
     "Invalid params: field 'statusTimestampAfter' has an invalid value"),
]


@pytest.mark.parametrize(("body", "message"), INVALID_PARAMS)
async def test_invalid_params_use_our_texts(server: RunningServer, http: aiohttp.ClientSession,
                                            body: dict[str, Any], message: str) -> None:
    reply = await post(http, server, body)
    assert reply["id"] == 1
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == message
    assert_no_internals(reply)


# ----------------------------------------------------------------------------- 3. Content-Encoding

RPC_BYTES = json.dumps(GET_UNKNOWN).encode()


@asynccontextmanager
async def one_connection() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session that can hold a single connection (keep-alive is reused or replaced)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as http:
        yield http


@pytest.mark.parametrize(("coding", "data"), [
    ("gzip", RPC_BYTES), ("deflate", RPC_BYTES), ("x-gzip", RPC_BYTES),
    ("gzip", gzip.compress(RPC_BYTES, mtime=0)[:-12]),  # truncated
    ("deflate", zlib.compress(RPC_BYTES) + b"junk"),  # trailing bytes
])
async def test_body_that_does_not_decode_is_a_client_error(server: RunningServer, coding: str, data: bytes) -> None:
    async with one_connection() as http:
        reply = await post(http, server, data, headers={**A2A_HEADERS, "Content-Encoding": coding}, status=400)
        assert reply == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32700, "message": "Parse error: request body does not match its Content-Encoding"}}
        after = await post(http, server, RPC_BYTES)
        assert after["error"]["code"] == -32001


@pytest.mark.parametrize(("coding", "data"), [
    ("gzip", gzip.compress(RPC_BYTES, mtime=0)),
    ("GZIP", gzip.compress(RPC_BYTES[:20], mtime=0) + gzip.compress(RPC_BYTES[20:], mtime=0)),  # two gzip members
    ("deflate", zlib.compress(RPC_BYTES)),
    ("deflate", zlib.compress(RPC_BYTES)[2:-4]),  # raw deflate, as some clients send it
    ("identity", RPC_BYTES),
    ("gzip, identity", gzip.compress(RPC_BYTES, mtime=0)),
])
async def test_compressed_bodies_work(server: RunningServer, coding: str, data: bytes) -> None:
    async with one_connection() as http:
        reply = await post(http, server, data, headers={**A2A_HEADERS, "Content-Encoding": coding})
        assert reply["id"] == 1 and reply["error"]["code"] == -32001


async def test_compressed_streaming_message(server: RunningServer) -> None:
    data = gzip.compress(json.dumps(send_message_body("hello", method="SendStreamingMessage")).encode())
    async with one_connection() as http, http.post(
            server.url, data=data, headers={**A2A_HEADERS, "Content-Encoding": "gzip"}) as r:
        events, _ = parse_sse(await r.text())
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


@pytest.mark.parametrize("coding", ["br", "foo", "zstd", "gzip, foo"])
async def test_unknown_content_encoding_is_415(server: RunningServer, coding: str) -> None:
    async with one_connection() as http:
        async with http.post(server.url, data=RPC_BYTES, headers={**A2A_HEADERS, "Content-Encoding": coding}) as r:
            assert r.status == 415
            assert r.headers["Accept-Encoding"] == "gzip, deflate"
            reply = await r.json()
        assert reply["id"] is None and reply["error"]["code"] == -32600
        assert "is not supported" in reply["error"]["message"]
        assert (await post(http, server, RPC_BYTES))["error"]["code"] == -32001


async def test_decompressed_size_is_limited() -> None:
    async with start_server({"max-request-bytes": 4096}) as server, one_connection() as http:
        body = json.dumps(send_message_body("x" * 20000)).encode()
        data = gzip.compress(body)
        assert len(data) < 4096
        reply = await post(http, server, data, headers={**A2A_HEADERS, "Content-Encoding": "gzip"}, status=413)
        assert reply["error"] == {"code": -32600, "message": "Request payload too large"}
        assert (await post(http, server, RPC_BYTES))["error"]["code"] == -32001


# ----------------------------------------------------------------------------- 4. auth scheme word

def basic(user: str, password: str, scheme: str = "Basic") -> str:
    return f"{scheme} {base64.b64encode(f'{user}:{password}'.encode()).decode()}"


async def test_auth_scheme_word_is_case_insensitive() -> None:
    settings = {"token": "secret-token", "basic-username": "u", "basic-password": "p"}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        accepted = ["Bearer secret-token", "bearer secret-token", "BEARER secret-token", "bEaReR  secret-token",
                    basic("u", "p"), basic("u", "p", "basic"), basic("u", "p", "BASIC")]
        for authorization in accepted:
            reply = await post(http, server, GET_UNKNOWN, headers={**A2A_HEADERS, "Authorization": authorization})
            assert reply["error"]["code"] == -32001, authorization
        for authorization in ["bearer wrong", "bearersecret-token", "Token secret-token", basic("u", "x", "basic"),
                              "secret-token"]:
            async with http.post(server.url, json=GET_UNKNOWN,
                                 headers={**A2A_HEADERS, "Authorization": authorization}) as r:
                assert r.status == 401, authorization
        # The scheme's spelling does not change the caller: one bearer principal.
        task = (await post(http, server, send_message_body("hi"),
                           headers={**A2A_HEADERS, "Authorization": "bearer secret-token"}))["result"]["task"]
        got = await post(http, server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}},
                         headers={**A2A_HEADERS, "Authorization": "Bearer secret-token"})
        assert got["result"]["id"] == task["id"]


# ----------------------------------------------------------------------------- 6. version negotiation

NO_VERSION = {"Content-Type": "application/json"}
EXPECTED = "Expected version '1.0'; send the header 'A2A-Version: 1.0'."


@pytest.mark.parametrize(("headers", "query", "accepted"), [
    ({"A2A-Version": "1.0"}, "", True),
    ({"A2A-Version": "1.0.3"}, "", True),
    ({}, "?A2A-Version=1.0", True),
    ({}, "?A2A-Version=1.0.7", True),
    ({"A2A-Version": "1.0"}, "?A2A-Version=2.0", True),  # the header wins
    ({"A2A-Version": "2.0"}, "?A2A-Version=1.0", False),
    ({"A2A-Version": "1.1"}, "", False),
    ({}, "?A2A-Version=1.1", False),
    ({"A2A-Version": "2.0"}, "", False),
    ({"A2A-Version": "1"}, "", False),
    ({"A2A-Version": "1.0.x"}, "", False),
    ({}, "?other=1", False),
])
async def test_version_from_header_or_query(server: RunningServer, http: aiohttp.ClientSession,
                                            headers: dict[str, str], query: str, accepted: bool) -> None:
    reply = await post(http, server, GET_UNKNOWN, headers={**NO_VERSION, **headers}, path=query)
    assert reply["error"]["code"] == (-32001 if accepted else -32009), reply


async def test_version_error_texts(server: RunningServer, http: aiohttp.ClientSession) -> None:
    absent = await post(http, server, GET_UNKNOWN, headers=NO_VERSION)
    assert absent["error"]["message"] == (
        f"A2A version '0.3' (no A2A-Version header) is not supported by this handler. {EXPECTED}")
    old = await post(http, server, GET_UNKNOWN, headers={**NO_VERSION, "A2A-Version": "0.3"})
    assert old["error"]["message"] == f"A2A version '0.3' is not supported by this handler. {EXPECTED}"
    newer = await post(http, server, GET_UNKNOWN, headers=NO_VERSION, path="?A2A-Version=1.1")
    assert (newer["error"]["code"], newer["error"]["message"]) == (
        -32009, f"A2A version '1.1' is not supported by this handler. {EXPECTED}")
    odd = await post(http, server, GET_UNKNOWN, headers=NO_VERSION, path="?A2A-Version=%E2%9C%93")
    assert odd["error"]["message"] == f"A2A version '?' is not supported by this handler. {EXPECTED}"


# ----------------------------------------------------------------------------- 7. Content-Type

PYTHON_REPR = repr(GET_UNKNOWN).encode()  # single quotes: not JSON


@pytest.mark.parametrize(("content_type", "code"), [
    ("text/plain", -32005), ("text/plain; charset=utf-8", -32005), ("application/x-www-form-urlencoded", -32005),
    ("application/json", -32700), ("application/json; charset=utf-8", -32700), ("application/a2a+json", -32700),
    (None, -32700),
])
async def test_unparsable_body_error_follows_content_type(server: RunningServer, http: aiohttp.ClientSession,
                                                          content_type: str | None, code: int) -> None:
    headers = {"A2A-Version": "1.0"} if content_type is None else {"A2A-Version": "1.0", "Content-Type": content_type}
    async with http.post(server.url, data=PYTHON_REPR, headers=headers,
                         skip_auto_headers=["Content-Type"]) as r:
        assert r.status == 200
        reply = await r.json()
    assert reply["id"] is None
    assert reply["error"]["code"] == code
    if code == -32005:
        media = content_type.partition(";")[0] if content_type else ""
        assert reply["error"]["message"] == f"Content type '{media}' is not supported: send application/json"
    else:
        assert reply["error"]["message"] == "Parse error: request body is not valid JSON"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_valid_json_is_accepted_whatever_the_content_type(server: RunningServer, http: aiohttp.ClientSession,
                                                                content_type: str | None) -> None:
    headers = {"A2A-Version": "1.0"} if content_type is None else {"A2A-Version": "1.0", "Content-Type": content_type}
    async with http.post(server.url, data=RPC_BYTES, headers=headers, skip_auto_headers=["Content-Type"]) as r:
        reply = await r.json()
    assert reply["id"] == 1 and reply["error"]["code"] == -32001


# ----------------------------------------------------------------------------- 8. strict base64 in raw parts

def raw_part_body(raw: str, method: str = "SendMessage") -> dict[str, Any]:
    body = send_message_body("", method=method, message_id=f"m-{raw}")
    body["params"]["message"]["parts"] = [{"text": "Read this:"}, {"raw": raw, "mediaType": "text/plain"}]
    return body


@pytest.mark.parametrize("raw", ["aGVsbG8@@@", "@@@", "aGVs bG8=", "aGVsbG8==", "aGk===", "====", "a", "aGVsbG8=x"])
@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_invalid_base64_is_invalid_params(server: RunningServer, http: aiohttp.ClientSession,
                                                raw: str, method: str) -> None:
    reply = await post(http, server, raw_part_body(raw, method))
    assert reply["error"] == {"code": -32602, "message": "Invalid params: message.parts[1].raw is not valid base64"}
    assert (await post(http, server, LIST_TASKS))["result"]["tasks"] == []


@pytest.mark.parametrize(("raw", "text"), [
    ("aGVsbG8=", "hello"), ("aGVsbG8", "hello"), ("fn5-Pz8_", "~~~???"), ("fn5+Pz8/", "~~~???"), ("", ""),
])
async def test_valid_base64_still_works(server: RunningServer, http: aiohttp.ClientSession, raw: str,
                                        text: str) -> None:
    task = (await post(http, server, raw_part_body(raw)))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    sent = task["history"][0]["parts"][1]
    assert base64.b64decode(sent.get("raw", "")) == text.encode()
