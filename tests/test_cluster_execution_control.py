"""Execution control (since-0.13 §7) on three server processes sharing state in the real Redis.

The nodes are ``iac-code a2a`` processes as in tests/test_cluster.py (default runtime, default permission
rules, bearer and basic authentication). A turn paused for its permission answer on node A is paused through
node B, read through C, resumed through C and terminated through B; then the node running a paused execution
is killed with SIGKILL: the others still report it paused, resume it, and the permission answer sent to
another node resumes the turn there (the durable permission wait a survivor suspended); a second
execution paused there with a short reconnect deadline is terminated (``disconnect_timeout``) by a survivor.
"""

from __future__ import annotations

import base64
import signal
from pathlib import Path
import uuid
from typing import Any

import aiohttp
from yarl import URL

from iac_code.testing import permission_answer_body, permission_envelope, send_message_body
from tests.test_cluster import LEASE_SECONDS, PROMPT, Node, cluster, method, rpc, until

BEARER = {"Authorization": "Bearer t-123"}
ALICE = {"Authorization": "Basic " + base64.b64encode(b"alice:pw").decode()}
AUTH = {"token": "t-123", "basic-username": "alice", "basic-password": "pw"}
STATE = "/iac-code/execution/state"


def _auth(_: str) -> dict[str, Any]:
    return AUTH


def base(node: Node) -> str:
    return str(URL(node.url).origin())


