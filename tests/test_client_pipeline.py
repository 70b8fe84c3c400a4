"""``iac-code a2a-client call`` in pipeline mode: the steps and candidates as they stream, the question
answered at a terminal, a piped run told how to answer, ``--output json`` passing batched events."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pexpect

from iac_code.testing import start_server
from tests.client_support import CLI_SECONDS, run_client, spawn_terminal

WEB_APP = "Build a web app with a MySQL database on ECS"


async def _expect(child: Any, pattern: str) -> None:
    await child.expect(pattern, timeout=CLI_SECONDS, async_=True)


async def _exit_code(child: Any) -> int:
    await child.expect(pexpect.EOF, timeout=CLI_SECONDS, async_=True)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0))


async def test_the_pipeline_shown_and_its_question_answered_at_the_terminal(ws: Path) -> None:
    async with start_server({"mode": "pipeline"}) as server:
        child = spawn_terminal(["call", "--url", server.url, "-p", WEB_APP, "--stream", "--rich"], cwd=ws)
        await _expect(child, "pipeline selling")
        await _expect(child, r"▸\S* intent_parsing")
        await _expect(child, r"✓\S* architecture_planning")
        await _expect(child, r"artifact\S* candidate-1-")
        await _expect(child, r"✓\S* candidate 2 High availability across two zones · CNY [\d,.]+ / month")
        await _expect(child, "Pipeline question")
        await _expect(child, "Monthly cost")
        await _expect(child, "```mermaid")
        await _expect(child, r"Your answer \(number or text\): ")
        child.sendline("2")
        await _expect(child, "answer received")
        await _expect(child, r"✓\S* confirm_and_select")
        await _expect(child, "no_deployer_configured")
        await _expect(child, "handoff")
        await _expect(child, "completed")
        assert await _exit_code(child) == 0


async def test_selling_solution_first_asks_twice_at_the_terminal(ws: Path) -> None:
    async with start_server() as server:
        child = spawn_terminal(["call", "--url", server.url, "-p", WEB_APP, "--stream", "--mode", "pipeline",
                                "--pipeline", "selling_solution_first"], cwd=ws)
        await _expect(child, r"1\. Economy single zone")
        await _expect(child, r"Your answer \(number or text\): ")
        child.sendline("1")
        await _expect(child, r"\(deployment_confirmation\)")
        await _expect(child, r"1\. confirm")
        await _expect(child, r"Your answer \(number, confirm")
        child.sendline("cancel")
        await _expect(child, "pipeline canceled")
        await _expect(child, "handoff")
        assert await _exit_code(child) == 0


async def test_a_piped_run_says_how_to_answer_and_the_answer_continues(ws: Path) -> None:
    async with start_server({"mode": "pipeline"}) as server:
        piped = await run_client("call", "--url", server.url, "-p", WEB_APP, "--stream", cwd=ws)
        assert piped.code == 11, piped.out + piped.err
        assert "\x1b[" not in piped.out
        assert "✓ evaluate_candidates" in piped.out and "Pipeline question" in piped.out
        line = next(line for line in piped.out.splitlines() if line.startswith("Answer it with: "))
        command = shlex.split(line.removeprefix("Answer it with: "))
        assert command[:3] == ["iac-code", "a2a-client", "call"] and command[-2:] == ["-p", "<answer>"]
        assert re.search(r"--task-id \S+ --context-id \S+", line)
        answered = await run_client(*command[2:-1], "2", "--stream", cwd=ws)
        assert answered.code == 0, answered.out + answered.err
        assert "pipeline completed" in answered.out and "handoff" in answered.out


async def test_json_output_passes_batched_pipeline_events(ws: Path) -> None:
    async with start_server({"mode": "pipeline"}) as server:
        result = await run_client("call", "--url", server.url, "-p", WEB_APP, "--stream", "-o", "json", cwd=ws)
        assert result.code == 11
        lines = result.lines()
        batches = [line["statusUpdate"]["metadata"]["iac_code"]["pipelineBatch"]["events"] for line in lines
                   if "pipelineBatch" in line.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})]
        assert batches and any(len(batch) > 1 for batch in batches)
        events = [e for batch in batches for e in batch] + [
            line["statusUpdate"]["metadata"]["iac_code"]["pipeline"] for line in lines
            if "pipeline" in line.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})]
        sequences = sorted(e["sequence"] for e in events)
        assert sequences == list(range(1, len(sequences) + 1))  # every event, once
        assert {"step_started", "candidate_completed", "input_required"} <= {e["eventType"] for e in events}
        assert lines[-1]["pipelineQuestion"]["kind"] == "candidate_selection"
