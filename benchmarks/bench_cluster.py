"""Several ``iac-code a2a`` nodes sharing one service on Redis: throughput and cross-node event latency.

Each node is ``iac-code a2a`` as its own process (default offline runtime,
default permission rules, its own persistence directory and scratch config
directory) with the shared-state keys ``task-store: redis``,
``task-store-redis-url`` (db 15 of the local Redis), a key prefix unique to
this run, ``node-id`` and ``node-lease-seconds``. One run measures:

1. throughput and latency of blocking SendMessage ("hello", a new contextId
   per request; the offline runtime ends that turn at once in INPUT_REQUIRED)
   at a fixed number of requests in flight, spread round robin over 1, 2 and 3
   Redis-backed nodes, plus the same load on ONE node with the default local
   store as the baseline, and the ratios between them;
2. cross-node event latency on 3 nodes: a turn on node A pauses for a
   permission answer; node B replays it (``SubscribeToTask``,
   ``Last-Event-ID: 0``) to learn the pause's seq; the streamed answer goes to
   node A, and as soon as its stream shows the continuation's first event, node
   B subscribes (a subscription to a paused turn ends at the pause, on every
   node). Each event id's arrival time on A's answer stream and on B's
   subscription is taken by this one process (same clock); latency =
   t_B(id) - t_A(id), for the live events after B's opening snapshot. The same
   with the subscriber on A itself is printed for comparison.

For each load window it also prints the CPU used by the nodes, redis-server,
the load generator and everything else on the machine (from /proc), and a
WARNING when other processes used over 10% of a core: then run it again.

The machine has two cores: the load generator, every node and redis-server
share them. The load generator is pinned to CPU 1 (``--no-pin`` to not pin);
the nodes may run on every core. Redis keys under the run's prefix are deleted
at the end.

Usage (from the repository root)::

    uv run --group bench python benchmarks/bench_cluster.py           # ~1 min
    uv run --group bench python benchmarks/bench_cluster.py --quick   # 2 s windows, 10 turns

Exit status: 0 when every request and turn succeeded, 1 otherwise (the
tables are still printed), 130 if interrupted. Nodes are always stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
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
import redis.asyncio as redis
from iac_server import LISTENING, pin_to_client_core
from loadgen import percentile

from iac_code.testing import A2A_HEADERS, permission_answer_body, permission_envelope, send_message_body

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
PROMPT = "Create a VPC with two vSwitches."
REDIS_URL = "redis://127.0.0.1:6379/15"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Node:
    proc: asyncio.subprocess.Process
    url: str
    drain: asyncio.Task[None] | None = None


@dataclass
class LoadResult:
    setup: str
    nodes: int
    duration_s: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    nodes_cpu_pct: float = 0.0
    client_cpu_pct: float = 0.0
    redis_cpu_pct: float | None = None
    #: whole machine during the window (from /proc/stat): idle, % of all cores; CPU used by
    #: processes other than the nodes, redis-server and this one, % of one core
    idle_pct: float = 0.0
    other_cpu_pct: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies_ms) / self.duration_s if self.duration_s else 0.0

    def pct(self, q: float) -> float:
        return percentile(sorted(self.latencies_ms), q)


def _all_cores() -> None:
    """In the child: undo the load generator's pinning, so a node may run on every core."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


async def start_node(workdir: Path, name: str, settings: dict[str, Any]) -> Node:
    """Run ``iac-code a2a --port 0`` with ``settings`` plus its own persistence directory."""
    config = workdir / f"{name}.json"
    config.write_text(json.dumps({**settings, "persistence-dir": str(workdir / name / "state")}))
    (workdir / "work").mkdir(exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--config", str(config), "--port", "0", cwd=workdir / "work",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, preexec_fn=_all_cores,
        env={**os.environ, "IAC_CODE_CONFIG_DIR": str(workdir / name / "cfg")})
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        if not line:
            raise RuntimeError(f"node {name} exited before it listened")
        match = LISTENING.search(line)
        if match:
            node = Node(proc, match.group(1))
            node.drain = asyncio.get_running_loop().create_task(_drain(proc))
            return node


async def _drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    while await proc.stderr.readline():
        pass


