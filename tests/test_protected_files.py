"""The server's own files are never input: config file, persistence dir, artifacts, audit log.

Every server here keeps its state inside ``tmp_path``, which is under the system
temp directory and therefore inside the default allowed roots; the workspace
(``metadata.iac_code.cwd``) is ``tmp_path`` too, so without the protection each
of those files would be an ordinary workspace file. The servers are started the
way ``iac-code a2a --config FILE`` starts them (``load_config`` with the file's
path, then ``Kernel``), on the echo runtime (``tests.echo_runtime``), so
anything read into the prompt would come straight back in the reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.base.config import build_config_model, load_config
from iac_code.server.kernel import Kernel
from iac_code.server.plugins import Plugins
from iac_code.testing import A2A_HEADERS, send_message_body
from tests.echo_runtime import EchoPlugin, EchoRuntime, split_echo

OUTSIDE = "A2A file URL part is outside the allowed workspace."
INVALID_WORKSPACE = "Invalid A2A workspace metadata."
TOKEN = "cfg-token-4e1b97d2"
HOME_SECRET = "home-credential-90c1aa"
AUDIT_SECRET = "audit-record-3f77e0"
ARTIFACT_SECRET = "artifact-body-c0ffee"
NOTES = "ordinary workspace notes\n"
MEDIA_TYPES = ["text/plain", "image/png", "application/octet-stream"]

IAC_CODE = str(Path(sys.executable).parent / "iac-code")


# --------------------------------------------------------------------------- layout and server


@dataclass(frozen=True)
class Layout:
    """Everything under ``tmp_path``: the workspace holds the server's own files."""

    workspace: Path
    config_file: Path
    state: Path
    artifacts: Path
    audit_log: Path
    config_home: Path

    @property
    def page_token_key(self) -> Path:
        return self.state / "page-token.key"


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    for name in ("IACCODE_A2A_ALLOWED_CWDS", "IAC_CODE_A2A_TRUST_REQUEST_CWD"):
        monkeypatch.delenv(name, raising=False)
    config_home = tmp_path / "config-home"
    config_home.mkdir()
    (config_home / "credentials").write_text(f"secret = {HOME_SECRET}\n")
    monkeypatch.setenv("IAC_CODE_CONFIG_DIR", str(config_home))
    audit_log = tmp_path / "audit" / "permissions.jsonl"
    audit_log.parent.mkdir()
    audit_log.write_text(json.dumps({"decision": "allow_once", "note": AUDIT_SECRET}) + "\n")
    layout = Layout(workspace=tmp_path, config_file=tmp_path / "server.yml", state=tmp_path / "state",
                    artifacts=tmp_path / "artifacts", audit_log=audit_log, config_home=config_home)
    layout.config_file.write_text(
        f"agent-runtime: echo\ntoken: {TOKEN}\npersistence-dir: {layout.state}\n"
        f"artifact-dir: {layout.artifacts}\npermission-audit-log: {audit_log}\n")
    (tmp_path / "notes.txt").write_text(NOTES)
    (tmp_path / "sub").mkdir()
    return layout


@pytest.fixture(params=["default-roots", "roots-name-the-state", "trusted-cwd"])
def roots(request: pytest.FixtureRequest, layout: Layout, monkeypatch: pytest.MonkeyPatch) -> str:
    """Whatever the allowed roots say (even naming the state directories), the protection holds."""
    if request.param == "roots-name-the-state":
        monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", os.pathsep.join(
            str(p) for p in (layout.state, layout.artifacts, layout.config_home, layout.workspace)))
    elif request.param == "trusted-cwd":
        monkeypatch.setenv("IAC_CODE_A2A_TRUST_REQUEST_CWD", "1")
    return str(request.param)


@dataclass
class Client:
    kernel: Kernel
    url: str
    http: aiohttp.ClientSession
    runtime: EchoRuntime

    async def rpc(self, body: dict[str, Any]) -> dict[str, Any]:
        async with self.http.post(self.url, json=body,
                                  headers={**A2A_HEADERS, "Authorization": f"Bearer {TOKEN}"}) as r:
            assert r.status == 200
            return await r.json()

    async def send(self, parts: list[dict[str, Any]], cwd: Path | str, message_id: str,
                   **fields: Any) -> dict[str, Any]:
        body = send_message_body("", message_id=message_id, metadata={"iac_code": {"cwd": str(cwd)}}, **fields)
        body["params"]["message"]["parts"] = parts
        return await self.rpc(body)


