"""Pipeline mode: pipeline events/s batched vs unbatched, and one full ``selling`` run's latency per step.

Issue 36. Starts a real ``iac-code a2a`` process (``mode: pipeline``, the offline runtime, a fresh
``persistence-dir`` per server: every pipeline event is journaled and fsynced before it is published) on an
ephemeral loopback port and speaks JSON-RPC to it with raw ``SendStreamingMessage`` requests, parsing the SSE
stream itself. Nothing is pinned to a CPU.

1. **Events/s.** ``--concurrency`` clients (default 8) each run, over and over, the first turn of a ``selling`` run
   in a context of its own (the request, then ``intent_parsing`` … up to the ``confirm_and_select`` question), for
   ``--duration`` seconds (or ``--turns`` turns in all). Counted: the pipeline events received (a status update's
   single ``metadata.iac_code.pipeline`` plus each event of ``metadata.iac_code.pipelineBatch.events``) and the
   status-update messages received. Reported: events/s, status updates/s, events per update, p50/p99 turn latency
   (request sent → stream closed), the server's and the load generator's CPU. Once with batching at its defaults
   (64 events / 64 KiB / 20 ms) and once with it effectively off (``pipeline-batch-max-events: 1``), then the
   ratio. Every turn is checked: it ends ``input-required`` on a ``candidate_selection`` question, and its events'
   ``sequence`` is exactly 1..n; a turn that does not is an error.
2. **Latency per step.** On the batched server, after a warm-up turn, one ``selling`` run end to end (``--runs``
   for more, then the median): the first turn, then the answer ``方案 2`` (deploy without a deployer, the
   handoff). Each step's ``step_started`` → ``step_completed``, each candidate's ``candidate_started`` →
   ``candidate_completed`` and its sub-steps' ``candidate_step_started`` → ``candidate_step_completed``, from the
   events' ``createdAt`` (milliseconds, the server's clock), offset from the turn's first event; plus each turn's
   wall time as the client sees it. ``confirm_and_select`` spans both turns: turn 1 shows it up to its question,
   turn 2 from ``input_received`` to its ``step_completed``.

Usage (from the repository root)::

    uv run python benchmarks/bench_pipeline.py                       # both parts, 8 clients, 10 s per mode
    uv run python benchmarks/bench_pipeline.py --only events --duration 5 --concurrency 16
    uv run python benchmarks/bench_pipeline.py --only steps --runs 5
    uv run python benchmarks/bench_pipeline.py --turns 200           # a fixed count instead of a duration

Exit status: 0 when every turn behaved, 1 when one failed (the tables are still printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
LISTENING = re.compile(r"listening: (http://\S+) \(JSONRPC\)")
FRAME_END = re.compile(rb"\r?\n\r?\n")  # the blank line that ends an SSE event
REQUEST = "Deploy a web shop with a MySQL database in cn-hangzhou"
ANSWER = "方案 2"
MODES: dict[str, dict[str, Any]] = {
    "batched (defaults)": {},
    "unbatched (max-events 1)": {"pipeline-batch-max-events": 1},
}
SECOND_TURN = ["input_received", "step_completed", "step_started", "pipeline_warning", "step_completed",
               "pipeline_completed", "pipeline_handoff_ready"]


def log(message: str) -> None:
    """Progress output on stderr (the tables go to stdout)."""
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], share: float) -> float:
    """The ``share`` percentile of ``values`` (nearest rank), 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# ----------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------

@dataclass
class Server:
    """An ``iac-code a2a`` subprocess in pipeline mode, its JSON-RPC URL and its scratch directory."""

    proc: subprocess.Popen[bytes]
    url: str
    workdir: Path

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (from ``/proc``)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def journal_files(self) -> int:
        """How many pipeline journals the server wrote (one per context)."""
        return len(list((self.workdir / "state" / "pipeline").glob("*.jsonl")))

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def fs_type(path: Path) -> str:
    """The file system type holding ``path`` (for the header: the journal's fsync cost depends on it)."""
    try:
        return subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