async def stop_nodes(nodes: list[Node]) -> None:
    for node in nodes:
        if node.proc.returncode is None:
            node.proc.send_signal(signal.SIGTERM)
    for node in nodes:
        try:
            await asyncio.wait_for(node.proc.wait(), 30)
        except TimeoutError:
            node.proc.kill()
            await node.proc.wait()
        if node.drain is not None:
            node.drain.cancel()


async def start_cluster(workdir: Path, count: int, prefix: str) -> list[Node]:
    """``count`` Redis-backed nodes sharing ``prefix``; if one fails to start the others are stopped."""
    started = await asyncio.gather(*(start_node(workdir, f"node-{i}", {
        "task-store": "redis", "task-store-redis-url": REDIS_URL, "task-store-key-prefix": prefix,
        "node-id": f"node-{i}", "node-lease-seconds": 10}) for i in range(count)), return_exceptions=True)
    nodes = [n for n in started if isinstance(n, Node)]
    for outcome in started:
        if isinstance(outcome, BaseException):
            await stop_nodes(nodes)
            raise outcome
    return nodes


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def machine_ticks() -> tuple[int, int, int]:
    """All CPUs' (total, idle, iowait) ticks since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]), fields[3], fields[4]


def redis_server_pids() -> list[int]:
    """Local redis-server processes whose CPU time this user may read (none: no column)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "redis-server":
                    cpu_seconds(int(entry.name))
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


# --- 1. throughput -----------------------------------------------------------------------------------


