"""Operating the server: readiness, --check-config, JSON logs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiohttp
import yaml

from iac_code.testing import A2A_HEADERS, send_message_body, start_server
from tests.test_crash_and_limits import LISTENING

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
SECRETS = {"token": "tok-SECRET-1", "signing-secret": "sign-SECRET-2", "basic-username": "ops",
           "basic-password": "pw-SECRET-3"}


async def test_ready_is_open_and_flips_to_503_while_stopping() -> None:
    server_cm = start_server({"token": "t0ken", "shutdown-drain-seconds": 1.0})
    server = await server_cm.__aenter__()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url + "ready") as r:  # no credentials needed, like /health
                assert (r.status, await r.json()) == (200, {"status": "ready"})
            stopping = asyncio.create_task(server.kernel.stop())
            deadline = asyncio.get_running_loop().time() + 5
            while True:
                async with http.get(server.url + "ready") as r:
                    if r.status == 503:
                        assert await r.json() == {"status": "stopping"}
                        break
                assert asyncio.get_running_loop().time() < deadline, "/ready never answered 503"
                await asyncio.sleep(0.02)
            async with http.get(server.url + "health") as r:  # liveness stays as it was while draining
                assert r.status == 200
            await stopping
    finally:
        server.kernel.stop = _noop  # type: ignore[method-assign]  # already stopped above
        await server_cm.__aexit__(None, None, None)


async def _noop() -> None:
    return None


async def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_check_config_prints_the_effective_settings_with_secrets_masked(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text(yaml.safe_dump({**SECRETS, "push-notifications": True, "push-queue": "redis-streams",
                                      "push-redis-url": "redis://:redis-SECRET-4@127.0.0.1:6379/0",
                                      "persistence-dir": str(tmp_path / "state")}))
    code, out, err = await _cli("--check-config", "--config", str(config))
    assert code == 0, err
    settings = json.loads(out)
    for secret in [*SECRETS.values(), "redis-SECRET-4"]:
        assert secret not in out or secret == "ops"
    assert settings["token"] == "***" and settings["basic-username"] == "ops"
    assert settings["push-redis-url"] == "redis://:***@127.0.0.1:6379/0"
    assert settings["push-stream"] == "iac-code:a2a:push"  # plugin keys are validated and shown too
    assert not (tmp_path / "state").exists()  # nothing was started
    config.write_text(yaml.safe_dump({"no-such-key": 1}))
    code, _, err = await _cli("--check-config", "--config", str(config))
    assert code == 2 and "no-such-key" in err and "Traceback" not in err


async def test_json_logs_are_one_object_per_line_without_secrets(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text(yaml.safe_dump({**SECRETS, "log-format": "json", "persistence-dir": str(tmp_path / "state")}))
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_"))}
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--port", "0", "--config", str(config), env=env,
                                                cwd=workspace, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "server exited early"
        lines.append(line)
        match = LISTENING.search(json.loads(line)["message"] + "\n")
        if match:
            url = match.group(1)
            break
    async with aiohttp.ClientSession() as http:
        headers = {**A2A_HEADERS, "Authorization": f"Bearer {SECRETS['token']}"}
        async with http.post(url, json=send_message_body("hello"), headers=headers) as r:
            assert "result" in await r.json()
        async with http.post(url, json=send_message_body("hello", message_id="m-2"),
                             headers={**A2A_HEADERS, "Authorization": "Bearer wrong-SECRET-5"}) as r:
            assert r.status == 401
    proc.terminate()
    rest = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
    await proc.wait()
    lines += [line for line in rest.splitlines(keepends=True) if line.strip()]
    records = [json.loads(line) for line in lines]  # every line parses
    assert all({"timestamp", "level", "logger", "message"} <= set(r) for r in records)
    assert any("listening" in r["message"] for r in records)
    text = "".join(lines)
    for secret in [*SECRETS.values(), "wrong-SECRET-5"]:
        assert secret == "ops" or secret not in text
