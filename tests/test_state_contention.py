"""One owner per state directory, under load: 20 refused starts change nothing of a serving server.

While a first ``iac-code a2a`` serves a steady load (new tasks, reads of acknowledged ones), 20
second servers are started on the same state directory, each with another fault: a taken
port, a missing setting, a plugin that cannot load, a misspelt transport, and valid
configurations. Every one exits 2 with one ``Error:`` line naming the directory and the holding
PID (or the configuration problem, which is found before the lock is even tried). The first
server keeps its lock file, keeps every file it holds open (none deleted or replaced under it),
and answers throughout: every task it acknowledged is still readable, none is FAILED.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from iac_code.testing import A2A_HEADERS, send_message_body
from tests.test_cli import _env, _install, run
from tests.test_startup_checks import _errors, _free_port, _paused_task, _server

ATTEMPTS = 20
# Each of the two load clients waits PACE seconds after each answer: a steady load that keeps the server
# busy during every refused start without taking the CPU the starts themselves need.
PACE = 0.05


def _open_state_files(pid: int, state: Path) -> dict[str, tuple[int, int]]:
    """The files under ``state`` that process ``pid`` holds open: path → (device, inode); deleted ones included."""
    held: dict[str, tuple[int, int]] = {}
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
            info = os.stat(fd)  # the open file itself, even when its path was removed
        except OSError:
            continue
        if target.startswith(str(state)):
            held[target] = (info.st_dev, info.st_ino)
    return held


def _deleted_under_it(held: dict[str, tuple[int, int]]) -> list[str]:
    """Open files whose path was removed (a second server deleting the journal or the index under the first),
    leaving out the server's own temporary files, which it renames into place or removes itself."""
    return [path for path in held if path.endswith(" (deleted)") and not path.removesuffix(" (deleted)").endswith(".tmp")]


def _faults(port: int, site: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    """(label, arguments, extra environment) of one refused start each, cycled to :data:`ATTEMPTS`."""
    plugin_env = {"PYTHONPATH": str(site)}
    kinds: list[tuple[str, list[str], dict[str, str]]] = [
        ("taken port", ["--port", str(port)], {}),
        ("missing setting", ["--port", "0", "--transport", "redis-streams"], {}),
        ("plugin that cannot load", ["--port", "0", "--transport", "broken-ws"], plugin_env),
        ("misspelt transport", ["--port", "0", "--transport", "websockte"], {}),
        ("valid configuration", ["--port", "0"], {}),
        ("valid configuration, two transports", ["--port", "0", "--transport", "http", "--transport", "grpc"], {}),
    ]
    return [kinds[n % len(kinds)] for n in range(ATTEMPTS)]


async def test_twenty_refused_starts_under_load_change_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "broken-plugin", "0.0.1", {"broken-ws": "broken_ws"}, {"broken_ws": "import no_such_dependency_xyz\n"})
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = _env()
    state = Path(env["IAC_CODE_CONFIG_DIR"]) / "a2a"
    port = _free_port()
    acknowledged: list[str] = []
    async with _server(env, "--port", str(port)) as (url, pid), aiohttp.ClientSession() as http:
        paused = await _paused_task(url, workspace)
        lock = (state / "server.lock").read_bytes()
        stop = asyncio.Event()

        async def load() -> None:
            while not stop.is_set():
                body = send_message_body("hello", message_id=uuid.uuid4().hex,
                                         metadata={"iac_code": {"cwd": str(workspace)}})
                async with http.post(url, json=body, headers=A2A_HEADERS) as r:
                    reply = await r.json()
                assert "result" in reply, reply
                acknowledged.append(reply["result"]["task"]["id"])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), PACE)

        loaders = [asyncio.create_task(load()) for _ in range(2)]
        try:
            held_before = _open_state_files(pid, state)
            for label, args, extra in _faults(port, site):
                code, out, err = await run("a2a", *args, env={**env, **extra})
                assert code == 2, (label, out, err)
                (line,) = _errors(err)
                if label in ("taken port", "valid configuration", "valid configuration, two transports"):
                    assert str(state) in line and f"PID {pid}" in line, (label, line)
                assert (state / "server.lock").read_bytes() == lock, label
                assert not _deleted_under_it(_open_state_files(pid, state)), label
            held_after = _open_state_files(pid, state)
        finally:
            stop.set()
            await asyncio.gather(*loaders)
        # Files the server kept open all along are the same files (not replaced or deleted under it).
        for path, identity in held_before.items():
            if path in held_after:
                assert held_after[path] == identity, path
        assert not _deleted_under_it(held_after)
        assert len(acknowledged) >= ATTEMPTS  # the server answered throughout
        states = [await _state(http, url, task_id) for task_id in [paused, *acknowledged]]
        assert states[0] == "TASK_STATE_INPUT_REQUIRED"  # still waiting for its permission answer
        assert "TASK_STATE_FAILED" not in states and all(s == "TASK_STATE_INPUT_REQUIRED" for s in states), states


async def _state(http: aiohttp.ClientSession, url: str, task_id: str) -> str:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    async with http.post(url, json=body, headers=A2A_HEADERS) as r:
        reply = await r.json()
    assert "result" in reply, reply
    return str(reply["result"]["status"]["state"])
