#!/usr/bin/env python3
"""Benchmark our A2A JSON-RPC server against a2a-sdk's reference Starlette app.

For each agent (``--agents``, default both: ``trivial`` =
``trivial_agent.TrivialExecutor``, ``one-update`` =
``one_update_agent.OneUpdateExecutor``) both servers run that same executor,
one after the other, each pinned to one CPU core while the load generator
runs pinned to another. Our server runs with durability on, as a new user has
it: task/context snapshots are written to ``persistence-dir`` (a fresh
scratch directory per server); the reference keeps everything in memory.
For SendMessage, SendStreamingMessage and GetTask it prints, per agent,
requests/s (and SSE events/s), p50/p99 latency, errors, and the
ours/reference ratios next to the targets.

Usage (from the repository root)::

    python benchmarks/bench_http.py                   # both agents x both servers, defaults
    python benchmarks/bench_http.py --only reference  # just a2a-sdk's app
    python benchmarks/bench_http.py --agents one-update
    python benchmarks/bench_http.py --json            # JSON on stdout
    python benchmarks/bench_http.py --selftest        # load-generator ceiling

Exit status: 0 when every requested server ran and no request failed,
1 otherwise (the table is still printed), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import functools
import json
import os
import shlex
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from loadgen import Scenario, ScenarioResult, percentile, run_scenario  # noqa: E402

try:  # single source of truth when a2a-sdk is importable here
    from trivial_agent import WORKING_UPDATES as TRIVIAL_WORKING_UPDATES
except ImportError:  # load generator env without a2a-sdk
    TRIVIAL_WORKING_UPDATES = 5
try:
    from one_update_agent import ACK_TEXT, ARTIFACT_NAME
except ImportError:
    ACK_TEXT, ARTIFACT_NAME = "ack", "result"

DEFAULT_OURS_CMD = "iac-code a2a --host {host} --port {port} --config {config}"
REFERENCE_READY_PATH = "/.well-known/agent-card.json"
#: Text of every benchmark request's single part (the one-update agent echoes it).
REQUEST_TEXT = "hello"

SCENARIOS = ("SendMessage", "SendStreamingMessage", "GetTask")
#: scenario -> (metric compared, target ratio ours/reference)
TARGETS: dict[str, tuple[str, float]] = {
    "SendMessage": ("req/s", 1.5),
    "GetTask": ("req/s", 2.0),
    "SendStreamingMessage": ("events/s", 1.5),
}
SERVER_ENV = {
    "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false",
    "PYTHONUNBUFFERED": "1",
}
SERVERS = ("reference", "ours")


def log(msg: str) -> None:
    """Progress output (always stderr so ``--json`` stdout stays clean)."""
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# Request bodies and validators
# ----------------------------------------------------------------------------

def _send_body_factory(method: str, rpc_id: str) -> Callable[[], bytes]:
    """Build SendMessage-style bodies with a fresh messageId each time."""
    head = ('{"jsonrpc":"2.0","id":"' + rpc_id + '","method":"' + method
            + '","params":{"message":{"messageId":"').encode()
    tail = b'","role":"ROLE_USER","parts":[{"text":"' + REQUEST_TEXT.encode() + b'"}]}}}'

    def make() -> bytes:
        return head + str(uuid.uuid4()).encode() + tail

    return make


def _get_task_body(task_id: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": "3", "method": "GetTask", "params": {"id": task_id}},
        separators=(",", ":"),
    ).encode()


def _constant(body: bytes) -> Callable[[], bytes]:
    """Body factory that always returns ``body``."""
    return lambda: body


def _text(message: Any) -> str | None:
    """Text of a message's first part (None if it has none)."""
    try:
        return message["parts"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return None


def _check_one_update_task(task: Any, where: str) -> str | None:
    """A finished one-update task: echo in the status message, the "result" artifact, the user message first."""
    if _text(task.get("status", {}).get("message")) != REQUEST_TEXT:
        return f"{where}: status message is not the echo {REQUEST_TEXT!r}: {str(task.get('status'))[:200]}"
    arts = task.get("artifacts") or []
    if len(arts) != 1 or arts[0].get("name") != ARTIFACT_NAME or _text(arts[0]) is None:
        return f"{where}: expected one text artifact {ARTIFACT_NAME!r}, got {str(arts)[:200]}"
    hist = task.get("history") or []
    if not hist or hist[0].get("role") != "ROLE_USER" or _text(hist[0]) != REQUEST_TEXT:
        return f"{where}: history does not start with the user message: {str(hist)[:200]}"
    return None


@dataclass(frozen=True)
class Agent:
    """A benchmark agent: its executor and what its responses must look like."""

    name: str
    #: ``package.module:attr`` of the a2a-sdk AgentExecutor (importable from benchmarks/).
    executor: str
    #: Stream shape: ``task``, ``artifact`` or a status-update state (``WORKING``, ``COMPLETED``) per event.
    stream_kinds: tuple[str, ...]
    #: Extra checks of a finished task (SendMessage result, GetTask result, last stream event's message).
    check_task: Callable[[Any, str], str | None] | None = None
    check_stream: Callable[[list[Any]], str | None] | None = None
    describe: str = ""

    @property
    def expected_events(self) -> int:
        """SSE events per SendStreamingMessage stream."""
        return len(self.stream_kinds)


def _check_one_update_stream(events: list[Any]) -> str | None:
    task = events[0]["result"]["task"]
    hist = task.get("history") or []
    if len(hist) != 1 or _text(hist[0]) != REQUEST_TEXT:
        return f"stream: Task history should be [the user message], got {str(hist)[:200]}"
    if _text(events[1]["result"]["statusUpdate"]["status"].get("message")) != ACK_TEXT:
        return f"stream: WORKING update message is not {ACK_TEXT!r}: {str(events[1])[:200]}"
    art = events[2]["result"]["artifactUpdate"].get("artifact", {})
    if art.get("name") != ARTIFACT_NAME or _text(art) is None:
        return f"stream: artifact is not a text artifact {ARTIFACT_NAME!r}: {str(art)[:200]}"
    if _text(events[3]["result"]["statusUpdate"]["status"].get("message")) != REQUEST_TEXT:
        return f"stream: COMPLETED message is not the echo {REQUEST_TEXT!r}: {str(events[3])[:200]}"
    return None


AGENTS: dict[str, Agent] = {
    "trivial": Agent(
        "trivial", "trivial_agent:TrivialExecutor",
        ("task", *["WORKING"] * TRIVIAL_WORKING_UPDATES, "COMPLETED"),
        describe=f"Task + {TRIVIAL_WORKING_UPDATES} WORKING + COMPLETED"),
    "one-update": Agent(
        "one-update", "one_update_agent:OneUpdateExecutor",
        ("task", "WORKING", "artifact", "COMPLETED"),
        check_task=_check_one_update_task, check_stream=_check_one_update_stream,
        describe="Task + WORKING(ack) + artifact + COMPLETED(echo)"),
}


def _validate_send(agent: Agent) -> Callable[[Any], str | None]:
    """SendMessage must return a COMPLETED task (plus the agent's own checks)."""
    def check(obj: Any) -> str | None:
        try:
            task = obj["result"]["task"]
            state = task["status"]["state"]
        except (KeyError, TypeError):
            return f"SendMessage: unexpected result shape: {str(obj)[:200]}"
        if state != "TASK_STATE_COMPLETED":
            return f"SendMessage: task state {state}, expected TASK_STATE_COMPLETED"
        return agent.check_task(task, "SendMessage") if agent.check_task else None

    return check


def _validate_get(agent: Agent, task_id: str) -> Callable[[Any], str | None]:
    def check(obj: Any) -> str | None:
        try:
            task = obj["result"]
            got, state = task["id"], task["status"]["state"]
        except (KeyError, TypeError):
            return f"GetTask: unexpected result shape: {str(obj)[:200]}"
        if got != task_id or state != "TASK_STATE_COMPLETED":
            return f"GetTask: got task {got} in {state}"
        return agent.check_task(task, "GetTask") if agent.check_task else None

    return check


def _event_kind(ev: Any) -> str:
    """``task`` / ``artifact`` / the status-update state without prefix (``WORKING``), else ``?``."""
    res = ev.get("result") if isinstance(ev, dict) else None
    if not isinstance(res, dict):
        return "?"
    if "task" in res:
        return "task"
    if "artifactUpdate" in res:
        return "artifact"
    try:
        return str(res["statusUpdate"]["status"]["state"]).removeprefix("TASK_STATE_")
    except (KeyError, TypeError):
        return "?"


def _validate_stream(agent: Agent) -> Callable[[Any], str | None]:
    """Stream: every event is a JSON-RPC result, in the agent's order; last one is COMPLETED."""
    def check(events: Any) -> str | None:
        if len(events) != agent.expected_events:
            return f"stream had {len(events)} events, expected {agent.expected_events}"
        for ev in events:
            if not isinstance(ev, dict) or "result" not in ev or "error" in ev:
                return f"bad stream event: {str(ev)[:200]}"
        kinds = tuple(_event_kind(ev) for ev in events)
        if kinds != agent.stream_kinds:
            return f"stream events {','.join(kinds)}, expected {','.join(agent.stream_kinds)}"
        try:
            task_state = events[0]["result"]["task"]["status"]["state"]
        except (KeyError, TypeError):
            return f"first stream event is not a Task: {str(events[0])[:200]}"
        if task_state != "TASK_STATE_SUBMITTED":
            return f"stream Task state {task_state}, expected TASK_STATE_SUBMITTED"
        return agent.check_stream(events) if agent.check_stream else None

    return check


def _post_json(port: int, body: bytes, timeout: float = 10.0) -> Any:
    """One blocking JSON-RPC POST (setup only)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/", data=body, method="POST",
        headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - localhost only
        return json.loads(resp.read())


# ----------------------------------------------------------------------------
# Server processes
# ----------------------------------------------------------------------------

class ServerUnavailable(Exception):
    """The server could not be started or did not become ready."""


def free_port() -> int:
    """Ask the kernel for a free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session_cpu_seconds(sid: int) -> float:
    """user+sys CPU seconds of all live processes in session ``sid``."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        # fields[0] is state (field 3); session is field 6, utime/stime are 14/15.
        if int(fields[3]) == sid:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


@dataclass(eq=False)
class ServerProc:
    """A server subprocess started in its own session, pinned to a CPU."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server (all its processes)."""
        return _session_cpu_seconds(self.proc.pid)

    def log_tail(self, n: int = 30) -> str:
        """Last ``n`` lines of the server's combined stdout/stderr."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL it if it lingers."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:  # the group may hold children even if the leader exited
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


#: Servers currently running; stopped at exit even if the normal path was skipped.
_LIVE_SERVERS: set[ServerProc] = set()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_LIVE_SERVERS):
        server.stop()


def _pin(cpu: int | None) -> Callable[[], None] | None:
    if cpu is None:
        return None

    def preexec() -> None:
        os.sched_setaffinity(0, {cpu})

    return preexec


def _resolve_exe(name: str) -> str | None:
    """Find ``name`` on PATH or next to the running interpreter."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


@contextmanager
def start_server(name: str, argv: list[str], port: int, ready_path: str, *, cpu: int | None,
                 workdir: Path, startup_timeout: float) -> Iterator[ServerProc]:
    """Start a server, wait until ``GET ready_path`` is 200, always stop it."""
    exe = _resolve_exe(argv[0])
    if exe is None:
        raise ServerUnavailable(
            f"{name}: command {argv[0]!r} not found on PATH"
            + (" (install the project, e.g. `pip install -e .`, or pass --ours-cmd)"
               if name == "ours" else "")
        )
    env = dict(os.environ)
    env.update(SERVER_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH_DIR), env.get("PYTHONPATH", "")) if p)
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(
            [exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=env, cwd=str(BENCH_DIR.parent), start_new_session=True, preexec_fn=_pin(cpu),
        )
    server = ServerProc(name, proc, port, log_path)
    _LIVE_SERVERS.add(server)
    try:
        url = f"http://127.0.0.1:{port}{ready_path}"
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise ServerUnavailable(
                    f"{name}: exited with code {proc.returncode} before becoming ready "
                    f"({shlex.join(argv)})\n--- log tail ---\n{server.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 - localhost only
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ServerUnavailable(
                    f"{name}: GET {ready_path} not 200 within {startup_timeout:.0f}s "
                    f"({shlex.join(argv)})\n--- log tail ---\n{server.log_tail()}"
                )
            time.sleep(0.1)
        yield server
    finally:
        server.stop()
        _LIVE_SERVERS.discard(server)


# ----------------------------------------------------------------------------
# Measurement
# ----------------------------------------------------------------------------

@dataclass
class Row:
    """Summary of one scenario against one server."""

    agent: str
    scenario: str
    server: str
    req_s: float
    events_s: float | None
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    errors: int
    ok: int
    duration_s: float
    concurrency: int
    server_cpu_pct: float | None
    client_cpu_pct: float
    avg_response_bytes: float
    events_per_stream: float | None = None
    p50_first_event_ms: float | None = None
    #: CPU time other processes took on the server's pinned core during the window.
    other_on_server_cpu_pct: float | None = None
    error_samples: list[str] = field(default_factory=list)


def summarize(res: ScenarioResult, agent: str, server: str, streaming: bool, server_cpu_s: float | None) -> Row:
    """Turn raw measurements into a table row."""
    lat = sorted(res.latencies_s)
    first = sorted(res.first_event_s)
    dur = res.duration_s or 1e-9
    return Row(
        agent=agent,
        scenario=res.scenario,
        server=server,
        req_s=res.ok / dur,
        events_s=(res.events / dur) if streaming else None,
        p50_ms=percentile(lat, 50) * 1e3,
        p90_ms=percentile(lat, 90) * 1e3,
        p99_ms=percentile(lat, 99) * 1e3,
        max_ms=(lat[-1] * 1e3) if lat else 0.0,
        errors=res.errors,
        ok=res.ok,
        duration_s=round(res.duration_s, 3),
        concurrency=res.concurrency,
        server_cpu_pct=(100.0 * server_cpu_s / dur) if server_cpu_s is not None else None,
        client_cpu_pct=100.0 * res.client_cpu_s / dur,
        avg_response_bytes=(res.bytes_received / res.ok) if res.ok else 0.0,
        events_per_stream=(res.events / res.ok) if streaming and res.ok else None,
        p50_first_event_ms=(percentile(first, 50) * 1e3) if streaming else None,
        error_samples=res.error_samples,
    )


def _core_busy_seconds(cpu: int) -> float | None:
    """Busy (non-idle, non-iowait) seconds of one CPU core since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith(f"cpu{cpu} "):
                    v = [int(x) for x in line.split()[1:9]]
                    # user nice system idle iowait irq softirq steal
                    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    return None


def _mark_cpu(server: ServerProc, core: int | None, marks: dict[str, float], edge: str) -> None:
    """Record server CPU seconds (and its core's busy seconds) at a window edge."""
    marks[edge] = server.cpu_seconds()
    busy = _core_busy_seconds(core) if core is not None else None
    if busy is not None:
        marks[edge + "_core"] = busy


async def bench_server(server: ServerProc, agent: Agent, args: argparse.Namespace, rows: list[Row]) -> None:
    """Run every selected scenario against one running server, appending to ``rows``."""
    for name in args.scenarios:
        if name == "SendMessage":
            sc = Scenario(name, _send_body_factory("SendMessage", "1"), validate=_validate_send(agent))
        elif name == "SendStreamingMessage":
            sc = Scenario(name, _send_body_factory("SendStreamingMessage", "2"), streaming=True,
                          validate=_validate_stream(agent), expected_events=agent.expected_events)
        else:
            first = await asyncio.to_thread(
                _post_json, server.port, _send_body_factory("SendMessage", "1")())
            try:
                task_id = str(first["result"]["task"]["id"])
            except (KeyError, TypeError) as exc:
                raise ServerUnavailable(
                    f"{server.name}: GetTask setup SendMessage returned {str(first)[:300]}") from exc
            body = _get_task_body(task_id)
            sc = Scenario(name, _constant(body), validate=_validate_get(agent, task_id))

        cpu_marks: dict[str, float] = {}
        log(f"  {agent.name}/{server.name}: {name} (warm-up {args.warmup:g}s, measure {args.duration:g}s, "
            f"concurrency {args.concurrency})")
        res = await run_scenario(
            sc, "127.0.0.1", server.port, concurrency=args.concurrency, warmup_s=args.warmup,
            duration_s=args.duration, validate_every=args.validate_every,
            on_window=functools.partial(_mark_cpu, server, args.pinned_server_cpu, cpu_marks),
        )
        cpu_s = cpu_marks["stop"] - cpu_marks["start"] if "stop" in cpu_marks else None
        row = summarize(res, agent.name, server.name, sc.streaming, cpu_s)
        if cpu_s is not None and "stop_core" in cpu_marks and "start_core" in cpu_marks:
            core_busy = cpu_marks["stop_core"] - cpu_marks["start_core"]
            row.other_on_server_cpu_pct = max(0.0, 100.0 * (core_busy - cpu_s) / res.duration_s)
        rows.append(row)
        if server.proc.poll() is not None:
            raise ServerUnavailable(
                f"{server.name}: server died during {name} (exit {server.proc.returncode})\n"
                f"--- log tail ---\n{server.log_tail()}")


# ----------------------------------------------------------------------------
# Reporting
# ----------------------------------------------------------------------------

def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


def _noise_warnings(r: Row) -> list[str]:
    """Signs that a measurement is not a clean server-bound number."""
    out: list[str] = []
    if r.other_on_server_cpu_pct is not None and r.other_on_server_cpu_pct > 5:
        out.append(f"other processes used {r.other_on_server_cpu_pct:.0f}% of the server's CPU core "
                   "during the window: result is unreliable, re-run on a quiet machine")
    if r.server_cpu_pct is not None and r.ok and r.server_cpu_pct < 85:
        out.append(f"server used only {r.server_cpu_pct:.0f}% CPU: not saturated "
                   "(CPU contention, or too little --concurrency)")
    if r.client_cpu_pct > 80:
        out.append(f"load generator at {r.client_cpu_pct:.0f}% CPU: it may be the bottleneck")
    return out


def format_table(rows: list[Row]) -> str:
    """Human-readable results table."""
    hdr = (f"{'scenario':<21} {'server':<10} {'req/s':>9} {'events/s':>9} {'p50 ms':>8} "
           f"{'p99 ms':>8} {'errors':>6} {'srv cpu':>7} {'gen cpu':>7}")
    lines = [hdr, "-" * len(hdr)]
    order = {s: i for i, s in enumerate(SCENARIOS)}
    for r in sorted(rows, key=lambda r: (order.get(r.scenario, 99), r.server != "reference")):
        lines.append(
            f"{r.scenario:<21} {r.server:<10} {r.req_s:>9.0f} {_fmt(r.events_s, '9.0f'):>9} "
            f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.errors:>6} "
            f"{_pct(r.server_cpu_pct):>7} {_pct(r.client_cpu_pct):>7}"
        )
    return "\n".join(lines)


def compute_ratios(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """ours/reference ratios per scenario (throughput metric and p99)."""
    by = {(r.scenario, r.server): r for r in rows}
    out: dict[str, dict[str, Any]] = {}
    for sc in SCENARIOS:
        ref, ours = by.get((sc, "reference")), by.get((sc, "ours"))
        if ref is None or ours is None:
            continue
        metric, target = TARGETS[sc]
        r_val = (ref.events_s or 0.0) if metric == "events/s" else ref.req_s
        o_val = (ours.events_s or 0.0) if metric == "events/s" else ours.req_s
        tput = (o_val / r_val) if r_val else None
        p99 = (ours.p99_ms / ref.p99_ms) if ref.p99_ms else None
        out[sc] = {
            "metric": metric,
            "throughput_ratio": tput,
            "target": target,
            "throughput_ok": tput is not None and tput >= target,
            "p99_ratio": p99,
            "p99_ok": p99 is not None and p99 < 1.0,
        }
    return out


def _rounded(d: dict[str, Any]) -> dict[str, Any]:
    """Copy of ``d`` with floats rounded for readable JSON."""
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in d.items()}


def format_ratios(ratios: dict[str, dict[str, Any]]) -> str:
    """Ratio lines with targets."""
    if not ratios:
        return ""
    lines = ["ratio ours/reference (target):"]
    for sc, r in ratios.items():
        t = r["throughput_ratio"]
        p = r["p99_ratio"]
        lines.append(
            f"  {sc:<21} {r['metric']:<8} x{_fmt(t, '.2f'):<6} (target x{r['target']:.1f}: "
            f"{'met' if r['throughput_ok'] else 'NOT met'})   "
            f"p99 x{_fmt(p, '.2f'):<6} (target <x1.00: {'met' if r['p99_ok'] else 'NOT met'})"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--only", choices=SERVERS, help="benchmark just one server")
    p.add_argument("--agents", default=",".join(AGENTS),
                   help="comma-separated agents to run, each against both servers: " + ",".join(AGENTS))
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per scenario")
    p.add_argument("--warmup", type=float, default=1.0, help="unrecorded warm-up seconds per scenario")
    p.add_argument("--concurrency", type=int, default=32, help="keep-alive connections (1 in flight each)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help="comma-separated subset of " + ",".join(SCENARIOS))
    p.add_argument("--json", action="store_true", help="print machine-readable results on stdout")
    p.add_argument("--ours-cmd", default=DEFAULT_OURS_CMD,
                   help="command starting our server; {host} {port} {config} are substituted")
    p.add_argument("--ours-ready-path", default="/health", help="GET path polled until 200 for ours")
    p.add_argument("--reference-python", default=sys.executable,
                   help="interpreter (with a2a-sdk[http-server], uvicorn, uvloop, httptools) for the reference")
    p.add_argument("--server-cpu", type=int, default=0, help="CPU core the servers are pinned to")
    p.add_argument("--client-cpu", type=int, default=1, help="CPU core the load generator is pinned to")
    p.add_argument("--no-pin", action="store_true", help="do not pin processes to CPU cores")
    p.add_argument("--startup-timeout", type=float, default=30.0, help="seconds to wait for readiness")
    p.add_argument("--validate-every", type=int, default=50,
                   help="fully JSON-validate the first 3 and every Nth response (all get a cheap check)")
    p.add_argument("--selftest", action="store_true",
                   help="measure the load generator's ceiling against a canned near-zero-cost server")
    args = p.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    bad = [s for s in args.scenarios if s not in SCENARIOS]
    if bad:
        p.error(f"unknown scenario(s): {', '.join(bad)}")
    args.agents = list(dict.fromkeys(a.strip() for a in args.agents.split(",") if a.strip()))
    bad = [a for a in args.agents if a not in AGENTS]
    if bad or not args.agents:
        p.error(f"unknown agent(s): {', '.join(bad) or '(none given)'}; choose from {', '.join(AGENTS)}")
    if args.selftest:  # the canned server answers like the trivial agent
        args.agents = ["trivial"]
    if args.duration <= 0 or args.warmup < 0 or args.concurrency < 1:
        p.error("--duration must be > 0, --warmup >= 0, --concurrency >= 1")
    return args


def _setup_pinning(args: argparse.Namespace) -> tuple[int | None, list[str]]:
    """Pin this process (load generator) and return the server CPU (or None)."""
    notes: list[str] = []
    if args.no_pin:
        return None, ["CPU pinning disabled (--no-pin)"]
    try:
        avail = os.sched_getaffinity(0)
    except AttributeError:
        return None, ["CPU pinning unsupported on this platform"]
    if args.server_cpu not in avail or args.client_cpu not in avail or args.server_cpu == args.client_cpu:
        return None, [f"CPU pinning skipped: need distinct cores {args.server_cpu},{args.client_cpu} "
                      f"in affinity set {sorted(avail)}"]
    os.sched_setaffinity(0, {args.client_cpu})
    notes.append(f"server pinned to CPU {args.server_cpu}, load generator to CPU {args.client_cpu}")
    return args.server_cpu, notes


def _fs_type(path: Path) -> str:
    """File system type holding ``path`` (from /proc/mounts; '?' if unknown)."""
    best, fstype = "", "?"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mnt = parts[1].replace("\\040", " ")
                    if (str(path) == mnt or str(path).startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                        best, fstype = mnt, parts[2]
    except OSError:
        pass
    return fstype


@dataclass
class Plan:
    """One server to start: which agent, how, and (ours) where it persists."""

    agent: Agent
    name: str
    argv: list[str]  # with {port} still to substitute
    ready_path: str
    persistence_dir: Path | None = None


def _server_plans(args: argparse.Namespace, workdir: Path) -> list[Plan]:
    """Every server to benchmark, in order: per agent, the reference then ours."""
    if args.selftest:
        return [Plan(AGENTS["trivial"], "null", [args.reference_python, str(BENCH_DIR / "null_server.py"),
                                                 "--host", "127.0.0.1", "--port", "{port}"], "/health")]
    plans: list[Plan] = []
    for agent_name in args.agents:
        agent = AGENTS[agent_name]
        if args.only in (None, "reference"):
            plans.append(Plan(agent, "reference", [
                args.reference_python, str(BENCH_DIR / "reference_server.py"), "--host", "127.0.0.1",
                "--port", "{port}", "--executor", agent.executor], REFERENCE_READY_PATH))
        if args.only in (None, "ours"):
            config = workdir / f"ours-{agent.name}.yaml"
            # Durability on, as a new user has it: snapshots go to persistence-dir. A fresh directory
            # per server (inside the run's scratch dir, removed at the end) so runs don't accumulate.
            state = workdir / f"ours-state-{agent.name}"
            config.write_text(f"agent-executor: {agent.executor}\npersistence-dir: {state}\n")
            argv = [a.replace("{host}", "127.0.0.1").replace("{config}", str(config))
                    for a in shlex.split(args.ours_cmd)]
            plans.append(Plan(agent, "ours", argv, args.ours_ready_path, state))
    return plans


def _header(args: argparse.Namespace, plans: list[Plan], workdir: Path, notes: list[str]) -> list[str]:
    """What runs where: agents, durability of each server, pinning."""
    if args.selftest:
        return ["selftest: load generator against the canned null server (answers like the trivial agent)", *notes]
    lines = [f"agents: {', '.join(args.agents)} (each against {args.only or 'both servers'})"]
    if any(p.name == "ours" for p in plans):
        lines.append("ours: persistence ON: every acknowledgement waits for the task journal (group commit, "
                     f"fdatasync), snapshots in {workdir}/ours-state-<agent> "
                     f"({_fs_type(workdir)}; a fresh directory per server, removed after the run)")
    if any(p.name == "reference" for p in plans):
        lines.append("reference: a2a-sdk InMemoryTaskStore: keeps nothing on disk")
    return lines + notes


def _stored_files(state: Path | None) -> int | None:
    """Number of files our server wrote under its persistence dir (None when not ours)."""
    if state is None:
        return None
    try:
        return sum(1 for p in state.rglob("*") if p.is_file())
    except OSError:
        return None


async def _amain(args: argparse.Namespace) -> int:
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # cancel cleanly so servers get stopped
        loop.add_signal_handler(sig, main_task.cancel)
    server_cpu, notes = _setup_pinning(args)
    args.pinned_server_cpu = server_cpu
    rows: list[Row] = []
    failures: dict[str, str] = {}
    stored: dict[str, int | None] = {}
    with tempfile.TemporaryDirectory(prefix="a2a-bench-") as tmp:
        workdir = Path(tmp)
        plans = _server_plans(args, workdir)
        header = _header(args, plans, workdir, notes)
        for line in header:
            log(line)
        for plan in plans:
            key = f"{plan.agent.name}/{plan.name}"
            port = free_port()
            argv = [a.replace("{port}", str(port)) for a in plan.argv]
            log(f"starting {key}: {shlex.join(argv)}")
            try:
                with start_server(plan.name, argv, port, plan.ready_path, cpu=server_cpu, workdir=workdir,
                                  startup_timeout=args.startup_timeout) as server:
                    await bench_server(server, plan.agent, args, rows)
            except ServerUnavailable as exc:
                failures[key] = str(exc)
                log(f"!! {plan.agent.name}: {exc}")
            except (OSError, urllib.error.URLError) as exc:
                failures[key] = f"{key}: {exc!r}"
                log(f"!! {key}: {exc!r}")
            if plan.persistence_dir is not None:
                stored[plan.agent.name] = _stored_files(plan.persistence_dir)
                log(f"  {key}: {stored[plan.agent.name]} files in {plan.persistence_dir}")

    by_agent = {a: [r for r in rows if r.agent == a] for a in args.agents}
    ratios = {a: compute_ratios(rs) for a, rs in by_agent.items()}
    errors = sum(r.errors for r in rows)
    if args.json:
        print(json.dumps({
            "config": {"duration_s": args.duration, "warmup_s": args.warmup,
                       "concurrency": args.concurrency, "server_cpu": server_cpu,
                       "client_cpu": None if server_cpu is None else args.client_cpu,
                       "ours_cmd": args.ours_cmd, "notes": notes,
                       "agents": {a: {"executor": AGENTS[a].executor,
                                      "expected_stream_events": AGENTS[a].expected_events}
                                  for a in args.agents},
                       "ours_persistence": {"enabled": True, "dir": f"{workdir}/ours-state-<agent>",
                                            "fs_type": _fs_type(workdir),
                                            "files_written": stored},
                       "reference_persistence": {"enabled": False, "task_store": "InMemoryTaskStore"}},
            "results": [_rounded(r.__dict__) for r in rows],
            "ratios": {a: {k: _rounded(v) for k, v in rs.items()} for a, rs in ratios.items()},
            "failures": failures,
        }, indent=2))
    else:
        out = ["\n".join(header)]
        for agent_name, agent_rows in by_agent.items():
            if not agent_rows:
                continue
            agent = AGENTS[agent_name]
            section = [f"== agent {agent_name} ({agent.executor}; {agent.describe}, "
                       f"{agent.expected_events} stream events)", format_table(agent_rows)]
            ratio_text = format_ratios(ratios[agent_name])
            if ratio_text:
                section.append("\n" + ratio_text)
            out.append("\n".join(section))
        problems = [f"error sample [{r.agent} {r.server} {r.scenario}]: {s}" for r in rows for s in r.error_samples]
        problems += [f"WARNING [{r.agent} {r.server} {r.scenario}]: {w}" for r in rows for w in _noise_warnings(r)]
        problems += [f"{name}: NOT BENCHMARKED (or incomplete): {msg.splitlines()[0]}"
                     for name, msg in failures.items()]
        if problems:
            out.append("\n".join(problems))
        print("\n" + "\n\n".join(out))
    return 1 if failures or errors else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    try:
        try:
            import uvloop
        except ImportError:
            log("uvloop not installed: falling back to asyncio (load generator will be slower)")
            return asyncio.run(_amain(args))
        return uvloop.run(_amain(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        _stop_live_servers()
        log("interrupted; servers stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