async def start_server(settings: Mapping[str, Any], scratch: Path, name: str) -> Server:
    """Run ``iac-code a2a --port 0`` with ``mode: pipeline`` plus ``settings`` and a fresh persistence dir; wait for
    its "listening" line (its log goes to a file, so a chatty server never blocks on a full pipe)."""
    workdir = scratch / name
    workdir.mkdir()
    config = workdir / "server.yml"
    config.write_text(json.dumps({"mode": "pipeline", "persistence-dir": str(workdir / "state"), **settings}))
    logfile = workdir / "server.log"
    command = [str(Path(sys.executable).parent / "iac-code"), "a2a", "--host", "127.0.0.1", "--port", "0",
               "--config", str(config)]
    with logfile.open("wb") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "IAC_CODE_CONFIG_DIR": str(workdir / "cfg"),
                                     "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = LISTENING.search(logfile.read_text(errors="replace"))
        if match:
            return Server(proc, match.group(1), workdir)
        if proc.poll() is not None:
            break
        await asyncio.sleep(0.05)  # polling a subprocess' log for readiness, not synchronising our own parts
    proc.kill()
    raise RuntimeError(f"iac-code a2a did not listen:\n{logfile.read_text(errors='replace')[-3000:]}")


# ----------------------------------------------------------------------------
# One turn over JSON-RPC streaming
# ----------------------------------------------------------------------------

@dataclass
class Turn:
    """What one SendStreamingMessage turn streamed, as the client received it."""

    seconds: float = 0.0
    status_updates: int = 0
    publications: int = 0  # status updates that carried pipeline events
    events: list[dict[str, Any]] = field(default_factory=list)
    last_status: dict[str, Any] = field(default_factory=dict)
    context_id: str = ""
    task_id: str = ""


