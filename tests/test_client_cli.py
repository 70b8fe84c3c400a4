"""``iac-code a2a-client`` against our own server over HTTP JSON-RPC: every subcommand, auth, config, exit codes.

The client runs as a real process (pipes: not a terminal, so no colour and no
questions); the server is a real kernel on an ephemeral port, in its default
configuration unless a test needs a setting (a token, push notifications).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import stat
from pathlib import Path
from typing import Any

from aiohttp import web

from iac_code.testing import start_server
from tests.client_support import Result, run_client, run_process, start_client

VPC = "Create a VPC with two vSwitches."
SECRET = "a-card-signing-secret-of-32-bytes!"




def _paused(result: Result) -> dict[str, Any]:
    """The permission envelope a non-interactive ``call -o json`` ended with."""
    assert result.code == 11, result.err
    last = result.lines()[-1]
    assert set(last) == {"permissionRequest"}
    return last["permissionRequest"]


# ----------------------------------------------------------------------------- a whole session


async def test_a_first_session(ws: Path) -> None:
    """The README's first session, each command its own process as a user runs it."""
    async with start_server() as server:
        url = server.url
        found = await run_process("discover", "--url", url, cwd=ws)
        assert found.code == 0, found.err
        assert "JSONRPC" in found.out and "iac_generation" in found.out and "Capabilities: streaming" in found.out
        card = (await run_process("discover", "--url", url, "-o", "json", cwd=ws)).json()
        assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"

        hello = await run_process("call", "--url", url, "-p", "hello", cwd=ws)
        assert hello.code == 0, hello.err
        assert "offline engine" in hello.out
        assert hello.out.count("offline engine") == 1  # the answer once, not once per history entry
        assert "● input-required" in hello.out and "\x1b[" not in hello.out  # no colour into a pipe

        paused = await run_process("call", "--url", url, "-p", VPC, "--stream", "-o", "json", cwd=ws)
        envelope = _paused(paused)
        events = paused.lines()[:-1]
        assert events[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        tools = [e["statusUpdate"]["metadata"]["iac_code"]["tool"] for e in events
                 if "tool" in e.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})]
        assert {"generate_template", "write_file"} <= {t["name"] for t in tools}
        assert any(isinstance(t.get("partialJsonLength"), int) for t in tools)  # integers stay integers
        assert envelope["toolName"] == "write_file" and envelope["kind"] == "permission"
        assert not (ws / "template.ros.yaml").exists()

        answered = await run_process("call", "--url", url, "--answer", "allow_once", "--task-id",
                                    envelope["requestTaskId"], "--context-id", envelope["contextId"], cwd=ws)
        assert answered.code == 0, answered.err
        assert "artifact template.ros.yaml" in answered.out and "KB" in answered.out
        assert "ALIYUN::ECS::VSwitch" in (ws / "template.ros.yaml").read_text()

        again = await run_process("call", "--url", url, "--answer", "deny", "--task-id", envelope["requestTaskId"],
                                 cwd=ws)
        assert again.code == 1 and "is not waiting for a permission answer" in again.err

        task = (await run_process("task-get", "--url", url, "--task-id", envelope["requestTaskId"], "-o", "json",
                                 cwd=ws)).json()
        assert task["id"] == envelope["requestTaskId"] and task["artifacts"][0]["name"] == "template.ros.yaml"
        short = (await run_process("task-get", "--url", url, "--task-id", envelope["requestTaskId"],
                                  "--history-length", "1", "-o", "json", cwd=ws)).json()
        assert len(short["history"]) == 1

        listed = await run_process("task-list", "--url", url, cwd=ws)
        assert listed.code == 0, listed.err
        header, rule = listed.out.splitlines()[:2]
        assert header.split() == ["ID", "Status", "Context", "Updated", "Message"] and set(rule) <= {"-", " "}
        assert envelope["requestTaskId"][:25] in listed.out and "Showing 2 of 2 tasks." in listed.out


