"""Crash consistency: kill -9 ``iac-code a2a`` under SendMessage load, restart, check every acknowledged task.

Each trial starts the server on a fresh state directory, runs ``--clients``
closed-loop SendMessage clients (the trivial agent: its tasks end COMPLETED),
kills the server with SIGKILL after a random 0.5-1.5 s, restarts it on the same
state and asks GetTask for every task whose response had been received. It prints,
per trial and in total:

* acknowledged: tasks whose SendMessage response the client received;
* lost: acknowledged tasks the restarted server does not know;
* changed: acknowledged tasks that came back in another state than acknowledged;
* stuck: tasks still SUBMITTED/WORKING after the restart (never marked interrupted);
* unreadable: files in the state directory that are not valid snapshots, and temp files, after the restart.

The target is 0 lost / 0 changed / 0 stuck / 0 unreadable.

    uv run --group bench python benchmarks/bench_crash.py --trials 25 --clients 24
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH_DIR), os.environ.get("PYTHONPATH", "")) if p)
from iac_server import start_iac_code, stop_iac_code  # noqa: E402

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
RUNNING = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}


@dataclass
class Trial:
    acknowledged: dict[str, str] = field(default_factory=dict)  # task id -> acknowledged state
    lost: int = 0
    changed: int = 0
    stuck: int = 0
    unreadable: int = 0


async def _client(http: aiohttp.ClientSession, url: str, trial: Trial, stop: asyncio.Event) -> None:
    while not stop.is_set():
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "crash test"}]}}}
        try:
            async with http.post(url, json=body, headers=HEADERS) as r:
                reply = await r.json()
        except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
            return  # the server died: responses not received are not acknowledged
        task = reply.get("result", {}).get("task")
        if task:
            trial.acknowledged[task["id"]] = task["status"]["state"]


def _unreadable(state: Path) -> int:
    bad = 0
    for path in state.rglob("*"):
        if not path.is_file():
            continue
        if path.name.endswith(".tmp"):
            bad += 1
        elif path.suffix == ".json" and path.parent.name in ("tasks", "contexts"):
            try:
                json.loads(path.read_bytes())
            except ValueError:
                bad += 1
    return bad


async def run_trial(config: Path, clients: int, rng: random.Random) -> Trial:
    trial = Trial()
    with tempfile.TemporaryDirectory(prefix="iac-crash-") as tmp:
        config_dir = Path(tmp)
        proc, url = await start_iac_code(config, config_dir)
        stop = asyncio.Event()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            workers = [asyncio.create_task(_client(http, url, trial, stop)) for _ in range(clients)]
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            stop.set()
            await asyncio.gather(*workers, return_exceptions=True)
        proc, url = await start_iac_code(config, config_dir)
        try:
            async with aiohttp.ClientSession() as http:
                for task_id, acked in trial.acknowledged.items():
                    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
                    async with http.post(url, json=body, headers=HEADERS) as r:
                        reply: dict[str, Any] = await r.json()
                    if "error" in reply:
                        trial.lost += 1
                        continue
                    now = reply["result"]["status"]["state"]
                    if now in RUNNING:
                        trial.stuck += 1
                    elif now != acked:
                        trial.changed += 1
        finally:
            await stop_iac_code(proc)
        trial.unreadable = _unreadable(config_dir / "a2a")  # what the restart left in place
    return trial


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=25)
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="iac-crash-config-") as tmp:
        config = Path(tmp) / "server.yml"
        config.write_text("agent-executor: trivial_agent:TrivialExecutor\n")
        totals = Trial()
        print(f"{'trial':>5} {'acknowledged':>12} {'lost':>6} {'changed':>8} {'stuck':>6} {'unreadable':>10}")
        for n in range(1, args.trials + 1):
            trial = await run_trial(config, args.clients, rng)
            print(f"{n:>5} {len(trial.acknowledged):>12} {trial.lost:>6} {trial.changed:>8} {trial.stuck:>6} "
                  f"{trial.unreadable:>10}", flush=True)
            totals.acknowledged.update({f"{n}:{k}": v for k, v in trial.acknowledged.items()})
            totals.lost += trial.lost
            totals.changed += trial.changed
            totals.stuck += trial.stuck
            totals.unreadable += trial.unreadable
        print(f"{'total':>5} {len(totals.acknowledged):>12} {totals.lost:>6} {totals.changed:>8} {totals.stuck:>6} "
              f"{totals.unreadable:>10}   (target: 0 lost / 0 changed / 0 stuck / 0 unreadable)")


if __name__ == "__main__":
    asyncio.run(main())
