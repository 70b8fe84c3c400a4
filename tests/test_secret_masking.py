"""Credentials never shown: URL query secrets and user info are masked in every output, and
masking replaces whole values, never every occurrence of a short string."""

from __future__ import annotations

import asyncio
import socket
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.testing import A2A_HEADERS, send_message_body, start_server
from iac_code.base.url_credentials import mask_url, redact, url_secrets
from tests.test_push_delivery import FAST, IAC_CODE, _dead_count, until, write_config

SECRETS = {
    "redis": "s3cr3t-redis-pw",
    "push": "s3cr3t-push-pw",
    "store": "s3cr3t-store-pw",
    "llm": "sk-s3cr3t-llm-key",
    "user": "s3cr3t-userinfo",
}


def test_every_credential_bearing_query_parameter_and_userinfo_is_masked() -> None:
    cases = {
        "redis://127.0.0.1:6379/7?password=abc": "redis://127.0.0.1:6379/7?password=***",
        "http://h/v1?api_key=k1&model=qwen": "http://h/v1?api_key=***&model=qwen",
        "http://h/?APIKEY=k&Access-Token=z&sig=s&x=1": "http://h/?APIKEY=***&Access-Token=***&sig=***&x=1",
        "redis://default:pw@h:6379/0": "redis://default:***@h:6379/0",
        "https://ghp_token@h/": "https://***@h/",
        "http://h/plain?page=2": "http://h/plain?page=2",
    }
    for url, masked in cases.items():
        assert mask_url(url) == masked
    assert set(url_secrets("redis://u:pw@h/0?password=qp&token=tk")) >= {"pw", "qp", "tk", "u"}


def test_masking_replaces_whole_values_only() -> None:
    text = "ClientConnectorError: Cannot connect to host t, token t at http://h/?token=t"
    assert redact(text, ["t"]) == ("ClientConnectorError: Cannot connect to host [redacted], token [redacted] "
                                   "at http://h/?token=[redacted]")
    assert redact("Bearer abcdef in abcdefgh", ["abcdef"]) == "Bearer [redacted] in abcdefgh"


async def test_check_config_masks_query_secrets(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text(yaml.safe_dump({
        "transport": ["http", "redis-streams"],
        "redis-url": f"redis://127.0.0.1:6379/7?password={SECRETS['redis']}",
        "push-notifications": True,
        "push-queue": "redis-streams",
        "push-redis-url": f"redis://app:{SECRETS['push']}@127.0.0.1:6379/7",
        "task-store": "redis",
        "task-store-redis-url": f"redis://127.0.0.1:6379/7?password={SECRETS['store']}",
        "agent-runtime": "llm",
        "llm-base-url": f"http://{SECRETS['user']}@127.0.0.1:9/v1?api_key={SECRETS['llm']}",
        "llm-api-key": "unused-but-set",
        "persistence-dir": str(tmp_path / "state"),
    }))
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--check-config", "--config", str(config),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    shown = out.decode() + err.decode()
    assert proc.returncode == 0, shown
    for secret in SECRETS.values():
        assert secret not in shown
    assert "password=***" in shown and "api_key=***" in shown


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_one_character_token_does_not_mangle_the_delivery_error(tmp_path: Path) -> None:
    settings = {**FAST, "push-max-attempts": 1, "persistence-dir": str(tmp_path), "push-allowed-hosts": ["127.0.0.1"]}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        body: dict[str, Any] = send_message_body("hello", message_id=uuid.uuid4().hex)
        body["params"]["configuration"] = {"taskPushNotificationConfig": {
            "id": "hook-1", "url": f"http://127.0.0.1:{_closed_port()}/hook", "token": "t"}}
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            assert "result" in await r.json()
        status = await until(lambda: _dead_count(write_config(tmp_path / "push.yml", settings), 1))
        last_error = status["dead"][0]["lastError"]
        assert last_error.startswith("ClientConnectorError: Cannot connect to host 127.0.0.1:"), last_error
        assert "[REDACTED]" not in last_error


@pytest.mark.parametrize("token", ["t", "ab"])
def test_short_secrets_are_found(token: str) -> None:
    assert token in url_secrets(f"http://h/?token={token}")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_log_lines_mask_url_credentials(log_format: str) -> None:
    import logging

    from iac_code.server.logs import formatter

    try:
        raise ConnectionError("cannot reach redis://app:pw-in-trace@127.0.0.1:1/0")
    except ConnectionError:
        import sys

        record = logging.LogRecord("x", logging.WARNING, __file__, 1, "queue at %s down",
                                   ("redis://127.0.0.1:1/0?password=pw-in-msg",), sys.exc_info())
    line = formatter(log_format).format(record)
    assert "pw-in-msg" not in line and "pw-in-trace" not in line
    assert "password=***" in line and "app:***@" in line
