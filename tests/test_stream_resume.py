"""Resumable streams on one node: every stream event has a seq, and SubscribeToTask resumes after one.

The default server (local store, offline runtime): a streamed turn that pauses for
a permission answer, a reconnect with ``Last-Event-ID`` or
``metadata.iac_code.resumeAfter``, and the answer's continuation replayed after
the turn ended.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.testing import (
    A2A_HEADERS,
    permission_answer_body,
    permission_envelope,
    send_message_body,
    start_server,
)

PROMPT = "Create a VPC with two vSwitches."


async def _sse(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
               headers: dict[str, str] | None = None) -> list[tuple[str | None, dict[str, Any]]]:
    """Every event of a stream as (SSE id, JSON-RPC frame)."""
    async with http.post(url, json=body, headers={**A2A_HEADERS, **(headers or {})}) as response:
        assert response.status == 200
        text = await response.text()
    events: list[tuple[str | None, dict[str, Any]]] = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        event_id, data = None, None
        for line in frame.split("\n"):
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if data is not None:
            events.append((event_id, data))
    return events


def _seq(frame: dict[str, Any]) -> int | None:
    result = frame["result"]
    payload = next(iter(result.values()))
    return payload.get("metadata", {}).get("iac_code", {}).get("seq")


def _subscribe(task_id: str, resume: int | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"id": task_id}
    if resume is not None:
        params["metadata"] = {"iac_code": {"resumeAfter": resume}}
    return {"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": params}


async def test_each_stream_event_carries_its_seq_as_sse_id_and_in_metadata() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        events = await _sse(http, server.url, send_message_body(PROMPT, method="SendStreamingMessage"))
        assert len(events) >= 3
        seqs = [_seq(frame) for _, frame in events]
        assert all(isinstance(s, int) for s in seqs)
        assert [event_id for event_id, _ in events] == [str(s) for s in seqs]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a_reconnecting_subscriber_gets_exactly_the_missed_events() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        events = await _sse(http, server.url, send_message_body(PROMPT, method="SendStreamingMessage"))
        last = events[-1][1]["result"]
        paused = last.get("statusUpdate") or last.get("task")
        assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id = paused["taskId"] if "taskId" in paused else paused["id"]
        seqs = [_seq(frame) for _, frame in events]
        for cut in range(len(events)):
            expected = [frame["result"] for _, frame in events[cut + 1:]]
            by_header = await _sse(http, server.url, _subscribe(task_id), {"Last-Event-ID": str(seqs[cut])})
            by_metadata = await _sse(http, server.url, _subscribe(task_id, seqs[cut]))
            assert [frame["result"] for _, frame in by_header] == expected, f"after seq {seqs[cut]}"
            assert [frame["result"] for _, frame in by_metadata] == expected
        # From before the first event: the whole turn so far (the task itself first).
        whole = await _sse(http, server.url, _subscribe(task_id, 0))
        assert [frame["result"] for _, frame in whole] == [frame["result"] for _, frame in events]


async def test_the_continuation_of_an_answered_turn_is_replayed_after_the_turn_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the answered turn writes its template into the workspace
    async with start_server() as server, aiohttp.ClientSession() as http:
        events = await _sse(http, server.url, send_message_body(PROMPT, method="SendStreamingMessage"))
        result = events[-1][1]["result"]
        paused = result.get("statusUpdate") or result["task"]
        envelope = permission_envelope(paused)
        assert envelope is not None
        answer = permission_answer_body(envelope, method="SendStreamingMessage")
        continuation = await _sse(http, server.url, answer)
        # The answer's stream opens with the paused task (no new event); the rest are new events.
        new = [frame for _, frame in continuation if _seq(frame) is not None and _seq(frame) > _seq(events[-1][1])]
        assert new, "the answer produced no events"
        task_id = envelope["requestTaskId"]
        replayed = await _sse(http, server.url, _subscribe(task_id, _seq(events[-1][1])))
        assert [frame["result"] for _, frame in replayed] == [frame["result"] for frame in new]
        # Nothing missed after the last event: an empty stream, not an error.
        assert await _sse(http, server.url, _subscribe(task_id, _seq(new[-1]))) == []


async def test_a_bad_resume_position_is_invalid_params() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        events = await _sse(http, server.url, send_message_body(PROMPT, method="SendStreamingMessage"))
        first = events[0][1]["result"]["task"]
        for headers, body in (({"Last-Event-ID": "abc"}, _subscribe(first["id"])),
                              ({}, _subscribe(first["id"], -1))):
            async with http.post(server.url, json=body, headers={**A2A_HEADERS, **headers}) as response:
                reply = await response.json()
            assert reply["error"]["code"] == -32602
            assert "resume" in reply["error"]["message"]
