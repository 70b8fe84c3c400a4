"""Start-up: every problem before anything binds, dependent options, one server per state directory.

Everything runs ``iac-code a2a`` as a subprocess: a start that fails exits 2 with one
``Error: ...`` line per problem and no traceback, before a socket is bound or a file of
the state directory is read or written.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.base.errors import StartupError
from iac_code.testing import A2A_HEADERS, send_message_body, start_server
from tests.test_cli import IAC_CODE, LISTENING, _env, _install, run

VPC = "Create a VPC with two vSwitches in cn-hangzhou."


def _config(tmp_path: Path, settings: dict[str, Any], name: str = "server.yml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def _errors(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("Error: ") for line in lines), err
    assert "Traceback" not in err
    return [line.removeprefix("Error: ") for line in lines]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    """Every file and directory under ``directory``: mode and content hash (byte-for-byte comparison).

    A path that disappears between the listing and its reading (a running server renaming its
    temporary file into place) is left out: the file it became is in the listing or the next one.
    """
    out: dict[str, tuple[int, str]] = {}
    for path in sorted(directory.rglob("*")):
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            mode = path.stat().st_mode
        except FileNotFoundError:
            continue
        out[str(path.relative_to(directory))] = (mode, digest)
    return out


async def _settled(directory: Path) -> dict[str, tuple[int, str]]:
    """:func:`_snapshot` once a running server's own writes (snapshots written behind the journal) stopped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    previous = _snapshot(directory)
    while loop.time() < deadline:
        await asyncio.sleep(0.3)  # poll interval of a bounded wait, not a synchronisation
        current = _snapshot(directory)
        if current == previous:
            return current
        previous = current
    raise AssertionError(f"{directory} kept changing")


@asynccontextmanager
async def _server(env: dict[str, str], *args: str) -> AsyncIterator[tuple[str, int]]:
    """``iac-code a2a`` until it listens; yields (JSON-RPC URL, PID); SIGTERM afterwards."""
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", *args, env=env, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            if not line:
                raise AssertionError("server exited early:\n" + "".join(seen))
            seen.append(line)
            match = LISTENING.search(line)
            if match:
                break
        drain = asyncio.ensure_future(proc.stderr.read())  # keep the pipe from filling up
        yield match.group(1), proc.pid
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


async def _rpc(url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()  # type: ignore[no-any-return]


async def _paused_task(url: str, workspace: Path) -> str:
    """A turn of the offline engine that waits for a permission answer; its task id."""
    answer = await _rpc(url, send_message_body(VPC, metadata={"iac_code": {"cwd": str(workspace)}}))
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return str(task["id"])


async def _task_state(url: str, task_id: str) -> str:
    got = await _rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}})
    return str(got["result"]["status"]["state"])


# ----------------------------------------------------------------------------- issue 28.10


async def test_every_problem_is_reported_before_anything_binds(tmp_path: Path) -> None:
    port = _free_port()
    config = _config(tmp_path, {"port": port, "log-format": "text", "card-signer": "hmac",
                                "push-queue": "redis-streams", "grpc-tls-cert": str(tmp_path / "cert.pem")})
    env = _env()
    code, _, err = await run("a2a", "--config", config, "--transport", "http", "--transport", "redis-streams",
                             env=env)
    assert code == 2, err
    problems = _errors(err)
    assert "bound to" not in err and "listening" not in err  # nothing was bound before the check
    assert "redis-url is required in --config for --transport redis-streams." in problems
    assert "card-signer: hmac needs signing-secret (or signing-secrets)." in problems
    assert any(p.startswith("'push-queue' has no effect without 'push-notifications: true'") for p in problems)
    assert any(p.startswith("'grpc-tls-cert' has no effect without 'transport: grpc'") for p in problems)
    assert len(problems) == 4, problems
    assert not (Path(env["IAC_CODE_CONFIG_DIR"]) / "a2a").exists()  # the state directory was not touched
    # --check-config runs the same validation and fails where the start would.
    code, out, check_err = await run("a2a", "--check-config", "--config", config, "--transport", "http",
                                     "--transport", "redis-streams", env=env)
    assert code == 2 and out == ""
    assert _errors(check_err) == problems


async def test_check_config_refuses_redis_streams_without_redis_url() -> None:
    code, out, err = await run("a2a", "--check-config", "--transport", "redis-streams")
    assert code == 2 and out == ""
    assert _errors(err) == ["redis-url is required in --config for --transport redis-streams."]


async def test_transports_sharing_a_port_are_refused(tmp_path: Path) -> None:
    code, _, err = await run("a2a", "--transport", "http", "--transport", "websocket", "--port", str(_free_port()))
    assert code == 2
    (problem,) = _errors(err)
    assert "'http' and 'websocket' would both bind" in problem and "port: 0" in problem
    config = _config(tmp_path, {"grpc-port": 50071, "grpc-jsonrpc-port": 50071})
    code, _, err = await run("a2a", "--check-config", "--config", config, "--transport", "grpc",
                             "--transport", "grpc-jsonrpc")
    assert code == 2
    assert _errors(err) == ["Transports 'grpc' and 'grpc-jsonrpc' would both bind port 50071: set "
                            "'grpc-jsonrpc-port' to another port (0 picks a free one)."]


