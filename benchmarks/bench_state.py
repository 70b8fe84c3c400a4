"""State at scale: memory per idle context and ListTasks latency at 10,000 tasks.

Runs ``iac-code a2a`` (offline runtime, snapshots in a scratch directory) as a
subprocess pinned to CPU 0 and drives it from CPU 1:

1. seeds 8,000 task snapshots into the persistence directory with the kernel's
   own task store (the server restores them at start-up);
2. sends 1,000 messages into ONE context (1,000 tasks, 1 context) and reads the
   server's RSS growth: the cost of 1,000 tasks;
3. sends 1,000 messages into 1,000 NEW contexts (1,000 tasks, 1,000 idle
   contexts): RSS growth minus step 2 is the cost of 1,000 idle contexts;
4. times ListTasks pages of 50 over the resulting 10,000 tasks (first page,
   deep pages through the page token, a contextId filter, a status filter).

Targets: under 50 KiB per idle context; under 50 ms per 50-task page.
Usage: ``uv run --group bench python benchmarks/bench_state.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from iac_server import pin_to_client_core, start_iac_code, stop_iac_code

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def seed_tasks(state: Path, count: int) -> None:
    """Write ``count`` task snapshots with the kernel's own store (as a previous run would)."""
    from a2a.server.context import ServerCallContext
    from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus

    from iac_code.base.storage import SnapshotWriter
    from iac_code.tasks.task_store import KernelTaskStore

    writer = SnapshotWriter(linger=0)
    store = KernelTaskStore(state, writer)
    context = ServerCallContext()
    for i in range(count):
        task_id = f"seed-{i:06d}"
        status = TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED)
        status.timestamp.FromSeconds(1_700_000_000 + i)
        await store.save(Task(id=task_id, context_id=f"seed-ctx-{i % 100}", status=status, history=[
            Message(message_id=f"{task_id}-u", role=Role.ROLE_USER, parts=[Part(text="Create a VPC")]),
            Message(message_id=f"{task_id}-a", role=Role.ROLE_AGENT, parts=[Part(text="Here is the template.")]),
        ]), context)
        if i % 500 == 499:
            await writer.flush()
    await writer.close()


async def send(http: aiohttp.ClientSession, url: str, context_id: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": str(uuid.uuid4()), "role": "ROLE_USER", "contextId": context_id,
        "parts": [{"text": "hello"}]}}}
    async with http.post(url, json=body, headers=HEADERS) as r:
        reply = await r.json()
    if "result" not in reply:
        raise RuntimeError(f"SendMessage failed: {reply}")


async def send_many(http: aiohttp.ClientSession, url: str, contexts: list[str], concurrency: int) -> None:
    """Send one message per entry; entries naming the same context run one after another."""
    by_context: dict[str, int] = {}
    for c in contexts:
        by_context[c] = by_context.get(c, 0) + 1
    queue: asyncio.Queue[str] = asyncio.Queue()
    for c in contexts:
        queue.put_nowait(c)
    busy: set[str] = set()

    async def worker() -> None:
        while not queue.empty():
            context_id = queue.get_nowait()
            if context_id in busy:  # one turn per context at a time
                queue.put_nowait(context_id)
                await asyncio.sleep(0)
                continue
            busy.add(context_id)
            try:
                await send(http, url, context_id)
            finally:
                busy.discard(context_id)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def settle(pid: int) -> int:
    """RSS once it stops moving (the snapshot writer drains in the background)."""
    last = rss_kib(pid)
    for _ in range(50):
        await asyncio.sleep(0.2)
        now = rss_kib(pid)
        if abs(now - last) < 64:
            return now
        last = now
    return last


async def time_list(http: aiohttp.ClientSession, url: str, params: dict[str, Any], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}
        start = time.perf_counter()
        async with http.post(url, json=body, headers=HEADERS) as r:
            reply = await r.json()
        times.append((time.perf_counter() - start) * 1000)
        if "result" not in reply:
            raise RuntimeError(f"ListTasks failed: {reply}")
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=1000)
    parser.add_argument("--seed-tasks", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=200, help="ListTasks requests per measurement")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    pin_to_client_core()
    workdir = Path(tempfile.mkdtemp(prefix="iac-code-bench-state-"))
    state = workdir / "state"
    await seed_tasks(state, args.seed_tasks)
    config = workdir / "server.yml"
    config.write_text(f"persistence-dir: {state}\ncontext-idle-timeout: 86400\n")
    proc, url = await start_iac_code(config, workdir / "cfg")
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency)) as http:
            await send_many(http, url, ["warm-up"] * 50, 1)  # imports, caches, allocator arenas
            gc.collect()
            base = await settle(proc.pid)
            await send_many(http, url, ["one-context"] * args.contexts, 1)
            after_tasks = await settle(proc.pid)
            await send_many(http, url, [f"idle-{i}" for i in range(args.contexts)], args.concurrency)
            after_contexts = await settle(proc.pid)
            task_cost = (after_tasks - base) / args.contexts
            context_cost = (after_contexts - after_tasks) / args.contexts - task_cost

            first = await time_list(http, url, {"pageSize": 50}, args.rounds)
            token_page = (await _page_token(http, url, depth=100))
            deep = await time_list(http, url, {"pageSize": 50, "pageToken": token_page}, args.rounds)
            filtered = await time_list(http, url, {"pageSize": 50, "contextId": "seed-ctx-7"}, args.rounds)
            by_status = await time_list(http, url, {"pageSize": 50, "status": "TASK_STATE_INPUT_REQUIRED"},
                                        args.rounds)
            total = await _total(http, url)
        print(f"tasks stored: {total} ({args.seed_tasks} restored from snapshots at start-up)")
        print(f"server RSS: {base / 1024:.1f} MiB after warm-up, {after_contexts / 1024:.1f} MiB at the end")
        print(f"memory per task (1 context, {args.contexts} tasks):   {task_cost:6.1f} KiB")
        print(f"memory per idle context (beyond its task):           {context_cost:6.1f} KiB   (target < 50 KiB)")
        print(f"ListTasks pageSize=50 over {total} tasks ({args.rounds} requests each), target p99 < 50 ms:")
        for name, values in (("first page", first), ("page 100 via pageToken", deep),
                             ("contextId filter", filtered), ("status filter", by_status)):
            print(f"  {name:26s} p50 {statistics.median(values):6.2f} ms   p99 {pct(values, 0.99):6.2f} ms")
        ok = context_cost < 50 and all(pct(v, 0.99) < 50 for v in (first, deep, filtered, by_status))
        print("targets met" if ok else "targets NOT met")
        return 0
    finally:
        await stop_iac_code(proc)
        shutil.rmtree(workdir, ignore_errors=True)


async def _page_token(http: aiohttp.ClientSession, url: str, depth: int) -> str:
    token = ""
    for _ in range(depth):
        params: dict[str, Any] = {"pageSize": 50}
        if token:
            params["pageToken"] = token
        async with http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params},
                             headers=HEADERS) as r:
            token = (await r.json())["result"]["nextPageToken"]
    return token


async def _total(http: aiohttp.ClientSession, url: str) -> int:
    async with http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 1}},
                         headers=HEADERS) as r:
        return int((await r.json())["result"]["totalSize"])


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