async def load(http: aiohttp.ClientSession, setup: str, nodes: list[Node], *, concurrency: int,
               warmup_s: float, duration_s: float) -> LoadResult:
    """Closed loop: ``concurrency`` workers, each request to the next node round robin."""
    result = LoadResult(setup, len(nodes), duration_s)
    counter = itertools.count()
    urls = [node.url for node in nodes]
    t_start = time.perf_counter() + warmup_s
    t_stop = t_start + duration_s
    cpu: dict[str, float] = {}
    redis_pids = redis_server_pids()

    async def worker() -> None:
        while (now := time.perf_counter()) < t_stop:
            i = next(counter)
            body = json.dumps(send_message_body("hello", message_id=f"m-{i}-{uuid.uuid4().hex}",
                                                request_id=i, contextId=f"ctx-{uuid.uuid4().hex}"))
            t0 = now
            try:
                async with http.post(urls[i % len(urls)], data=body, headers=A2A_HEADERS) as response:
                    raw = await response.read()
                    status = response.status
                error = None if status == 200 and b'"result"' in raw and b"TASK_STATE_INPUT_REQUIRED" in raw \
                    else f"HTTP {status}: {raw[:200]!r}"
            except (aiohttp.ClientError, OSError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            t1 = time.perf_counter()
            if t0 >= t_start and t1 <= t_stop:
                if error is None:
                    result.latencies_ms.append((t1 - t0) * 1000)
                else:
                    result.errors += 1
                    if len(result.error_samples) < 3:
                        result.error_samples.append(error)

    async def sample_cpu() -> None:
        await asyncio.sleep(max(0.0, t_start - time.perf_counter()))
        cpu["nodes0"] = sum(cpu_seconds(n.proc.pid) for n in nodes)
        cpu["client0"] = time.process_time()
        cpu["redis0"] = sum(cpu_seconds(pid) for pid in redis_pids)
        cpu["total0"], cpu["idle0"], cpu["iowait0"] = machine_ticks()
        await asyncio.sleep(max(0.0, t_stop - time.perf_counter()))
        cpu["nodes1"] = sum(cpu_seconds(n.proc.pid) for n in nodes)
        cpu["client1"] = time.process_time()
        cpu["redis1"] = sum(cpu_seconds(pid) for pid in redis_pids)
        cpu["total1"], cpu["idle1"], cpu["iowait1"] = machine_ticks()

    await asyncio.gather(sample_cpu(), *(worker() for _ in range(concurrency)))
    result.nodes_cpu_pct = 100 * (cpu["nodes1"] - cpu["nodes0"]) / duration_s
    result.client_cpu_pct = 100 * (cpu["client1"] - cpu["client0"]) / duration_s
    ticks = max(1.0, cpu["total1"] - cpu["total0"])
    result.idle_pct = 100 * (cpu["idle1"] - cpu["idle0"]) / ticks
    if redis_pids:
        result.redis_cpu_pct = 100 * (cpu["redis1"] - cpu["redis0"]) / duration_s
    busy = 100 * (os.cpu_count() or 1) * (1 - (cpu["idle1"] - cpu["idle0"] + cpu["iowait1"] - cpu["iowait0"]) / ticks)
    result.other_cpu_pct = max(0.0, busy - result.nodes_cpu_pct - (result.redis_cpu_pct or 0.0)
                               - result.client_cpu_pct)
    return result


# --- 2. cross-node event latency ----------------------------------------------------------------------


def method(name: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": name, "method": name, "params": params}


async def read_stream(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
                      headers: dict[str, str] | None = None, seen: asyncio.Event | None = None,
                      after: int = 0, resting_ends: bool = False) -> list[tuple[int, float]]:
    """Read an SSE stream to its end; return (event id, arrival time) in order of arrival.

    ``seen`` is set when the first event with an id above ``after`` arrives. ``resting_ends``:
    a subscription that opens on a task resting after its turn (which would wait for a next
    turn) raises ``RuntimeError`` at once.
    """
    arrivals: list[tuple[int, float]] = []
    async with http.post(url, json=body, headers={**A2A_HEADERS, **(headers or {})}) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {(await response.read())[:200]!r}")
        event_id: str | None = None
        data: bytes | None = None
        async for raw in response.content:
            line = raw.rstrip(b"\r\n")
            if line.startswith(b"id:"):
                event_id = line[3:].strip().decode()
            elif line.startswith(b"data:"):
                data = line[5:].strip()
            elif not line:
                if data is not None:
                    if b'"error"' in data:
                        raise RuntimeError(f"error event: {data[:200]!r}")
                    if resting_ends and not arrivals and b'"task"' in data and b"TASK_STATE_INPUT_REQUIRED" in data:
                        raise RuntimeError("the task rests: its turn is over")
                    if event_id is not None:
                        arrivals.append((int(event_id), time.perf_counter()))
                        if seen is not None and int(event_id) > after:
                            seen.set()
                event_id, data = None, None
    return arrivals


@dataclass
class Latencies:
    cross: list[float] = field(default_factory=list)
    same: list[float] = field(default_factory=list)


async def pause_turn(http: aiohttp.ClientSession, a: Node, turn: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start a turn on ``a`` that pauses for a permission answer; the paused task and its envelope."""
    async with http.post(a.url, json=send_message_body(
            PROMPT, message_id=f"lat-{turn}-{uuid.uuid4().hex}", contextId=f"lat-{uuid.uuid4().hex}"),
            headers=A2A_HEADERS) as response:
        reply = await response.json()
    task = reply["result"]["task"]
    envelope = permission_envelope(task)
    if envelope is None:
        raise RuntimeError(f"turn {turn} did not pause for a permission answer: {task['status']}")
    return task, envelope


def answer(envelope: dict[str, Any], turn: int) -> dict[str, Any]:
    return permission_answer_body(envelope, message_id=f"ans-{turn}-{uuid.uuid4().hex}",
                                  method="SendStreamingMessage")


def deltas(on_a: list[tuple[int, float]], on_b: list[tuple[int, float]], after: int) -> list[float]:
    """t_B(id) - t_A(id) in ms for every id above ``after`` seen on both streams."""
    first_a = dict(reversed(on_a))
    return [(t - first_a[i]) * 1000 for i, t in on_b if i > after and i in first_a]


async def follow_turn(http: aiohttp.ClientSession, a: Node, b: Node, turn: int) -> list[float]:
    """Pause a turn on ``a``, stream the answer on ``a``, follow the resumed turn from ``b``.

    A subscription to a paused turn ends at the pause (on every node), so ``b``
    subscribes as soon as A's answer stream shows the first event of the
    continuation; its opening task snapshot is not counted, only the live events
    after it.
    """
    task, envelope = await pause_turn(http, a, turn)
    replay = await read_stream(http, b.url, method("SubscribeToTask", id=task["id"]), {"Last-Event-ID": "0"})
    if not replay:
        raise RuntimeError(f"turn {turn}: replay from Last-Event-ID 0 was empty")
    pause_seq = replay[-1][0]
    resumed = asyncio.Event()
    answering = asyncio.create_task(read_stream(http, a.url, answer(envelope, turn), seen=resumed, after=pause_seq))
    waiter = asyncio.create_task(resumed.wait())
    await asyncio.wait({answering, waiter}, return_when=asyncio.FIRST_COMPLETED)
    on_b: list[tuple[int, float]] = []
    if resumed.is_set():
        try:
            on_b = await asyncio.wait_for(read_stream(http, b.url, method("SubscribeToTask", id=task["id"]),
                                                      resting_ends=True), 60)
        except RuntimeError:
            on_b = []  # the turn stopped before the subscription arrived (the task rests)
    waiter.cancel()
    on_a = await asyncio.wait_for(answering, 60)
    return deltas(on_a, on_b[1:], pause_seq)


async def event_latency(http: aiohttp.ClientSession, nodes: list[Node], turns: int, result: Latencies) -> None:
    """Cross-node and same-node samples, turns interleaved so both see the same conditions."""
    for turn in range(turns):
        a = nodes[turn % len(nodes)]
        result.cross += await follow_turn(http, a, nodes[(turn + 1) % len(nodes)], 2 * turn)
        result.same += await follow_turn(http, a, a, 2 * turn + 1)


# --- run ------------------------------------------------------------------------------------------------


async def delete_keys(prefix: str) -> int:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 1000):
            await client.delete(*keys[start:start + 1000])
        return len(keys)
    finally:
        await client.aclose()


def print_load(results: list[LoadResult], args: argparse.Namespace, pinned: bool) -> None:
    cores = os.cpu_count() or 1
    placement = ("load generator pinned to CPU 1, nodes on every core" if pinned
                 else "nothing pinned")
    print(f"machine: {cores} cores shared by the load generator, every node and redis-server ({placement})")
    print(f'1. blocking SendMessage "hello" (new contextId each), {args.concurrency} in flight, '
          f"{args.duration:g} s measured after {args.warmup:g} s warm-up, round robin over the nodes")
    print()
    print(f"{'setup':<18}{'nodes':>6}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
          f"{'nodes CPU %':>13}{'redis CPU %':>13}{'client CPU %':>14}{'other CPU %':>13}{'idle %':>8}")
    print("-" * 117)
    for r in results:
        print(f"{r.setup:<18}{r.nodes:>6}{r.rate:>9.1f}{r.pct(50):>9.1f}{r.pct(99):>9.1f}{r.errors:>8}"
              f"{r.nodes_cpu_pct:>13.0f}{'-' if r.redis_cpu_pct is None else f'{r.redis_cpu_pct:.0f}':>13}"
              f"{r.client_cpu_pct:>14.0f}{r.other_cpu_pct:>13.0f}{r.idle_pct:>8.0f}")
    print(f"(process CPU % is of one core, {cores} cores = {100 * cores}%; other = the rest of the machine's busy"
          " time; idle % is of the whole machine)")
    by = {(r.setup, r.nodes): r.rate for r in results}
    local, one = by.get(("local store", 1), 0.0), by.get(("redis", 1), 0.0)

    def ratio(x: float, y: float) -> str:
        return f"{x / y:.2f}" if y else "-"

    print(f"ratios: redis 1 node / local {ratio(one, local)}   2 nodes / 1 node "
          f"{ratio(by.get(('redis', 2), 0.0), one)}   3 nodes / 1 node {ratio(by.get(('redis', 3), 0.0), one)}")
    noisy = [f"{r.setup} x{r.nodes}" for r in results if r.other_cpu_pct > 10]
    if noisy:
        print(f"WARNING: other processes used over 10% of a core during: {', '.join(noisy)}; run it again")
    for r in results:
        for sample in r.error_samples:
            print(f"  error ({r.setup}, {r.nodes} nodes): {sample}")


def print_latency(result: Latencies, turns: int) -> None:
    print()
    print(f"2. event latency, 3 nodes on redis, {turns} turns per row: turn paused on node A, answer streamed")
    print("   to A, subscriber on B; latency = arrival on B - arrival on A of each event id seen on both")
    print()
    print(f"{'subscriber':<26}{'samples':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    print("-" * 62)
    for name, values in (("other node (B != A)", result.cross), ("same node (B = A)", result.same)):
        ordered = sorted(values)
        print(f"{name:<26}{len(values):>9}{percentile(ordered, 50):>9.2f}{percentile(ordered, 99):>9.2f}"
              f"{(ordered[-1] if ordered else 0.0):>9.2f}")
    print("   (each subscriber attaches once the answer stream shows the continuation's first event;")
    print("   only the live events after its opening snapshot count)")


def print_note(results: list[LoadResult]) -> None:
    cores = os.cpu_count() or 1
    print(f"note: {cores} cores for everything. The nodes, the load generator and redis-server compete for the")
    print("same cores, so an extra node adds a process, not CPU: the node-count ratios show the cost of sharing")
    print("state on Redis on this box, not how the service scales when each node has its own cores.")
    multi = [r for r in results if r.setup == "redis" and r.nodes >= 2]
    if not multi:
        return
    low, high = min(r.idle_pct for r in multi), max(r.idle_pct for r in multi)
    if high < 15:
        print(f"CPU is the limit: the machine was {low:.0f}-{high:.0f}% idle during the 2- and 3-node runs (one node,")
        print("one Python process, cannot use both cores; several can, and then they fill the box).")
    else:
        print(f"CPU was NOT saturated, though: the machine was {low:.0f}-{high:.0f}% idle during the 2- and 3-node")
        print("runs, so the nodes are held back by something other than cores (waiting on Redis or the disk).")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s windows and 10 latency turns")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--duration", type=float, default=None, help="measured seconds per setup (5, quick 2)")
    parser.add_argument("--warmup", type=float, default=None, help="unrecorded seconds per setup (1, quick 0.5)")
    parser.add_argument("--turns", type=int, default=None, help="latency turns per subscriber (30, quick 10)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the load generator to CPU 1")
    args = parser.parse_args()
    args.duration = args.duration if args.duration is not None else (2.0 if args.quick else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 1.0)
    args.turns = args.turns if args.turns is not None else (10 if args.quick else 30)
    pinned = not args.no_pin and (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    if pinned:
        pin_to_client_core()

    run_prefix = f"bench-cluster-{uuid.uuid4().hex}"
    workdir = Path(tempfile.mkdtemp(prefix="iac-code-bench-cluster-"))
    results: list[LoadResult] = []
    latencies = Latencies()
    failed = False
    nodes: list[Node] = []
    print(f"iac-code A2A, several nodes: task-store redis at {REDIS_URL}, key prefix {run_prefix}*")
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + 8, limit_per_host=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
            for setup, count in (("local store", 1), ("redis", 1), ("redis", 2), ("redis", 3)):
                run_dir = workdir / f"{setup.replace(' ', '-')}-{count}"
                run_dir.mkdir()
                if setup == "local store":
                    nodes = [await start_node(run_dir, "node-0", {})]
                else:
                    nodes = await start_cluster(run_dir, count, f"{run_prefix}-{count}:")
                results.append(await load(http, setup, nodes, concurrency=args.concurrency,
                                          warmup_s=args.warmup, duration_s=args.duration))
                if count < 3:
                    await stop_nodes(nodes)
                    nodes = []
            print_load(results, args, pinned)
            failed = any(r.errors or not r.latencies_ms for r in results)
            try:
                await event_latency(http, nodes, args.turns, latencies)
            except (RuntimeError, KeyError, TimeoutError, aiohttp.ClientError) as exc:
                print(f"event latency FAILED: {type(exc).__name__}: {exc}")
                failed = True
            print_latency(latencies, args.turns)
            failed = failed or not latencies.cross or not latencies.same
    finally:
        await stop_nodes(nodes)
        removed = await delete_keys(run_prefix)
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print_note(results)
    print(f"(redis keys removed at the end: {removed})")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        try:
            import uvloop
        except ImportError:
            sys.exit(asyncio.run(main()))
        sys.exit(uvloop.run(main()))
    except KeyboardInterrupt:
        sys.exit(130)
