#!/usr/bin/env python3
"""SendMessage and GetTask over the HTTP+JSON (REST) and gRPC bindings: ours against a2a-sdk's own servers.

In one run, with the same trivial agent (``trivial_agent.TrivialExecutor``):

* reference REST: a2a-sdk's Starlette app (``create_rest_routes``) on uvicorn
  with uvloop and httptools (``reference_server.py``);
* reference gRPC: a2a-sdk's ``GrpcHandler`` on grpcio's asyncio server
  (``reference_grpc_server.py``);
* ours: one ``iac-code a2a --transport http --transport grpc`` process serving
  both, persistence on (a fresh directory), as a new user has it;
* the grpcio floor: a servicer answering every call with a constant
  (``grpc_floor_server.py``), the most grpcio's asyncio server sustains here, so
  ``floor / reference`` is the highest gRPC ratio any implementation can show.

Servers run one after the other pinned to CPU 0, the load generator on CPU 1.
For each binding and call it prints requests/s, p50/p99 and errors, then the
ratio ours/reference (target ≥ 1.5× requests/s, lower p99).

    uv run --group bench python benchmarks/bench_bindings.py [--duration 5 --concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from loadgen import Scenario, percentile, run_scenario  # noqa: E402

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@dataclass
class Result:
    binding: str
    call: str
    server: str
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _message() -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hello"}]}


def _pinned(argv: list[str], cpu: int | None) -> list[str]:
    if cpu is not None and shutil.which("taskset"):
        return ["taskset", "-c", str(cpu), *argv]
    return argv


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early ({proc.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} not ready in {timeout:g}s")


def start(argv: list[str], ports: list[int], cpu: int | None, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(_pinned(argv, cpu), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for port in ports:
        _wait_port(port, proc)
    time.sleep(0.5)  # let the HTTP app finish its start-up after the bind
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ------------------------------------------------------------------ REST


def _rest_send(port: int) -> str:
    body = json.dumps({"message": _message()}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/message:send", data=body, headers=HEADERS)
    with urllib.request.urlopen(request, timeout=10) as r:
        return str(json.loads(r.read())["task"]["id"])


def _rest_check_send(obj: Any) -> str | None:
    state = (obj.get("task") or {}).get("status", {}).get("state") if isinstance(obj, dict) else None
    return None if state == "TASK_STATE_COMPLETED" else f"REST SendMessage: {str(obj)[:200]}"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def quiesce(pid: int, bound: float = 30.0) -> float:
    """Wait (at most ``bound`` s) until the server uses under 5 % of a core, so each scenario starts from a
    quiet server, not during the background work the previous one left (e.g. snapshot writes); seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < bound:
        before = _cpu_seconds(pid)
        await asyncio.sleep(0.5)
        if _cpu_seconds(pid) - before < 0.025:
            break
    return time.perf_counter() - started


Quiet = Callable[[], Awaitable[float]] | None


async def bench_rest(server: str, port: int, args: argparse.Namespace, quiet: Quiet = None) -> list[Result]:
    task_id = _rest_send(port)

    def send_body() -> bytes:
        return json.dumps({"message": _message()}).encode()

    def check_get(obj: Any) -> str | None:
        ok = isinstance(obj, dict) and obj.get("id") == task_id
        return None if ok else f"REST GetTask: {str(obj)[:200]}"

    scenarios = [
        Scenario("SendMessage", send_body, validate=_rest_check_send, path="/message:send", jsonrpc=False),
        Scenario("GetTask", lambda: b"", validate=check_get, method="GET", path=f"/tasks/{task_id}", jsonrpc=False),
    ]
    results = []
    for scenario in scenarios:
        if quiet is not None:
            await quiet()
        res = await run_scenario(scenario, "127.0.0.1", port, concurrency=args.concurrency,
                                 warmup_s=args.warmup, duration_s=args.duration)
        lat = sorted(res.latencies_s)
        for sample in res.error_samples[:2]:
            print(f"  {server} REST {scenario.name} error: {sample}", file=sys.stderr)
        results.append(Result("HTTP+JSON", scenario.name, server, res.ok / res.duration_s,
                              percentile(lat, 50) * 1e3, percentile(lat, 99) * 1e3, res.errors))
    return results


# ------------------------------------------------------------------ gRPC


async def _grpc_run(target: str, call: str, make: Any, args: argparse.Namespace) -> tuple[float, list[float], int]:
    import grpc
    from a2a.types import a2a_pb2_grpc

    channels = [grpc.aio.insecure_channel(target) for _ in range(4)]
    stubs = [a2a_pb2_grpc.A2AServiceStub(c) for c in channels]
    metadata = (("a2a-version", "1.0"),)
    latencies: list[float] = []
    errors = 0
    state = {"running": True, "recording": False}

    async def worker(n: int) -> None:
        nonlocal errors
        method = getattr(stubs[n % len(stubs)], call)
        while state["running"]:
            t0 = time.perf_counter()
            try:
                await method(make(), metadata=metadata, timeout=10)
            except grpc.aio.AioRpcError:
                if state["recording"]:
                    errors += 1
                continue
            if state["recording"]:
                latencies.append(time.perf_counter() - t0)

    workers = [asyncio.create_task(worker(n)) for n in range(args.concurrency)]
    await asyncio.sleep(args.warmup)
    state["recording"] = True
    started = time.perf_counter()
    await asyncio.sleep(args.duration)
    state["recording"] = False
    elapsed = time.perf_counter() - started
    state["running"] = False
    await asyncio.gather(*workers, return_exceptions=True)
    for channel in channels:
        await channel.close()
    return elapsed, latencies, errors


