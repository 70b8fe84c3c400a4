#!/usr/bin/env python3
"""The cost of observability: SendMessage throughput with metrics off, on (scraped every second), and tracing on.

One ``iac-code a2a`` server at a time (the trivial agent, persistence on, CPU 0),
the load generator on CPU 1 (32 keep-alive connections). With metrics on, a
scraper in this process fetches ``/metrics`` every second during the run.
Target: metrics on within 5 % of metrics off. Tracing on (``tracing: true``,
metrics on, ``OTEL_TRACES_EXPORTER=none`` so no collector is needed: spans are
created, sampled and ended, then dropped) is reported for its cost.

    uv run --group bench python benchmarks/bench_metrics.py [--duration 5 --rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

import aiohttp

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bench_bindings import free_port, start, stop  # noqa: E402
from loadgen import Scenario, percentile, run_scenario  # noqa: E402


def _body() -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}).encode()


async def _scrape(port: int, stop_event: asyncio.Event, counts: list[int]) -> None:
    async with aiohttp.ClientSession() as http:
        while not stop_event.is_set():
            async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
                await r.read()
                counts.append(r.status)
            try:
                await asyncio.wait_for(stop_event.wait(), 1.0)
            except TimeoutError:
                pass


async def one(mode: str, tmp: Path, args: argparse.Namespace) -> tuple[float, float, int]:
    port = free_port()
    metrics = mode != "off"
    config = tmp / f"metrics-{mode}-{port}.yml"
    config.write_text(f"agent-executor: trivial_agent:TrivialExecutor\npersistence-dir: {tmp}/state-{port}\n"
                      f"metrics: {str(metrics).lower()}\ntracing: {str(mode == 'tracing').lower()}\n")
    env = {**os.environ, "PYTHONPATH": str(BENCH_DIR), "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false",
           "OTEL_TRACES_EXPORTER": "none"}
    iac_code = str(Path(sys.executable).with_name("iac-code"))
    proc = start([iac_code, "a2a", "--port", str(port), "--config", str(config)], [port], 0, env)
    scrapes: list[int] = []
    done = asyncio.Event()
    scraper = asyncio.create_task(_scrape(port, done, scrapes)) if metrics else None
    try:
        result = await run_scenario(Scenario("SendMessage", _body), "127.0.0.1", port, concurrency=args.concurrency,
                                    warmup_s=args.warmup, duration_s=args.duration)
    finally:
        done.set()
        if scraper is not None:
            await scraper
        stop(proc)
    if metrics and (not scrapes or any(s != 200 for s in scrapes)):
        raise RuntimeError(f"scrapes failed: {scrapes}")
    return result.ok / result.duration_s, percentile(sorted(result.latencies_s), 99) * 1e3, result.errors


async def amain(args: argparse.Namespace) -> int:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    modes = ("off", "metrics", "tracing")
    rows: dict[str, list[tuple[float, float, int]]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="a2a-bench-metrics-") as tmp:
        for _ in range(args.rounds):  # alternate, so drift hits all alike
            for mode in modes:
                rows[mode].append(await one(mode, Path(tmp), args))
    print(f"SendMessage, trivial agent, c={args.concurrency}, {args.rounds} round(s) of {args.duration:g}s each; "
          "metrics on = /metrics scraped every second; tracing = tracing: true + metrics, exporter none")
    best = {}
    labels = {"off": "metrics off       ", "metrics": "metrics on        ", "tracing": "tracing + metrics "}
    for mode in modes:
        rps = max(r[0] for r in rows[mode])
        p99 = min(r[1] for r in rows[mode])
        best[mode] = rps
        runs = ", ".join(f"{r[0]:.0f}" for r in rows[mode])
        print(f"{labels[mode]} best {rps:7.0f} req/s  p99 {p99:6.2f} ms  (runs: {runs})")
    ratio = best["metrics"] / best["off"] if best["off"] else 0.0
    print(f"metrics on/off: x{ratio:.3f} ({'within' if ratio >= 0.95 else 'NOT within'} 5 %)")
    print(f"tracing cost: x{best['tracing'] / best['off']:.3f} of metrics off" if best["off"] else "")
    return 0 if all(r[2] == 0 for group in rows.values() for r in group) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    return asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
