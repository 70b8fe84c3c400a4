"""A real MCP server for the tests, written with the official ``mcp`` SDK (FastMCP).

``python demo_server.py stdio [--token=...]``, ``python demo_server.py http PORT`` (Streamable HTTP, ``/mcp``) or
``python demo_server.py sse PORT`` (SSE, ``/sse``). Tools: ``echo`` (read-only),
``count_up`` (progress notifications; writes ``counted`` to ``$DEMO_MARKER``), ``slow`` (waits; writes ``started`` / ``cancelled`` to ``$DEMO_MARKER``),
``fail`` (an error result), ``big`` (a large result), ``crash`` (the process exits).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

port = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] in ("http", "sse") else 0
server = FastMCP("demo", host="127.0.0.1", port=port or 8000)


def _mark(text: str) -> None:
    marker = os.environ.get("DEMO_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(text + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Return the text."""
    return f"echo: {text}"


@server.tool()
async def count_up(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting progress at each step."""
    for n in range(1, steps + 1):
        await ctx.report_progress(n, steps, f"step {n} of {steps}")
    _mark("counted")
    return f"counted to {steps}"


@server.tool()
async def slow(seconds: float) -> str:
    """Wait ``seconds``."""
    _mark("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _mark("cancelled")
        raise
    return "slept"


@server.tool()
def fail(reason: str = "boom") -> str:
    """Always fails."""
    raise ValueError(f"it failed: {reason}")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def big(kilobytes: int = 300) -> str:
    """A large result."""
    return ("0123456789abcdef" * 64) * kilobytes


@server.tool()
def crash() -> str:
    """The server process exits."""
    os._exit(3)


if __name__ == "__main__":
    if os.environ.get("DEMO_PIDFILE"):  # the tests watch the process end
        with open(os.environ["DEMO_PIDFILE"], "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
    server.run({"http": "streamable-http", "sse": "sse"}.get(sys.argv[1], "stdio"))