def pipeline_events(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pipeline events of one ``metadata``: ``iac_code.pipeline`` or each of ``iac_code.pipelineBatch.events``."""
    section = metadata.get("iac_code", {})
    if isinstance(section.get("pipeline"), Mapping):
        return [section["pipeline"]]
    return list(section.get("pipelineBatch", {}).get("events", []))


async def send_turn(http: aiohttp.ClientSession, url: str, text: str, *, context_id: str = "",
                    task_id: str = "") -> Turn:
    """Send ``text`` with SendStreamingMessage and read the SSE stream to its end."""
    message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}],
                               "metadata": {"iac_code": {"candidatePresentation": "rich-v1"}}}
    if context_id:
        message["contextId"] = context_id
    if task_id:
        message["taskId"] = task_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
    turn = Turn()
    started = time.perf_counter()
    async with http.post(url, json=body, headers=HEADERS) as reply:
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}: {(await reply.text())[:300]}")
        buffer = b""
        async for chunk in reply.content.iter_any():
            buffer += chunk
            *frames, buffer = FRAME_END.split(buffer)
            for frame in frames:
                _read_frame(frame, turn)
        if buffer.strip():
            _read_frame(buffer, turn)
    turn.seconds = time.perf_counter() - started
    return turn


def _read_frame(frame: bytes, turn: Turn) -> None:
    data = b"".join(line[5:].strip() for line in frame.split(b"\n") if line.startswith(b"data:"))
    if not data:
        return
    envelope = json.loads(data)
    if "error" in envelope:
        raise RuntimeError(f"JSON-RPC error: {envelope['error']}")
    result = envelope["result"]
    if "task" in result:
        turn.context_id, turn.task_id = result["task"]["contextId"], result["task"]["id"]
    update = result.get("statusUpdate")
    if update is None:
        return
    turn.status_updates += 1
    turn.last_status = update
    turn.context_id, turn.task_id = update["contextId"], update["taskId"]
    events = pipeline_events(update.get("metadata", {}))
    if events:
        turn.publications += 1
        turn.events.extend(events)


def check_first_turn(turn: Turn) -> str | None:
    """Why a first turn is wrong (``None`` when it stopped on the candidate choice with gapless sequences)."""
    sequences = [e["sequence"] for e in turn.events]
    if sequences != list(range(1, len(sequences) + 1)):
        return f"sequences not 1..n: {sequences}"
    if turn.last_status.get("status", {}).get("state") != "TASK_STATE_INPUT_REQUIRED":
        return f"ended {turn.last_status.get('status', {}).get('state')}"
    if not turn.events or turn.events[-1]["eventType"] != "input_required" \
            or turn.events[-1]["data"].get("kind") != "candidate_selection":
        return "did not stop on the candidate_selection question"
    return None


# ----------------------------------------------------------------------------
# Part 1: events/s
# ----------------------------------------------------------------------------

@dataclass
class Load:
    """One mode's totals."""

    mode: str
    seconds: float = 0.0
    turns: int = 0
    events: int = 0
    status_updates: int = 0
    publications: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    server_cpu: float = 0.0
    client_cpu: float = 0.0


async def run_load(server: Server, mode: str, args: argparse.Namespace) -> Load:
    """``args.concurrency`` clients each sending first turns until the duration is up or the count is reached."""
    load = Load(mode)
    stop_at = time.perf_counter() + args.duration
    remaining = [args.turns] if args.turns else None
    connector = aiohttp.TCPConnector(limit=args.concurrency)

    async def client(http: aiohttp.ClientSession) -> None:
        while True:
            if remaining is not None:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            elif time.perf_counter() >= stop_at:
                return
            try:
                turn = await send_turn(http, server.url, REQUEST)
            except (aiohttp.ClientError, RuntimeError, ValueError, KeyError) as exc:
                load.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            problem = check_first_turn(turn)
            if problem:
                load.errors.append(problem)
            load.turns += 1
            load.events += len(turn.events)
            load.status_updates += turn.status_updates
            load.publications += turn.publications
            load.latencies.append(turn.seconds)

    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
        cpu_before, client_before, started = server.cpu_seconds(), time.process_time(), time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(args.concurrency)))
        load.seconds = time.perf_counter() - started
        load.server_cpu = server.cpu_seconds() - cpu_before
        load.client_cpu = time.process_time() - client_before
    return load


