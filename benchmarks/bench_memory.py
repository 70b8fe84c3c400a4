#!/usr/bin/env python3
"""Memory is bounded: RSS of ``iac-code a2a`` after many finished tasks and turns and abandoned permission waits.

Three phases, each against a fresh ``iac-code a2a`` subprocess (own scratch
persistence-dir, config file and ``IAC_CODE_CONFIG_DIR``, an ephemeral port,
ready when ``GET /health`` is 200; pinned to CPU 0, the client to CPU 1):

1. **finished tasks** (``agent-executor: trivial_agent:TrivialExecutor``):
   ``--tasks`` (100,000) SendMessage requests, each without a contextId (a new
   context each, as independent callers do), ``--concurrency`` (32) in flight.
   Every task ends COMPLETED. RSS is read at the start, every 10 %, and once
   it has settled at the end.
2. **finished turns on the default runtime** (no agent-executor, default
   config): ``--runtime-tasks`` (default: ``--tasks``) SendMessage "hello"
   requests, a new context each; the offline runtime answers and ends the turn
   in INPUT_REQUIRED (waiting for the next message). RSS as in phase 1.
3. **abandoned permission waits** (the default built-in offline runtime, no
   agent-executor, with ``permission-timeout: 2``): ``--waits`` (3,000)
   SendStreamingMessage requests "Create a VPC with two vSwitches." (the
   offline runtime generates a template and asks to write it with
   ``write_file``), each in a new contextId, read until the INPUT_REQUIRED
   permission event and then dropped without answering. Nobody answers, so
   each question is denied after ``permission-timeout`` seconds and the turn
   ends. The script polls GetTask until no task is waiting any more (bounded),
   then reports RSS. Because dropped waits stay active until their timeout,
   more than the default 100 are active at once for the (single, anonymous)
   caller, so this server's config raises ``max-active-turns-per-caller`` to
   ``--waits`` when that is over 100 (printed).

RSS is ``VmRSS`` of the server process (``/proc/<pid>/status``). The table
shows phase, tasks, RSS MiB, delta MiB against that server's start, and the
delta per task in bytes. ``--json`` prints the same as JSON on stdout.

    uv run --group bench python benchmarks/bench_memory.py                          # ~15 min
    uv run --group bench python benchmarks/bench_memory.py --tasks 20000 --waits 500  # quick

Exit status: 0 when every phase ran with no failed request and every wait was
decided in time; 1 otherwise (the table is still printed); 130 if interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

BENCH_DIR = Path(__file__).resolve().parent
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
MiB = 1024 * 1024
#: A prompt the offline runtime answers by generating a template and asking to write it (write_file).
PERMISSION_PROMPT = "Create a VPC with two vSwitches."
# The offline runtime answers "hello" and ends its turn waiting for the next message.
RUNTIME_ENDS = (b'"TASK_STATE_INPUT_REQUIRED"', b'"TASK_STATE_COMPLETED"')
RUNNING_STATES = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}


def log(msg: str) -> None:
    """Progress output (stderr, so ``--json`` stdout stays clean)."""
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# Server process
# ----------------------------------------------------------------------------

class ServerFailed(Exception):
    """The server could not be started, or died."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (ephemeral, chosen by the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    """VmRSS of process ``pid`` in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise ServerFailed(f"no VmRSS for pid {pid}")


@dataclass(eq=False)
class Server:
    """An ``iac-code a2a`` subprocess in its own session."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def cpu_seconds(self) -> float:
        """user+sys CPU seconds the server process has used."""
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss(self) -> int:
        """Current RSS of the server process, in bytes."""
        self.check_alive()
        return rss_bytes(self.proc.pid)

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise ServerFailed(f"{self.name}: server exited with code {self.proc.returncode}\n"
                               f"--- log tail ---\n{self.log_tail()}")

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL if it lingers."""
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            if self.proc.poll() is not None and sig == signal.SIGTERM:
                continue
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass


_LIVE: set[Server] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()
        _LIVE.discard(server)