async def state(http: aiohttp.ClientSession, node: Node, context_id: str,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    async with http.get(base(node) + STATE, params={"contextId": context_id}, headers=headers or {}) as rsp:
        return rsp.status, await rsp.json()


async def post(http: aiohttp.ClientSession, node: Node, operation: str, body: dict[str, Any],
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    async with http.post(base(node) + f"/iac-code/execution/{operation}", json=body, headers=headers or {}) as rsp:
        return rsp.status, await rsp.json()


def pause_body(snapshot: dict[str, Any], epoch: int = 1) -> dict[str, Any]:
    return {"contextId": snapshot["contextId"], "taskId": snapshot["taskId"],
            "expectedExecutionId": snapshot["executionId"], "requestId": f"p-{uuid.uuid4().hex}",
            "connectionEpoch": epoch, "reason": "client_disconnect", "reconnectTimeoutSeconds": 600}


def resume_body(snapshot: dict[str, Any], epoch: int = 2) -> dict[str, Any]:
    return {"contextId": snapshot["contextId"], "executionId": snapshot["executionId"],
            "pauseId": snapshot["pauseId"], "requestId": f"r-{uuid.uuid4().hex}", "connectionEpoch": epoch}


def terminate_body(snapshot: dict[str, Any], epoch: int = 3) -> dict[str, Any]:
    return {"contextId": snapshot["contextId"], "expectedExecutionId": snapshot["executionId"],
            "requestId": f"t-{uuid.uuid4().hex}", "connectionEpoch": epoch}


async def same_state(http: aiohttp.ClientSession, nodes: list[Node], context_id: str) -> dict[str, Any]:
    """The state as every node answers it: one answer, the same everywhere."""
    answers = [await state(http, node, context_id) for node in nodes]
    differ = [{k: (answers[0][1].get(k), answer[1].get(k)) for k in answer[1] if answer[1].get(k) != answers[0][1].get(k)}
              for answer in answers if answer != answers[0]]
    assert not differ, differ
    status, body = answers[0]
    assert status == 200, body
    return body


async def paused_turn(http: aiohttp.ClientSession, node: Node, context_id: str) -> dict[str, Any]:
    """A turn on ``node`` waiting for its permission answer (it keeps running there)."""
    reply = await rpc(http, node, send_message_body(PROMPT, message_id=f"m-{uuid.uuid4().hex}", contextId=context_id))
    task = reply["result"]["task"]
    assert permission_envelope(task) is not None, task
    return task


async def test_pause_resume_terminate_through_other_nodes(tmp_path: Path) -> None:
    async with cluster(tmp_path, extra=_auth) as nodes, aiohttp.ClientSession(headers=BEARER) as http:
        a, b, c = nodes
        task = await paused_turn(http, a, "ctx-exec")
        running = await same_state(http, nodes, "ctx-exec")
        assert (running["phase"], running["taskId"], running["executionStatus"]) == (
            "running", task["id"], "input-required")
        assert running["streamAvailable"] is True  # every node answers what node A, running the turn, sees
        # Another owner reads not found on every node, and cannot pause it.
        for node in nodes:
            assert await state(http, node, "ctx-exec", ALICE) == (404, {"error": "Execution was not found"})
        assert await post(http, b, "pause", pause_body(running), ALICE) == (404, {"error": "Execution was not found"})
        async with http.get(base(c) + STATE, params={"contextId": "ctx-exec"}, headers={"Authorization": ""}) as rsp:
            assert rsp.status == 401

        # Pause through B: the turn on A is parked (it waits for its answer), so the pause completes at once.
        status, paused = await post(http, b, "pause", pause_body(running))
        assert status == 200 and paused["phase"] == "paused" and paused["pauseComplete"] is True, paused
        seen = await same_state(http, nodes, "ctx-exec")  # read through C (and A and B): the same
        assert (seen["phase"], seen["pauseId"], seen["executionId"]) == ("paused", paused["pauseId"],
                                                                        running["executionId"])
        # A new task on the paused context is refused on every node.
        for node in nodes:
            refused = await rpc(http, node, send_message_body("hello", message_id=f"n-{uuid.uuid4().hex}",
                                                              contextId="ctx-exec"))
            assert (refused["error"]["code"], refused["error"]["message"]) == (
                -32602, "Current execution must finish recovery before a new task starts"), refused
        # The same pause again through C: idempotent; another one: refused.
        again = {**pause_body(running), "requestId": "p-other"}
        assert await post(http, c, "pause", again) == (409, {"error": "A different pause request is already active"})

        # Resume through C; the answer through B goes on with the turn on A.
        status, resumed = await post(http, c, "resume", resume_body(seen))
        assert status == 200 and resumed["phase"] == "running" and resumed["pauseId"] is None, resumed
        assert (await same_state(http, nodes, "ctx-exec"))["phase"] == "running"
        envelope = permission_envelope(task)
        assert envelope is not None
        done = (await rpc(http, b, permission_answer_body(envelope, message_id="a-1")))["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and permission_envelope(done) is None

        async def turn_over() -> bool:  # node A ran the turn to its end (its gate hears it just after the reply)
            return (await state(http, a, "ctx-exec"))[1]["streamAvailable"] is False

        await until(turn_over)
        ended = await same_state(http, nodes, "ctx-exec")
        assert (ended["phase"], ended["executionStatus"], ended["streamAvailable"]) == (
            "running", "normal-turn-ended", False)

        # The next turn of the context, on A again; terminate it through B: cancelled like CancelTask.
        second = await paused_turn(http, a, "ctx-exec")
        current = await same_state(http, nodes, "ctx-exec")
        assert current["taskId"] == second["id"] and current["executionId"] == running["executionId"]
        status, terminated = await post(http, b, "terminate", terminate_body(current))
        assert status == 200 and terminated["phase"] == "terminated", terminated
        assert terminated["releaseReady"] is True and terminated["terminationReason"] == "explicit_terminate"
        assert (await rpc(http, c, method("GetTask", id=second["id"])))["result"]["status"]["state"] == \
            "TASK_STATE_CANCELED"
        final = await same_state(http, nodes, "ctx-exec")
        assert final["phase"] == "terminated"
        assert await post(http, c, "terminate", {**terminate_body(final), "requestId": "t-again"}) == (
            409, {"error": "Execution is terminating or terminated"})
        # A terminated execution's context takes new tasks (a new execution), on any node.
        fresh = await paused_turn(http, c, "ctx-exec")
        now = await same_state(http, nodes, "ctx-exec")
        assert now["taskId"] == fresh["id"] and now["executionId"] != running["executionId"]


async def test_a_paused_execution_survives_its_node(tmp_path: Path) -> None:
    async with cluster(tmp_path, extra=_auth) as nodes, aiohttp.ClientSession(headers=BEARER) as http:
        victim, b, c = nodes
        task = await paused_turn(http, victim, "ctx-kill")
        running = await same_state(http, nodes, "ctx-kill")
        status, paused = await post(http, b, "pause", pause_body(running))
        assert status == 200 and paused["phase"] == "paused", paused
        # A second execution on the victim, paused with a short reconnect deadline nobody will meet.
        await paused_turn(http, victim, "ctx-deadline")
        short = {**pause_body(await same_state(http, nodes, "ctx-deadline")), "reconnectTimeoutSeconds": 5}
        status, expiring = await post(http, c, "pause", short)
        assert status == 200 and expiring["phase"] == "paused", expiring
        victim.proc.send_signal(signal.SIGKILL)
        await victim.proc.wait()

        async def suspended() -> bool:
            seen = (await rpc(http, b, method("GetTask", id=task["id"])))["result"]
            return seen["metadata"]["iac_code"].get("permissionWait", {}).get("status") == "suspended"

        await until(suspended, LEASE_SECONDS * 6)
        # The survivors report the pause, the same on both, as it was acknowledged.
        after = await same_state(http, [b, c], "ctx-kill")
        assert {k: after[k] for k in ("phase", "pauseId", "executionId", "taskId", "expiresAt", "pauseReason")} == \
            {k: paused[k] for k in ("phase", "pauseId", "executionId", "taskId", "expiresAt", "pauseReason")}
        assert after["streamAvailable"] is False  # no node runs the turn any more
        refused = await rpc(http, c, send_message_body("hello", message_id="n-1", contextId="ctx-kill"))
        # (the suspended permission wait is checked first: its refusal names the task and how to answer)
        assert refused["error"]["code"] == -32602 and task["id"] in refused["error"]["message"], refused
        assert await state(http, b, "ctx-kill", ALICE) == (404, {"error": "Execution was not found"})
        # Resume through C; the turn died with its node, its permission wait is suspended and resumable:
        # the answer, sent to B, resumes the turn there.
        status, resumed = await post(http, c, "resume", resume_body(after))
        assert status == 200 and resumed["phase"] == "running", resumed
        envelope = permission_envelope(task)
        assert envelope is not None
        late = (await rpc(http, b, permission_answer_body(envelope, message_id="late")))["result"]["task"]
        assert late["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", late
        assert late["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}

        async def turn_over() -> bool:  # the node ran the turn to its end (its gate hears it just after the reply)
            return (await state(http, b, "ctx-kill"))[1]["streamAvailable"] is False

        await until(turn_over)
        done = await same_state(http, [b, c], "ctx-kill")
        # (the kernel reports a recovered turn that rests in INPUT_REQUIRED as "input-required")
        assert (done["phase"], done["executionStatus"], done["executionId"], done["taskId"]) == (
            "running", "input-required", running["executionId"], task["id"])
        follow = await rpc(http, c, send_message_body("hello", message_id="n-2", contextId="ctx-kill"))
        assert "result" in follow, follow

        # The short deadline passed while its node was dead: a survivor that read the record terminates it.
        async def expired() -> bool:
            status, body = await state(http, c, "ctx-deadline")
            return status == 200 and body["phase"] == "terminated"

        await until(expired, 30)
        gone = await same_state(http, [b, c], "ctx-deadline")
        assert (gone["terminationReason"], gone["executionId"]) == ("disconnect_timeout", expiring["executionId"])
        assert await post(http, b, "resume", resume_body(expiring)) == (
            409, {"error": "Reconnect deadline has expired; termination was claimed"})
