"""End to end with the JavaScript SDK's own client (``@a2a-js/sdk``), JSON-RPC and REST.

``tests/interop_js/a2a_js_e2e.mjs`` drives a server with the default configuration the way
a generic JavaScript client does: a streamed generating turn that pauses for permission,
the permission answered by text, the answer read from ``status.message``, the template
artifact fetched by its URL, a resubscription to the idle task that carries the next turn,
and binary and text file parts round-tripped byte for byte.

Needs ``node`` (``.ci/run`` installs it when missing); the SDK comes from the npm registry,
pinned by ``tests/interop_js/package-lock.json``. Without ``node`` the test is skipped on a
developer's machine and fails under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from iac_code.testing import start_server

pytestmark = pytest.mark.interop

JS_DIR = Path(__file__).parent / "interop_js"
SCRIPT = JS_DIR / "a2a_js_e2e.mjs"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed: .ci/run installs it (apt-get install nodejs npm)")
        pytest.skip("node is not installed")
    return node


@contextlib.contextmanager
def _installing() -> Iterator[None]:
    """Hold an exclusive lock on ``tests/interop_js`` (POSIX ``flock`` on the directory itself) while
    installing: parallel test workers, or two runs in one checkout, must not run ``npm ci`` (which
    first deletes ``node_modules``) under each other."""
    try:
        import fcntl
    except ImportError:  # Windows: no parallel installs to guard against there
        yield
        return
    fd = os.open(JS_DIR, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@pytest.fixture(scope="module")
def js_sdk() -> str:
    """``node``, with ``@a2a-js/sdk`` installed from the lock file into ``tests/interop_js``."""
    node = _node()
    with _installing():
        if not (JS_DIR / "node_modules" / "@a2a-js" / "sdk" / "package.json").exists():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not installed next to node: cannot install @a2a-js/sdk")
            done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True,
                                  text=True, timeout=300, check=False)
            if done.returncode != 0:
                pytest.fail(f"npm ci failed in {JS_DIR}:\n{done.stdout}\n{done.stderr}")
    return node


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a2a_js_client_end_to_end(js_sdk: str, binding: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(tmp_path)
    async with start_server() as server:
        proc = await asyncio.create_subprocess_exec(
            js_sdk, str(SCRIPT), server.url, str(workspace), binding, cwd=JS_DIR,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            output, _ = await asyncio.wait_for(proc.communicate(), timeout=90)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    text = output.decode(errors="replace")
    assert proc.returncode == 0 and "all passed" in text, text
    assert "FAIL" not in text, text