def format_loads(loads: list[Load], concurrency: int) -> str:
    """The events/s table, one row per mode, then the ratio batched / unbatched."""
    head = (f"| mode | turns | s | events/s | status updates/s | events/update | events/publication | "
            f"turn p50 ms | turn p99 ms | server CPU % | client CPU % | errors |")
    lines = [f"events/s, {concurrency} concurrent clients, first turn of `selling` (request → candidate choice):",
             "", head, "|" + "---|" * 12]
    for load in loads:
        lines.append(
            f"| {load.mode} | {load.turns} | {load.seconds:.1f} | {load.events / load.seconds:,.0f} | "
            f"{load.status_updates / load.seconds:,.0f} | {load.events / max(1, load.status_updates):.2f} | "
            f"{load.events / max(1, load.publications):.2f} | {1000 * statistics.median(load.latencies or [0]):.0f} | "
            f"{1000 * percentile(load.latencies, 0.99):.0f} | {100 * load.server_cpu / load.seconds:.0f} | "
            f"{100 * load.client_cpu / load.seconds:.0f} | {len(load.errors)} |")
    if len(loads) == 2 and all(load.turns for load in loads):
        batched, unbatched = loads

        def ratio(pick: Any) -> str:
            low = pick(unbatched)
            return f"{pick(batched) / low:.2f}" if low else "-"

        lines += ["", "batched / unbatched: "
                  f"events/s x{ratio(lambda l: l.events / l.seconds)}, "
                  f"status updates/s x{ratio(lambda l: l.status_updates / l.seconds)}, "
                  f"status updates per turn x{ratio(lambda l: l.status_updates / l.turns)}, "
                  f"turn p50 x{ratio(lambda l: statistics.median(l.latencies))}, "
                  f"server CPU per event x{ratio(lambda l: l.server_cpu / max(1, l.events))}"]
    for load in loads:
        for error in sorted(set(load.errors))[:5]:
            lines.append(f"error ({load.mode}, {load.errors.count(error)}x): {error[:300]}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Part 2: latency per step of one full run
# ----------------------------------------------------------------------------

def _millis(created_at: str) -> float:
    return datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp() * 1000


def step_spans(events: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(label, start offset ms from the turn's first event, duration ms) for every step, candidate and candidate
    sub-step of one turn: the steps in the order they started, each step's candidates right after it (by index,
    each followed by its sub-steps); a span still open at the turn's end ends at its last event."""
    if not events:
        return []
    origin = _millis(events[0]["createdAt"])
    end = _millis(events[-1]["createdAt"])
    opened: dict[str, tuple[str, float]] = {}
    spans: dict[str, tuple[str, float, float]] = {}
    order: dict[str, tuple[Any, ...]] = {}  # key -> (parent step's run id, candidate index, sub-step start)
    current_step = ""
    for event in events:
        kind, at = event["eventType"], _millis(event["createdAt"])
        step_run = (event.get("step") or {}).get("runId") or current_step  # candidates belong to the open step
        if kind == "step_started":
            current_step = step_run
        if kind in ("step_started", "step_completed", "input_received", "input_required"):
            key, label, rank = step_run, step_run.removeprefix("step-").rsplit("-", 1)[0], (step_run, -1, 0.0)
        elif kind.startswith("candidate"):
            candidate = event["candidate"]["runId"]
            index = int(candidate.removeprefix("candidate-evaluate_candidate-").split("-")[0])
            if kind.startswith("candidate_step"):
                key = event["candidateStep"]["runId"]
                label = f"candidate {index} › " + key.removeprefix(candidate + "-").rsplit("-", 1)[0]
                rank = (step_run, index, at)
            else:
                key, label, rank = candidate, f"candidate {index}", (step_run, index, -1.0)
        else:
            continue
        if kind.endswith("_started") or kind == "input_received":
            if key not in opened:
                opened[key] = (label, at)
                order[key] = rank
        elif key in opened:
            name, began = opened.pop(key)
            name = (f"{name} (to its question)" if kind == "input_required"
                    else name if kind.endswith("_completed") else f"{name} ({kind.rsplit('_', 1)[1]})")
            spans[key] = (name, began - origin, at - began)
    for key, (name, began) in opened.items():
        spans[key] = (f"{name} (open)", began - origin, end - began)
    step_start = {key: spans[key][1] for key in spans if order[key][1] == -1}
    return [spans[key] for key in sorted(spans, key=lambda k: (step_start.get(order[k][0], 0.0), *order[k][1:]))]


async def full_run(server: Server) -> tuple[list[list[tuple[str, float, float]]], list[float], str | None]:
    """One ``selling`` run end to end: spans of each turn, each turn's wall time (ms), a problem if any."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
        first = await send_turn(http, server.url, REQUEST)
        problem = check_first_turn(first)
        second = await send_turn(http, server.url, ANSWER, context_id=first.context_id, task_id=first.task_id)
    types = [e["eventType"] for e in second.events]
    if problem is None and types != SECOND_TURN:
        problem = f"second turn streamed {types}"
    if problem is None and [e["sequence"] for e in second.events] != list(
            range(len(first.events) + 1, len(first.events) + 1 + len(second.events))):
        problem = "second turn's sequences do not continue the first's"
    spans = [step_spans(first.events), step_spans(second.events)]
    for turn, turn_spans in zip((first, second), spans):  # the turn's whole span, as one more row
        span = _millis(turn.events[-1]["createdAt"]) - _millis(turn.events[0]["createdAt"]) if turn.events else 0.0
        turn_spans.append((f"first → last event ({len(turn.events)} events, {turn.status_updates} status updates)",
                           0.0, span))
    return spans, [1000 * first.seconds, 1000 * second.seconds], problem


def format_steps(runs: list[tuple[list[list[tuple[str, float, float]]], list[float]]]) -> str:
    """The per-step table (median over the runs when there are several) and the turns' wall times."""
    many = len(runs) > 1
    title = (f"latency per step of a full `selling` run, offline runtime (median of {len(runs)} runs)" if many
             else "latency per step of one full `selling` run, offline runtime")
    lines = [title + " (events' createdAt, ms):", "",
             "| turn | step | starts at ms | duration ms |" + (" max ms |" if many else ""),
             "|---|---|---|---|" + ("---|" if many else "")]
    for turn_index in range(2):
        by_label = [{label: (offset, duration) for label, offset, duration in run[0][turn_index]} for run in runs]
        for label, _, _ in runs[0][0][turn_index]:
            offsets = [spans[label][0] for spans in by_label if label in spans]
            durations = [spans[label][1] for spans in by_label if label in spans]
            row = (f"| {turn_index + 1} | {label} | "
                   f"{statistics.median(offsets):.0f} | {statistics.median(durations):.0f} |")
            lines.append(row + (f" {max(durations):.0f} |" if many else ""))
    lines.append("")
    for turn_index, name in enumerate((f"turn 1 ({REQUEST!r} → the candidate choice)",
                                       f"turn 2 ({ANSWER!r} → deploying → handoff)")):
        walls = [run[1][turn_index] for run in runs]
        lines.append(f"{name}: {statistics.median(walls):.0f} ms wall (request sent → stream closed)"
                     + (f", max {max(walls):.0f}" if many else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("events", "steps"), help="run one part only")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per mode (default 10)")
    parser.add_argument("--turns", type=int, default=0, help="a fixed number of turns per mode instead of --duration")
    parser.add_argument("--runs", type=int, default=1, help="full runs for the per-step table (default 1)")
    return parser.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    """Both parts; returns the exit status."""
    scratch = Path(tempfile.mkdtemp(prefix="iac-code-bench-pipeline-"))
    failed = False
    print(f"iac-code a2a, mode: pipeline, offline runtime, durable (persistence-dir on {fs_type(scratch)}), "
          f"loopback, unpinned, {os.cpu_count()} CPUs\n", flush=True)
    try:
        loads: list[Load] = []
        for index, (mode, settings) in enumerate(MODES.items()):
            if args.only == "steps" and index:
                break
            server = await start_server(settings, scratch, f"server-{index}")
            try:
                async with aiohttp.ClientSession() as http:  # warm-up: imports, compiled patterns
                    problem = check_first_turn(await send_turn(http, server.url, REQUEST))
                if problem:
                    raise RuntimeError(f"warm-up turn: {problem}")
                if index == 0 and args.only != "events":
                    runs = []
                    for number in range(args.runs):
                        log(f"full run {number + 1}/{args.runs}")
                        spans, walls, problem = await full_run(server)
                        if problem:
                            failed = True
                            print(f"full run {number + 1}: {problem}", flush=True)
                        runs.append((spans, walls))
                    print(format_steps(runs) + "\n", flush=True)
                if args.only != "steps":
                    log(f"{mode}: {args.concurrency} clients, "
                        + (f"{args.turns} turns" if args.turns else f"{args.duration:g} s"))
                    load = await run_load(server, mode, args)
                    log(f"{mode}: {load.turns} turns, {server.journal_files()} journals written")
                    failed = failed or bool(load.errors)
                    loads.append(load)
            finally:
                server.stop()
        if loads:
            print(format_loads(loads, args.concurrency), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
