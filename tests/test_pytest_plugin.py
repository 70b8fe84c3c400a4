"""The ``iac_code`` pytest plugin: its fixtures in auto mode (this suite) and strict mode (a pytester run)."""

from __future__ import annotations

import inspect
import json
import socket
import subprocess
import sys
import textwrap
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError

from iac_code import pytest_plugin
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import DecodedPart, PartDecoderSpec
from iac_code.agents.runtime import TextDelta, TurnFailed
from iac_code.testing import ScriptedRuntime

pytest_plugins = ("pytester",)


def request(text: str, message_id: str, media_type: str = "") -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=message_id, role=Role.ROLE_USER,
                                              parts=[Part(text=text, media_type=media_type)]))


async def final_status(client: Any, body: SendMessageRequest) -> Any:
    """The last status a streamed SendMessage reported (the task's own status when nothing followed it)."""
    status = None
    async for event in client.send_message(body):
        if event.HasField("task"):
            status = event.task.status
        elif event.HasField("status_update"):
            status = event.status_update.status
    assert status is not None
    return status


class UpperDecoder:
    @hookimpl
    def iac_code_part_decoders(self) -> list[PartDecoderSpec]:
        return [PartDecoderSpec(name="upper", kind="text", media_types=("text/x-upper",),
                                decode=lambda part, context: DecodedPart(text=(part.text or "").upper()))]


# ----------------------------------------------------------------------------- the fixtures, auto mode


async def test_the_client_reaches_the_server_and_the_scripted_runtime(
        iac_code_scripted_runtime: ScriptedRuntime, iac_code_client: Any) -> None:
    iac_code_scripted_runtime.script("first answer").script(TextDelta("second "), "answer")
    first = await final_status(iac_code_client, request("one", "m-1"))
    second = await final_status(iac_code_client, request("two", "m-2"))
    assert first.state == second.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [p.text for p in first.message.parts] == ["first answer"]
    assert "".join(p.text for p in second.message.parts) == "second answer"
    assert [turn.prompt for turn in iac_code_scripted_runtime.turns] == ["one", "two"]


async def test_a_turn_without_a_script_fails_saying_so(iac_code_scripted_runtime: ScriptedRuntime,
                                                       iac_code_client: Any) -> None:
    status = await final_status(iac_code_client, request("anything", "m-1"))
    assert status.state == TaskState.TASK_STATE_FAILED
    assert "no script left for turn 1" in "".join(p.text for p in status.message.parts)


@pytest.mark.parametrize("iac_code_plugins", [{"upper": UpperDecoder()}])
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_overridden_plugins_reach_the_server_on_each_binding(
        binding: str, iac_code_scripted_runtime: ScriptedRuntime, iac_code_server: Any,
        iac_code_client_factory: Any) -> None:
    client = await iac_code_client_factory(iac_code_server, binding=binding, streaming=False)
    iac_code_scripted_runtime.script("ok")
    await final_status(client, request("shout", "m-1", media_type="text/x-upper"))
    assert iac_code_scripted_runtime.turns[0].prompt == "SHOUT"


async def test_the_factory_starts_servers_with_their_own_settings_and_plugins(
        iac_code_server_factory: Any, iac_code_client_factory: Any, iac_code_scripted_runtime: ScriptedRuntime,
        tmp_path: Any) -> None:
    plain = await iac_code_server_factory()
    guarded = await iac_code_server_factory({"token": "secret-token"}, plugins={"upper": UpperDecoder()})
    assert plain.url != guarded.url
    with pytest.raises(InvalidParamsError):  # no decoder for text/x-upper on the plain server
        await final_status(await iac_code_client_factory(plain), request("x", "m-1", media_type="text/x-upper"))
    async with httpx.AsyncClient() as http:
        assert (await http.post(guarded.url, json={})).status_code == 401
    client = await iac_code_client_factory(guarded, headers={"Authorization": "Bearer secret-token"})
    iac_code_scripted_runtime.script("ok")
    await final_status(client, request("quiet", "m-2", media_type="text/x-upper"))
    assert iac_code_scripted_runtime.turns[-1].prompt == "QUIET"
    import os

    assert os.getcwd() == str(tmp_path)  # the servers' default workspace: nothing lands in the source tree