async def test_follow_up_in_the_same_context_and_text_stream(ws: Path) -> None:
    async with start_server() as server:
        first = await run_client("call", "--url", server.url, "-p", "hello", "-o", "json", cwd=ws)
        context = first.json()["task"]["contextId"]
        follow = await run_client("call", "--url", server.url, "-p", VPC, "--stream", "--context-id", context, cwd=ws)
        assert follow.code == 11
        assert "✓ generate_template" in follow.out and "Permission needed: Change a workspace file" in follow.out
        assert "target: template.ros.yaml" in follow.out
        assert f"--context-id {context}" in follow.out  # how to answer it later
        listed = (await run_client("task-list", "--url", server.url, "--context-id", context, "-o", "json",
                                   cwd=ws)).json()
        assert len(listed["tasks"]) == 2 and {t["contextId"] for t in listed["tasks"]} == {context}


async def test_task_list_pages_and_all(ws: Path) -> None:
    async with start_server() as server:
        created = await asyncio.gather(*(run_client("call", "--url", server.url, "-p", f"hello {n}", "-o", "json",
                                                    cwd=ws) for n in range(3)))
        ids = {r.json()["task"]["id"] for r in created}
        page = await run_client("task-list", "--url", server.url, "--page-size", "2", cwd=ws)
        assert page.code == 0 and "Showing 2 of 3 tasks." in page.out
        hint = next(line for line in page.out.splitlines() if line.startswith("Next page: "))
        argv = shlex.split(hint.removeprefix("Next page: "))
        assert argv[:3] == ["iac-code", "a2a-client", "task-list"]
        rest = (await run_client(*argv[2:], "-o", "json", cwd=ws)).json()
        assert len(rest["tasks"]) == 1 and not rest.get("nextPageToken")
        everything = (await run_client("task-list", "--url", server.url, "--page-size", "1", "--all", "-o", "json",
                                       cwd=ws)).json()
        assert {t["id"] for t in everything["tasks"]} == ids
        working = await run_client("task-list", "--url", server.url, "--status", "working", cwd=ws)
        assert working.code == 0 and working.out.strip() == "No A2A tasks found."
        bad = await run_client("task-list", "--url", server.url, "--status", "sleepy", cwd=ws)
        assert bad.code == 2 and "Unknown task state 'sleepy'" in bad.err


async def test_cancel_and_subscribe(ws: Path) -> None:
    async with start_server() as server:
        envelope = _paused(await run_client("call", "--url", server.url, "-p", VPC, "-o", "json", cwd=ws))
        task_id = envelope["requestTaskId"]
        # A turn paused for a permission: the subscription shows the task as it is, then that turn's stream ends.
        snapshot = await run_client("task-subscribe", "--url", server.url, "--task-id", task_id, "-o", "json", cwd=ws)
        assert snapshot.code == 0, snapshot.err
        assert [e["task"]["status"]["state"] for e in snapshot.lines()] == ["TASK_STATE_INPUT_REQUIRED"]

        other = _paused(await run_client("call", "--url", server.url, "-p", VPC, "-o", "json", cwd=ws))
        canceled = await run_client("task-cancel", "--url", server.url, "--task-id", other["requestTaskId"], "-o",
                                    "json", cwd=ws)
        assert canceled.code == 0 and canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
        twice = await run_client("task-cancel", "--url", server.url, "--task-id", other["requestTaskId"], cwd=ws)
        assert twice.code == 8 and "TaskNotCancelable" in twice.err and "Traceback" not in twice.err
        gone = await run_client("task-subscribe", "--url", server.url, "--task-id", other["requestTaskId"], cwd=ws)
        assert gone.code == 8 and "terminal state" in gone.err


