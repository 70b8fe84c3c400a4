"""kill -9 of a real ``iac-code a2a`` server in pipeline mode at a step boundary, then a restart on the same
persistence directory: the journal stays gapless without a duplicated event, the run continues from the last
completed step (nothing that had completed is done again), the user's choice after the restart reaches the
handoff, and the state endpoint equals what was streamed."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.testing import A2A_HEADERS, next_sse_data, send_message_body

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
LISTENING = re.compile(r"listening: (http://\S+) \(JSONRPC\)")
PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
Event = dict[str, Any]


@asynccontextmanager
async def server_process(config: Path, workspace: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``iac-code a2a --config <config>`` as its own process; SIGTERM on exit unless the test killed it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_"))}
    env["IAC_CODE_CONFIG_DIR"] = str(config.parent)
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--config", str(config), "--port", "0", env=env, cwd=workspace,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "server exited early"
            match = LISTENING.search(line)
            if match:
                break
        yield proc, match.group(1)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


def _carried(result: Event) -> tuple[list[Event], Event | None]:
    """The pipeline events of one streamed result (single or batched) and its status update, if it is one."""
    update = result.get("statusUpdate")
    if update is None:
        return [], None
    section = update.get("metadata", {}).get("iac_code", {})
    if "pipeline" in section:
        return [section["pipeline"]], update
    return list(section.get("pipelineBatch", {}).get("events", [])), update


async def stream_turn(http: aiohttp.ClientSession, url: str, text: str, *, n: int, context_id: str = "",
                      stop: Callable[[Event], bool] | None = None,
                      metadata: Event | None = None) -> tuple[list[Event], Event | None, bool]:
    """One streamed turn: its pipeline events, its last status update, and whether ``stop`` cut it short (the
    caller then kills the server: the stream is left as it is)."""
    fields: Event = {"contextId": context_id} if context_id else {}
    if metadata:
        fields["metadata"] = metadata
    body = send_message_body(text, message_id=f"m-{n}", request_id=n, method="SendStreamingMessage", **fields)
    events: list[Event] = []
    last: Event | None = None
    async with http.post(url, json=body, headers=A2A_HEADERS) as response:
        assert response.status == 200
        while True:
            try:
                data = await next_sse_data(response.content)
            except EOFError:
                return events, last, False
            assert "error" not in data, data
            carried, update = _carried(data["result"])
            last = update or last
            events.extend(carried)
            if stop is not None and any(stop(e) for e in carried):
                return events, last, True
            if update is not None and update.get("final") is True:
                return events, last, False
            if update is not None and update["status"]["state"] in ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_FAILED"):
                return events, last, False


async def pipeline_state(http: aiohttp.ClientSession, url: str, context_id: str) -> Event:
    async with http.get(url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id},
                        headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return await reply.json()  # type: ignore[no-any-return]


def assert_journal_sound(events: list[Event]) -> None:
    """Gapless increasing sequences from 1, no event twice, nothing that completed done twice."""
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["eventId"] for e in events}) == len(events)
    once: Counter[tuple[Any, ...]] = Counter()
    for e in events:
        key = (e["eventType"], e.get("step", {}).get("runId"), e.get("candidate", {}).get("runId"),
               e.get("candidateStep", {}).get("runId"), e["data"].get("stepId"))
        once[key] += 1
    repeated = {k: c for k, c in once.items() if c > 1 and k[0] not in ("input_required", "pipeline_resumed")}
    assert not repeated, repeated
    types = [e["eventType"] for e in events]
    assert types.count("pipeline_started") == 1


def _first(event_type: str, step_id: str = "") -> Callable[[Event], bool]:
    return lambda e: e["eventType"] == event_type and (not step_id or e["data"].get("stepId") == step_id)


BOUNDARIES = {
    "intent_parsing completed": _first("step_completed", "intent_parsing"),
    "architecture_planning completed": _first("step_completed", "architecture_planning"),
    "first candidate started": _first("candidate_started"),
    "first template written": _first("artifact_created"),
    "first candidate completed": _first("candidate_completed"),
    "evaluate_candidates completed": _first("step_completed", "evaluate_candidates"),
    "confirm_and_select input_required": _first("input_required"),
}


@pytest.mark.parametrize("boundary", list(BOUNDARIES))
async def test_kill_9_at_a_step_boundary_then_the_run_resumes(boundary: str, tmp_path: Path) -> None:
    state_dir, workspace = tmp_path / "state", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(state_dir)}))
    async with aiohttp.ClientSession() as http:
        async with server_process(config, workspace) as (proc, url):
            before, last, cut = await stream_turn(http, url, PROMPT, n=1, stop=BOUNDARIES[boundary],
                                                  metadata={"iac_code": {"candidatePresentation": "rich-v1"}})
            assert cut, [e["eventType"] for e in before]
            context_id = before[0]["contextId"]
            proc.kill()  # SIGKILL: no shutdown, whatever the turn was doing is cut
            await proc.wait()

        async with server_process(config, workspace) as (_, url):
            journaled = (await pipeline_state(http, url, context_id))["events"]
            assert journaled[:len(before)] == before  # everything streamed was journaled, as streamed
            assert_journal_sound(journaled)
            streamed_after: list[Event] = []
            snapshot = (await pipeline_state(http, url, context_id))["snapshot"]
            n = 2
            if not snapshot.get("pendingInput"):  # cut before the question: the next message continues the run
                more, last, _ = await stream_turn(http, url, "continue", n=n, context_id=context_id)
                n += 1
                assert more[0]["eventType"] == "pipeline_resumed", [e["eventType"] for e in more]
                assert more[0]["sequence"] == journaled[-1]["sequence"] + 1
                streamed_after += more
            assert last is not None
            question = streamed_after[-1] if streamed_after else journaled[-1]
            assert question["eventType"] == "input_required" and question["data"]["kind"] == "candidate_selection"
            assert [o["candidate_index"] for o in question["data"]["options"]] == [1, 2, 3]

            answer, last, _ = await stream_turn(http, url, "方案 2", n=n, context_id=context_id)
            streamed_after += answer
            assert [e["eventType"] for e in answer][-2:] == ["pipeline_completed", "pipeline_handoff_ready"]
            assert answer[-1]["data"]["outcome"] == "completed"

            final = (await pipeline_state(http, url, context_id))["events"]
            assert final == journaled + streamed_after  # the state endpoint: the journal, as streamed
            assert_journal_sound(final)
            types = [e["eventType"] for e in final]
            for event_type in ("candidate_started", "artifact_created", "candidate_completed"):
                assert sorted(e["candidate"]["index"] for e in final if e["eventType"] == event_type) == [1, 2, 3], (
                    event_type, types)
            for step in ("intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select",
                         "deploying"):
                assert [e["data"]["stepId"] for e in final if e["eventType"] == "step_completed"].count(step) == 1


async def test_the_journal_publishes_a_lifecycle_event_once_and_questions_every_time(tmp_path: Path) -> None:
    """What makes a redone step safe: the same lifecycle event (same run ids) is neither journaled nor published
    twice, also after the journal is read back; questions and resumptions are new events each time."""
    from iac_code_pipeline_selling.journal import JournalStore, envelope

    published: list[Event] = []

    def build(event_type: str, step_run: str) -> Callable[[int], Event]:
        return lambda seq: envelope(seq, event_type=event_type, scope="step", status="working", data={"step_id": "x"},
                                    run_id="run-1", task_id="t", context_id="c", pipeline_name="selling",
                                    extra={"step": {"id": "x", "runId": step_run, "attempt": 1}})

    store = JournalStore(tmp_path)
    first = await store.publish("c", build("step_started", "step-x-1"), published.append)
    assert await store.publish("c", build("step_started", "step-x-1"), published.append) == first
    await store.publish("c", build("step_started", "step-x-2"), published.append)  # another attempt: a new event
    await store.publish("c", build("input_required", "step-x-2"), published.append)
    await store.publish("c", build("input_required", "step-x-2"), published.append)
    again = JournalStore(tmp_path)  # after a restart
    assert await again.publish("c", build("step_started", "step-x-1"), published.append) == first
    assert [e["sequence"] for e in published] == [1, 2, 3, 4]
    assert again.journal("c").events == published
