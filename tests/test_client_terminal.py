"""``iac-code a2a-client call`` at a terminal (a pseudo-terminal): permission questions and Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pexpect
import pytest

from iac_code.testing import start_server
from tests.client_support import CLI_SECONDS, run_client, spawn_terminal
from tests.runtimes import GatedRuntimePlugin

VPC = "Create a VPC with two vSwitches."




async def _expect(child: Any, pattern: str) -> None:
    await child.expect(pattern, timeout=CLI_SECONDS, async_=True)


async def _exit_code(child: Any) -> int:
    await child.expect(pexpect.EOF, timeout=CLI_SECONDS, async_=True)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0))


@pytest.mark.parametrize("reply", ["a", "d"])
async def test_a_permission_question_answered_at_the_terminal(ws: Path, reply: str) -> None:
    async with start_server() as server:
        child = spawn_terminal(["call", "--url", server.url, "-p", VPC, "--stream"], cwd=ws)
        await _expect(child, "Permission needed")
        await _expect(child, "Change a workspace file")
        await _expect(child, r"\[a\] Allow once / \[d\] Deny: ")
        child.sendline(reply)
        if reply == "a":
            await _expect(child, "answer recorded: allow_once")
            await _expect(child, r"artifact\S* template\.ros\.yaml · 1\.\d KB")
        else:
            await _expect(child, "answer recorded: deny")
        await _expect(child, "input-required")
        assert await _exit_code(child) == 0
        assert (ws / "template.ros.yaml").exists() is (reply == "a")


@pytest.fixture(params=["default", "ignored-by-the-test-run"])
def sigint_of_the_test_run(request: pytest.FixtureRequest) -> Any:
    """The test run's own SIGINT disposition: as usual, or ignored (``cmd &``, ``nohup``), which must not
    reach the client the test starts."""
    if request.param == "default":
        yield request.param
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield request.param
    finally:
        signal.signal(signal.SIGINT, previous)


async def test_ctrl_c_at_the_question_cancels_the_remote_task(ws: Path, sigint_of_the_test_run: str) -> None:
    async with start_server() as server:
        child = spawn_terminal(["call", "--url", server.url, "-p", VPC, "--stream"], cwd=ws)
        await _expect(child, r"\[a\] Allow once / \[d\] Deny: ")
        child.sendintr()
        await _expect(child, "Canceled remote task")
        assert await _exit_code(child) == 130
        listed = (await run_client("task-list", "--url", server.url, "-o", "json", cwd=ws)).json()
        assert [t["status"]["state"] for t in listed["tasks"]] == ["TASK_STATE_CANCELED"]


async def test_ctrl_c_while_streaming_asks_once(ws: Path) -> None:
    gate = GatedRuntimePlugin()
    async with start_server({"agent-runtime": "gated"}, extra_plugins={"gated": gate}) as server:
        child = spawn_terminal(["call", "--url", server.url, "-p", "go", "--stream"], cwd=ws)
        await _expect(child, "working on it")
        child.sendintr()
        await _expect(child, r"Cancel remote task .*\? \[Y/n\]: ")
        child.sendline("n")  # keep going: the client follows the task again
        await _expect(child, "Following task .* again")  # its subscription is open
        listed = await run_client("task-list", "--url", server.url, "--status", "working", "-o", "json", cwd=ws)
        assert len(listed.json()["tasks"]) == 1
        gate.runtime.release.set()
        await _expect(child, "done")
        await _expect(child, "input-required")
        assert await _exit_code(child) == 0
        assert not gate.runtime.cancelled.is_set()

        gate.runtime.release.clear()
        child = spawn_terminal(["call", "--url", server.url, "-p", "again", "--stream"], cwd=ws)
        await _expect(child, "working on it")
        child.sendintr()
        await _expect(child, r"\[Y/n\]: ")
        child.sendline("")
        await _expect(child, "Canceled remote task")
        assert await _exit_code(child) == 130
        await asyncio.wait_for(gate.runtime.cancelled.wait(), CLI_SECONDS)


async def test_no_terminal_means_no_question(ws: Path) -> None:
    async with start_server() as server:
        piped = await run_client("call", "--url", server.url, "-p", VPC, "--stream", cwd=ws)
        assert piped.code == 11 and "Answer it with: iac-code a2a-client call" in piped.out
        assert "\x1b[" not in piped.out  # no colour, no spinner frames