async def test_subscribe_follows_the_next_turn(ws: Path) -> None:
    async with start_server({"agent-executor": "tests.byo_agent:ShoutExecutor"}) as server:
        asked = (await run_client("call", "--url", server.url, "-p", "why?", "-o", "json", cwd=ws)).json()["task"]
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        subscriber = await start_client("task-subscribe", "--url", server.url, "--task-id", asked["id"], "-o", "json",
                                        cwd=ws)
        first = await subscriber.line()  # subscribed: the task as it is now
        assert first["task"]["id"] == asked["id"]
        follow = await run_client("call", "--url", server.url, "-p", "fine", "--task-id", asked["id"], "--context-id",
                                  asked["contextId"], cwd=ws)
        assert follow.code == 0 and "FINE" in follow.out and "● completed" in follow.out
        followed = await subscriber.finish()
        assert followed.code == 0, followed.err
        updates = [e["statusUpdate"] for e in followed.lines() if "statusUpdate" in e]
        assert updates[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert any("artifactUpdate" in e for e in followed.lines())
        text = await run_client("task-subscribe", "--url", server.url, "--task-id", asked["id"], cwd=ws)
        assert text.code == 8 and "terminal state" in text.err  # finished: nothing left to follow


async def test_push_config_crud(ws: Path) -> None:
    settings = {"push-notifications": True, "push-allowed-hosts": ["127.0.0.1"]}
    async with start_server(settings) as server:
        envelope = _paused(await run_client("call", "--url", server.url, "-p", VPC, "-o", "json", cwd=ws))
        task = ["--url", server.url, "--task-id", envelope["requestTaskId"]]
        created = await run_client("push-config-create", *task, "--config-id", "hook-1", "--callback-url",
                                   "http://127.0.0.1:9/hook", "--notification-token", "tok",
                                   "--auth-scheme", "Bearer", "--auth-credentials", "secret", "-o", "json", cwd=ws)
        assert created.code == 0, created.err
        assert created.json()["id"] == "hook-1" and created.json()["url"] == "http://127.0.0.1:9/hook"
        await run_client("push-config-create", *task, "--config-id", "hook-2", "--callback-url",
                         "http://127.0.0.1:9/other", cwd=ws)
        got = (await run_client("push-config-get", *task, "--config-id", "hook-1", "-o", "json", cwd=ws)).json()
        assert got["id"] == "hook-1" and got["taskId"] == envelope["requestTaskId"]
        page = (await run_client("push-config-list", *task, "--page-size", "1", "-o", "json", cwd=ws)).json()
        assert len(page["configs"]) == 1 and page["nextPageToken"]
        both = (await run_client("push-config-list", *task, "-o", "json", cwd=ws)).json()
        assert sorted(c["id"] for c in both["configs"]) == ["hook-1", "hook-2"]
        deleted = await run_client("push-config-delete", *task, "--config-id", "hook-1", "-o", "json", cwd=ws)
        assert deleted.code == 0 and deleted.json()["deleted"] is True
        missing = await run_client("push-config-get", *task, "--config-id", "hook-1", cwd=ws)
        assert missing.code == 8, missing.err
        needs = await run_client("push-config-create", *task, "--config-id", "x", cwd=ws)
        assert needs.code == 1 and "callback-url is required. Provide --callback-url" in needs.err


async def test_extended_card_needs_the_credentials(ws: Path) -> None:
    async with start_server({"token": "t0ken"}) as server:
        refused = await run_client("extended-card", "--url", server.url, cwd=ws)
        assert refused.code == 5 and "refused the credentials" in refused.err
        card = await run_client("extended-card", "--url", server.url, "--token", "t0ken", "-o", "json", cwd=ws)
        assert card.code == 0, card.err
        assert any(s["id"] == "iac_code_runtime_details" for s in card.json()["skills"])


# ----------------------------------------------------------------------------- auth and configuration


async def test_credentials_from_flags_environment_and_config(ws: Path, tmp_path: Path) -> None:
    async with start_server({"api-key": "k3y", "api-key-header": "X-Team-Key"}) as server:
        url = server.url
        none = await run_client("task-list", "--url", url, cwd=ws)
        assert none.code == 5 and none.err.count("\n") == 1 and "k3y" not in none.err
        flag = await run_client("task-list", "--url", url, "--api-key", "k3y", "--api-key-header", "X-Team-Key",
                                cwd=ws)
        assert flag.code == 0, flag.err
        env = await run_client("task-list", "--url", url, cwd=ws,
                               env={"IACCODE_A2A_API_KEY": "k3y", "IACCODE_A2A_API_KEY_HEADER": "X-Team-Key"})
        assert env.code == 0, env.err
        config = tmp_path / "a2a-client.yml"
        config.write_text(f"url: {url}\napi-key: ${{TEAM_KEY}}\napi_key_header: X-Team-Key\noutput: json\n")
        from_file = await run_client("--config", str(config), "task-list", cwd=ws, env={"TEAM_KEY": "k3y"})
        assert from_file.code == 0, from_file.err
        assert from_file.json().get("tasks", []) == []  # output: json came from the file too
        overridden = await run_client("--config", str(config), "task-list", "--api-key", "wrong", cwd=ws,
                                      env={"TEAM_KEY": "k3y"})
        assert overridden.code == 5  # the command line wins over the config file


async def test_basic_auth_and_bearer(ws: Path) -> None:
    async with start_server({"basic-username": "ann", "basic-password": "pw"}) as server:
        ok = await run_client("task-list", "--url", server.url, "--basic-username", "ann", "--basic-password", "pw",
                              cwd=ws)
        assert ok.code == 0, ok.err
        wrong = await run_client("task-list", "--url", server.url, "--basic-username", "ann", "--basic-password",
                                 "no", cwd=ws)
        assert wrong.code == 5


async def test_config_file_errors(ws: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("- a list\n")
    result = await run_client("--config", str(bad), "task-list", cwd=ws)
    assert result.code == 1 and "A2A config file must contain a YAML mapping." in result.err
    unknown = tmp_path / "unknown.yml"
    unknown.write_text("url: http://127.0.0.1:1/\ntokn: x\n")
    result = await run_client("--config", str(unknown), "task-list", cwd=ws)
    assert result.code == 1 and "Unknown a2a-client config key(s): tokn" in result.err
    result = await run_client("task-get", "--url", "http://127.0.0.1:1/", cwd=ws)
    assert result.code == 1 and "task-id is required. Provide --task-id or task-id in --config." in result.err


# ----------------------------------------------------------------------------- signed cards


async def test_signed_card_verification(ws: Path) -> None:
    async with start_server({"signing-secret": SECRET}) as signed, start_server() as unsigned:
        good = await run_client("discover", "--url", signed.url, "--verify-card-secret", SECRET, cwd=ws)
        assert good.code == 0 and "Signature: signed (kid default)" in good.out
        wrong = await run_client("discover", "--url", signed.url, "--verify-card-secret", "other", cwd=ws)
        assert wrong.code == 7
        assert wrong.err.strip() == "Error: A2A Agent Card verification failed: signature-mismatch: kid=default"
        call = await run_client("call", "--url", signed.url, "-p", "hello", "--signing-secret", "other", cwd=ws)
        assert call.code == 7  # call discovers, so it verifies too
        required = await run_client("discover", "--url", unsigned.url, "--require-card-signature", cwd=ws)
        assert required.code == 7 and "missing-signature" in required.err
        passes = await run_client("discover", "--url", unsigned.url, "--verify-card-secret", "x", cwd=ws)
        assert passes.code == 0  # an unsigned card passes unless a signature is required

        served = (await run_client("discover", "--url", signed.url, "-o", "json", cwd=ws)).json()
        served["description"] = "tampered"
        async with _static_card(served) as tampered_url:
            tampered = await run_client("discover", "--url", tampered_url, "--verify-card-secret", SECRET,
                                        cwd=ws)
            assert tampered.code == 7 and "signature-mismatch" in tampered.err


class _static_card:  # noqa: N801 - used as an async context manager like start_server
    """A tiny HTTP server serving a fixed body at the card path (tampered, invalid or foreign cards)."""

    def __init__(self, card: Any, status: int = 200, hang: bool = False) -> None:
        self._card, self._status, self._hang = card, status, hang
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()

    async def __aenter__(self) -> str:
        async def card(request: web.Request) -> web.Response:
            if self._hang:
                await self._release.wait()
            return web.Response(status=self._status, text=json.dumps(self._card), content_type="application/json")

        app = web.Application()
        app.router.add_get("/.well-known/agent-card.json", card)
        app.router.add_post("/", card)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/"

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        assert self._runner is not None
        await self._runner.cleanup()


# ----------------------------------------------------------------------------- errors and exit codes


async def test_every_documented_exit_code(ws: Path) -> None:
    closed = "http://127.0.0.1:9/"  # discard port: nothing listens
    unreachable = await run_client("task-list", "--url", closed, cwd=ws)
    assert unreachable.code == 3 and unreachable.err.startswith("Error: Cannot reach the agent")
    assert "Traceback" not in unreachable.err and unreachable.err.count("\n") == 1
    debug = await run_client("--debug", "task-list", "--url", closed, cwd=ws)
    assert debug.code == 3 and "Traceback" in debug.err

    async with _static_card({}, hang=True) as slow:
        timeout = await run_client("discover", "--url", slow, "--timeout", "0.5", cwd=ws)
        assert timeout.code == 4 and "did not answer in time" in timeout.err
    async with _static_card(["not", "a", "card"]) as bad:
        invalid = await run_client("discover", "--url", bad, cwd=ws)
        assert invalid.code == 6 and "A2A Agent Card response must be a JSON object" in invalid.err
    async with _static_card({}, status=404) as missing:
        nothing = await run_client("discover", "--url", missing, cwd=ws)
        assert nothing.code == 6 and "No Agent Card" in nothing.err
    pigeon = {"name": "p", "description": "d", "version": "1", "supportedInterfaces": [
        {"url": "pigeon://coop", "protocolBinding": "CARRIER-PIGEON", "protocolVersion": "1.0"}]}
    async with _static_card(pigeon) as foreign:
        none = await run_client("call", "--url", foreign, "-p", "hi", cwd=ws)
        assert none.code == 9 and "no interface this client can execute" in none.err and "CARRIER-PIGEON" in none.err
    async with start_server() as server:
        agent_error = await run_client("task-get", "--url", server.url, "--task-id", "nope", cwd=ws)
        assert agent_error.code == 8 and "TaskNotFound" in agent_error.err
        failed = await run_client("call", "--url", server.url, "-p", "hi", "--cwd", "relative/dir", cwd=ws)
        assert failed.code == 12 and "● failed" in failed.out
        paused = await run_client("call", "--url", server.url, "-p", VPC, cwd=ws)
        assert paused.code == 11 and "Permission needed" in paused.out
        missing_prompt = await run_client("call", "--url", server.url, cwd=ws)
        assert missing_prompt.code == 2 and "--prompt is required" in missing_prompt.err
    route = await run_client("call", "-p", "hi", "--route", "a=http://127.0.0.1:9/", "--route-name", "b", cwd=ws)
    assert route.code == 10 and "Unknown A2A route 'b'. Known routes: a" in route.err
    usage = await run_client("task-list", "--no-such-option", cwd=ws)
    assert usage.code == 2


async def test_expected_protocol_errors_are_one_line_in_a_process(ws: Path) -> None:
    """As its own process (real stderr, logging configured): one ``Error:`` line, no log record, no traceback."""
    settings = {"token": "right", "transport": ["http", "grpc"], "grpc-port": 0}
    async with start_server(settings, environ={}) as server:
        cases = [
            (["task-get", "--task-id", "nope", "--token", "right"], 8, "TaskNotFound"),
            (["task-cancel", "--task-id", "nope", "--token", "right"], 8, "TaskNotFound"),
            (["task-list", "--page-token", "garbage", "--token", "right"], 8, "InvalidParams"),
            (["task-subscribe", "--task-id", "nope", "--token", "right"], 8, "TaskNotFound"),
            (["task-get", "--task-id", "nope", "--token", "wrong"], 5, "refused the credentials"),
        ]
        for binding in ("JSONRPC", "HTTP+JSON", "GRPC"):
            for args, code, text in cases:
                result = await run_process(*args, "--url", server.url, "--binding", binding, cwd=ws)
                assert result.code == code, (binding, args, result.err)
                assert result.err.startswith("Error: ") and text in result.err, (binding, args, result.err)
                assert result.err.count("\n") == 1, (binding, args, result.err)
                assert "Traceback" not in result.err and "ERROR" not in result.err


async def test_json_output_reports_errors_as_objects(ws: Path) -> None:
    result = await run_client("task-list", "--url", "http://127.0.0.1:9/", "-o", "json", cwd=ws)
    assert result.code == 3
    assert result.lines() == [{"error": {"exitCode": 3, "message": result.err.strip().removeprefix("Error: ")}}]


async def test_endpoint_url_with_a_path_finds_the_card_at_the_origin(ws: Path) -> None:
    async with start_server() as server:
        result = await run_client("call", "--url", server.url + "rpc", "-p", "hello", cwd=ws)
        assert result.code == 0, result.err
        assert "offline engine" in result.out


async def test_turn_metadata_is_sent_and_the_key_is_not_printed(ws: Path) -> None:
    async with start_server() as server:
        result = await run_client("call", "--url", server.url, "-p", "hello", "--iac-code-model", "qwen-max",
                                  "--iac-code-api-key", "sk-very-secret", "--thinking-enabled", "--thinking-effort",
                                  "high", "--thinking-budget", "2048", "--language", "zh", "-o", "json", cwd=ws)
        assert result.code == 0, result.err
        assert "sk-very-secret" not in result.out + result.err
        task = result.json()["task"]
        user = next(m for m in task["history"] if m["role"] == "ROLE_USER")
        sent = user.get("metadata", {}).get("iac_code", {})
        assert sent.get("cwd") == str(ws)
        assert sent.get("iac_code_model") == "qwen-max" and sent.get("thinking") == {
            "enabled": True, "effort": "high", "budget": 2048}
        assert "iac_code_api_key" not in sent  # the runtime got it; the task does not keep it
        fetched = await run_client("task-get", "--url", server.url, "--task-id", task["id"], "-o", "json", cwd=ws)
        assert fetched.code == 0 and "sk-very-secret" not in fetched.out
        await server.kernel.stop()  # snapshots flushed: nothing on disk holds the key either
        stored = [p for p in Path(server.kernel.state_dir).rglob("*") if p.is_file()]
        assert stored and not any(b"sk-very-secret" in p.read_bytes() for p in stored)


def test_route_snapshot_is_private(tmp_path: Path) -> None:
    from iac_code_a2a_client.routing import load_snapshot, parse_route, save_snapshot

    path = save_snapshot(tmp_path / "state", [parse_route("a=http://x;skills=s;tags=t")])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [r.name for r in load_snapshot(tmp_path / "state")] == ["a"]



def test_interfaces_bound_to_all_addresses_are_reached_at_the_discovered_host() -> None:
    # (On Linux 0.0.0.0 reaches this machine anyway, so a served card cannot show the difference.)
    from a2a.types.a2a_pb2 import AgentCard, AgentInterface
    from iac_code_a2a_client.connect import _replace_wildcard_hosts

    card = AgentCard(supported_interfaces=[
        AgentInterface(url="http://0.0.0.0:41242/", protocol_binding="JSONRPC"),
        AgentInterface(url="0.0.0.0:50051", protocol_binding="GRPC"),
        AgentInterface(url="ws://[::]:8080/a2a", protocol_binding="websocket"),
        AgentInterface(url="http://agent.example:41242/", protocol_binding="HTTP+JSON")])
    _replace_wildcard_hosts(card, "https://iac.internal.example/a2a")
    assert [i.url for i in card.supported_interfaces] == [
        "http://iac.internal.example:41242/", "iac.internal.example:50051", "ws://iac.internal.example:8080/a2a",
        "http://agent.example:41242/"]
