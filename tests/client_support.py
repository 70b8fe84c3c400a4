"""Run ``iac-code a2a-client`` as a real process (pipes or a pseudo-terminal) against real servers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLI_SECONDS = 60  # every client run must end by itself within this bound


@dataclass
class Result:
    """One finished client run."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def client_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without any IACCODE_A2A_* credentials of the caller, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IACCODE_A2A_")}
    env["OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"] = "false"
    env.update(extra or {})
    return env


_IN_PROCESS = threading.Lock()  # one in-process run at a time: it swaps sys.stdout and the working directory


async def run_client(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                     stdin: bytes | None = None) -> Result:
    """``iac-code a2a-client <args>`` through the CLI entry point, in this process (pipes, not a terminal).

    It runs on a worker thread with its own event loop, as the command does in its own
    process, while the test's loop keeps serving the server. :func:`run_process` runs it
    as a separate process instead.
    """
    return await asyncio.wait_for(asyncio.to_thread(_invoke, args, cwd, env, stdin), CLI_SECONDS)


def _invoke(args: Sequence[str], cwd: Path | None, env: Mapping[str, str] | None, stdin: bytes | None) -> Result:
    from click.testing import CliRunner

    from iac_code.server.cli import main

    variables: dict[str, str | None] = {k: None for k in os.environ if k.startswith("IACCODE_A2A_")}
    variables.update(env or {})
    with _IN_PROCESS:
        previous = os.getcwd()
        if cwd is not None:
            os.chdir(cwd)
            variables["PWD"] = str(cwd)
        try:
            result = CliRunner().invoke(main, ["a2a-client", *args], input=stdin, env=variables)
        finally:
            os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a bug in the client, not an exit code: show its traceback
    return Result(result.exit_code, result.stdout, result.stderr)


async def run_process(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                      stdin: bytes | None = None) -> Result:
    """``iac-code a2a-client <args>`` as its own process (pipes): its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "iac_code.server.cli", "a2a-client", *args, cwd=str(cwd) if cwd else None,
        env=client_env(env), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin or b""), CLI_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return Result(process.returncode if process.returncode is not None else -1, out.decode(), err.decode())


class RunningClient:
    """A client run whose stdout is read line by line while it runs (a subscription, say)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def line(self) -> dict[str, Any]:
        """The next JSON line it prints (bounded wait)."""
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), CLI_SECONDS)
        assert raw, "the client ended before printing a line"
        return json.loads(raw)

    async def finish(self) -> Result:
        out, err = await asyncio.wait_for(self.process.communicate(), CLI_SECONDS)
        return Result(self.process.returncode if self.process.returncode is not None else -1, out.decode(),
                      err.decode())


async def start_client(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> RunningClient:
    """``iac-code a2a-client <args>`` started, not awaited: read its lines as they come."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "iac_code.server.cli", "a2a-client", *args, cwd=str(cwd) if cwd else None,
        env=client_env(env), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    return RunningClient(process)


def default_signals() -> None:
    """Run in a child the tests start (``preexec_fn``): SIGINT and SIGQUIT as a terminal delivers them,
    even when the test run itself started with them ignored (``cmd &`` in a script, ``nohup``, some
    CI runners), which children would otherwise inherit."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def spawn_terminal(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> Any:
    """``iac-code a2a-client <args>`` on a pseudo-terminal (pexpect), as a person would run it."""
    import pexpect

    return pexpect.spawn(sys.executable, ["-m", "iac_code.server.cli", "a2a-client", *args], cwd=str(cwd),
                         env=client_env({"TERM": "xterm-256color", "COLUMNS": "160", **(env or {})}),
                         encoding="utf-8", dimensions=(50, 160), timeout=CLI_SECONDS, preexec_fn=default_signals)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def reference_server(executor: Any) -> AsyncIterator[str]:
    """a2a-sdk's own Starlette app (JSON-RPC at ``/``, HTTP+JSON, the card) on uvicorn; yields its base URL."""
    import uvicorn
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue here until uvicorn accepts them: no start-up polling
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="reference-agent", description="a2a-sdk's reference server", version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
                              AgentInterface(url=url.rstrip("/"), protocol_binding="HTTP+JSON",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="shout", name="shout", description="Answers in upper case.", tags=["shout"])])
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/"),
                            *create_rest_routes(handler)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield url
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
        sock.close()
