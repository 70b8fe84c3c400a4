"""Push notifications arrive: real servers, a real receiver on 127.0.0.1, both queues, real Redis.

The receiver is an aiohttp app on an ephemeral port, let through the URL guard
by ``push-allowed-hosts`` (the only way around it). A turn of the built-in
runtime ends in INPUT_REQUIRED, the default push event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from iac_code.testing import (
    A2A_HEADERS,
    parse_sse,
    redis_url,
    send_message_body,
    start_redis_server,
    start_server,
)

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
TOKEN = "push-token-" + uuid.uuid4().hex
CREDENTIALS = "cred-" + uuid.uuid4().hex
FAST = {"push-notifications": True, "push-allowed-hosts": ["127.0.0.1"], "push-retry-base-delay": 0.05,
        "push-retry-max-delay": 0.2}
QUEUES = ("local-file", "redis-streams")


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Receiver:
    """A webhook: records every POST; answers ``statuses`` in turn (then 200); ``hold`` stalls answers."""

    statuses: list[int] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    hold: asyncio.Event | None = None
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        async with self.arrived:
            self.requests.append(Received(dict(request.headers), body))
            self.arrived.notify_all()
        if self.hold is not None:
            await self.hold.wait()
        status = self.statuses.pop(0) if self.statuses else 200
        return web.Response(status=status)

    async def wait_for(self, count: int, timeout: float = 20) -> list[Received]:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: len(self.requests) >= count), timeout)
        return list(self.requests)


@contextlib.asynccontextmanager
async def receiver(**options: Any) -> AsyncIterator[Receiver]:
    hook = Receiver(**options)
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hook.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield hook
    finally:
        if hook.hold is not None:
            hook.hold.set()
        await runner.cleanup()


def queue_settings(queue: str, prefix: str, url: str | None = None) -> dict[str, Any]:
    if queue == "local-file":
        return {"push-queue": "local-file"}
    return {"push-queue": "redis-streams", "push-redis-url": url or redis_url(), "push-stream": f"{prefix}:push",
            "push-retry-key": f"{prefix}:retry", "push-dead-stream": f"{prefix}:dead",
            "push-consumer-group": f"{prefix}:group"}


@pytest.fixture
def prefix() -> AsyncIterator[str]:
    name = f"iac-code-test:{uuid.uuid4().hex}"
    yield name
    import redis

    client = redis.Redis.from_url(redis_url())
    keys = list(client.scan_iter(f"{name}*"))
    if keys:
        client.delete(*keys)
    client.close()


def push_config(url: str, **extra: Any) -> dict[str, Any]:
    return {"url": url, "token": TOKEN, "authentication": {"scheme": "Bearer", "credentials": CREDENTIALS}, **extra}


async def send_with_push(http: aiohttp.ClientSession, server_url: str, hook_url: str, text: str = "hello") -> dict:
    body = send_message_body(text, message_id=uuid.uuid4().hex)
    body["params"]["configuration"] = {"taskPushNotificationConfig": push_config(hook_url, id="hook-1")}
    async with http.post(server_url, json=body, headers=A2A_HEADERS) as r:
        reply = await r.json()
    assert "result" in reply, reply
    return reply["result"]["task"]


async def cli_json(*args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


def write_config(path: Path, settings: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(settings))
    return path


async def until(predicate: Any, timeout: float = 20.0, step: float = 0.05) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(step)


# --------------------------------------------------------------------------- delivery


@pytest.mark.parametrize("queue", QUEUES)
async def test_the_end_of_a_turn_is_pushed_with_the_configured_credentials(queue: str, prefix: str) -> None:
    async with receiver() as hook, start_server({**FAST, **queue_settings(queue, prefix)}) as server, \
            aiohttp.ClientSession() as http:
        task = await send_with_push(http, server.url, hook.url)
        (got,) = await hook.wait_for(1)
        assert got.body["statusUpdate"]["taskId"] == task["id"]
        assert got.body["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert got.headers["X-A2A-Notification-Token"] == TOKEN
        assert got.headers["Authorization"] == f"Bearer {CREDENTIALS}"
        assert len(got.headers["Idempotency-Key"]) == 32
        assert got.headers["Content-Type"] == "application/json"


async def test_signed_notifications_verify_with_the_served_jwks() -> None:
    from iac_code_push.signing import verify_notification

    async with receiver() as hook, start_server({**FAST, "push-signing": True}) as server, \
            aiohttp.ClientSession() as http:
        task = await send_with_push(http, server.url, hook.url)
        (got,) = await hook.wait_for(1)
        async with http.get(server.url + ".well-known/jwks.json") as r:  # public: no credentials needed
            assert r.status == 200
            jwks = await r.json()
        assert jwks["keys"] and all("d" not in key for key in jwks["keys"])
        claims = verify_notification(got.headers["X-A2A-Notification-Signature"], jwks, audience=hook.url)
        assert claims["taskId"] == task["id"] and claims["jti"] == got.headers["Idempotency-Key"]
        assert claims["exp"] > claims["iat"]
        forged = got.headers["X-A2A-Notification-Signature"][:-4] + "AAAA"
        with pytest.raises(ValueError):
            verify_notification(forged, jwks, audience=hook.url)
        with pytest.raises(ValueError):
            verify_notification(got.headers["X-A2A-Notification-Signature"], jwks, audience="https://other.example/")


async def test_without_signing_there_is_no_jwks_route() -> None:
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + ".well-known/jwks.json") as r:
            assert r.status == 404


@pytest.mark.parametrize("queue", QUEUES)
async def test_a_failing_receiver_is_retried_then_dead_lettered(queue: str, prefix: str, tmp_path: Path) -> None:
    settings = {**FAST, **queue_settings(queue, prefix), "push-max-attempts": 3, "persistence-dir": str(tmp_path)}
    async with receiver(statuses=[503, 503, 503, 503]) as hook, start_server(settings) as server, \
            aiohttp.ClientSession() as http:
        await send_with_push(http, server.url, hook.url)
        attempts = await hook.wait_for(3)
        assert len({a.headers["Idempotency-Key"] for a in attempts}) == 1  # one notification, three attempts
        config = write_config(tmp_path / "push.yml", settings)

        async def dead() -> dict[str, Any] | None:
            status = await cli_json("push-status", "--config", str(config), "--dead", "5")
            return status if status["depth"]["dead"] == 1 else None

        status = await until(dead)
        assert status["dead"][0]["attempt"] == 3 and status["dead"][0]["lastError"] == "RuntimeError: HTTP 503"
        assert len(hook.requests) == 3


async def test_a_permanent_refusal_is_dead_lettered_at_once(tmp_path: Path) -> None:
    settings = {**FAST, "persistence-dir": str(tmp_path)}
    async with receiver(statuses=[404]) as hook, start_server(settings) as server, aiohttp.ClientSession() as http:
        await send_with_push(http, server.url, hook.url)
        await hook.wait_for(1)
        config = write_config(tmp_path / "push.yml", settings)
        status = await until(lambda: _dead_count(config, 1))
        assert status["dead"][0]["attempt"] == 1 and status["dead"][0]["lastError"] == "RuntimeError: HTTP 404"


async def _dead_count(config: Path, count: int) -> dict[str, Any] | None:
    status = await cli_json("push-status", "--config", str(config), "--dead", "5")
    return status if status["depth"]["dead"] == count else None


async def test_credentials_come_from_the_config_as_it_is_at_each_attempt() -> None:
    # The job holds no credentials: after the config is deleted, the retry goes out without them.
    settings = {**FAST, "push-retry-base-delay": 1.0}
    async with receiver(statuses=[503]) as hook, start_server(settings) as server, aiohttp.ClientSession() as http:
        task = await send_with_push(http, server.url, hook.url)
        (first,) = await hook.wait_for(1)
        assert first.headers["X-A2A-Notification-Token"] == TOKEN
        body = {"jsonrpc": "2.0", "id": 2, "method": "DeleteTaskPushNotificationConfig",
                "params": {"taskId": task["id"], "id": "hook-1"}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            assert "result" in await r.json()
        second = (await hook.wait_for(2))[1]
        assert "X-A2A-Notification-Token" not in second.headers and "Authorization" not in second.headers
        assert second.headers["Idempotency-Key"] == first.headers["Idempotency-Key"]


# --------------------------------------------------------------------------- URL guard at the server


@pytest.mark.parametrize("url", [
    "ftp://8.8.8.8/hook", "http://localhost/hook", "http://api.localhost/hook", "http://127.0.0.1/hook",
    "http://10.1.2.3/hook", "http://[::1]/hook", "http://[::ffff:127.0.0.1]/hook", "http://2130706433/hook",
    "http://0177.0.0.1/hook", "http://0x7f.1/hook", "http://169.254.169.254/latest", "http://224.0.0.1/hook",
    "http://0.0.0.0/hook", "http://[fe80::1]/hook", "http://100.100.100.200/latest/meta-data/",
    "http://[::ffff:100.100.100.200]/", "http://[64:ff9b::100.100.100.200]/", "http://metadata.tencentyun.com/",
])
async def test_unsafe_callback_urls_are_refused(url: str) -> None:
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as http:
        body = send_message_body("hello", message_id=uuid.uuid4().hex)
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            task_id = (await r.json())["result"]["task"]["id"]
        body = {"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig",
                "params": {"taskId": task_id, "id": "bad", "url": url}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            error = (await r.json())["error"]
        assert error["code"] == -32602
        assert error["message"].startswith("A2A push callback URL must")


def _fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> None:
    """Answer look-ups of the given test names in turn (the last answer repeats); others fail."""
    import socket

    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name in answers:
            queue = answers[name]
            addresses = queue.pop(0) if len(queue) > 1 else queue[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, int(port or 80))) for a in addresses]
        return await real(host, port, *args, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


async def test_a_name_resolving_to_loopback_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as http:
        _fake_dns(monkeypatch, {"hooks.example.test": [["127.0.0.1"]]})
        body = send_message_body("hello", message_id=uuid.uuid4().hex)
        body["params"]["configuration"] = {"taskPushNotificationConfig": push_config("http://hooks.example.test/h")}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            error = (await r.json())["error"]
        assert error["code"] == -32602
        assert error["message"] == "A2A push callback URL must not resolve to private or local hosts"


async def test_a_rebinding_name_never_reaches_the_private_address(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    # Accepted when stored (a public answer), private when the worker resolves it: dead-lettered, nothing sent.
    settings = {**FAST, "persistence-dir": str(tmp_path)}
    async with receiver() as hook, start_server(settings) as server, aiohttp.ClientSession() as http:
        port = hook.url.split(":")[2].split("/")[0]
        _fake_dns(monkeypatch, {"rebind.example.test": [["93.184.216.34"], ["127.0.0.1"]]})
        await send_with_push(http, server.url, f"http://rebind.example.test:{port}/hook")
        config = write_config(tmp_path / "push.yml", settings)
        status = await until(lambda: _dead_count(config, 1))
        assert "must not resolve to private or local hosts" in status["dead"][0]["lastError"]
        assert hook.requests == []


# --------------------------------------------------------------------------- durability


async def _server_process(config: Path, workspace: Path) -> tuple[asyncio.subprocess.Process, str]:
    from tests.test_crash_and_limits import LISTENING

    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_"))}
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--port", "0", "--config", str(config), env=env,
                                                cwd=workspace, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "server exited early"
        match = LISTENING.search(line)
        if match:
            return proc, match.group(1)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)


@pytest.mark.parametrize("queue", QUEUES)
async def test_jobs_acknowledged_before_a_kill_are_delivered_after_the_restart(queue: str, prefix: str,
                                                                              tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    base = {**FAST, **queue_settings(queue, prefix), "persistence-dir": str(tmp_path / "state")}
    async with receiver() as hook, aiohttp.ClientSession() as http:
        # First life: nobody delivers (push-delivery external), then kill -9 right after the acknowledgements.
        proc, url = await _server_process(write_config(tmp_path / "a.yml", {**base, "push-delivery": "external"}),
                                          workspace)
        try:
            tasks = [await send_with_push(http, url, hook.url) for _ in range(3)]
        finally:
            proc.kill()
            await proc.wait()
        assert hook.requests == []
        proc, url = await _server_process(write_config(tmp_path / "b.yml", base), workspace)
        try:
            got = await hook.wait_for(3)
        finally:
            await _stop(proc)
        assert {r.body["statusUpdate"]["taskId"] for r in got} == {t["id"] for t in tasks}
        _assert_no_clear_secret(tmp_path / "state")
        if queue == "redis-streams":
            _assert_no_clear_secret_in_redis(prefix)


def _assert_no_clear_secret(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN.encode() not in data and CREDENTIALS.encode() not in data, path.name


def _assert_no_clear_secret_in_redis(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url())
    try:
        for key in client.scan_iter(f"{prefix}*"):
            kind = client.type(key).decode()
            if kind == "stream":
                values = [v for _, fields in client.xrange(key) for v in fields.values()]
            elif kind == "zset":
                values = client.zrange(key, 0, -1)
            elif kind == "string":
                values = [client.get(key) or b""]
            else:
                values = []
            for value in values:
                assert TOKEN.encode() not in value and CREDENTIALS.encode() not in value
    finally:
        client.close()


async def _worker(config: Path) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "push-worker", "--config", str(config),
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    while True:  # started once it says so
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "push worker exited early"
        if "push worker delivering" in line:
            return proc


async def test_a_worker_killed_mid_delivery_loses_nothing(prefix: str, tmp_path: Path) -> None:
    settings = {**FAST, **queue_settings("redis-streams", prefix), "persistence-dir": str(tmp_path),
                "push-delivery": "external", "push-lease-timeout-ms": 1000}
    config = write_config(tmp_path / "push.yml", settings)
    async with receiver(hold=asyncio.Event()) as hook, start_server(settings) as server, \
            aiohttp.ClientSession() as http:
        first = await _worker(config)
        try:
            task = await send_with_push(http, server.url, hook.url)
            (held,) = await hook.wait_for(1)  # the first worker is mid-delivery
            first.kill()
            await first.wait()
            assert hook.hold is not None
            hook.hold.set()  # the receiver answers from now on
            second = await _worker(config)
            try:
                got = await hook.wait_for(2)
                status = await until(lambda: _drained(config))
            finally:
                await _stop(second)
        finally:
            if first.returncode is None:
                first.kill()
        assert got[1].headers["Idempotency-Key"] == held.headers["Idempotency-Key"]
        assert got[1].body["statusUpdate"]["taskId"] == task["id"]
        assert status["depth"]["dead"] == 0


async def _drained(config: Path) -> dict[str, Any] | None:
    status = await cli_json("push-status", "--config", str(config))
    depth = status["depth"]
    return status if depth["pending"] == 0 and depth["inflight"] == 0 else None


async def test_a_redis_restart_during_delivery_loses_nothing(prefix: str, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "redis"
    data.mkdir()
    redis_proc = start_redis_server(port, data, appendonly=True)
    url = f"redis://127.0.0.1:{port}/0"
    settings = {**FAST, **queue_settings("redis-streams", prefix, url), "persistence-dir": str(tmp_path / "state"),
                "push-lease-timeout-ms": 1500}
    try:
        async with receiver(hold=asyncio.Event()) as hook, start_server(settings) as server, \
                aiohttp.ClientSession() as http:
            tasks = [await send_with_push(http, server.url, hook.url) for _ in range(2)]
            await hook.wait_for(1)  # deliveries in flight
            redis_proc.kill()
            redis_proc.wait()
            redis_proc = start_redis_server(port, data, appendonly=True)
            assert hook.hold is not None
            hook.hold.set()
            got = await hook.wait_for(2, timeout=30)
            config = write_config(tmp_path / "push.yml", settings)
            await until(lambda: _drained(config), timeout=30)
        assert {t["id"] for t in tasks} <= {r.body["statusUpdate"]["taskId"] for r in got}
    finally:
        redis_proc.kill()
        redis_proc.wait()


# --------------------------------------------------------------------------- configuration API


async def test_configs_are_encrypted_at_rest_and_returned_in_clear(tmp_path: Path) -> None:
    settings = {"push-notifications": True, "persistence-dir": str(tmp_path)}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        body = send_message_body("hello", message_id=uuid.uuid4().hex)
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            task_id = (await r.json())["result"]["task"]["id"]
        for n in range(5):
            body = {"jsonrpc": "2.0", "id": n, "method": "CreateTaskPushNotificationConfig",
                    "params": {"taskId": task_id, **push_config("https://8.8.8.8/hook", id=f"hook-{n}")}}
            async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
                assert "result" in await r.json()
        get = {"jsonrpc": "2.0", "id": 9, "method": "GetTaskPushNotificationConfig",
               "params": {"taskId": task_id, "id": "hook-3"}}
        async with http.post(server.url, json=get, headers=A2A_HEADERS) as r:
            got = (await r.json())["result"]
        assert got["token"] == TOKEN and got["authentication"]["credentials"] == CREDENTIALS
        pages: list[list[str]] = []
        token = ""
        while True:
            params: dict[str, Any] = {"taskId": task_id, "pageSize": 2}
            if token:
                params["pageToken"] = token
            body = {"jsonrpc": "2.0", "id": 10, "method": "ListTaskPushNotificationConfigs", "params": params}
            async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
                result = (await r.json())["result"]
            pages.append([c["id"] for c in result["configs"]])
            token = result.get("nextPageToken", "")
            if not token:
                break
        assert pages == [["hook-0", "hook-1"], ["hook-2", "hook-3"], ["hook-4"]]
        bad = {"jsonrpc": "2.0", "id": 11, "method": "ListTaskPushNotificationConfigs",
               "params": {"taskId": task_id, "pageToken": "bm8tc3VjaA"}}
        async with http.post(server.url, json=bad, headers=A2A_HEADERS) as r:
            error = (await r.json())["error"]
        assert (error["code"], error["message"]) == (-32602, "Invalid page token: bm8tc3VjaA")
    _assert_no_clear_secret(tmp_path)
    files = [p for p in (tmp_path / "push_configs").rglob("*.json")]
    assert len(files) == 5 and all(p.stat().st_mode & 0o777 == 0o600 for p in files)
    # A restart reads them back.
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        async with http.post(server.url, json=get, headers=A2A_HEADERS) as r:
            assert (await r.json())["result"]["token"] == TOKEN


async def test_the_key_rotation_command_keeps_old_secrets_readable(tmp_path: Path) -> None:
    settings = {"push-notifications": True, "persistence-dir": str(tmp_path)}
    config = write_config(tmp_path / "push.yml", settings)
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        body = send_message_body("hello", message_id=uuid.uuid4().hex)
        body["params"]["configuration"] = {"taskPushNotificationConfig": push_config("https://8.8.8.8/h", id="old")}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            task_id = (await r.json())["result"]["task"]["id"]
    before = json.loads((tmp_path / "push_keys.json").read_text())["activeKeyId"]
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "push-key-rotate", "--config", str(config),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    after = json.loads((tmp_path / "push_keys.json").read_text())["activeKeyId"]
    assert after != before and after in out.decode()
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        get = {"jsonrpc": "2.0", "id": 9, "method": "GetTaskPushNotificationConfig",
               "params": {"taskId": task_id, "id": "old"}}
        async with http.post(server.url, json=get, headers=A2A_HEADERS) as r:
            assert (await r.json())["result"]["token"] == TOKEN


async def test_a_queue_whose_plugin_is_not_installed_names_the_extra() -> None:
    from iac_code.base.errors import StartupError

    settings = {"push-notifications": True, "push-queue": "redis-streams", "disabled-plugins": ["push-redis"]}
    with pytest.raises(StartupError, match=r"^Redis-backed A2A push delivery requires optional dependencies\. "
                                           r"Install iac-code\[a2a-redis\]\.$"):
        async with start_server(settings):
            pass


async def test_storing_a_config_looks_the_name_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # One screening per call: the second answer (private) would refuse a second look-up.
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as http:
        body = send_message_body("hello", message_id=uuid.uuid4().hex)
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            task_id = (await r.json())["result"]["task"]["id"]
        _fake_dns(monkeypatch, {"once.example.test": [["93.184.216.34"], ["127.0.0.1"]]})
        create = {"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig",
                  "params": {"taskId": task_id, "id": "h", "url": "https://once.example.test/hook"}}
        async with http.post(server.url, json=create, headers=A2A_HEADERS) as r:
            assert (await r.json())["result"]["id"] == "h"
        async with http.post(server.url, json={**create, "id": 3}, headers=A2A_HEADERS) as r:
            refused = (await r.json())["error"]  # the next call looks it up again, and now it is private
        assert refused["message"] == "A2A push callback URL must not resolve to private or local hosts"


def _kind_and_state(event: dict[str, Any]) -> tuple[str, str]:
    kind = next(k for k in ("task", "statusUpdate", "artifactUpdate", "message") if k in event)
    return kind, event[kind].get("status", {}).get("state", "")


@pytest.mark.parametrize("queue", QUEUES)
async def test_each_push_carries_its_events_state_in_order_across_retries(queue: str, prefix: str) -> None:
    """Every event of a turn is pushed as it was when it happened, in the stream's order, the first one after a retry."""
    settings = {**FAST, **queue_settings(queue, prefix), "push-events": "all"}
    async with receiver(statuses=[503]) as hook, start_server(settings) as server, aiohttp.ClientSession() as http:
        body = send_message_body("hello", message_id=uuid.uuid4().hex, method="SendStreamingMessage")
        body["params"]["configuration"] = {"taskPushNotificationConfig": push_config(hook.url, id="hook-1")}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            events, _ = parse_sse(await r.text())
        streamed = [_kind_and_state(e["result"]) for e in events]
        assert streamed[0] == ("task", "TASK_STATE_SUBMITTED") and streamed[-1][1] == "TASK_STATE_INPUT_REQUIRED"
        got = await hook.wait_for(len(streamed) + 1)  # the first attempt was answered 503
        assert got[0].headers["Idempotency-Key"] == got[1].headers["Idempotency-Key"]
        assert [_kind_and_state(r.body) for r in got[1:]] == streamed


@pytest.mark.parametrize("queue", QUEUES)
async def test_a_restarted_server_chains_a_tasks_next_push_to_the_one_queued_before(queue: str, prefix: str,
                                                                                    tmp_path: Path) -> None:
    """The first turn's push is still retrying after a restart: the next turn's push waits for it."""
    base = {**FAST, **queue_settings(queue, prefix), "persistence-dir": str(tmp_path / "state"),
            "push-retry-base-delay": 2.0, "push-retry-max-delay": 2.0}
    async with receiver(statuses=[503]) as hook, aiohttp.ClientSession() as http:
        async with start_server({**base, "push-delivery": "external"}) as server:  # queued, not delivered
            task = await send_with_push(http, server.url, hook.url)
        async with start_server(base) as server:
            (first,) = await hook.wait_for(1)  # the first turn's push, answered 503: retried in about 2 s
            body = send_message_body("hello again", message_id=uuid.uuid4().hex, taskId=task["id"],
                                     contextId=task["contextId"])
            async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
                assert (await r.json())["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            got = await hook.wait_for(3)
        keys = [r.headers["Idempotency-Key"] for r in got]
        assert keys[1] == keys[0] != keys[2]  # the retry first, then the second turn's push