CHECKING_PLUGIN = '''
from pydantic import BaseModel
from iac_code.base.config import without_effect
from iac_code.base.hookspecs import hookimpl


class AuditSinkConfig(BaseModel):
    audit_sink_url: str = ""
    audit_sink_batch: int = 10


@hookimpl
def iac_code_config_model():
    return AuditSinkConfig


@hookimpl
def iac_code_check_config(config):
    if not config.audit_sink_url:
        return without_effect(config, ["audit_sink_batch"], "audit-sink-url")
    if not config.audit_sink_url.startswith("https://"):
        return ["audit-sink-url must be an https:// URL."]
    return []
'''


async def test_a_third_party_plugin_checks_its_settings_with_the_rest(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "audit-sink", "0.1.0", {"audit-sink": "audit_sink_plugin"}, {"audit_sink_plugin": CHECKING_PLUGIN})
    config = _config(tmp_path, {"audit-sink-url": "http://sink.example", "ws-path": "/x"})
    code, out, err = await run("a2a", "--check-config", "--config", config, env=_env(site))
    assert code == 2 and out == ""
    assert sorted(_errors(err)) == [
        "'ws-path' has no effect without 'transport: websocket': set 'transport: websocket' or remove 'ws-path'.",
        "audit-sink-url must be an https:// URL."]
    config = _config(tmp_path, {"audit-sink-batch": 5})
    code, _, err = await run("a2a", "--config", config, env=_env(site))
    assert code == 2
    assert _errors(err) == ["'audit-sink-batch' has no effect without 'audit-sink-url': set 'audit-sink-url' or "
                            "remove 'audit-sink-batch'."]


# ----------------------------------------------------------------------------- issue 28.11


@pytest.mark.parametrize(("settings", "transports", "problem"), [
    ({"signing-algorithm": "ES256"}, [],
     "'signing-algorithm' has no effect without 'card-signer: jwks': set 'card-signer: jwks' or remove "
     "'signing-algorithm'."),
    ({"card-signer": "jwks", "signing-secret": "s3cret"}, [],
     "'signing-secret' has no effect with 'card-signer: jwks': remove it, or set 'card-signer: hmac'."),
    ({"signing-kid": "k1"}, [], "'signing-kid' has no effect without 'signing-secrets'"),
    ({"grpc-tls-cert": "/etc/cert.pem"}, ["grpc"], "'grpc-tls-cert' has no effect without 'grpc-tls-key': "
                                                   "gRPC TLS needs both."),
    ({"grpc-port": 50061}, [], "'grpc-port' has no effect without 'transport: grpc'"),
    ({"grpc-tls-cert": "/no/such/cert.pem", "grpc-tls-key": "{tmp}/server.yml"}, ["grpc"],
     "Cannot read the 'grpc-tls-cert' file '/no/such/cert.pem'."),
    ({"card-signer": "jwks", "signing-key-files": ["/no/such/key.pem"]}, [],
     "card-signer jwks: cannot read the signing-key-files entry '/no/such/key.pem'."),
    ({"push-notifications": True, "push-stream": "jobs"}, [],
     "'push-stream' has no effect without 'push-queue: redis-streams'"),
    ({"push-redis-url": "redis://127.0.0.1:6379/0"}, [],
     "'push-redis-url' has no effect without 'push-notifications: true'"),
    ({"push-allowed-hosts": ["127.0.0.1"]}, [], "'push-allowed-hosts' has no effect without 'push-notifications: true'"),
    ({"push-notifications": True, "push-queue": "redis-streams"}, [],
     "push-redis-url is required in --config for push-queue: redis-streams."),
    ({"redis-url": "redis://127.0.0.1:6379/0"}, [], "'redis-url' has no effect without 'transport: redis-streams'"),
    ({"task-store-redis-url": "redis://127.0.0.1:6379/0"}, [],
     "'task-store-redis-url' has no effect without 'task-store: redis'"),
    ({"task-store": "redis"}, [], "task-store-redis-url is required in --config for task-store: redis."),
    ({"ws-path": "/socket"}, [], "'ws-path' has no effect without 'transport: websocket'"),
    ({}, ["unix"], "socket-path is required in --config for --transport unix."),
    ({"socket-path": "/tmp/a2a.sock"}, [], "'socket-path' has no effect without 'transport: unix'"),
    ({"basic-username": "ops"}, [], "'basic-username' has no effect without 'basic-password'"),
    ({"api-key-header": "X-Key"}, [], "'api-key-header' has no effect without 'api-key'"),
    ({"metrics": False, "metrics-public": True}, [], "'metrics-public' has no effect without 'metrics: true'"),
    ({"metrics-host": "127.0.0.2"}, [], "'metrics-host' has no effect without 'metrics-port'"),
    ({"llm-model": "qwen-max"}, [], "'llm-model' has no effect without 'agent-runtime: llm'"),
    ({"agent-executor": "tests.byo_agent:ShoutExecutor", "permission-timeout": 5}, [],
     "'permission-timeout' has no effect with 'agent-executor': remove 'permission-timeout'."),
    ({"log-to-stdout": True}, ["stdio"],
     "--log-to-stdout cannot be used with --transport stdio because stdout carries A2A frames."),
])
async def test_an_option_that_does_nothing_is_refused(tmp_path: Path, settings: dict[str, Any],
                                                      transports: list[str], problem: str) -> None:
    settings = {k: v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for k, v in settings.items()}
    config = _config(tmp_path, settings)  # {tmp}/server.yml: a file that exists and is readable
    flags = [arg for name in transports for arg in ("--transport", name)]
    code, out, err = await run("a2a", "--check-config", "--config", config, *flags)
    assert code == 2, out
    (line,) = _errors(err)
    assert line.startswith(problem), line


