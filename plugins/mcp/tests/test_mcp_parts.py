"""The MCP plugin's pure parts: public names, configuration parsing and warnings, redaction."""

from __future__ import annotations

import json
from pathlib import Path

from iac_code_mcp.definitions import McpWarning, parse_servers, read_file
from iac_code_mcp.names import public_name, sanitise
from iac_code_mcp.redaction import Redactor, definition_secrets, local_paths


def test_public_names_are_sanitised_bounded_and_unique() -> None:
    assert sanitise("my server!") == "my_server" and sanitise("a__b") == "a_b" and sanitise("???") == "x"
    taken: set[str] = set()
    first = public_name("demo", "list vpcs", taken)
    assert first == "mcp__demo__list_vpcs"
    taken.add(first)
    second = public_name("demo", "list-vpcs?", taken | {"mcp__demo__list-vpcs"})
    assert second == "mcp__demo__list-vpcs_" + second[-8:] and len(second) <= 64
    long = public_name("s" * 40, "t" * 40, set())
    assert len(long) == 64 and long.startswith("mcp__")
    clash = public_name("demo", "list vpcs", {first})
    assert clash != first and clash.startswith("mcp__demo__list_vpcs")


def test_entries_and_files_give_the_seeds_warnings(tmp_path: Path) -> None:
    found, warnings = parse_servers({"ok": {"command": "x"}, "web": {"url": "https://h/mcp", "transport": "sse"},
                                     "bad": {"args": ["a"]}, "worse": {"url": "ftp://h"}}, "server", "mcp-servers")
    assert sorted(found) == ["ok", "web"] and found["web"].transport == "sse" and found["ok"].transport == "stdio"
    assert [(w.server_name, w.code) for w in warnings] == [("bad", "invalid_config"), ("worse", "invalid_config")]
    assert warnings[0].record() == {"serverName": "bad", "code": "invalid_config", "severity": "fatal",
                                    "message": "server 'bad': needs 'command' (stdio) or 'url' (HTTP)",
                                    "source": "mcp-servers", "scope": "server"}
    (tmp_path / "a.json").write_text("[1]")
    (tmp_path / "b.json").write_text('{"mcpServers": {"x": {"command": "y"}}')
    _, [shape], _ = read_file(tmp_path / "a.json", "user", "[CONFIG]/mcp.json")
    _, [parse], _ = read_file(tmp_path / "b.json", "project", "[WORKSPACE]/.mcp.json")
    assert shape.code == "invalid_config" and parse.code == "parse_error"
    assert parse.record()["sourcePath"] == "[WORKSPACE]/.mcp.json" and "scope" not in parse.record()
    assert McpWarning("s", "server_failed", "m", "mcp-servers", "server").record()["severity"] == "warning"
    assert read_file(tmp_path / "missing.json", "user", "x") == ({}, [], [])


def test_redaction_hides_secrets_urls_tokens_and_paths(tmp_path: Path) -> None:
    raw = {"command": "python", "args": ["-m", "srv", "--token=abcd1234"], "env": {"KEY": "envsecret1"},
           "url": "https://u:pw123456@h/mcp?api_key=qk998877", "headers": {"Authorization": "Bearer hdrtok55"}}
    secrets = definition_secrets(raw)
    assert {"abcd1234", "envsecret1", "pw123456", "qk998877", "hdrtok55"} <= set(secrets) and "-m" not in secrets
    redactor = Redactor(secrets, local_paths(str(tmp_path / "ws"), tmp_path / "cfg"))
    text = (f"env envsecret1 at {tmp_path}/ws/x and {tmp_path}/cfg/mcp.json via https://u:pw123456@h/mcp?"
            f"api_key=qk998877 with Bearer hdrtok55 and token zzzzzzzzzz9")
    out = redactor.text(text)
    for secret in ("envsecret1", "pw123456", "qk998877", "hdrtok55", "zzzzzzzzzz9", str(tmp_path)):
        assert secret not in out
    assert "[WORKSPACE]/x" in out and "[CONFIG]/mcp.json" in out
    assert json.dumps(redactor.value({"k": ["envsecret1", {"abcd1234": 1}]})).count("[redacted]") == 2
