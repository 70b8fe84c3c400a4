"""Settings for the whole test run (the kernel's tests and every plugin's).

The run is parallel by default (``--numprocesses=auto`` in ``[tool.pytest.ini_options]``);
with pytest-xdist disabled (``-p no:xdist``) those options are accepted and the run is serial.

Much of the suite's time goes into starting Python processes: ``iac-code`` servers and
clients, and pytest-xdist's workers, each importing a2a-sdk, aiohttp, pydantic, grpc...
When bytecode writing is disabled (``PYTHONDONTWRITEBYTECODE`` or ``python -B``, as on some
CI machines), every one of them compiles all of that from source again: about half of each
start's CPU time. Then the run keeps the compiled bytecode in a private temporary directory
(``PYTHONPYCACHEPREFIX``) that every process of the run shares and that is removed at the
end: nothing is written next to the sources, and a module is compiled once per run
instead of once per process.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

_PREFIX = "PYTHONPYCACHEPREFIX"
_NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
_pycache: list[str] = []  # the directory this process created (the controller's, under xdist)
_no_bytecode: list[str | None] = []  # the caller's PYTHONDONTWRITEBYTECODE, restored at the end


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("xdist"):
        group = parser.getgroup("xdist (disabled)")
        group.addoption("--numprocesses", default=None, help="ignored: pytest-xdist is disabled, the run is serial")
        group.addoption("--dist", default="no", help="ignored: pytest-xdist is disabled, the run is serial")


def pytest_configure(config: pytest.Config) -> None:
    # Runs before pytest-xdist starts its workers: they inherit the environment set here.
    if not sys.dont_write_bytecode or os.environ.get(_PREFIX) or sys.pycache_prefix:
        return  # bytecode is cached as usual, or the caller chose where it goes
    directory = tempfile.mkdtemp(prefix="iac-code-test-pycache-")
    _pycache.append(directory)
    _no_bytecode.append(os.environ.pop(_NO_BYTECODE, None))
    os.environ[_PREFIX] = directory
    sys.pycache_prefix = directory
    sys.dont_write_bytecode = False


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _pycache:
        return
    sys.dont_write_bytecode = True
    sys.pycache_prefix = None
    os.environ.pop(_PREFIX, None)
    previous = _no_bytecode.pop()
    if previous is not None:
        os.environ[_NO_BYTECODE] = previous
    shutil.rmtree(_pycache.pop(), ignore_errors=True)
