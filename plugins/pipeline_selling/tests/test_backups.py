"""Critical backups in pipeline mode, through the public surface: a real server with ``mode: pipeline`` and a backup
directory, a2a-sdk's client reading events by the product's names, the state endpoint, the files on disk.

A protected publication (the question a turn stops on, the terminal event, the handoff) comes only after its
backup: ``backup_committed`` then the publication marked ``visibility: committed``. A backup that cannot be written
gives ``backup_blocked`` and ``metadata.iac_code.backupBlocked`` instead, and the publication waits for a retry.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import stat
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from a2a.types.a2a_pb2 import GetTaskRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import (
    A2A_HEADERS,
    ServerProcess,
    connect_client,
    next_sse_data,
    permission_answer_request,
    send_message_body,
    server_process,
    start_server,
)
from iac_code_pipeline_selling.runner import lifecycle

from pipeline_selling_test_streams import last_status as _last, pipeline_events as _pipeline, sender, state_of as _state


PROMPT = "Deploy a web shop with a MySQL database in cn-hangzhou"
RICH = {"candidatePresentation": "rich-v1"}
IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
Event = dict[str, Any]

_send = sender("bk")


# ----------------------------------------------------------------------------- helpers (the product's wire format)


def _said(results: list[Event]) -> str:
    """Every status message text of the turn (what a generic client shows)."""
    return "\n".join(p.get("text", "") for r in results if "statusUpdate" in r
                     for p in r["statusUpdate"]["status"].get("message", {}).get("parts", []))


def _types(events: list[Event]) -> list[str]:
    return lifecycle([e["eventType"] for e in events])


def _context_dir(root: Path, context_id: str) -> Path:
    return root / "pipeline" / hashlib.sha256(context_id.encode()).hexdigest()[:40]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_committed_pairs(events: list[Event]) -> None:
    """Each protected publication comes right after its ``backup_committed`` (which has no status) and says
    ``visibility: committed``; nothing else has a visibility."""
    for i, event in enumerate(events):
        if event["eventType"] in ("input_required", "pipeline_completed", "pipeline_handoff_ready",
                                  "pipeline_failed", "pipeline_canceled"):
            ack = events[i - 1]
            assert ack["eventType"] == "backup_committed" and "status" not in ack, _types(events)
            assert ack["data"] == {"committedEventId": event["eventId"], "committedEventType": event["eventType"],
                                   "committedSequence": event["sequence"]}
            assert event["visibility"] == "committed"
        else:
            assert "visibility" not in event, event


def _assert_sound(events: list[Event]) -> None:
    for i, event in enumerate(events):  # every ack is followed by the publication it acknowledges
        if event["eventType"] == "backup_committed":
            assert events[i + 1]["eventId"] == event["data"]["committedEventId"], _types(events)
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["eventId"] for e in events}) == len(events)
    for step in ("intent_parsing", "architecture_planning", "evaluate_candidates", "confirm_and_select", "deploying"):
        assert [e["data"].get("stepId") for e in events if e["eventType"] == "step_completed"].count(step) <= 1


def _break(path: Path) -> None:
    """Make ``path`` unusable as the backup directory, for any user (root writes into a 0500 directory anyway): a
    file where the directory should be (a directory already there is set aside for :func:`_repair`)."""
    if path.is_dir():
        path.rename(path.with_name(path.name + ".aside"))
    path.write_text("not a directory")


def _repair(path: Path) -> None:
    path.unlink()
    aside = path.with_name(path.name + ".aside")
    if aside.is_dir():
        aside.rename(path)


async def _until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Wait until ``condition()`` holds (checked every few ms, at most ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


# ----------------------------------------------------------------------------- the committed path


async def test_each_protected_publication_comes_after_its_committed_backup(tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    async with start_server({"mode": "pipeline", "backup-dir": str(backups)}) as server, \
            connect_client(server) as client:
        first = await _send(client, PROMPT, n=1, iac_code=RICH)
        streamed = _pipeline(first)
        assert _types(streamed)[-2:] == ["backup_committed", "input_required"]
        question = streamed[-1]
        assert question["data"]["kind"] == "candidate_selection" and len(question["data"]["options"]) == 3
        last = _last(first)
        assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert last["metadata"]["iac_code"]["pipeline"] == question
        assert "backupBlocked" not in last["metadata"]["iac_code"]
        assert "candidate 2" in _said(first)  # the question's text for generic clients comes with it
        context_id, task_id = last["contextId"], last["taskId"]

        directory = _context_dir(backups, context_id)
        snapshot_file = directory / "0000000001.json"
        assert snapshot_file.is_file()
        assert _mode(snapshot_file) == 0o600
        assert _mode(directory) == 0o700 and _mode(directory.parent) == 0o700
        snapshot = json.loads(snapshot_file.read_text())
        assert snapshot["kind"] == "input_required" and snapshot["contextId"] == context_id
        journal = snapshot["journal"]["events"]  # the journal up to the gated publication
        *narration, ack, pending = snapshot["pending"]  # the publication: the question's narration, the ack, itself
        assert journal + narration + [ack] == streamed[:-1]
        assert narration and not _types(narration)  # the question's text (display events) is withheld with it
        assert snapshot["journal"]["lastSequence"] == journal[-1]["sequence"]
        assert ack == streamed[-2]
        assert pending == {**question, "visibility": "pending_backup"}  # recorded before it was published
        assert snapshot["state"]["pendingInput"]["kind"] == "candidate_selection"

        second = await _send(client, "方案 2", context_id=context_id, task_id=task_id, n=2)
        more = _pipeline(second)
        assert _types(more) == ["input_received", "step_completed", "step_started", "pipeline_warning",
                                "step_completed", "backup_committed", "pipeline_completed", "backup_committed",
                                "pipeline_handoff_ready"]
        everything = streamed + more
        _assert_sound(everything)
        _assert_committed_pairs(everything)
        assert (await _state(server.url, context_id))["events"] == everything  # the state endpoint: as streamed
        assert sorted(os.listdir(directory)) == ["0000000001.json", "0000000002.json", "0000000003.json"]
        assert json.loads((directory / "0000000003.json").read_text())["kind"] == "handoff_ready"
        assert json.loads((directory / "0000000002.json").read_text())["kind"] == "terminal"

        # After the handoff, a chat turn ends with a non-blocking checkpoint (the newest three generations stay).
        chat = await _send(client, "Add a second vSwitch to the template", context_id=context_id, n=3)
        assert not _pipeline(chat)
        asked = [e["statusUpdate"] for e in chat if "statusUpdate" in e][-1]["metadata"]["iac_code"].get("input")
        assert asked is not None and asked["toolName"] == "write_file"  # the chat edits the chosen template
        chat = [MessageToDict(e) async for e in client.send_message(
            permission_answer_request(asked, "deny", message_id="deny-write"))]  # nothing written: the turn ends
        await _until(lambda: sorted(os.listdir(directory)) == ["0000000002.json", "0000000003.json", "0000000004.json"],
                     "the turn-end checkpoint (and the oldest generation dropped)")
        checkpoint = json.loads((directory / "0000000004.json").read_text())
        assert checkpoint["kind"] == "normal_turn_end" and checkpoint["pending"] == []
        assert checkpoint["history"][-2] == {"role": "user", "text": "Add a second vSwitch to the template"}
        assert (await _state(server.url, context_id))["events"] == everything  # a checkpoint publishes nothing


# ----------------------------------------------------------------------------- blocked, then retried


async def test_an_unwritable_backup_dir_blocks_the_publication_until_a_retry_succeeds(tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    _break(backups)
    async with start_server({"mode": "pipeline", "backup-dir": str(backups)}) as server, \
            connect_client(server) as client:
        first = await _send(client, PROMPT, n=1, iac_code=RICH)
        streamed = _pipeline(first)
        blocked = streamed[-1]
        assert blocked["eventType"] == "backup_blocked" and blocked["status"] == "input_required"
        assert set(blocked["data"]) == {"reason", "error", "recoverable"}
        assert blocked["data"]["reason"] == "input_required" and blocked["data"]["recoverable"] is True
        assert "input_required" not in _types(streamed) and "backup_committed" not in _types(streamed)
        last = _last(first)
        assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert last["metadata"]["iac_code"]["backupBlocked"] == blocked["data"]
        assert last["metadata"]["iac_code"]["pipeline"] == blocked
        said = _said(first)
        assert "backup" in said and "candidate 2" not in said  # the question's text is withheld with it
        wire = json.dumps(first, ensure_ascii=False)
        assert str(tmp_path) not in wire and "backups" not in blocked["data"]["error"]  # never a local path
        context_id, task_id = last["contextId"], last["taskId"]
        task = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert task["metadata"]["iac_code"]["backupBlocked"] == blocked["data"]  # on the task, for GetTask/ListTasks

        again = await _send(client, "retry", context_id=context_id, task_id=task_id, n=2)
        assert _types(_pipeline(again)) == ["backup_blocked"]  # still unwritable: blocked again, nothing else
        assert _pipeline(again)[0]["sequence"] == blocked["sequence"] + 1
        assert _last(again)["metadata"]["iac_code"]["backupBlocked"]["reason"] == "input_required"

        _repair(backups)
        retried = await _send(client, "please retry", context_id=context_id, task_id=task_id, n=3)
        published = _pipeline(retried)
        assert _types(published) == ["backup_committed", "input_required"]  # the withheld question, once
        assert lifecycle(published)[1]["data"]["kind"] == "candidate_selection"
        assert [o["candidate_index"] for o in lifecycle(published)[1]["data"]["options"]] == [1, 2, 3]
        assert "backupBlocked" not in _last(retried)["metadata"]["iac_code"]
        task = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        assert "backupBlocked" not in task["metadata"]["iac_code"]  # cleared by the committed publication
        assert "candidate 2" in _said(retried)

        # Blocked again at the end: the terminal event and the handoff wait, the answer is not asked for again.
        _break(backups)
        answer = await _send(client, "方案 2", context_id=context_id, task_id=task_id, n=4)
        assert _types(_pipeline(answer)) == ["input_received", "step_completed", "step_started", "pipeline_warning",
                                             "step_completed", "backup_blocked"]
        assert _pipeline(answer)[-1]["data"]["reason"] == "terminal"
        assert _last(answer)["metadata"]["iac_code"]["backupBlocked"]["reason"] == "terminal"

        _repair(backups)
        done = await _send(client, "retry", context_id=context_id, task_id=task_id, n=5)
        assert _types(_pipeline(done)) == ["backup_committed", "pipeline_completed", "backup_committed",
                                           "pipeline_handoff_ready"]
        assert lifecycle(_pipeline(done))[-1]["data"]["outcome"] == "completed"

        everything = [e for turn in (first, again, retried, answer, done) for e in _pipeline(turn)]
        _assert_sound(everything)
        _assert_committed_pairs(everything)
        assert (await _state(server.url, context_id))["events"] == everything
        directory = _context_dir(backups, context_id)
        assert sorted(os.listdir(directory)) == ["0000000001.json", "0000000002.json", "0000000003.json"]

        chat = await _send(client, "What does the template create?", context_id=context_id, n=6)
        assert not _pipeline(chat)  # handed off: normal chat now


async def test_solution_first_withholds_its_deployment_confirmation_the_same_way(tmp_path: Path) -> None:
    """``selling_solution_first`` (chosen per request): its ``deployment_confirmation`` (data as the spec spells it)
    is withheld by a blocked backup and published as it was after the retry; ``cancel`` ends behind backups too."""
    backups = tmp_path / "backups"
    async with start_server({"mode": "pipeline", "backup-dir": str(backups)}) as server, \
            connect_client(server) as client:
        first = await _send(client, PROMPT, n=1, iac_code={"pipeline_name": "selling_solution_first"})
        assert _types(_pipeline(first))[-2:] == ["backup_committed", "input_required"]
        last = _last(first)
        context_id, task_id = last["contextId"], last["taskId"]

        _break(backups)
        picked = await _send(client, "方案 2", context_id=context_id, task_id=task_id, n=2)
        assert _types(_pipeline(picked))[-1] == "backup_blocked" and "input_required" not in _types(_pipeline(picked))
        _repair(backups)
        retried = await _send(client, "retry", context_id=context_id, task_id=task_id, n=3)
        assert _types(_pipeline(retried)) == ["backup_committed", "input_required"]
        confirmation = lifecycle(_pipeline(retried))[1]["data"]
        assert confirmation["kind"] == "deployment_confirmation" and "effective_deployment_parameters" in confirmation

        canceled = await _send(client, "cancel", context_id=context_id, task_id=task_id, n=4)
        assert _types(_pipeline(canceled))[-4:] == ["backup_committed", "pipeline_canceled", "backup_committed",
                                                   "pipeline_handoff_ready"]
        everything = [e for turn in (first, picked, retried, canceled) for e in _pipeline(turn)]
        _assert_sound(everything)
        _assert_committed_pairs(everything)
        assert (await _state(server.url, context_id))["events"] == everything


# ----------------------------------------------------------------------------- the staging directory


async def test_with_a_staging_dir_the_commit_is_local_and_a_failed_copy_is_reported_and_retried(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    backups, staging = tmp_path / "backups", tmp_path / "staging"
    backups.write_text("not a directory")  # the background copy fails; the local commit does not
    caplog.set_level(logging.WARNING, logger="iac_code_pipeline_selling.backups")
    settings = {"mode": "pipeline", "backup-dir": str(backups), "backup-tmp-dir": str(staging)}
    async with start_server(settings) as server, connect_client(server) as client:
        first = await _send(client, PROMPT, n=1, iac_code=RICH)
        streamed = _pipeline(first)
        assert _types(streamed)[-2:] == ["backup_committed", "input_required"]  # confirmed by the local snapshot
        last = _last(first)
        context_id, task_id = last["contextId"], last["taskId"]
        staged = _context_dir(staging, context_id) / "0000000001.json"
        assert staged.is_file() and _mode(staged) == 0o600
        await _until(lambda: any("Background copy" in r.getMessage() for r in caplog.records),
                     "the background copy to fail")
        assert all(str(tmp_path) not in r.getMessage() for r in caplog.records)

        backups.unlink()  # repaired: the next protected publication reports the failure and copies again
        second = await _send(client, "方案 2", context_id=context_id, task_id=task_id, n=2)
        more = _pipeline(second)
        warnings = [e for e in more if e["eventType"] == "pipeline_warning" and e["data"]["code"] == "backup_copy_failed"]
        assert len(warnings) == 1 and warnings[0]["data"]["backupGeneration"] == 1
        assert str(tmp_path) not in json.dumps(warnings[0])
        assert _types(more).index("pipeline_warning", _types(more).index("step_started") + 2) < _types(more).index(
            "backup_committed")  # reported before the next commit
        assert _types(more)[-4:] == ["backup_committed", "pipeline_completed", "backup_committed",
                                     "pipeline_handoff_ready"]
        everything = streamed + more
        _assert_sound(everything)
        _assert_committed_pairs(everything)
        assert (await _state(server.url, context_id))["events"] == everything

        copied = _context_dir(backups, context_id) / "0000000003.json"
        await _until(copied.exists, "the newest snapshot in the backup directory")
        assert copied.read_bytes() == (_context_dir(staging, context_id) / "0000000003.json").read_bytes()
        assert _mode(copied) == 0o600 and _mode(copied.parent) == 0o700


# ----------------------------------------------------------------------------- environment, kill -9, check-config


def _server_process(config: Path, workspace: Path, env: dict[str, str]) -> AbstractAsyncContextManager[ServerProcess]:
    """``iac-code a2a --config <config>`` as its own process with the environment ``env`` (this one's without
    ``IAC_CODE_*`` settings, plus the test's)."""
    return server_process(config=config, cwd=workspace, env=env, drop_env=("IACCODE_A2A_", "IAC_CODE_"))


async def _stream(http: aiohttp.ClientSession, url: str, text: str, *, n: int, context_id: str = "",
                  metadata: Event | None = None, stop: str = "") -> tuple[list[Event], Event]:
    """One streamed turn: its pipeline events and last status update; ``stop``: return as soon as an event of that
    type arrives (the caller then kills the server)."""
    fields: Event = {"contextId": context_id} if context_id else {}
    if metadata:
        fields["metadata"] = metadata
    body = send_message_body(text, message_id=f"kb-{n}", request_id=n, method="SendStreamingMessage", **fields)
    events: list[Event] = []
    last: Event = {}
    async with http.post(url, json=body, headers=A2A_HEADERS) as response:
        assert response.status == 200
        while True:
            try:
                data = await next_sse_data(response.content)
            except EOFError:
                return events, last
            update = data["result"].get("statusUpdate")
            if update is None:
                continue
            last = update
            section = update.get("metadata", {}).get("iac_code", {})
            events += [section["pipeline"]] if "pipeline" in section else section.get("pipelineBatch", {}).get(
                "events", [])
            if stop and stop in _types(events):
                return events, last
            if update.get("final") is True or update["status"]["state"] in ("TASK_STATE_INPUT_REQUIRED",
                                                                            "TASK_STATE_FAILED"):
                return events, last


async def test_a_blocked_backup_survives_kill_9_and_is_retried_after_the_restart(tmp_path: Path) -> None:
    """The directory from ``IAC_CODE_CONFIG_BACKUP_DIR``; blocked, the server killed, repaired, restarted: the retry
    publishes the withheld question once, the journal gapless."""
    backups, workspace = tmp_path / "backups", tmp_path / "work"
    workspace.mkdir()
    _break(backups)
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(tmp_path / "state")}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_"))}
    env.update(IAC_CODE_CONFIG_DIR=str(config.parent), IAC_CODE_CONFIG_BACKUP_DIR=str(backups))
    async with aiohttp.ClientSession() as http:
        async with _server_process(config, workspace, env) as (proc, url):
            before, last = await _stream(http, url, PROMPT, n=1, metadata={"iac_code": RICH})
            assert _types(before)[-1] == "backup_blocked" and "input_required" not in _types(before)
            assert last["metadata"]["iac_code"]["backupBlocked"]["reason"] == "input_required"
            context_id = last["contextId"]
            proc.kill()
            await proc.wait()
        _repair(backups)
        async with _server_process(config, workspace, env) as (_, url):
            assert (await _state(url, context_id))["events"] == before
            after, last = await _stream(http, url, "retry", n=2, context_id=context_id)
            assert _types(after) == ["backup_committed", "input_required"]
            assert after[0]["sequence"] == before[-1]["sequence"] + 1
            everything = before + after
            _assert_sound(everything)
            _assert_committed_pairs(everything)
            assert (await _state(url, context_id))["events"] == everything
            assert (_context_dir(backups, context_id) / "0000000001.json").is_file()


