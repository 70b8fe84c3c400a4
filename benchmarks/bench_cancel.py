"""Cancel latency of the offline runtime: CancelTask round trip and stream close.

Starts ``iac-code a2a`` (offline runtime) as a subprocess on CPU 0, then, from
CPU 1, repeatedly opens a SendStreamingMessage turn that generates a template
and pauses at the ``write_file`` permission, sends CancelTask and measures
(a) the CancelTask round trip until the CANCELED task comes back and (b) the
time until the turn's own stream is closed. Target: under 100 ms.
Usage: ``uv run --group bench python benchmarks/bench_cancel.py``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from iac_server import pin_to_client_core, start_iac_code, stop_iac_code

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


async def one_round(http: aiohttp.ClientSession, url: str, index: int, cwd: str) -> tuple[float, float]:
    body = {"jsonrpc": "2.0", "id": index, "method": "SendStreamingMessage", "params": {"message": {
        "messageId": f"m-{index}", "role": "ROLE_USER", "contextId": f"cancel-{index}",
        "parts": [{"text": "Create a VPC with two vSwitches and an ECS instance"}],
        "metadata": {"iac_code": {"cwd": cwd}}}}}
    async with http.post(url, json=body, headers=HEADERS) as stream:
        task_id = ""
        while True:
            line = (await asyncio.wait_for(stream.content.readline(), 30)).decode()
            if not line.startswith("data: "):
                continue
            result = json.loads(line[6:])["result"]
            if "task" in result:
                task_id = result["task"]["id"]
            update = result.get("statusUpdate", {})
            if update.get("status", {}).get("state") == "TASK_STATE_INPUT_REQUIRED":
                break  # paused at the write_file permission
        start = time.perf_counter()
        cancel = {"jsonrpc": "2.0", "id": "c", "method": "CancelTask", "params": {"id": task_id}}
        async with http.post(url, json=cancel, headers=HEADERS) as r:
            reply = await r.json()
        round_trip = (time.perf_counter() - start) * 1000
        if reply["result"]["status"]["state"] != "TASK_STATE_CANCELED":
            raise RuntimeError(f"not canceled: {reply}")
        await asyncio.wait_for(stream.read(), 30)
        closed = (time.perf_counter() - start) * 1000
    return round_trip, closed


async def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    pin_to_client_core()
    workdir = Path(tempfile.mkdtemp(prefix="iac-code-bench-cancel-"))
    (workdir / "ws").mkdir()
    config = workdir / "server.yml"
    config.write_text(f"persistence-dir: {workdir / 'state'}\n")
    proc, url = await start_iac_code(config, workdir / "cfg")
    try:
        async with aiohttp.ClientSession() as http:
            await one_round(http, url, -1, str(workdir / "ws"))  # warm-up
            results = [await one_round(http, url, i, str(workdir / "ws")) for i in range(rounds)]
        trips = sorted(r[0] for r in results)
        closes = sorted(r[1] for r in results)
        p99 = max(0, int(len(trips) * 0.99) - 1)
        print(f"cancel of a paused turn, {rounds} rounds (target < 100 ms):")
        print(f"  CancelTask round trip  p50 {statistics.median(trips):6.2f} ms   p99 {trips[p99]:6.2f} ms")
        print(f"  turn stream closed     p50 {statistics.median(closes):6.2f} ms   p99 {closes[p99]:6.2f} ms")
        print("target met" if closes[p99] < 100 else "target NOT met")
        return 0
    finally:
        await stop_iac_code(proc)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