async def test_dependent_options_with_what_they_need_pass(tmp_path: Path) -> None:
    for name in ("cert.pem", "key.pem"):
        (tmp_path / name).write_text("-----BEGIN TEST-----\n")
    config = _config(tmp_path, {
        "card-signer": "jwks", "signing-algorithm": "ES256", "push-notifications": True,
        "push-allowed-hosts": ["127.0.0.1"], "push-queue": "redis-streams", "push-redis-url": "redis://127.0.0.1:6379/0",
        "push-stream": "jobs", "basic-username": "ops", "basic-password": "pw", "api-key": "k", "api-key-header": "X-Key",
        "grpc-port": 0, "grpc-tls-cert": str(tmp_path / "cert.pem"), "grpc-tls-key": str(tmp_path / "key.pem"),
        "metrics-port": 0,
        "metrics-host": "127.0.0.1", "ws-path": "/socket", "port": 0})
    code, out, err = await run("a2a", "--check-config", "--config", config, "--transport", "http",
                               "--transport", "grpc", "--transport", "websocket")
    assert code == 0, err
    assert '"signing-algorithm": "ES256"' in out


async def test_signing_algorithm_without_card_signer_does_not_start(tmp_path: Path) -> None:
    """The issue's case: it used to start and serve an unsigned card."""
    config = _config(tmp_path, {"signing-algorithm": "ES256", "port": 0})
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--config", config, env=_env(),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        _, raw = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:  # it started serving: stop it, the assertion below fails
            proc.kill()
            await proc.wait()
    code, err = proc.returncode, raw.decode()
    assert code == 2
    (line,) = _errors(err)
    assert "card-signer" in line and "signing-algorithm" in line


# ----------------------------------------------------------------------------- issue 35.1 / 35.2


async def test_a_second_server_on_the_same_state_directory_changes_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = _env()
    state = Path(env["IAC_CODE_CONFIG_DIR"]) / "a2a"
    port = _free_port()
    async with _server(env, "--port", str(port)) as (url, pid):
        task_id = await _paused_task(url, workspace)
        before = await _settled(state)
        assert (state / "server.lock").read_text().strip() == str(pid)
        attempts: list[list[str]] = [
            ["--transport", "redis-streams"],  # a configuration fault: refused before the lock
            ["--port", str(port)],  # the port is taken, and so is the directory
            ["--port", "0"],  # a valid configuration
            ["--port", "0", "--transport", "http", "--transport", "grpc"],
        ]
        for args in attempts:
            code, _, err = await run("a2a", *args, env=env)
            assert code == 2, (args, err)
            (line,) = _errors(err)
            if args[0] != "--transport":
                assert str(state) in line and f"PID {pid}" in line, line
            assert _snapshot(state) == before, args
        assert await _task_state(url, task_id) == "TASK_STATE_INPUT_REQUIRED"  # the first server still answers


async def test_a_port_in_use_stops_the_start_before_state_is_restored(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    mine, other = _env(), _env()
    state = Path(mine["IAC_CODE_CONFIG_DIR"]) / "a2a"
    async with _server(mine, "--port", "0") as (url, _):
        task_id = await _paused_task(url, workspace)
    before = _snapshot(state)  # a paused task a restore would mark suspended (its checkpoint too)
    port = _free_port()
    async with _server(other, "--port", str(port)):
        code, _, err = await run("a2a", "--port", str(port), env=mine)
    assert _snapshot(state) == before
    assert code == 2
    (line,) = _errors(err)
    assert "Transport 'http'" in line and str(port) in line and "address already in use" in line
    async with _server(mine, "--port", "0") as (url, _):  # the directory is free again once it failed
        got = await _rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}})
        assert got["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert got["result"]["metadata"]["iac_code"]["permissionWait"] == {"status": "suspended", "resumable": True}
    assert _snapshot(state) != before  # restored this time


async def test_an_embedded_kernel_holds_the_lock_while_it_runs(tmp_path: Path) -> None:
    settings = {"persistence-dir": str(tmp_path / "state")}
    async with start_server(settings):
        with pytest.raises(StartupError, match="is in use by another iac-code server"):
            async with start_server(settings):
                raise AssertionError("a second kernel started on the same state directory")
    async with start_server(settings) as again:  # released when the first stopped
        assert again.kernel.readiness == "ready"
