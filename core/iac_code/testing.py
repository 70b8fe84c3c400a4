"""Helpers for testing iac-code and its plugins against a real server.

``start_server`` runs a kernel in-process on an ephemeral 127.0.0.1 port with
the installed plugins plus any extra plugin objects, and stops it afterwards::

    async with start_server({"token": "t"}, extra_plugins={"mine": my_plugin}) as server:
        async with aiohttp.ClientSession() as s:
            await s.get(server.url + "health")

``connect_client`` opens a2a-sdk's own ``Client`` on such a server, ``ScriptedRuntime``
is an agent runtime that plays back runtime events, ``run_cli`` runs the ``iac-code``
command line as a process (``run_cli_each`` several short command lines in one process),
and ``server_process`` runs ``iac-code a2a`` as its own process (restarts, ``kill -9``).
The pytest plugin :mod:`iac_code.pytest_plugin` wraps some of them in fixtures. Nothing
here mocks the network: the server is the same one ``iac-code a2a`` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from iac_code.base.config import build_config_model, load_config, normalise_keys
from iac_code.base.hookspecs import hookimpl
from iac_code.server.kernel import Kernel
from iac_code.server.plugins import Plugins
from iac_code.base.records import AgentRuntimeSpec
from iac_code.agents.runtime import RuntimeEvent, TextDelta, TurnFailed, TurnRequest

A2A_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@dataclass
class RunningServer:
    """A started kernel: ``url`` is the JSON-RPC endpoint (``http://127.0.0.1:<port>/``)."""

    kernel: Kernel
    url: str

    @property
    def plugins(self) -> Plugins:
        return self.kernel.plugins


def make_kernel(settings: Mapping[str, Any] | None = None, *,
                extra_plugins: Mapping[str, object] | None = None,
                environ: Mapping[str, str] | None = None) -> Kernel:
    """Build (but do not start) a kernel from settings written as in YAML.

    Without a ``persistence-dir`` setting the kernel gets a fresh temporary one.
    """
    plugins = Plugins.load(blocked=list((settings or {}).get("disabled-plugins", [])))
    for name, plugin in (extra_plugins or {}).items():
        plugins.register(plugin, name, distribution="tests")
    model = build_config_model([(p.plugin, p.record) for p in plugins.config_models()])
    raw: dict[str, Any] = {"host": "127.0.0.1", "port": 0}
    if not any(k.replace("-", "_") == "persistence_dir" for k in (settings or {})):
        raw["persistence_dir"] = tempfile.mkdtemp(prefix="iac-code-test-")
    raw.update(normalise_keys(dict(settings or {})))
    config = load_config(raw=raw, model=model, environ=environ if environ is not None else {})
    return Kernel(config, plugins)


@contextlib.asynccontextmanager
async def start_server(settings: Mapping[str, Any] | None = None, *,
                       extra_plugins: Mapping[str, object] | None = None,
                       environ: Mapping[str, str] | None = None) -> AsyncIterator[RunningServer]:
    """Start a kernel on an ephemeral port; stop it on exit."""
    kernel = make_kernel(settings, extra_plugins=extra_plugins, environ=environ)
    owns_state = not any(k.replace("-", "_") == "persistence_dir" for k in (settings or {}))
    interfaces = await kernel.start()
    try:
        yield RunningServer(kernel=kernel, url=interfaces[0].url)
    finally:
        await kernel.stop()
        if owns_state:
            shutil.rmtree(kernel.state_dir, ignore_errors=True)


@contextlib.contextmanager
def registered(plugins: Plugins, name: str, plugin: object) -> Iterator[None]:
    """Register ``plugin`` for the duration of a ``with`` block."""
    plugins.register(plugin, name, distribution="tests")
    try:
        yield
    finally:
        plugins.unregister(name)


def local_task_store() -> Any:
    """The kernel's own task store (``task-store: local``) in memory: the reference a state-backend
    plugin's store is compared with (same ListTasks order, page sizes and errors)."""
    from iac_code.tasks.task_store import KernelTaskStore

    return KernelTaskStore()


def send_message_body(text: str, *, message_id: str = "msg-1", request_id: str | int = "1",
                      method: str = "SendMessage", **message_fields: Any) -> dict[str, Any]:
    """A JSON-RPC SendMessage body with one text part."""
    message: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(message_fields)
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"message": message}}


