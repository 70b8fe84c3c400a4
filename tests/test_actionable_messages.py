"""Messages a person can act on: a refused workspace says why, the client says what it sent and how to
choose another, and start-up and client errors name the real line, URL or name to fix.

Servers are real (an in-process kernel on an ephemeral port, or ``iac-code a2a`` as a process);
the client runs as its own process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import A2A_HEADERS, next_sse_data, send_message_body, start_server
from tests.client_support import run_process
from tests.test_cli import _env, run, serving

INVALID = "Invalid A2A workspace metadata."
VPC = "Create a VPC with two vSwitches."


async def _send(url: str, cwd: Any, message_id: str, language: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {} if cwd is None else {"cwd": cwd}
    if language:
        metadata["preferredLanguage"] = language
    body = send_message_body("hello", message_id=message_id, metadata={"iac_code": metadata})
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=A2A_HEADERS) as reply:
        return (await reply.json())["result"]["task"]


# ----------------------------------------------------------------------------- the server says why


async def test_a_refused_workspace_says_why_without_naming_a_path(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "file.txt").write_text("x")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", str(allowed))
    monkeypatch.chdir(allowed)
    async with start_server() as server:
        state = str(server.kernel.config.resolved_persistence_dir())
        cases = {"relative/dir": "not_absolute", str(outside): "outside_allowed_roots",
                 str(allowed / "missing"): "does_not_exist", str(allowed / "file.txt"): "not_a_directory"}
        explanations = set()
        for index, (cwd, reason) in enumerate(cases.items()):
            task = await _send(server.url, cwd, f"w{index}")
            status = task["status"]
            assert status["state"] == "TASK_STATE_FAILED", cwd
            parts = status["message"]["parts"]
            assert parts[0]["text"] == INVALID  # the spec's text, unchanged, first
            assert len(parts) == 2 and parts[1]["text"], parts
            explanations.add(parts[1]["text"])
            assert task["metadata"]["iac_code"]["error"] == {"code": "invalid_workspace", "reason": reason}
            shown = json.dumps({"status": status, "metadata": task["metadata"]})
            for path in (cwd, str(allowed), str(tmp_path), state):
                assert path not in shown, (path, shown)
        assert len(explanations) == len(cases)  # each reason explained in its own words
        roots = await _send(server.url, str(outside), "w-roots")
        assert "outside" in roots["status"]["message"]["parts"][1]["text"]

        # the server's own state is never a workspace, whatever the roots say
        monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", os.pathsep.join([str(allowed), state]))
        own = await _send(server.url, state, "w-state")
        assert own["metadata"]["iac_code"]["error"]["reason"] == "server_directory"
        assert state not in json.dumps(own["status"])

        # the reason in the request's language; the first text stays the spec's
        german = await _send(server.url, str(allowed / "missing"), "w-de", language="de")
        parts = german["status"]["message"]["parts"]
        assert parts[0]["text"] == "Ungültige Metadaten für den A2A-Arbeitsbereich."
        assert parts[1]["text"] == "Das Verzeichnis des Arbeitsbereichs existiert auf dem Server nicht."

        # a stream carries the same metadata on the failed status update
        body = send_message_body("hello", message_id="w-stream", method="SendStreamingMessage",
                                 metadata={"iac_code": {"cwd": str(outside)}})
        async with aiohttp.ClientSession() as http, http.post(server.url, json=body, headers=A2A_HEADERS) as reply:
            while True:
                event = (await next_sse_data(reply.content))["result"]
                update = event.get("statusUpdate", {})
                if update.get("status", {}).get("state") == "TASK_STATE_FAILED":
                    break
        assert update["metadata"]["iac_code"]["error"] == {"code": "invalid_workspace",
                                                           "reason": "outside_allowed_roots"}


# ----------------------------------------------------------------------------- the client says what it sent


async def test_the_client_names_the_cwd_it_sent_and_how_to_choose_another(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``a2a-client call`` from a directory the agent does not accept (the issue's home-directory case)."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    serving_dir = tmp_path / "server"
    for folder in (home, project, serving_dir):
        folder.mkdir()
    monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", str(project))
    monkeypatch.chdir(serving_dir)
    async with start_server() as server:
        refused = await run_process("call", "--url", server.url, "-p", "Hello", cwd=home)
        assert refused.code == 12, refused.err
        lines = refused.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), refused.err
        assert f"cwd {home}" in lines[0] and "outside" in lines[0]
        assert "--cwd <dir>" in lines[0] and "--no-cwd" in lines[0]
        assert INVALID in refused.out and "● failed" in refused.out

        scripted = await run_process("call", "--url", server.url, "-p", "Hello", "-o", "json", cwd=home)
        assert scripted.code == 12 and str(home) in scripted.lines()[-1]["error"]["message"]

        relative = await run_process("call", "--url", server.url, "-p", "Hello", "--cwd", "sub/dir", cwd=home)
        assert relative.code == 12 and "cwd sub/dir (not an absolute path)" in relative.err

        chosen = await run_process("call", "--url", server.url, "-p", "Hello", "--cwd", str(project), cwd=home)
        assert chosen.code == 0, chosen.err
        none = await run_process("call", "--url", server.url, "-p", "Hello", "--no-cwd", cwd=home)
        assert none.code == 0, none.err  # the agent works in its own directory
        config = tmp_path / "client.yml"
        config.write_text("no-cwd: true\n")
        from_file = await run_process("--config", str(config), "call", "--url", server.url, "-p", "Hello", cwd=home)
        assert from_file.code == 0, from_file.err
        both = await run_process("call", "--url", server.url, "-p", "Hello", "--no-cwd", "--cwd", str(project),
                                 cwd=home)
        assert both.code == 2 and "--no-cwd" in both.err


# ----------------------------------------------------------------------------- client errors name the real thing


async def test_the_answer_hint_prints_the_real_url(ws: Path) -> None:
    async with start_server() as server:
        paused = await run_process("call", "--url", server.url, "-p", VPC, cwd=ws)
        assert paused.code == 11, paused.err
        hint = next(line for line in paused.out.splitlines() if line.startswith("Answer it with:"))
        assert f"--url {server.url} --answer allow_once|deny" in hint and "<url>" not in hint


async def test_an_unreachable_agent_is_named_by_its_url(ws: Path) -> None:
    closed = "http://127.0.0.1:9/"  # discard port: nothing listens
    for command in (["task-list"], ["discover"], ["call", "-p", "hi"]):
        result = await run_process(*command, "--url", closed, cwd=ws)
        assert result.code == 3, (command, result.err)
        assert result.err.startswith(f"Error: Cannot reach the agent at {closed}"), result.err
    secret = await run_process("task-list", "--url", "http://user:hunter2@127.0.0.1:9/", cwd=ws)
    assert secret.code == 3 and "hunter2" not in secret.err and "127.0.0.1:9" in secret.err


@pytest.mark.parametrize("url", ["127.0.0.1:9", "localhost:41242"])
async def test_a_url_without_a_scheme_is_named_as_such(ws: Path, url: str) -> None:
    for command in (["call", "-p", "hi"], ["discover"]):
        result = await run_process(*command, "--url", url, cwd=ws)
        assert result.code == 1, result.err
        assert result.err.strip() == (f"Error: The URL '{url}' has no scheme: write it as http://{url} "
                                      "(or https://, grpc://, ws://, unix://, ...)."), result.err


# ----------------------------------------------------------------------------- start-up errors


UNCLOSED = "port: 0\ntransport: [http, websocket\nhost: 127.0.0.1\n"


async def test_a_yaml_error_names_the_problem_and_its_real_line(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text(UNCLOSED)
    for args in (("a2a", "--config", str(config)), ("a2a", "--check-config", "--config", str(config)),
                 ("a2a-client", "--config", str(config), "task-list", "--url", "http://127.0.0.1:9/")):
        code, out, err = await run(*args, env=_env())
        assert err.strip().splitlines() == [
            f"Error: Config file {config} is not valid YAML: in the '[' opened on line 2, column 12: expected ',' "
            "or ']', but got ':' on line 3, column 5 (is a ']' missing?)."], err
        assert code == (1 if args[0] == "a2a-client" else 2) and not out
    tabs = tmp_path / "tabs.yml"
    tabs.write_text("port: 0\n\thost: 127.0.0.1\n")
    code, _, err = await run("a2a", "--check-config", "--config", str(tabs), env=_env())
    assert code == 2 and "line 2" in err and "tabs" in err


async def test_a_misspelt_component_gets_did_you_mean(tmp_path: Path) -> None:
    code, _, err = await run("a2a", "--check-config", "--transport", "websoket", env=_env())
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("Error: Unknown transport 'websoket': did you mean 'websocket'? (installed: ")
    assert "pip install" not in err and "iac-code[" not in err
    config = tmp_path / "server.yml"
    config.write_text("transport: [http, grcp]\nagent-runtime: ofline\n")
    code, _, err = await run("a2a", "--check-config", "--config", str(config), env=_env())
    assert code == 2 and "pip install" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("Error: Unknown transport 'grcp': did you mean 'grpc'?")
    assert lines[1].startswith("Error: Unknown agent runtime 'ofline': did you mean 'offline'?")
    code, _, err = await run("a2a", "--check-config", "--transport", "carrier-pigeon", env=_env())
    assert code == 2 and "Unknown transport 'carrier-pigeon'" in err and "pip install" not in err
    client = await run_process("call", "--url", "http://127.0.0.1:9/", "--binding", "websoket", "-p", "hi",
                               cwd=tmp_path)
    assert client.code == 9 and "Did you mean 'websocket'?" in client.err, client.err
    # a first-party transport that is not installed still names its extra
    blocked = tmp_path / "no-grpc.yml"
    blocked.write_text("disabled-plugins: [grpc]\n")
    code, _, err = await run("a2a", "--check-config", "--transport", "grpc", "--config", str(blocked), env=_env())
    assert code == 2 and "Transport 'grpc' is not installed" in err and "pip install 'iac-code[a2a-grpc]'" in err


async def test_the_llm_runtime_without_a_key_warns_at_start(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text("agent-runtime: llm\n")
    env = {k: v for k, v in _env().items() if k != "IAC_CODE_API_KEY"}
    async with serving("--config", str(config), env=env) as (_url, lines):
        warnings = [line for line in lines if "WARNING" in line and "IAC_CODE_API_KEY" in line]
        assert len(warnings) == 1, lines
        assert "llm-api-key" in warnings[0] and "metadata.iac_code.iac_code_api_key" in warnings[0]
    async with serving("--config", str(config), env={**env, "IAC_CODE_API_KEY": "sk-test"}) as (_url, lines):
        assert not any("IAC_CODE_API_KEY" in line for line in lines), lines
