#!/usr/bin/env python3
"""Push delivery throughput for both queues, and zero loss when a worker is killed with kill -9.

For each queue (``local-file``, ``redis-streams`` on the machine's Redis with a
fresh key prefix):

1. **Fill**: one ``iac-code a2a`` server (``push-delivery: external``, the trivial
   agent) gets ``--jobs`` SendMessage calls, each with a push configuration to
   the local receiver, so every call queues one notification (its COMPLETED
   state) durably and nothing delivers yet.
2. **Drain**: ``--workers`` ``iac-code a2a push-worker`` processes start on the
   same configuration; the receiver (an aiohttp app in this process, on CPU 1)
   counts distinct ``Idempotency-Key``\\ s. Deliveries/s = jobs / (last - first
   delivery).
3. **Kill -9**: the fill again; during the drain one worker is killed with
   SIGKILL after a third of the jobs, and a replacement started. Every job must
   arrive (duplicates allowed: at-least-once), the queue must end empty.

Servers and workers are pinned to CPU 0, the receiver and the load to CPU 1.
Target: ≥ 2,000 deliveries/s for Redis Streams.

    uv run --group bench python benchmarks/bench_push.py [--jobs 6000 --workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

BENCH_DIR = Path(__file__).resolve().parent
IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
LISTENING = re.compile(r"listening: (http://\S+) \(JSONRPC\)")
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")


@dataclass
class Receiver:
    """Counts deliveries; ``first``/``last`` are the times of the first and of the latest new one."""

    keys: set[str] = field(default_factory=set)
    requests: int = 0
    first: float = 0.0
    last: float = 0.0
    goal: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.requests += 1
        key = request.headers.get("Idempotency-Key", "")
        if key not in self.keys:
            now = time.perf_counter()
            self.first = self.first or now
            self.last = now
            self.keys.add(key)
            if len(self.keys) >= self.goal:
                self.done.set()
        return web.Response()

    def reset(self, goal: int) -> None:
        self.keys.clear()
        self.requests, self.first, self.last, self.goal = 0, 0.0, 0.0, goal
        self.done = asyncio.Event()


def _pinned(argv: list[str], cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu), *argv] if cpu is not None and shutil.which("taskset") else argv


async def start_server(config: Path, cpu: int | None) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        *_pinned([IAC_CODE, "a2a", "--port", "0", "--config", str(config)], cpu),
        env={**os.environ, "PYTHONPATH": str(BENCH_DIR)}, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise RuntimeError("server exited early")
        match = LISTENING.search(line)
        if match:
            asyncio.get_running_loop().create_task(_drain_stderr(proc))
            return proc, match.group(1)


async def start_worker(config: Path, cpu: int | None) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        *_pinned([IAC_CODE, "a2a", "push-worker", "--config", str(config)], cpu),
        env={**os.environ, "PYTHONPATH": str(BENCH_DIR)}, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise RuntimeError("push worker exited early")
        if "push worker delivering" in line:
            asyncio.get_running_loop().create_task(_drain_stderr(proc))
            if os.environ.get("BENCH_PUSH_PROFILE"):  # py-spy the worker: raw stacks to that file
                await asyncio.create_subprocess_exec(
                    "py-spy", "record", "-p", str(proc.pid), "-d", "4", "-f", "raw", "-o",
                    f"{os.environ['BENCH_PUSH_PROFILE']}.{proc.pid}", stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL)
            return proc


async def _drain_stderr(proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    while await proc.stderr.readline():
        pass


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def fill(url: str, hook: str, jobs: int, concurrency: int) -> float:
    """Send ``jobs`` SendMessage calls, each storing a push config; seconds taken."""
    counter = iter(range(jobs))
    started = time.perf_counter()

    async def client(http: aiohttp.ClientSession) -> None:
        for _ in counter:
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hello"}]},
                "configuration": {"taskPushNotificationConfig": {"url": hook, "token": "bench-token"}}}}
            async with http.post(url, json=body, headers=HEADERS) as r:
                reply = await r.json()
            if "result" not in reply:
                raise RuntimeError(f"SendMessage failed: {str(reply)[:200]}")

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    return time.perf_counter() - started


async def depth(config: Path) -> dict[str, int]:
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "push-status", "--config", str(config),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    return dict(json.loads(out)["depth"])


@dataclass
class Run:
    queue: str
    kind: str
    jobs: int
    fill_s: float
    delivered: int
    requests: int
    seconds: float
    left: dict[str, int]

    @property
    def rate(self) -> float:
        return self.delivered / self.seconds if self.seconds else 0.0


async def one_run(queue: str, kill: bool, hook: Receiver, tmp: Path, args: argparse.Namespace,
                  server_cpu: int | None) -> Run:
    prefix = f"iac-code-bench:{uuid.uuid4().hex}"
    settings: dict[str, Any] = {
        "agent-executor": "trivial_agent:TrivialExecutor", "persistence-dir": str(tmp / f"{queue}-{kill}"),
        "push-notifications": True, "push-allowed-hosts": ["127.0.0.1"], "push-delivery": "external",
        "push-queue": queue, "push-concurrency": args.concurrency, "push-lease-timeout-ms": 2000,
    }
    if queue == "redis-streams":
        settings.update({"push-redis-url": REDIS_URL, "push-stream": f"{prefix}:push",
                         "push-retry-key": f"{prefix}:retry", "push-dead-stream": f"{prefix}:dead",
                         "push-consumer-group": f"{prefix}:group"})
    config = tmp / f"{queue}-{kill}.yml"
    config.write_text(yaml.safe_dump(settings))
    hook.reset(args.jobs)
    server, url = await start_server(config, server_cpu)
    try:
        fill_s = await fill(url, hook.url, args.jobs, 32)
    finally:
        await stop(server)
    workers = [await start_worker(config, server_cpu) for _ in range(args.workers)]
    try:
        if kill:
            while len(hook.keys) < args.jobs // 3:
                await asyncio.sleep(0.01)
            workers[0].kill()  # kill -9 mid-delivery
            await workers[0].wait()
            workers[0] = await start_worker(config, server_cpu)
        try:
            await asyncio.wait_for(hook.done.wait(), args.timeout)
        except TimeoutError:
            pass
        left: dict[str, int] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the last acks land just after the last delivery
            left = await depth(config)
            if not left.get("pending") and not left.get("inflight"):
                break
            await asyncio.sleep(0.2)
    finally:
        for worker in workers:
            await stop(worker)
    if queue == "redis-streams":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
    return Run(queue, "kill -9" if kill else "drain", args.jobs, fill_s, len(hook.keys), hook.requests,
               hook.last - hook.first, left)


async def amain(args: argparse.Namespace) -> int:
    pin = (os.cpu_count() or 1) >= 2 and not args.no_pin
    server_cpu = 0 if pin else None
    if pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {1})
    hook = Receiver()
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    hook.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/hook"  # type: ignore[union-attr]
    runs: list[Run] = []
    try:
        with tempfile.TemporaryDirectory(prefix="a2a-bench-push-") as tmp:
            for queue in args.queues:
                for kill in (False, True):
                    runs.append(await one_run(queue, kill, hook, Path(tmp), args, server_cpu))
    finally:
        await runner.cleanup()
    print(f"{args.jobs} notifications per run, {args.workers} push-worker process(es), push-concurrency "
          f"{args.concurrency}; receiver on 127.0.0.1 (aiohttp)")
    print(f"{'queue':<14} {'run':<8} {'queued/s':>9} {'delivered':>9} {'lost':>5} {'dupes':>6} {'deliveries/s':>13} "
          f"{'left in queue':<30}")
    print("-" * 100)
    ok = True
    for r in runs:
        lost = r.jobs - r.delivered
        left = ", ".join(f"{k} {v}" for k, v in r.left.items())
        print(f"{r.queue:<14} {r.kind:<8} {r.jobs / r.fill_s:>9.0f} {r.delivered:>9} {lost:>5} "
              f"{r.requests - r.delivered:>6} {r.rate:>13.0f} {left:<30}")
        ok = ok and lost == 0 and not r.left.get("pending") and not r.left.get("inflight")
    redis_rate = max((r.rate for r in runs if r.queue == "redis-streams" and r.kind == "drain"), default=0.0)
    if "redis-streams" in args.queues:
        print(f"\nRedis Streams: {redis_rate:.0f} deliveries/s (target 2000: {'met' if redis_rate >= 2000 else 'NOT met'})")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=64, help="push-concurrency of each worker")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--queues", nargs="+", default=["local-file", "redis-streams"])
    parser.add_argument("--no-pin", action="store_true")
    return asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