def start_server(name: str, config_text: str, workdir: Path, *, cpu: int | None, startup_timeout: float) -> Server:
    """Write the config, start ``iac-code a2a`` on a free port, wait for ``GET /health`` == 200."""
    home = workdir / name
    (home / "workspace").mkdir(parents=True)
    config = home / "server.yml"
    config.write_text(config_text)
    port = free_port()
    exe = shutil.which("iac-code", path=str(Path(sys.executable).parent)) or shutil.which("iac-code")
    if exe is None:
        raise ServerFailed("iac-code not found next to the interpreter or on PATH (run with `uv run`)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH_DIR), env.get("PYTHONPATH", "")) if p)
    env["IAC_CODE_CONFIG_DIR"] = str(home / "config-dir")  # nothing lands in ~/.iac-code
    env["PYTHONUNBUFFERED"] = "1"
    log_path = home / "server.log"

    def preexec() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    argv = [exe, "a2a", "--host", "127.0.0.1", "--port", str(port), "--config", str(config)]
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                cwd=str(home / "workspace"), start_new_session=True, preexec_fn=preexec)
    server = Server(name, proc, f"http://127.0.0.1:{port}/", log_path)
    _LIVE.add(server)
    deadline = time.monotonic() + startup_timeout
    while True:
        server.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:  # noqa: S310 - localhost
                if r.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            stop_server(server)
            raise ServerFailed(f"{name}: GET /health not 200 within {startup_timeout:.0f}s\n{server.log_tail()}")
        time.sleep(0.1)


def stop_server(server: Server) -> None:
    server.stop()
    _LIVE.discard(server)


# ----------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------

@dataclass
class Point:
    """One RSS reading."""

    server: str
    phase: str
    tasks: int
    rss_mib: float
    delta_mib: float
    per_task_bytes: float | None


@dataclass
class Phase:
    """Readings and errors of one server."""

    server: str
    start_rss: int = 0
    points: list[Point] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def error(self, msg: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5 and msg not in self.error_samples:
            self.error_samples.append(msg)

    def record(self, server: Server, phase: str, tasks: int, rss: int | None = None) -> Point:
        rss = server.rss() if rss is None else rss
        if not self.points and phase == "start":
            self.start_rss = rss
        delta = rss - self.start_rss
        point = Point(self.server, phase, tasks, rss / MiB, delta / MiB, (delta / tasks) if tasks else None)
        self.points.append(point)
        return point


async def settled_rss(server: Server, seconds: float = 10.0) -> int:
    """RSS once it stops moving (background snapshot writes drain), bounded by ``seconds``."""
    last = server.rss()
    steady = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and steady < 2:
        await asyncio.sleep(0.25)
        now = server.rss()
        steady = steady + 1 if abs(now - last) < 64 * 1024 else 0
        last = now
    return last


class Progress:
    """Prints progress and records RSS every 10 % of ``total``."""

    def __init__(self, server: Server, phase: Phase, label: str, total: int) -> None:
        self.server, self.phase, self.label, self.total = server, phase, label, total
        self.done = 0
        self.next_mark = 1
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()
        self.server_cpu0 = server.cpu_seconds()

    def cpu_note(self) -> str:
        """Server and client CPU use since the start, in % of one core."""
        wall = max(1e-9, time.perf_counter() - self.t0)
        srv = 100 * (self.server.cpu_seconds() - self.server_cpu0) / wall
        cli = 100 * (time.process_time() - self.cpu0) / wall
        return f"server CPU {srv:.0f}%, client CPU {cli:.0f}%"

    def step(self) -> None:
        self.done += 1
        while self.next_mark <= 10 and self.done >= self.total * self.next_mark / 10:
            point = self.phase.record(self.server, f"{self.label} {self.next_mark * 10}%", self.done)
            rate = self.done / max(1e-9, time.perf_counter() - self.t0)
            log(f"  {self.label}: {self.done:>7,}/{self.total:,} ({self.next_mark * 10:>3}%)  {rate:6.0f}/s  "
                f"RSS {point.rss_mib:7.1f} MiB ({point.delta_mib:+.1f})  errors {self.phase.errors}  "
                f"{self.cpu_note()}")
            self.next_mark += 1


async def run_tasks(server: Server, phase: Phase, total: int, concurrency: int,
                    ends: tuple[bytes, ...] = (b'"TASK_STATE_COMPLETED"',)) -> None:
    """``total`` SendMessage "hello" requests, ``concurrency`` in flight; each task must end in one of ``ends``."""
    head = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"'
    tail = b'","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
    progress = Progress(server, phase, "finished tasks", total)
    remaining = total

    async def worker(http: aiohttp.ClientSession) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            body = head + uuid.uuid4().hex.encode() + tail
            try:
                async with http.post(server.url, data=body, headers=HEADERS) as r:
                    reply = await r.read()
                    status = r.status
                if status != 200 or b'"error"' in reply or not any(end in reply for end in ends):
                    phase.error(f"SendMessage: HTTP {status}: {reply[:200]!r}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                phase.error(f"SendMessage: {exc!r}")
                server.check_alive()
            progress.step()

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency),
                                     timeout=aiohttp.ClientTimeout(total=60)) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    phase.elapsed_s = time.perf_counter() - progress.t0
    phase.notes.append(f"{total / max(phase.elapsed_s, 1e-9):.0f} SendMessage/s, {progress.cpu_note()}")