@pytest.mark.parametrize("turn", [1, 2])
async def test_kill_9_right_after_a_backup_commit_leaves_the_pair_whole(turn: int, tmp_path: Path) -> None:
    """Killed the moment ``backup_committed`` is streamed (the question's in turn 1, the terminal event's in turn 2):
    after the restart the journal holds the ack with its publication, the run goes on to the handoff, every
    protected publication paired, the journal gapless and equal to what the state endpoint returns."""
    backups, workspace = tmp_path / "backups", tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({"mode": "pipeline", "persistence-dir": str(tmp_path / "state"),
                                      "backup-dir": str(backups)}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_"))}
    env["IAC_CODE_CONFIG_DIR"] = str(config.parent)
    async with aiohttp.ClientSession() as http:
        async with _server_process(config, workspace, env) as (proc, url):
            events, last = await _stream(http, url, PROMPT, n=1, metadata={"iac_code": RICH},
                                         stop="backup_committed" if turn == 1 else "")
            context_id = events[0]["contextId"]
            if turn == 2:
                events, _ = await _stream(http, url, "方案 2", n=2, context_id=context_id, stop="backup_committed")
            proc.kill()
            await proc.wait()
        async with _server_process(config, workspace, env) as (_, url):
            journaled = (await _state(url, context_id))["events"]
            assert all(e in journaled for e in events)  # everything streamed was journaled
            ack = [e for e in events if e["eventType"] == "backup_committed"][-1]  # the ack the kill followed
            assert journaled[journaled.index(ack) + 1]["eventId"] == ack["data"]["committedEventId"]  # with its event
            if turn == 1:
                await _stream(http, url, "方案 2", n=3, context_id=context_id)
            elif "pipeline_handoff_ready" not in _types(journaled):  # the kill may also have come after the handoff
                await _stream(http, url, "continue", n=3, context_id=context_id)
            final = (await _state(url, context_id))["events"]
            assert final[:len(journaled)] == journaled
            assert _types(final)[-2:] == ["backup_committed", "pipeline_handoff_ready"]
            assert _types(final).count("pipeline_completed") == 1 and _types(final).count("input_required") == 1
            _assert_sound(final)
            _assert_committed_pairs(final)


async def test_a_staging_dir_without_a_backup_dir_is_a_configuration_error(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"mode": "pipeline", "backup-tmp-dir": str(tmp_path / "staging")}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_"))}
    env["IAC_CODE_CONFIG_DIR"] = str(tmp_path)
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--check-config", "--config", str(config), env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert "backup-tmp-dir (or IAC_CODE_CONFIG_BACKUP_TMP_DIR) is set but backup-dir" in err.decode()
    env["IAC_CODE_CONFIG_BACKUP_DIR"] = str(tmp_path / "backups")  # the environment supplies the directory
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", "--check-config", "--config", str(config), env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


async def test_a_backup_ack_torn_from_its_publication_is_dropped_with_the_torn_tail(tmp_path: Path) -> None:
    """``backup_committed`` and its publication are journaled in one write; a journal that kept only the ack (a
    write torn between them) reads back without it, so the publication is redone, never left unpaired."""
    from iac_code_pipeline_selling.journal import JournalStore, envelope

    def event(sequence: int, event_type: str, data: Event, status: str | None = "working") -> Event:
        return envelope(sequence, event_type=event_type, scope="pipeline", status=status, data=data, run_id="run-1",
                        task_id="t", context_id="c", pipeline_name="selling", verbatim=True)

    store = JournalStore(tmp_path)
    journal = store.journal("c")
    started = event(1, "pipeline_started", {"pipelineName": "selling"})
    ack = event(2, "backup_committed", {"committedEventId": "evt-x", "committedEventType": "input_required",
                                        "committedSequence": 3}, status=None)
    journal.append_many([started, ack])
    assert journal.path is not None
    size = journal.path.stat().st_size
    again = JournalStore(tmp_path).journal("c")
    assert again.events == [started]  # the lone ack is gone, and so are its bytes
    assert journal.path.stat().st_size < size
    paired = [ack, event(3, "input_required", {"kind": "candidate_selection"}, status="input_required")]
    again.append_many(paired)
    assert JournalStore(tmp_path).journal("c").events == [started, *paired]