async def next_sse_data(content: Any, timeout: float = 30.0) -> dict[str, Any]:
    """The next SSE event's ``data:`` JSON from an aiohttp ``StreamReader`` (``id:`` and comment lines skipped)."""
    while True:
        line = (await asyncio.wait_for(content.readline(), timeout)).decode()
        if not line:
            raise EOFError("the event stream ended")
        if line.startswith("data:"):
            return json.loads(line[5:].strip())  # type: ignore[no-any-return]


def parse_sse(body: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Split an SSE body into its ``data:`` JSON payloads and its other lines."""
    events: list[dict[str, Any]] = []
    other: list[str] = []
    for frame in body.replace("\r\n", "\n").split("\n\n"):
        for line in frame.split("\n"):
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
            elif line and not line.startswith("id: "):  # event ids: see iac_code.tasks.task_events
                other.append(line)
    return events, other


def permission_envelope(task_or_update: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pending permission envelope (``metadata.iac_code.input``) of a task or status update, if any."""
    envelope = task_or_update.get("metadata", {}).get("iac_code", {}).get("input")
    return envelope if isinstance(envelope, dict) else None


def permission_answer_body(envelope: Mapping[str, Any], decision: str = "allow_once", *,
                           message_id: str = "answer-1", method: str = "SendMessage") -> dict[str, Any]:
    """The JSON-RPC message answering a permission envelope (``allow_once`` or ``deny``)."""
    body = send_message_body("", message_id=message_id, method=method,
                             taskId=envelope["requestTaskId"], contextId=envelope["contextId"])
    body["params"]["message"]["parts"] = [{"mediaType": "application/json", "data": {
        "schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
        "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": decision}}]
    return body


def permission_answer_request(envelope: Mapping[str, Any], decision: str = "allow_once", *,
                              message_id: str = "answer-1") -> Any:
    """:func:`permission_answer_body` as a2a-sdk's ``SendMessageRequest`` (for a2a-sdk clients)."""
    from a2a.types.a2a_pb2 import SendMessageRequest
    from google.protobuf.json_format import ParseDict

    params = permission_answer_body(envelope, decision, message_id=message_id)["params"]
    return ParseDict(params, SendMessageRequest())


async def send_and_answer(post: Any, body: dict[str, Any], decision: str = "allow_once",
                          max_questions: int = 5) -> dict[str, Any]:
    """SendMessage ``body`` and answer each permission the turn asks; return the task at the turn's end.

    ``post(body) -> reply`` sends one JSON-RPC request (any HTTP client).
    """
    task = (await post(body))["result"]["task"]
    for n in range(max_questions):
        envelope = permission_envelope(task)
        if envelope is None:
            return task
        reply = await post(permission_answer_body(
            envelope, decision, message_id=f"{body['params']['message']['messageId']}-answer-{n}"))
        task = reply["result"]["task"]
    raise AssertionError(f"the turn asked more than {max_questions} permissions")


# --------------------------------------------------------------------------- a2a-sdk clients

CLIENT_BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
"""The A2A bindings :func:`connect_client` speaks (``GRPC`` needs ``transport: [http, grpc]`` and a2a-sdk[grpc])."""


@contextlib.asynccontextmanager
async def connect_client(server: RunningServer | str, *, binding: str = "JSONRPC", streaming: bool = True,
                         headers: Mapping[str, str] | None = None, interceptors: Sequence[Any] = (),
                         timeout: float = 30.0) -> AsyncIterator[Any]:
    """a2a-sdk's own ``Client`` for ``server`` (a :class:`RunningServer` or its URL), closed on exit.

    Built the way any A2A client builds it: ``ClientFactory.create_from_url`` fetches the served
    Agent Card and picks the card's interface for ``binding``. ``headers`` (credentials, say) go
    on every HTTP request, the card's included; a gRPC client gets them through ``interceptors``.
    """
    import httpx
    from a2a.client import ClientConfig, ClientFactory

    if binding not in CLIENT_BINDINGS:
        raise ValueError(f"binding must be one of {', '.join(CLIENT_BINDINGS)}, not {binding!r}")
    url = server if isinstance(server, str) else server.url
    async with httpx.AsyncClient(timeout=timeout, headers=dict(headers or {})) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding])
        if binding == "GRPC":
            import grpc

            config.grpc_channel_factory = grpc.aio.insecure_channel
        client = await ClientFactory(config).create_from_url(url, interceptors=list(interceptors) or None)
        try:
            yield client
        finally:
            await client.close()