async def one_wait(http: aiohttp.ClientSession, url: str, workspace: str) -> str:
    """Open a turn that asks a permission, read until that INPUT_REQUIRED event, drop it; return the task id."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {
        "messageId": uuid.uuid4().hex, "contextId": f"mem-{uuid.uuid4().hex}", "role": "ROLE_USER",
        "parts": [{"text": PERMISSION_PROMPT}], "metadata": {"iac_code": {"cwd": workspace}}}}}
    task_id = ""
    resp = await http.post(url, json=body, headers=HEADERS)
    try:
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {(await resp.read())[:200]!r}")
        async for line in resp.content:
            if not line.startswith(b"data:"):
                continue
            if not task_id or b"TASK_STATE_INPUT_REQUIRED" in line or b'"error"' in line:
                event = json.loads(line[5:])
                if "error" in event:
                    raise RuntimeError(f"error event: {str(event)[:200]}")
                result = event["result"]
                if "task" in result:
                    task_id = result["task"]["id"]
                update = result.get("statusUpdate", {})
                if update.get("status", {}).get("state") == "TASK_STATE_INPUT_REQUIRED":
                    meta = update.get("metadata", {}).get("iac_code", {})
                    if meta.get("input", {}).get("kind") != "permission":
                        raise RuntimeError(f"INPUT_REQUIRED without a permission request: {str(update)[:200]}")
                    return task_id  # dropped here: never answered
        raise RuntimeError("stream ended without a permission request")
    finally:
        resp.close()  # closes the connection: the client is gone


def _waiting(task: dict[str, Any]) -> bool:
    """Whether a task is still running or paused at an unanswered permission."""
    if task.get("status", {}).get("state") in RUNNING_STATES:
        return True
    permission = task.get("metadata", {}).get("iac_code", {}).get("permission", {})
    return bool(permission.get("pending"))


async def run_waits(server: Server, phase: Phase, total: int, concurrency: int, workspace: str,
                    permission_timeout: float, bound_s: float) -> int:
    """``total`` abandoned permission waits, then poll until all were decided; return how many still wait."""
    progress = Progress(server, phase, "abandoned waits", total)
    task_ids: list[str] = []
    remaining = total

    async def opener(http: aiohttp.ClientSession) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            try:
                task_ids.append(await asyncio.wait_for(one_wait(http, server.url, workspace), 60))
            except (aiohttp.ClientError, TimeoutError, RuntimeError, ValueError, KeyError) as exc:
                phase.error(f"SendStreamingMessage: {exc!r}")
                server.check_alive()
            progress.step()

    timeout = aiohttp.ClientTimeout(total=90)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), timeout=timeout) as http:
        await asyncio.gather(*(opener(http) for _ in range(concurrency)))
    phase.elapsed_s = time.perf_counter() - progress.t0
    phase.notes.append(f"{total / max(phase.elapsed_s, 1e-9):.0f} waits opened/s, {progress.cpu_note()}")
    last_opened = time.monotonic()

    # Wait for the permission timeout to elapse: poll GetTask until nothing waits any more (bounded).
    pending = list(task_ids)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), timeout=timeout) as http:
        async def still_waiting(task_id: str) -> bool:
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id, "historyLength": 1}}
            try:
                async with http.post(server.url, json=body, headers=HEADERS) as r:
                    reply = await r.json(content_type=None)
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                phase.error(f"GetTask: {exc!r}")
                return True
            if "result" not in reply:
                phase.error(f"GetTask: {str(reply)[:200]}")
                return True
            return _waiting(reply["result"])

        sem = asyncio.Semaphore(concurrency)

        async def check(task_id: str) -> bool:
            async with sem:
                return await still_waiting(task_id)

        await asyncio.sleep(max(0.0, permission_timeout - (time.monotonic() - last_opened)))
        deadline = last_opened + permission_timeout + bound_s
        while pending:
            flags = await asyncio.gather(*(check(t) for t in pending))
            pending = [t for t, waiting in zip(pending, flags, strict=True) if waiting]
            log(f"  after the {permission_timeout:g}s permission timeout: {len(task_ids) - len(pending):,} of "
                f"{len(task_ids):,} waits decided, {len(pending):,} still waiting")
            if not pending or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
            server.check_alive()
    return len(pending)


# ----------------------------------------------------------------------------
# Reporting and main
# ----------------------------------------------------------------------------

def format_table(points: list[Point]) -> str:
    hdr = f"{'server':<16} {'phase':<34} {'tasks':>8} {'RSS MiB':>9} {'delta MiB':>10} {'per-task bytes':>15}"
    lines = [hdr, "-" * len(hdr)]
    for p in points:
        per = "-" if p.per_task_bytes is None else f"{p.per_task_bytes:,.0f}"
        lines.append(f"{p.server:<16} {p.phase:<34} {p.tasks:>8,} {p.rss_mib:>9.1f} {p.delta_mib:>+10.1f} {per:>15}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--tasks", type=int, default=100_000, help="finished SendMessage tasks (trivial agent)")
    p.add_argument("--runtime-tasks", type=int, default=None,
                   help="finished SendMessage 'hello' turns on the default offline runtime (default: --tasks)")
    p.add_argument("--waits", type=int, default=3_000, help="abandoned permission waits (offline runtime)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    p.add_argument("--permission-timeout", type=float, default=2.0,
                   help="permission-timeout of the offline-runtime server, seconds")
    p.add_argument("--wait-bound", type=float, default=120.0,
                   help="seconds past the permission timeout to wait for every wait to be decided")
    p.add_argument("--startup-timeout", type=float, default=60.0, help="seconds to wait for GET /health")
    p.add_argument("--no-pin", action="store_true", help="do not pin the server to CPU 0 and the client to CPU 1")
    p.add_argument("--json", action="store_true", help="print machine-readable results on stdout")
    args = p.parse_args(argv)
    if args.runtime_tasks is None:
        args.runtime_tasks = args.tasks
    if min(args.tasks, args.runtime_tasks, args.waits) < 0 or args.concurrency < 1 or args.permission_timeout <= 0:
        p.error("--tasks, --runtime-tasks and --waits must be >= 0, --concurrency >= 1, --permission-timeout > 0")
    return args


def _pinning(no_pin: bool) -> tuple[int | None, str]:
    if no_pin:
        return None, "CPU pinning disabled (--no-pin)"
    try:
        avail = os.sched_getaffinity(0)
    except AttributeError:
        return None, "CPU pinning unsupported on this platform"
    if not {0, 1} <= avail:
        return None, f"CPU pinning skipped: need cores 0 and 1 in affinity set {sorted(avail)}"
    os.sched_setaffinity(0, {1})
    return 0, "server pinned to CPU 0, client to CPU 1"


async def amain(args: argparse.Namespace) -> int:
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, main_task.cancel)
    cpu, pin_note = _pinning(args.no_pin)
    notes = [pin_note]
    log(pin_note)
    phases: list[Phase] = []
    failures: list[str] = []
    still_waiting = 0
    with tempfile.TemporaryDirectory(prefix="iac-bench-memory-") as tmp:
        workdir = Path(tmp)
        finished = (
            (args.tasks, "trivial-agent", "agent-executor: trivial_agent:TrivialExecutor\n",
             "phase 1: {n:,} finished tasks (SendMessage, trivial agent, new context each)", "finished tasks, settled",
             (b'"TASK_STATE_COMPLETED"',)),
            (args.runtime_tasks, "runtime-hello", "",
             "phase 2: {n:,} finished turns (SendMessage 'hello', default offline runtime, new context each)",
             "finished turns, settled", RUNTIME_ENDS),
        )
        for total, name, settings, what, settled_label, ends in finished:
            if not total:
                continue
            phase = Phase(name)
            phases.append(phase)
            state = workdir / name / "state"
            config = f"{settings}persistence-dir: {state}\n"
            log(f"{what.format(n=total)}; persistence on in {state}")
            try:
                server = await asyncio.to_thread(start_server, name, config, workdir, cpu=cpu,
                                                 startup_timeout=args.startup_timeout)
                try:
                    phase.record(server, "start", 0)
                    await run_tasks(server, phase, total, args.concurrency, ends)
                    phase.record(server, settled_label, total, await settled_rss(server))
                finally:
                    await asyncio.to_thread(stop_server, server)
            except ServerFailed as exc:
                failures.append(str(exc))
                log(f"!! {exc}")
        if args.waits:
            phase = Phase("offline-runtime")
            phases.append(phase)
            state = workdir / "offline-runtime" / "state"
            config = f"persistence-dir: {state}\npermission-timeout: {args.permission_timeout:g}\n"
            if args.waits > 100:
                config += f"max-active-turns-per-caller: {args.waits}\n"
                note = (f"offline-runtime server: max-active-turns-per-caller raised from 100 to {args.waits}: all "
                        f"anonymous callers share one owner scope, and dropped waits stay active until the "
                        f"{args.permission_timeout:g}s permission timeout")
            else:
                note = "offline-runtime server: default max-active-turns-per-caller (100) kept: --waits <= 100"
            notes.append(note)
            log(f"phase 3: {args.waits:,} abandoned permission waits (SendStreamingMessage {PERMISSION_PROMPT!r}, "
                f"new context each, dropped at the permission request); default offline runtime, "
                f"permission-timeout: {args.permission_timeout:g}; persistence on in {state}")
            log(note)
            try:
                server = await asyncio.to_thread(start_server, "offline-runtime", config, workdir, cpu=cpu,
                                                 startup_timeout=args.startup_timeout)
                try:
                    phase.record(server, "start", 0)
                    workspace = str(workdir / "offline-runtime" / "workspace")
                    still_waiting = await run_waits(server, phase, args.waits, args.concurrency, workspace,
                                                    args.permission_timeout, args.wait_bound)
                    phase.record(server, "waits timed out, settled", args.waits, await settled_rss(server))
                    if still_waiting:
                        failures.append(f"offline-runtime: {still_waiting} waits still pending "
                                        f"{args.wait_bound:g}s after the permission timeout")
                finally:
                    await asyncio.to_thread(stop_server, server)
            except ServerFailed as exc:
                failures.append(str(exc))
                log(f"!! {exc}")

    points = [p for ph in phases for p in ph.points]
    errors = sum(ph.errors for ph in phases)
    if args.json:
        print(json.dumps({
            "config": {"tasks": args.tasks, "runtime_tasks": args.runtime_tasks, "waits": args.waits,
                       "concurrency": args.concurrency,
                       "permission_timeout_s": args.permission_timeout, "notes": notes},
            "points": [{k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(p).items()}
                       for p in points],
            "phases": [{"server": ph.server, "errors": ph.errors, "error_samples": ph.error_samples,
                        "elapsed_s": round(ph.elapsed_s, 3), "notes": ph.notes} for ph in phases],
            "still_waiting": still_waiting,
            "failures": failures,
        }, indent=2))
    else:
        out = ["\n".join(notes), format_table(points)]
        extra = [f"{ph.server}: {n}" for ph in phases for n in ph.notes]
        extra += [f"{ph.server}: {ph.errors} failed requests" for ph in phases if ph.errors]
        extra += [f"error sample [{ph.server}]: {s}" for ph in phases for s in ph.error_samples]
        extra += [f"FAILED: {f.splitlines()[0]}" for f in failures]
        if extra:
            out.append("\n".join(extra))
        print("\n" + "\n\n".join(out))
    return 1 if failures or errors else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return asyncio.run(amain(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        _stop_all()
        log("interrupted; servers stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
