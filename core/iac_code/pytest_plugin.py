"""The ``iac_code`` pytest plugin: fixtures for testing iac-code plugins against a real server.

pytest loads it by itself wherever ``iac-code`` is installed (entry point group ``pytest11``;
``-p no:iac_code`` turns it off). Loading it imports nothing of the kernel: each fixture
imports :mod:`iac_code.testing` when a test first uses it, so unrelated test runs pay nothing.

Fixtures (every name starts with ``iac_code_``):

* ``iac_code_server_factory``: ``await start(settings, plugins={name: plugin})`` starts a
  server on an ephemeral 127.0.0.1 port and returns its :class:`~iac_code.testing.RunningServer`
  (``server.url`` is the JSON-RPC endpoint, other routes are below it); every server the
  test started is stopped after it.
* ``iac_code_server``: one server started with the ``iac_code_settings`` and
  ``iac_code_plugins`` fixtures (both empty unless a test module or conftest overrides them).
* ``iac_code_client_factory``: ``await connect(server, binding="JSONRPC" | "HTTP+JSON" | "GRPC",
  streaming=True, headers=None)`` returns a2a-sdk's own ``Client``, built by its
  ``ClientFactory`` from the served Agent Card; closed after the test.
* ``iac_code_client``: a streaming JSON-RPC a2a-sdk ``Client`` connected to ``iac_code_server``.
* ``iac_code_scripted_runtime``: a :class:`~iac_code.testing.ScriptedRuntime`; requesting it
  registers it with every server the test starts and makes it their agent runtime (unless
  the settings name another ``agent-runtime``). ``runtime.script(event, ...)`` queues a turn;
  ``runtime.turns`` holds the ``TurnRequest`` of each turn that ran.
* ``iac_code_cli``: ``await run("a2a", "--plugins", "list")`` runs the ``iac-code`` command
  line as a process (in the test's ``tmp_path``) and returns its exit code and output.

The servers run in the test's event loop, so the tests that use them are ``async def``
tests run by pytest-asyncio: with ``asyncio_mode = "auto"`` as they are, in pytest-asyncio's
default strict mode marked ``@pytest.mark.asyncio``. The server fixtures make ``tmp_path`` the
working directory, which is the server's default workspace: files an agent writes land there,
never in the source tree.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from iac_code.testing import CliResult, RunningServer, ScriptedRuntime

try:
    import pytest_asyncio
except ImportError:  # the fixtures that need an event loop say so when a test asks for them
    pytest_asyncio = None

SCRIPTED_RUNTIME_FIXTURE = "iac_code_scripted_runtime"


def _async_fixture(function: Callable[..., Any]) -> Any:
    """An async fixture through pytest-asyncio (it then works in its strict and auto modes alike)."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(function)

    @pytest.fixture(name=function.__name__)
    def needs_pytest_asyncio() -> None:
        pytest.fail(f"the {function.__name__} fixture needs pytest-asyncio: pip install pytest-asyncio",
                    pytrace=False)

    needs_pytest_asyncio.__doc__ = function.__doc__
    return needs_pytest_asyncio


@pytest.fixture
def iac_code_settings() -> dict[str, Any]:
    """The settings ``iac_code_server`` starts with, written as in YAML (override this fixture to change them)."""
    return {}


@pytest.fixture
def iac_code_plugins() -> dict[str, object]:
    """Plugin objects registered, by name, with every server the test starts (override to add yours)."""
    return {}


@pytest.fixture
def iac_code_scripted_runtime() -> ScriptedRuntime:
    """An agent runtime playing back scripted events, registered and selected for this test's servers."""
    from iac_code.testing import ScriptedRuntime

    return ScriptedRuntime()


@_async_fixture
async def iac_code_server_factory(request: pytest.FixtureRequest, iac_code_plugins: Mapping[str, object],
                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  ) -> AsyncIterator[Callable[..., Awaitable[RunningServer]]]:
    """``await start(settings=None, *, plugins=None, environ=None)``: a running server; all stopped after the test."""
    from iac_code.testing import start_server

    monkeypatch.chdir(tmp_path)
    runtime = (request.getfixturevalue(SCRIPTED_RUNTIME_FIXTURE)
               if SCRIPTED_RUNTIME_FIXTURE in request.fixturenames else None)
    async with contextlib.AsyncExitStack() as servers:

        async def start(settings: Mapping[str, Any] | None = None, *, plugins: Mapping[str, object] | None = None,
                        environ: Mapping[str, str] | None = None) -> RunningServer:
            chosen = dict(settings or {})
            extra = {**iac_code_plugins, **(plugins or {})}
            if runtime is not None:
                extra.setdefault(runtime.name, runtime)
                if not any(key.replace("_", "-") == "agent-runtime" for key in chosen):
                    chosen.update(runtime.settings)
            return await servers.enter_async_context(start_server(chosen, extra_plugins=extra, environ=environ))

        yield start


@_async_fixture
async def iac_code_server(iac_code_server_factory: Callable[..., Awaitable[RunningServer]],
                          iac_code_settings: Mapping[str, Any]) -> RunningServer:
    """A running server with ``iac_code_settings`` and ``iac_code_plugins``, stopped after the test."""
    return await iac_code_server_factory(iac_code_settings)


@_async_fixture
async def iac_code_client_factory() -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """``await connect(server, *, binding="JSONRPC", streaming=True, headers=None)``: a2a-sdk ``Client``s, closed after."""
    from iac_code.testing import connect_client

    async with contextlib.AsyncExitStack() as clients:

        async def connect(server: RunningServer | str, *, binding: str = "JSONRPC", streaming: bool = True,
                          headers: Mapping[str, str] | None = None, interceptors: tuple[Any, ...] = ()) -> Any:
            return await clients.enter_async_context(connect_client(
                server, binding=binding, streaming=streaming, headers=headers, interceptors=interceptors))

        yield connect


@_async_fixture
async def iac_code_client(iac_code_client_factory: Callable[..., Awaitable[Any]],
                          iac_code_server: RunningServer) -> Any:
    """a2a-sdk's streaming JSON-RPC ``Client``, connected to ``iac_code_server``."""
    return await iac_code_client_factory(iac_code_server)


@pytest.fixture
def iac_code_cli(tmp_path: Path) -> Callable[..., Awaitable[CliResult]]:
    """``await run(*args, cwd=tmp_path, env=None)``: the ``iac-code`` command line as a process."""

    async def run(*args: str, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
                  timeout: float = 60.0) -> CliResult:
        from iac_code.testing import run_cli

        return await run_cli(*args, cwd=tmp_path if cwd is None else cwd, env=env, timeout=timeout)

    return run