# --------------------------------------------------------------------------- a scripted agent runtime


class ScriptedRuntime:
    """An agent runtime that plays back scripted runtime events: one script per turn, in order.

    It is its own plugin (it implements ``iac_code_agent_runtimes``): register it with a server
    and select it with ``agent-runtime: <name>`` (:attr:`settings`). Each turn's
    ``TurnRequest`` is kept in :attr:`turns`, so a test sees exactly what the kernel handed the
    runtime (the prompt its part decoders built, the history, the metadata). A turn with no
    script left ends in ``TurnFailed`` saying so, which the caller sees as a failed task.
    """

    def __init__(self, *scripts: Sequence[RuntimeEvent | str], name: str = "scripted") -> None:
        self.name = name
        self.turns: list[TurnRequest] = []
        self._scripts: deque[tuple[RuntimeEvent, ...]] = deque()
        for events in scripts:
            self.script(*events)

    def script(self, *events: RuntimeEvent | str) -> ScriptedRuntime:
        """Queue the events of one more turn (a ``str`` is short for ``TextDelta(str)``); returns ``self``."""
        self._scripts.append(tuple(TextDelta(e) if isinstance(e, str) else e for e in events))
        return self

    @property
    def settings(self) -> dict[str, Any]:
        """The settings that select this runtime: ``{"agent-runtime": name}``."""
        return {"agent-runtime": self.name}

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        self.turns.append(turn)
        if not self._scripts:
            yield TurnFailed(f"The scripted runtime has no script left for turn {len(self.turns)}.")
            return
        for event in self._scripts.popleft():
            yield event

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name=self.name, create_runtime=lambda context: self,
                                 description="Plays back the runtime events a test scripted.")]


class GatedRuntime:
    """An agent runtime whose turn streams one delta, then waits until :attr:`release` is set (or the turn is
    cancelled): a turn that stays running as long as a test needs (``started``, ``cancelled`` say how far it got)."""

    name = "gated"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        yield TextDelta("working on it")
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield TextDelta(" done")


class GatedRuntimePlugin:
    """Registers one :class:`GatedRuntime` (its :attr:`runtime`) as ``agent-runtime: gated``."""

    def __init__(self) -> None:
        self.runtime = GatedRuntime()

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="gated", create_runtime=lambda context: self.runtime)]


# --------------------------------------------------------------------------- the command line


