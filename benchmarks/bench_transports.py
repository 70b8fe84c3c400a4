#!/usr/bin/env python3
"""SendMessage requests/s and p99 over every JSON-RPC transport, next to HTTP, in one run.

Each transport gets its own ``iac-code a2a --transport X`` process (the trivial
agent, persistence on, pinned to CPU 0); the load runs in this process on CPU 1:
``--concurrency`` calls in flight through the transport's client from its plugin
(:mod:`iac_code_transport_stdio.ndjson_client` for stdio and unix; one multiplexed
connection; HTTP uses an aiohttp pool of that many keep-alive connections). Redis Streams uses the
machine's Redis with a fresh key prefix.

    uv run --group bench python benchmarks/bench_transports.py [--duration 5 --concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml

BENCH_DIR = Path(__file__).resolve().parent
IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
LISTENING = re.compile(r"listening: (\S+) \((\S+)\)")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
TRANSPORTS = ("http", "unix", "stdio", "websocket", "grpc-jsonrpc", "redis-streams")
VERSION = {"A2A-Version": "1.0"}


def _pinned(argv: list[str], cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu), *argv] if cpu is not None and shutil.which("taskset") else argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpClient:
    def __init__(self, url: str, concurrency: int) -> None:
        self.url = url
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))

    async def request(self, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> dict[str, Any]:
        async with self.http.post(self.url, json=payload, headers={"Content-Type": "application/json", **(headers or {})}) as r:
            return dict(await r.json())

    async def aclose(self) -> None:
        await self.http.close()


def _settings(name: str, tmp: Path, prefix: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"agent-executor": "trivial_agent:TrivialExecutor",
                                "persistence-dir": str(tmp / f"state-{name}"), "port": _free_port()}
    if name == "unix":
        settings["socket-path"] = str(tmp / "a2a.sock")
    elif name == "grpc-jsonrpc":
        settings["grpc-jsonrpc-port"] = _free_port()
    elif name == "redis-streams":
        settings.update({"redis-url": REDIS_URL, "request-stream": f"{prefix}:req", "response-stream": f"{prefix}:resp",
                         "consumer-group": f"{prefix}:group"})
    return settings


@contextlib.asynccontextmanager
async def serving(name: str, tmp: Path, cpu: int | None, concurrency: int) -> AsyncIterator[Any]:
    prefix = f"iac-code-bench:{uuid.uuid4().hex}"
    config = tmp / f"{name}.yml"
    config.write_text(yaml.safe_dump(_settings(name, tmp, prefix)))
    env = {**os.environ, "PYTHONPATH": str(BENCH_DIR), "IAC_CODE_CONFIG_DIR": str(tmp)}
    argv = _pinned([IAC_CODE, "a2a", "--transport", name, "--config", str(config)], cpu)
    if name == "stdio":
        from iac_code_transport_stdio.ndjson_client import NdjsonClient

        client = await NdjsonClient.spawn(argv, env=env, cwd=str(tmp))
        try:
            yield client
        finally:
            await client.aclose()
        return
    proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=str(tmp), stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    url = ""
    while not url:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise RuntimeError(f"{name} server exited early")
        match = LISTENING.search(line)
        if match:
            url = match.group(1)
    drain = asyncio.get_running_loop().create_task(_drain(proc))
    client = await _connect(name, url, prefix, concurrency)
    try:
        yield client
    finally:
        await client.aclose()
        os.killpg(proc.pid, signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        drain.cancel()
        if name == "redis-streams":
            import redis

            r = redis.Redis.from_url(REDIS_URL)
            keys = list(r.scan_iter(f"{prefix}*"))
            if keys:
                r.delete(*keys)
            r.close()


async def _drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    while await proc.stderr.readline():
        pass


async def _connect(name: str, url: str, prefix: str, concurrency: int) -> Any:
    if name == "http":
        return HttpClient(url, concurrency)
    if name == "unix":
        from iac_code_transport_stdio.ndjson_client import NdjsonClient

        return await NdjsonClient.connect_unix(url.removeprefix("unix://"))
    if name == "websocket":
        from iac_code_transport_http.websocket_client import WebSocketClient

        return await WebSocketClient.connect(url)
    if name == "grpc-jsonrpc":
        from iac_code_transport_grpc.jsonrpc_client import GrpcJsonRpcClient

        return GrpcJsonRpcClient(url)
    from iac_code_transport_redis.client import RedisStreamsClient

    return RedisStreamsClient(REDIS_URL, request_stream=f"{prefix}:req")


def _body() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "SendMessage", "params": {
        "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}


async def load(client: Any, args: argparse.Namespace) -> tuple[float, list[float], int]:
    latencies: list[float] = []
    errors = 0
    state = {"running": True, "recording": False}

    async def worker() -> None:
        nonlocal errors
        while state["running"]:
            t0 = time.perf_counter()
            try:
                reply = await client.request(_body(), headers=VERSION)
                ok = reply.get("result", {}).get("task", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
            except Exception:
                ok = False
            if state["recording"]:
                if ok:
                    latencies.append(time.perf_counter() - t0)
                else:
                    errors += 1

    workers = [asyncio.create_task(worker()) for _ in range(args.concurrency)]
    await asyncio.sleep(args.warmup)
    state["recording"] = True
    started = time.perf_counter()
    await asyncio.sleep(args.duration)
    state["recording"] = False
    elapsed = time.perf_counter() - started
    state["running"] = False
    await asyncio.gather(*workers, return_exceptions=True)
    return elapsed, latencies, errors


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


async def amain(args: argparse.Namespace) -> int:
    pin = (os.cpu_count() or 1) >= 2 and not args.no_pin
    if pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {1})
    rows = []
    with tempfile.TemporaryDirectory(prefix="a2a-bench-transports-") as tmp:
        for name in args.transports:
            async with serving(name, Path(tmp), 0 if pin else None, args.concurrency) as client:
                elapsed, latencies, errors = await load(client, args)
            rows.append((name, len(latencies) / elapsed, percentile(latencies, 50) * 1e3,
                         percentile(latencies, 99) * 1e3, errors))
    http = next((r[1] for r in rows if r[0] == "http"), 0.0)
    print(f"SendMessage, trivial agent, persistence on; c={args.concurrency}, warm-up {args.warmup:g}s, "
          f"measure {args.duration:g}s; server on CPU 0, client on CPU 1")
    print(f"{'transport':<14} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'vs http':>8}")
    print("-" * 58)
    for name, rps, p50, p99, errors in rows:
        ratio = f"x{rps / http:.2f}" if http else "-"
        print(f"{name:<14} {rps:>8.0f} {p50:>8.2f} {p99:>8.2f} {errors:>6} {ratio:>8}")
    return 1 if any(r[4] for r in rows) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--transports", nargs="+", default=list(TRANSPORTS))
    parser.add_argument("--no-pin", action="store_true")
    return asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