async def test_settings_naming_another_runtime_win_over_the_scripted_one(
        iac_code_server_factory: Any, iac_code_client_factory: Any, iac_code_scripted_runtime: ScriptedRuntime) -> None:
    other = ScriptedRuntime(["from the other runtime"], name="other")
    server = await iac_code_server_factory({"agent-runtime": "other"}, plugins={"other": other})
    status = await final_status(await iac_code_client_factory(server), request("hi", "m-1"))
    assert [p.text for p in status.message.parts] == ["from the other runtime"]
    assert iac_code_scripted_runtime.turns == [] and len(other.turns) == 1


async def test_scripted_events_reach_the_caller_as_a2a(iac_code_scripted_runtime: ScriptedRuntime,
                                                        iac_code_client: Any) -> None:
    iac_code_scripted_runtime.script("partial ", TurnFailed("the scripted turn failed"))
    status = await final_status(iac_code_client, request("go", "m-1"))
    assert status.state == TaskState.TASK_STATE_FAILED
    assert "the scripted turn failed" in "".join(p.text for p in status.message.parts)


async def test_the_cli_fixture_runs_iac_code_as_a_process(iac_code_cli: Any) -> None:
    listed = await iac_code_cli("a2a", "--plugins", "list", "--output", "json")
    assert listed.code == 0, listed.err
    rows = {row["name"]: row for row in listed.json()["plugins"]}
    assert rows["http"]["status"] == "active"
    refused = await iac_code_cli("a2a", "--plugins", "nonsense")
    assert refused.code == 2 and "nonsense" in refused.err


# ----------------------------------------------------------------------------- strict mode, teardown, cost


def test_the_fixtures_work_in_strict_mode_and_stop_their_servers(pytester: pytest.Pytester) -> None:
    urls = pytester.path / "urls.json"
    pytester.makepyfile(test_strict=textwrap.dedent(f"""
        import json
        import pytest
        from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

        @pytest.mark.asyncio
        async def test_one_turn(iac_code_scripted_runtime, iac_code_server, iac_code_client, iac_code_server_factory):
            other = await iac_code_server_factory()
            with open({str(urls)!r}, "w") as f:
                json.dump([iac_code_server.url, other.url], f)
            iac_code_scripted_runtime.script("done")
            body = SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hi")]))
            events = [event async for event in iac_code_client.send_message(body)]
            assert events and iac_code_scripted_runtime.turns[0].prompt == "hi"
    """))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-o", "asyncio_mode=strict",
                                "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=1)
    for url in json.loads(urls.read_text()):
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
            sock.connect(("127.0.0.1", port))


def test_loading_the_plugin_imports_nothing_of_the_kernel() -> None:
    code = "import json, sys, iac_code.pytest_plugin; print(json.dumps([m for m in sys.modules if 'iac_code' in m]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert sorted(json.loads(done.stdout)) == ["iac_code", "iac_code.pytest_plugin"]


def test_every_fixture_is_prefixed_and_documented() -> None:
    fixtures = {name for name, value in inspect.getmembers(pytest_plugin)
                if name.startswith("iac_code_") or hasattr(value, "_pytestfixturefunction")
                or type(value).__name__ == "FixtureFunctionDefinition"}
    assert fixtures == {"iac_code_settings", "iac_code_plugins", "iac_code_scripted_runtime", "iac_code_server_factory",
                        "iac_code_server", "iac_code_client_factory", "iac_code_client", "iac_code_cli"}
    for name in fixtures:
        assert f"``{name}``" in (pytest_plugin.__doc__ or ""), name