@dataclass(frozen=True)
class CliResult:
    """One finished ``iac-code`` process: exit ``code``, standard output and standard error."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """Standard output parsed as JSON (for ``--output json``)."""
        return json.loads(self.out)


CLI_ENVIRONMENT_PREFIXES = ("IACCODE_A2A_", "IAC_CODE_A2A_")
_CLI_MAIN = "from iac_code.server.cli import main; main(prog_name='iac-code')"


async def run_cli(*args: str, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                  stdin: bytes = b"", timeout: float = 60.0) -> CliResult:
    """Run ``iac-code <args>`` as its own process, as a user would, and wait for it to exit.

    It runs this interpreter's ``iac-code`` (so it sees the same installed plugins), with this
    process's environment minus any ``IACCODE_A2A_*``/``IAC_CODE_A2A_*`` settings, plus ``env``.
    The caller's event loop keeps running meanwhile, so servers the test started answer it.
    A process still running after ``timeout`` seconds is killed and fails the call.
    """
    return await _run_python(_CLI_MAIN, args, f"iac-code {' '.join(args)}", cwd=cwd, env=env, stdin=stdin,
                             timeout=timeout)


async def _run_python(script: str, args: Sequence[str], what: str, *, cwd: str | os.PathLike[str] | None,
                      env: Mapping[str, str] | None, stdin: bytes, timeout: float) -> CliResult:
    """``python -c <script> <args>`` with :func:`run_cli`'s environment and time limit."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(CLI_ENVIRONMENT_PREFIXES)}
    environment.update(env or {})
    if cwd is not None:
        environment["PWD"] = str(Path(cwd).resolve())
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, *args,
        cwd=cwd, env=environment, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
    except TimeoutError:
        raise AssertionError(f"{what} did not exit within {timeout:g} s") from None
    finally:
        if process.returncode is None:  # timed out, or the test was cancelled: leave no process behind
            process.kill()
            await process.wait()
    return CliResult(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


_EACH_SCRIPT = r"""
import contextlib, io, json, sys
from iac_code.server.cli import main
results = []
for args in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args, prog_name="iac-code")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):  # as the interpreter does on exit
                print(exc.code, file=sys.stderr)
    results.append([code, out.getvalue(), err.getvalue()])
sys.__stdout__.write("\n" + json.dumps(results) + "\n")  # the last line: whatever else went to stdout precedes it
"""


async def run_cli_each(*invocations: Sequence[str], cwd: str | os.PathLike[str] | None = None,
                       env: Mapping[str, str] | None = None, timeout: float = 60.0) -> list[CliResult]:
    """Run several short ``iac-code`` command lines (``--check-config``, say) one after another in ONE process.

    Each gets its own exit code and output, as from :func:`run_cli` (same environment and working
    directory rules); what they share is the interpreter and the imported plugins, which is most of
    a short command's time. Only for commands that return: one that serves would never end (use
    :func:`run_cli` or :func:`server_process`), and the whole batch is killed after ``timeout``.
    """
    batch = await _run_python(_EACH_SCRIPT, (), f"{len(invocations)} iac-code command lines", cwd=cwd, env=env,
                              stdin=json.dumps([list(args) for args in invocations]).encode(), timeout=timeout)
    if batch.code != 0:
        raise AssertionError(f"the batch of iac-code command lines failed ({batch.code}): {batch.err}")
    return [CliResult(code, out, err) for code, out, err in json.loads(batch.out.splitlines()[-1])]


# --------------------------------------------------------------------------- a server process

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
"""The ``iac-code`` command of this interpreter's environment (it sees the same installed plugins)."""

LISTENING_LINE = re.compile(r"listening: (http://\S+) \(JSONRPC\)")
"""The start-up log line naming the JSON-RPC endpoint; group 1 is its URL."""


class ServerProcess(NamedTuple):
    """A started ``iac-code a2a`` process and its JSON-RPC URL (unpacks as ``(process, url)``)."""

    process: asyncio.subprocess.Process
    url: str


@contextlib.asynccontextmanager
async def server_process(*args: str, config: str | os.PathLike[str] | None = None,
                         cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                         drop_env: Sequence[str] = CLI_ENVIRONMENT_PREFIXES, start_timeout: float = 30.0,
                         stop_timeout: float = 30.0, drain_stderr: bool = True,
                         on_startup_line: Callable[[str], None] | None = None) -> AsyncIterator[ServerProcess]:
    """Run ``iac-code a2a [--config <config>] --port 0 <args>`` as its own process; yield it and its URL.

    For what an in-process :func:`start_server` cannot show: a restart on the same state, a
    ``kill -9``, the real command line. The environment is this process's minus the variables
    starting with a ``drop_env`` prefix, plus ``env``. The server is ready when its start-up log
    line (:data:`LISTENING_LINE`, on standard error) names its URL, within ``start_timeout``
    seconds; each line before it is given to ``on_startup_line`` (which may assert). After that,
    with ``drain_stderr`` the rest of standard error is read and dropped, so a full pipe never
    blocks the server; without it the test reads ``process.stderr`` itself (and must keep up).
    On exit a server still running (the test may have killed it) gets SIGTERM; one not gone
    within ``stop_timeout`` seconds is killed and fails the test. A server that did not start
    is killed at once.
    """
    environment = {k: v for k, v in os.environ.items() if not (drop_env and k.startswith(tuple(drop_env)))}
    environment.update(env or {})
    command = ["a2a", *(["--config", str(config)] if config is not None else []), "--port", "0", *args]
    process = await asyncio.create_subprocess_exec(IAC_CODE, *command, env=environment, cwd=cwd,
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    stderr = process.stderr

    async def listening() -> str:
        while True:
            line = (await stderr.readline()).decode(errors="replace")
            if not line:
                raise AssertionError(f"iac-code {' '.join(command)} exited before it was listening")
            if on_startup_line is not None:
                on_startup_line(line)
            match = LISTENING_LINE.search(line)
            if match:
                return match.group(1)

    async def drain() -> None:
        while await stderr.readline():
            pass

    try:
        try:
            url = await asyncio.wait_for(listening(), start_timeout)
        except TimeoutError:
            raise AssertionError(f"iac-code {' '.join(command)} was not listening within {start_timeout:g} s") from None
    except BaseException:
        if process.returncode is None:  # never leave a server running behind a failed start
            process.kill()
        await process.wait()
        raise
    drainer = asyncio.get_running_loop().create_task(drain()) if drain_stderr else None
    try:
        yield ServerProcess(process, url)
    finally:
        try:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), stop_timeout)
            except TimeoutError:
                process.kill()
                await process.wait()
                raise AssertionError(f"iac-code a2a did not stop within {stop_timeout:g} s of SIGTERM") from None
        finally:
            if drainer is not None:
                drainer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await drainer


