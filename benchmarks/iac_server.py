"""Start and stop ``iac-code a2a`` for the benchmark scripts (pinned to CPU 0)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from pathlib import Path

LISTENING = re.compile(r"listening: (http://\S+) \(JSONRPC\)")


def pin_to_client_core() -> None:
    """Run the calling process (the load generator) on CPU 1 when there are two cores."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})


async def start_iac_code(config: Path, config_dir: Path) -> tuple[asyncio.subprocess.Process, str]:
    """Run ``iac-code a2a --port 0`` on CPU 0; return the process and its JSON-RPC URL."""
    command = [str(Path(sys.executable).parent / "iac-code"), "a2a", "--port", "0", "--config", str(config)]
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        command = ["taskset", "-c", "0", *command]
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, "IAC_CODE_CONFIG_DIR": str(config_dir)})
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise RuntimeError("iac-code a2a exited before it listened")
        match = LISTENING.search(line)
        if match:
            return proc, match.group(1)


async def stop_iac_code(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
