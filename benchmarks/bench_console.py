#!/usr/bin/env python3
"""The web console (``/console``) in Debian's Chromium, driven by Playwright: page load with 200 tasks
stored, and the task list's responsiveness while 50 turns stream at once.

1. **Load**: a server (in-process, default configuration, the offline runtime) gets 200 tasks; the
   browser opens ``/console`` cold (a fresh context each time, ``--loads`` times) at 100 tasks a page,
   and the time until both pages have been drawn (the first 100 rows, *Next*, the other 100) is
   measured. Target: under 2 s.
2. **Responsiveness**: 50 turns of a runtime that streams a text delta every 50 ms for ``--seconds``
   seconds run at once (each read by its own SSE client outside the page). Meanwhile the page, on the
   task list, changes its state filter back and forth: each change is timed from the input event to the
   redrawn table, and the page's main-thread lag is sampled (a 50 ms timer's lateness).

    uv run python benchmarks/bench_console.py [--tasks 200 --turns 50 --loads 5 --seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator

import aiohttp
from playwright.async_api import Page, async_playwright

from iac_code.api import AgentRuntimeSpec, TextDelta, TurnRequest, hookimpl
from iac_code.testing import A2A_HEADERS, start_server

CHROMIUM = "/usr/bin/chromium"


class TickingRuntime:
    """Streams one text delta every 50 ms for ``seconds`` seconds."""

    name = "ticking"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def run_turn(self, turn: TurnRequest) -> AsyncIterator[TextDelta]:
        end = time.monotonic() + self.seconds
        n = 0
        while time.monotonic() < end:
            n += 1
            yield TextDelta(f"tick {n} ")
            await asyncio.sleep(0.05)


class TickingPlugin:
    """Registers :class:`TickingRuntime` as ``agent-runtime: ticking``."""

    def __init__(self, seconds: float) -> None:
        self.runtime = TickingRuntime(seconds)

    @hookimpl
    def iac_code_agent_runtimes(self) -> list[AgentRuntimeSpec]:
        return [AgentRuntimeSpec(name="ticking", create_runtime=lambda context: self.runtime)]


def body(text: str, method: str = "SendMessage") -> dict:
    import uuid
    return {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}}}


async def fill(url: str, count: int) -> None:
    async with aiohttp.ClientSession() as session:
        semaphore = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            async with semaphore, session.post(url, json=body(f"hello {i}"), headers=A2A_HEADERS) as response:
                await response.read()

        await asyncio.gather(*(one(i) for i in range(count)))


async def load_time(browser, url: str) -> float:
    context = await browser.new_context()
    page = await context.new_page()
    start = time.perf_counter()
    await page.goto(url + "console#/?size=100")
    await page.wait_for_function("() => document.querySelectorAll('#task-rows tr').length === 100", timeout=30_000)
    await page.click("#page-next")  # the second hundred
    await page.wait_for_function("() => document.querySelectorAll('#task-rows tr').length === 100"
                                 " && !document.querySelector('#page-prev').disabled", timeout=30_000)
    elapsed = time.perf_counter() - start
    await context.close()
    return elapsed


async def filter_round(page: Page, state: str) -> float:
    start = time.perf_counter()
    await page.select_option("#filter-state", state)
    await page.wait_for_function(
        "(s) => { const rows = [...document.querySelectorAll('#task-rows tr')];"
        " return rows.length > 0 && rows.every(r => !s || r.dataset.state === s); }", arg=state, timeout=30_000)
    return time.perf_counter() - start


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"


async def main(args: argparse.Namespace) -> None:
    os.chdir(tempfile.mkdtemp(prefix="bench-console-"))
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        async with start_server({}) as server:
            await fill(server.url, args.tasks)
            times = [await load_time(browser, server.url) for _ in range(args.loads)]
            print(f"load with {args.tasks} tasks listed (2 pages of 100) ({args.loads} cold loads): {summary(times)}"
                  f" -> {'OK' if max(times) < 2.0 else 'OVER'} (target < 2 s)")

        plugin = TickingPlugin(args.seconds)
        async with start_server({"agent-runtime": "ticking"}, extra_plugins={"ticking": plugin}) as server:
            await fill(server.url, 20)  # some finished tasks to filter between
            page = await browser.new_page()
            await page.goto(server.url + "console")
            await page.wait_for_selector("#task-rows tr", timeout=30_000)
            events = 0

            async def stream(session: aiohttp.ClientSession, i: int) -> None:
                nonlocal events
                async with session.post(server.url, json=body(f"stream {i}", "SendStreamingMessage"),
                                        headers=A2A_HEADERS) as response:
                    async for line in response.content:
                        if line.startswith(b"data:"):
                            events += 1

            async with aiohttp.ClientSession() as session:
                turns = [asyncio.create_task(stream(session, i)) for i in range(args.turns)]
                await page.wait_for_function("() => document.querySelectorAll('#task-rows tr').length > 0")
                await page.evaluate("""() => { window.__lag = []; let last = performance.now();
                    window.__lagTimer = setInterval(() => { const now = performance.now();
                    window.__lag.push(now - last - 50); last = now; }, 50); }""")
                rounds: list[float] = []
                deadline = time.monotonic() + args.seconds * 0.8
                while time.monotonic() < deadline:
                    rounds.append(await filter_round(page, "TASK_STATE_WORKING"))
                    rounds.append(await filter_round(page, ""))
                lag = await page.evaluate("() => { clearInterval(window.__lagTimer); return window.__lag; }")
                await asyncio.gather(*turns)
            print(f"{args.turns} turns streaming ({events} SSE events read): filter change to redrawn list "
                  f"({len(rounds)} changes): {summary(rounds)}")
            print(f"main-thread lag of a 50 ms timer ({len(lag)} samples): p50 {statistics.median(lag):.1f} ms, "
                  f"max {max(lag):.1f} ms")
        await browser.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    asyncio.run(main(parser.parse_args()))