# --------------------------------------------------------------------------- Redis

REDIS_TEST_DB = 15
_redis_test_url: str | None = None


def _redis_pings(port: int, password: str = "", timeout: float = 0.5) -> bool:
    """Whether a Redis on 127.0.0.1:``port`` answers PING (with ``password`` when given)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, password=password or None, socket_timeout=timeout,
                         socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis_server(port: int, directory: Any, appendonly: bool = True, *, password: str = "",
                       timeout: float = 10.0) -> Any:
    """Start a private ``redis-server`` on 127.0.0.1:``port`` with its files in ``directory``.

    With ``appendonly`` the server keeps an AOF (``appendfsync always``), so killing and
    restarting it on the same directory keeps every acknowledged write. Returns the
    ``subprocess.Popen`` once the server answers PING (within ``timeout`` seconds);
    raises ``RuntimeError`` otherwise. The caller stops it (``kill()`` + ``wait()``).
    """
    import shutil
    import subprocess
    import time
    from pathlib import Path

    binary = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else "")
    if not binary:
        raise RuntimeError("redis-server is not installed (e.g. apt-get install redis-server)")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    log_file = directory / "redis.log"
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
            "--logfile", str(log_file), "--daemonize", "no", "--appendonly", "yes" if appendonly else "no"]
    if appendonly:
        args += ["--appendfsync", "always"]
    if password:
        args += ["--requirepass", password]
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _redis_pings(port, password):
            return process
        time.sleep(0.02)
    if process.poll() is None:
        process.kill()
        process.wait()
    tail = log_file.read_text(errors="replace").strip().splitlines()[-3:] if log_file.exists() else []
    raise RuntimeError(f"redis-server on port {port} did not answer PING within {timeout:g} s "
                       f"(exit code {process.returncode}): {' | '.join(tail) or 'no log'}")


def redis_url() -> str:
    """A Redis for tests: ``redis://127.0.0.1:6379/15`` when one answers PING there, else a private
    ``redis-server`` on a free port (started once per process, stopped at exit).

    Raises ``RuntimeError("no Redis: ...")`` when neither is possible: tests fail, they never skip.
    Tests share the database, so each uses its own key prefix and deletes its keys.
    """
    global _redis_test_url
    if _redis_test_url is not None:
        return _redis_test_url
    if _redis_pings(6379):
        _redis_test_url = f"redis://127.0.0.1:6379/{REDIS_TEST_DB}"
        return _redis_test_url
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    directory = Path(tempfile.mkdtemp(prefix="iac-code-redis-"))
    port = free_port()
    try:
        process = start_redis_server(port, directory, appendonly=False)
    except RuntimeError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"no Redis: nothing answers PING on 127.0.0.1:6379 and starting one failed: {exc}") from None

    def stop() -> None:
        process.kill()
        process.wait()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    _redis_test_url = f"redis://127.0.0.1:{port}/{REDIS_TEST_DB}"
    return _redis_test_url