async def bench_grpc(server: str, port: int, args: argparse.Namespace, quiet: Quiet = None) -> list[Result]:
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.protobuf.json_format import ParseDict

    target = f"127.0.0.1:{port}"

    def send() -> Any:
        return a2a_pb2.SendMessageRequest(message=ParseDict(_message(), a2a_pb2.Message()))

    async with grpc.aio.insecure_channel(target) as channel:
        first = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            send(), metadata=(("a2a-version", "1.0"),), timeout=10)
    task_id = first.task.id
    results = []
    for call, make in (("SendMessage", send), ("GetTask", lambda: a2a_pb2.GetTaskRequest(id=task_id))):
        if quiet is not None:
            await quiet()
        elapsed, latencies, errors = await _grpc_run(target, call, make, args)
        lat = sorted(latencies)
        results.append(Result("GRPC", call, server, len(lat) / elapsed, percentile(lat, 50) * 1e3,
                              percentile(lat, 99) * 1e3, errors))
    return results


# ------------------------------------------------------------------ main


def _table(results: list[Result]) -> str:
    lines = [f"{'binding':<10} {'call':<12} {'server':<10} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}",
             "-" * 68]
    for r in results:
        lines.append(f"{r.binding:<10} {r.call:<12} {r.server:<10} {r.rps:>8.0f} {r.p50_ms:>8.2f} {r.p99_ms:>8.2f} "
                     f"{r.errors:>6}")
    lines.append("")
    lines.append("ratio ours/reference (target x1.5 req/s, lower p99):")
    for binding in ("HTTP+JSON", "GRPC"):
        for call in ("SendMessage", "GetTask"):
            pair = {r.server: r for r in results if r.binding == binding and r.call == call}
            if {"ours", "reference"} <= pair.keys() and pair["reference"].rps:
                ratio = pair["ours"].rps / pair["reference"].rps
                p99 = pair["ours"].p99_ms / pair["reference"].p99_ms if pair["reference"].p99_ms else 0.0
                met = "met" if ratio >= 1.5 and p99 < 1.0 else "NOT met"
                lines.append(f"  {binding:<10} {call:<12} req/s x{ratio:.2f}   p99 x{p99:.2f}   ({met})")
    floors = {r.call: r for r in results if r.server == "floor"}
    if floors:
        lines.append("")
        lines.append("grpcio floor/reference (the most any server on grpcio's asyncio server could show):")
        for call, floor in floors.items():
            reference = next((r for r in results if r.binding == "GRPC" and r.call == call and r.server == "reference"),
                             None)
            if reference is not None and reference.rps:
                lines.append(f"  GRPC       {call:<12} req/s x{floor.rps / reference.rps:.2f}")
    return "\n".join(lines)


async def amain(args: argparse.Namespace) -> int:
    server_cpu, client_cpu = (0, 1) if (os.cpu_count() or 1) >= 2 and not args.no_pin else (None, None)
    if client_cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {client_cpu})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH_DIR), os.environ.get("PYTHONPATH")])),
           "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="a2a-bench-bindings-") as tmp:
        http_port, grpc_port = free_port(), free_port()
        if args.only != "ours":
            results += await _references(http_port, grpc_port, server_cpu, env, args)
        if args.only != "reference":
            results += await _ours(Path(tmp), http_port, grpc_port, server_cpu, env, args)
    print(f"trivial agent; c={args.concurrency}, warm-up {args.warmup:g}s, measure {args.duration:g}s; "
          "ours: one process serving both bindings, persistence on; references keep nothing on disk")
    print(_table(results))
    return 1 if any(r.errors for r in results) else 0


async def _references(http_port: int, grpc_port: int, server_cpu: int | None, env: dict[str, str],
                      args: argparse.Namespace) -> list[Result]:
    results: list[Result] = []
    runs = (("reference_server.py", http_port, bench_rest, "reference"),
            ("reference_grpc_server.py", grpc_port, bench_grpc, "reference"),
            ("grpc_floor_server.py", grpc_port, bench_grpc, "floor"))
    for script, port, bench, server in runs:
        proc = start([sys.executable, str(BENCH_DIR / script), "--port", str(port)], [port], server_cpu, env)
        try:
            results += await bench(server, port, args, lambda pid=proc.pid: quiesce(pid))
        finally:
            stop(proc)
    return results


async def _ours(tmp: Path, http_port: int, grpc_port: int, server_cpu: int | None, env: dict[str, str],
                args: argparse.Namespace) -> list[Result]:
    config = tmp / "ours.yml"
    config.write_text("agent-executor: trivial_agent:TrivialExecutor\n"
                      f"persistence-dir: {tmp}/state\ngrpc-port: {grpc_port}\n")
    iac_code = str(Path(sys.executable).with_name("iac-code"))
    proc = start([iac_code, "a2a", "--port", str(http_port), "--transport", "http", "--transport", "grpc",
                  "--config", str(config)], [http_port, grpc_port], server_cpu, env)
    try:
        quiet = lambda: quiesce(proc.pid)  # noqa: E731
        return [*await bench_rest("ours", http_port, args, quiet), *await bench_grpc("ours", grpc_port, args, quiet)]
    finally:
        stop(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--only", choices=("reference", "ours"))
    return asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
