"""Crash consistency: kill -9 ``iac-code a2a`` under SendMessage load, restart, check every acknowledged task.

Each trial starts the server on a fresh state directory, runs ``--clients``
closed-loop clients, a quarter of them streaming (``SendStreamingMessage``), each
message in a new context, kills the server with SIGKILL after a random 0.5-1.5 s,
restarts it on the same state and asks GetTask for every task a client was told
about. ``--agent trivial`` (default) runs the trivial agent (its tasks end
COMPLETED); ``--agent iac-code`` the built-in runtime with its default
configuration (``hello`` ends the turn in INPUT_REQUIRED, a VPC request pauses
for a permission answer). It prints, per trial and in total:

* acknowledged: tasks whose SendMessage response, or a stream event creating the task
  or moving it to INPUT_REQUIRED or a terminal state, the client received;
* lost: acknowledged tasks the restarted server does not know;
* changed: tasks acknowledged in INPUT_REQUIRED (turn over) or a terminal state that came
  back in another state, or paused for a permission answer and not FAILED "interrupted"
  (a task acknowledged SUBMITTED/WORKING may come back in any later state);
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
STOPS = {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
         "TASK_STATE_REJECTED"}
PROMPTS = {"trivial": ("crash test",), "iac-code": ("hello", "Create a VPC with two vSwitches.")}
CONFIGS = {"trivial": "agent-executor: trivial_agent:TrivialExecutor\n", "iac-code": "{}\n"}


def _paused(task_or_event: dict[str, Any]) -> bool:
    return "input" in task_or_event.get("metadata", {}).get("iac_code", {})


@dataclass
class Trial:
    acknowledged: dict[str, tuple[str, bool]] = field(default_factory=dict)  # id -> (state, paused)
    lost: int = 0
    changed: int = 0
    stuck: int = 0
    unreadable: int = 0


def _message(prompts: tuple[str, ...], n: int, method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": method, "params": {"message": {
        "messageId": uuid.uuid4().hex, "contextId": uuid.uuid4().hex, "role": "ROLE_USER",
        "parts": [{"text": prompts[n % len(prompts)]}]}}}


async def _client(http: aiohttp.ClientSession, url: str, trial: Trial, stop: asyncio.Event,
                  prompts: tuple[str, ...]) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        try:
            async with http.post(url, json=_message(prompts, n, "SendMessage"), headers=HEADERS) as r:
                reply = await r.json()
        except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
            return  # the server died: responses not received are not acknowledged
        task = reply.get("result", {}).get("task")
        if task:
            trial.acknowledged[task["id"]] = (task["status"]["state"], _paused(task))


async def _streaming_client(http: aiohttp.ClientSession, url: str, trial: Trial, stop: asyncio.Event,
                            prompts: tuple[str, ...]) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        try:
            async with http.post(url, json=_message(prompts, n, "SendStreamingMessage"),
                                 headers={**HEADERS, "Accept": "text/event-stream"}) as r:
                async for line in r.content:
                    if not line.startswith(b"data:"):
                        continue
                    result = json.loads(line[5:]).get("result", {})
                    if "task" in result:
                        task = result["task"]
                        trial.acknowledged[task["id"]] = (task["status"]["state"], _paused(task))
                    elif result.get("statusUpdate", {}).get("status", {}).get("state") in STOPS:
                        event = result["statusUpdate"]
                        trial.acknowledged[event["taskId"]] = (event["status"]["state"], _paused(event))
        except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError, ValueError):
            return


def _unreadable(state: Path) -> int:
    bad = 0
    for path in state.rglob("*"):
        if not path.is_file():
            continue
        if path.name.endswith(".tmp"):
            bad += 1
        elif path.suffix == ".json" and path.parent.name in ("tasks", "contexts", "push-configs"):
            try:
                json.loads(path.read_bytes())
            except ValueError:
                bad += 1
    return bad


async def run_trial(config: Path, clients: int, rng: random.Random, prompts: tuple[str, ...]) -> Trial:
    trial = Trial()
    with tempfile.TemporaryDirectory(prefix="iac-crash-") as tmp:
        config_dir = Path(tmp)
        proc, url = await start_iac_code(config, config_dir)
        stop = asyncio.Event()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            streaming = clients // 4
            workers = [asyncio.create_task(_client(http, url, trial, stop, prompts))
                       for _ in range(clients - streaming)]
            workers += [asyncio.create_task(_streaming_client(http, url, trial, stop, prompts))
                        for _ in range(streaming)]
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            stop.set()
            await asyncio.gather(*workers, return_exceptions=True)
        proc, url = await start_iac_code(config, config_dir)
        try:
            async with aiohttp.ClientSession() as http:
                for task_id, (acked, paused) in trial.acknowledged.items():
                    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
                    async with http.post(url, json=body, headers=HEADERS) as r:
                        reply: dict[str, Any] = await r.json()
                    if "error" in reply:
                        trial.lost += 1
                        continue
                    now = reply["result"]["status"]["state"]
                    if now in RUNNING:
                        trial.stuck += 1
                    elif paused:
                        interrupted = reply["result"].get("metadata", {}).get("iac_code", {}).get("interrupted")
                        trial.changed += now != "TASK_STATE_FAILED" or interrupted is not True
                    elif acked in STOPS and now != acked:
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
    parser.add_argument("--agent", choices=sorted(PROMPTS), default="trivial")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="iac-crash-config-") as tmp:
        config = Path(tmp) / "server.yml"
        config.write_text(CONFIGS[args.agent])
        totals = Trial()
        print(f"{'trial':>5} {'acknowledged':>12} {'lost':>6} {'changed':>8} {'stuck':>6} {'unreadable':>10}")
        for n in range(1, args.trials + 1):
            trial = await run_trial(config, args.clients, rng, PROMPTS[args.agent])
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
