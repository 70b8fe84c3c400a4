"""Overhead of an MCP tool call over stdio (issue 32): p50/p99 per call.

Starts the tests' demo MCP server (plugins/mcp/tests/demo_server.py, written with the ``mcp`` SDK) over stdio and
times ``echo`` calls three ways: the SDK's ``ClientSession.call_tool`` alone (the protocol and process round trip),
the plugin's :class:`~iac_code_mcp.connection.Connection.call`, and a whole runtime tool call through
``iac_code.api.run_tool`` with the plugin's tool (permission check, redaction, events). The differences are what
iac-code adds.

    uv run python benchmarks/bench_mcp.py [--calls 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
SERVER = str(ROOT / "plugins" / "mcp" / "tests" / "demo_server.py")


def _line(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name:<28} n={len(samples):<5} p50={statistics.median(ordered) * 1000:7.3f} ms  p99={p99 * 1000:7.3f} ms"


async def main(calls: int) -> None:
    from iac_code.api import ToolCall, ToolContext, run_tool
    from iac_code_mcp.manager import McpManager

    config = SimpleNamespace(mcp_servers={"demo": {"command": sys.executable, "args": [SERVER, "stdio"]}},
                             mcp_project_servers="ask", mcp_max_servers=4, mcp_call_timeout=30.0,
                             mcp_startup_timeout=60.0, context_idle_timeout=3600.0)
    with tempfile.TemporaryDirectory() as home:
        manager = McpManager(config, Path(home))
        context = ToolContext(cwd=home, task_id="bench", context_id="bench")
        offers = {}
        async for item in manager.prepare(context):
            if hasattr(item, "tool"):
                offers[item.name] = item
        tool = offers["mcp__demo__echo"].tool
        connection = manager.contexts[("bench", home)].servers["demo"].connection
        session = connection.session
        for _ in range(20):  # warm up
            await session.call_tool("echo", {"text": "x"})
        sdk, plugin, runtime = [], [], []
        for n in range(calls):
            t = time.perf_counter()
            await session.call_tool("echo", {"text": "hello"})
            sdk.append(time.perf_counter() - t)
            t = time.perf_counter()
            await connection.call("echo", {"text": "hello"}, 30.0, None)
            plugin.append(time.perf_counter() - t)
            t = time.perf_counter()
            call = ToolCall(f"c{n}", tool.name, {"text": "hello"})
            async for _ in run_tool(tool, call, context):
                pass
            runtime.append(time.perf_counter() - t)
            assert call.outcome is not None and call.outcome.error is None
        await manager.stop()
    print(f"MCP tool call over stdio (demo server, echo), {calls} calls each")
    print(_line("SDK call_tool", sdk))
    print(_line("plugin Connection.call", plugin))
    print(_line("runtime run_tool (mcp__)", runtime))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    asyncio.run(main(parser.parse_args().calls))