@asynccontextmanager
async def serve(layout: Layout) -> AsyncIterator[Client]:
    """A server built as ``iac-code a2a --config <layout.config_file>`` builds it, on the echo runtime."""
    plugins = Plugins.load()
    echo = EchoPlugin()
    plugins.register(echo, "echo", distribution="tests")
    model = build_config_model([(p.plugin, p.record) for p in plugins.config_models()])
    config = load_config(layout.config_file, overrides={"host": "127.0.0.1", "port": 0}, model=model, environ={})
    kernel = Kernel(config, plugins)
    interfaces = await kernel.start()
    try:
        async with aiohttp.ClientSession() as http:
            yield Client(kernel, interfaces[0].url, http, echo.runtime)
    finally:
        await kernel.stop()


def accepted(reply: dict[str, Any]) -> str:
    """The prompt the echo runtime saw."""
    assert "error" not in reply, reply.get("error")
    task = reply["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]
    answer = task["status"]["message"]  # the turn's answer
    assert answer["role"] == "ROLE_AGENT"
    return split_echo(answer["parts"][0]["text"])[0]


def assert_refused(reply: dict[str, Any], client: Client, label: str, content: bytes) -> None:
    """Refused with the documented file-URL error; neither the content nor its hash is anywhere."""
    assert "result" not in reply, label
    assert reply["error"]["code"] == -32602, (label, reply["error"])
    assert reply["error"]["message"] == OUTSIDE, (label, reply["error"])
    assert_not_leaked(json.dumps(reply), content, label)
    for turn in client.runtime.turns:
        assert_not_leaked(turn.prompt + json.dumps(list(turn.manifest)), content, label)


def assert_not_leaked(text: str, content: bytes, label: str) -> None:
    assert hashlib.sha256(content).hexdigest() not in text, label
    decoded = content.decode("utf-8", errors="replace")
    for marker in (TOKEN, HOME_SECRET, AUDIT_SECRET, ARTIFACT_SECRET):
        assert marker not in text, label
    for line in decoded.splitlines():
        if len(line.strip()) > 12:
            assert line.strip() not in text, label


async def first_task(client: Client, layout: Layout) -> str:
    """Run one turn and wait until its task snapshot is on disk; return the task id."""
    reply = await client.send([{"text": "hello"}], layout.workspace, "first")
    accepted(reply)
    for _ in range(200):
        if list((layout.state / "tasks").glob("*.json")):
            break
        await asyncio.sleep(0.025)
    return str(reply["result"]["task"]["id"])


def one_snapshot(layout: Layout) -> Path:
    snapshots = sorted((layout.state / "tasks").glob("*.json"))
    assert snapshots, "no task snapshot was written"
    return snapshots[0]


def file_urls(layout: Layout, artifact: Path) -> dict[str, tuple[str, Path]]:
    """label → (file:// URL, the protected file it reaches): direct, through symlinks, ``..`` and hard links."""
    ws = layout.workspace
    snapshot = one_snapshot(layout)
    context_snapshot = sorted((layout.state / "contexts").glob("*.json"))
    targets = {
        "config-file": layout.config_file,
        "task-snapshot": snapshot,
        "page-token-key": layout.page_token_key,
        "audit-log": layout.audit_log,
        "other-task-artifact": artifact,
        "config-dir-file": layout.config_home / "credentials",
    }
    if context_snapshot:
        targets["context-snapshot"] = context_snapshot[0]
    urls: dict[str, tuple[str, Path]] = {label: (path.as_uri(), path) for label, path in targets.items()}
    for label, path in targets.items():
        link = ws / f"link-to-{label}"
        link.symlink_to(path)
        urls[f"symlink-to-{label}"] = (link.as_uri(), path)
        relative = path.relative_to(ws).as_posix()
        urls[f"dotdot-{label}"] = (f"{ws.as_uri()}/sub/../{relative}", path)
        urls[f"encoded-dotdot-{label}"] = (f"{ws.as_uri()}/sub/%2E%2E/{relative}", path)
    for label in targets:  # every server file is recognised by its identity (device, inode) too
        (ws / f"hardlink-to-{label}").hardlink_to(targets[label])
        urls[f"hardlink-to-{label}"] = ((ws / f"hardlink-to-{label}").as_uri(), targets[label])
    (ws / "link-to-state").symlink_to(layout.state, target_is_directory=True)
    urls["through-symlinked-state-dir"] = ((ws / "link-to-state" / "page-token.key").as_uri(), layout.page_token_key)
    return urls


# --------------------------------------------------------------------------- file:// parts


@pytest.mark.parametrize("media_type", MEDIA_TYPES)
async def test_server_files_are_refused_as_file_url_parts(layout: Layout, roots: str, media_type: str) -> None:
    async with serve(layout) as client:
        owner = await first_task(client, layout)
        stored = await client.kernel.artifacts.save(owner, "template.yaml", "text/yaml", f"body: {ARTIFACT_SECRET}\n")
        artifact = layout.artifacts / owner / stored.artifact_id / stored.name
        assert artifact.is_file()
        failures: list[str] = []
        for index, (label, (url, target)) in enumerate(file_urls(layout, artifact).items()):
            reply = await client.send([{"text": "Summarise:"}, {"url": url, "mediaType": media_type}],
                                      layout.workspace, f"probe-{index}")
            try:
                assert_refused(reply, client, label, target.read_bytes())
            except AssertionError:
                failures.append(label)
        assert failures == [], failures
        # An ordinary file next to them is still read.
        notes = (layout.workspace / "notes.txt").as_uri()
        reply = await client.send([{"url": notes, "mediaType": media_type}], layout.workspace, "notes")
        if media_type == "text/plain":
            assert accepted(reply) == NOTES
        else:
            assert hashlib.sha256(NOTES.encode()).hexdigest() in accepted(reply)


async def test_a_task_reads_only_its_own_artifacts(layout: Layout) -> None:
    async with serve(layout) as client:
        owner = await first_task(client, layout)
        other = await client.send([{"text": "another task"}], layout.workspace, "other")
        other_id, other_context = other["result"]["task"]["id"], other["result"]["task"]["contextId"]
        stored = await client.kernel.artifacts.save(owner, "template.yaml", "text/yaml", f"body: {ARTIFACT_SECRET}\n")
        artifact = layout.artifacts / owner / stored.artifact_id / stored.name
        part = {"url": artifact.as_uri(), "mediaType": "text/yaml"}
        content = artifact.read_bytes()
        # Another task's follow-up and a new task are refused.
        assert_refused(await client.send([part], layout.workspace, "o-2", taskId=other_id, contextId=other_context),
                       client, "other task's follow-up", content)
        assert_refused(await client.send([part], layout.workspace, "new"), client, "new task", content)
        # The artifact's own task may read it back in a later turn.
        own = await client.send([part], layout.workspace, "own-2", taskId=owner)
        assert accepted(own) == content.decode()


# --------------------------------------------------------------------------- workspaces


async def test_server_state_is_never_a_workspace(layout: Layout, roots: str) -> None:
    async with serve(layout) as client:
        owner = await first_task(client, layout)
        await client.kernel.artifacts.save(owner, "template.yaml", "text/yaml", f"body: {ARTIFACT_SECRET}\n")
        ws = layout.workspace
        (ws / "state-link").symlink_to(layout.state, target_is_directory=True)
        bad = {
            "persistence-dir": layout.state,
            "tasks-dir": layout.state / "tasks",
            "contexts-dir": layout.state / "contexts",
            "symlink-to-persistence-dir": ws / "state-link",
            "dotdot-persistence-dir": f"{ws}/sub/../state",
            "trailing-dotdot": f"{layout.state}/tasks/..",
            "artifact-dir": layout.artifacts,
            "task-artifact-dir": layout.artifacts / owner,
            "config-dir": layout.config_home,
        }
        failures: list[str] = []
        for index, (label, cwd) in enumerate(bad.items()):
            status = (await client.send([{"text": "hi"}], cwd, f"cwd-{index}"))["result"]["task"]["status"]
            if (status["state"] != "TASK_STATE_FAILED" or status["message"]["parts"][0]["text"] != INVALID_WORKSPACE
                    or str(cwd) in json.dumps(status)):
                failures.append(label)
        assert failures == [], failures
        assert len(client.runtime.turns) == 1  # only the first turn ran
        # The directory holding them is still a fine workspace.
        assert accepted(await client.send([{"url": (ws / "notes.txt").as_uri(), "mediaType": "text/plain"}],
                                          ws, "fine")) == NOTES


# --------------------------------------------------------------------------- the real command


async def test_iac_code_a2a_protects_its_config_file(layout: Layout) -> None:
    """``iac-code a2a --config FILE`` (offline runtime) refuses FILE and its state as input."""
    layout.config_file.write_text(
        f"token: {TOKEN}\npersistence-dir: {layout.state}\npermission-audit-log: {layout.audit_log}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IACCODE_A2A_")}
    env["IAC_CODE_CONFIG_DIR"] = str(layout.config_home)
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--port", "0", "--config", layout.config_file.name, env=env, cwd=layout.workspace,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        url = ""
        while not url:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "server exited early"
            if "listening: " in line:
                url = line.split("listening: ", 1)[1].split()[0]
        headers = {**A2A_HEADERS, "Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession() as http:
            for index, target in enumerate([layout.config_file, layout.audit_log, layout.page_token_key]):
                body = send_message_body("", message_id=f"m-{index}",
                                         metadata={"iac_code": {"cwd": str(layout.workspace)}})
                body["params"]["message"]["parts"] = [{"text": "Review this file"},
                                                      {"url": target.as_uri(), "mediaType": "text/yaml"}]
                async with http.post(url, json=body, headers=headers) as r:
                    reply = await r.json()
                assert reply.get("error", {}).get("message") == OUTSIDE, (target.name, reply)
                assert_not_leaked(json.dumps(reply), target.read_bytes(), target.name)
            body = send_message_body("hi", message_id="m-cwd", metadata={"iac_code": {"cwd": str(layout.state)}})
            async with http.post(url, json=body, headers=headers) as r:
                status = (await r.json())["result"]["task"]["status"]
            assert status["state"] == "TASK_STATE_FAILED"
            assert status["message"]["parts"][0]["text"] == INVALID_WORKSPACE
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


async def test_builtin_tools_do_not_read_the_server_files(layout: Layout) -> None:
    """The offline runtime's read_file refuses the config file even inside the workspace; other files work."""
    layout.config_file.write_text(f"token: {TOKEN}\npersistence-dir: {layout.state}\n")
    (layout.workspace / "other.yml").write_text(f"token: {TOKEN}\nfoo: bar\n")
    (layout.workspace / "hardlinked.yml").hardlink_to(layout.config_file)  # the same file by another path
    plugins = Plugins.load()
    model = build_config_model([(p.plugin, p.record) for p in plugins.config_models()])
    config = load_config(layout.config_file, overrides={"host": "127.0.0.1", "port": 0}, model=model, environ={})
    kernel = Kernel(config, plugins)
    url = (await kernel.start())[0].url
    replies = {}
    try:
        async with aiohttp.ClientSession() as http:
            for name in (layout.config_file.name, "hardlinked.yml", "other.yml"):
                body = send_message_body(f"review {name}", message_id=f"m-{name}",
                                         metadata={"iac_code": {"cwd": str(layout.workspace)}})
                async with http.post(url, json=body, headers={**A2A_HEADERS, "Authorization": f"Bearer {TOKEN}"}) as r:
                    task = (await r.json())["result"]["task"]
                replies[name] = task["status"]["message"]["parts"][0]["text"]  # the turn's answer
    finally:
        await kernel.stop()
    assert replies[layout.config_file.name].startswith("There is no template to review")
    assert replies["hardlinked.yml"].startswith("There is no template to review")
    assert replies["other.yml"].startswith("Review of the input")
