"""The ``iac-code a2a`` command, run as a real process, and installed entry-point plugins."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from iac_code.testing import A2A_HEADERS, send_message_body

IAC_CODE = str(Path(sys.executable).parent / "iac-code")
LISTENING = re.compile(r"listening: (http://\S+) \(JSONRPC\)")

THIRD_PARTY = '''
from aiohttp import web
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import DecodedPart, HttpRouteSpec, PartDecoderSpec


def decode_vpc_order(part, context):
    return DecodedPart(text=f"Create a VPC with {part.data['vswitches']} vSwitches")


@hookimpl
def iac_code_part_decoders():
    return [PartDecoderSpec(name="vpc-order", kind="data", media_types=("application/x-vpc-order",),
                            decode=decode_vpc_order)]


@hookimpl
def iac_code_http_routes(kernel):
    async def hello(request):
        return web.json_response({"hello": "from thirdparty"})
    return [HttpRouteSpec("GET", "/thirdparty/hello", hello)]
'''


def _install(site: Path, dist: str, version: str, entries: dict[str, str], modules: dict[str, str]) -> None:
    """Install a distribution the way pip would leave it: a module plus a .dist-info."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[iac_code]\n{lines}\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "thirdparty-plugin", "1.2.3", {"thirdparty": "thirdparty_plugin"},
             {"thirdparty_plugin": THIRD_PARTY})
    _install(site, "broken-plugin", "0.0.1", {"broken": "broken_plugin", "broken-ws": "broken_ws"},
             {"broken_plugin": "raise ImportError('needs libfoo')\n",
              "broken_ws": "import no_such_dependency_xyz\n"})
    return site


def _env(site: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IACCODE_A2A_")}
    env["IAC_CODE_CONFIG_DIR"] = tempfile.mkdtemp(prefix="iac-code-cli-test-")
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


async def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, *args, env=env or _env(), cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@asynccontextmanager
async def serving(*args: str, env: dict[str, str] | None = None,
                  read_stdout: bool = False) -> AsyncIterator[tuple[str, list[str]]]:
    """Run ``iac-code a2a`` until its listening line appears; yield (url, log lines)."""
    proc = await asyncio.create_subprocess_exec(
        IAC_CODE, "a2a", "--port", "0", *args, env=env or _env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines: list[str] = []
    try:
        stream = proc.stdout if read_stdout else proc.stderr
        assert stream is not None
        while True:
            line = (await asyncio.wait_for(stream.readline(), 30)).decode()
            if not line:
                raise AssertionError("server exited early:\n" + "".join(lines))
            lines.append(line)
            match = LISTENING.search(line)
            if match:
                break
        yield match.group(1), lines
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


async def test_plugins_list_table_and_json(site: Path) -> None:
    code, out, err = await run("a2a", "--plugins", "list", env=_env(site))
    assert code == 0, err
    header, *rows = out.strip().splitlines()
    assert header.split() == ["name", "distribution", "version", "kind", "status", "hooks"]
    by_name = {r.split()[0]: r for r in rows}
    assert "built-in" in by_name["text-parts"] and "default-router" not in by_name
    assert "iac-code-a2a-client" in by_name["a2a-client"] and "iac_code_routers" in by_name["a2a-client"]
    assert "iac-code-runtime-offline" in by_name["runtime-offline"] and "installed" in by_name["runtime-offline"]
    assert "iac-code-transport-http" in by_name["http"] and "installed" in by_name["http"]
    assert "iac_code_transports" in by_name["http"]
    assert "thirdparty-plugin" in by_name["thirdparty"] and "1.2.3" in by_name["thirdparty"]
    assert "failed: ImportError: needs libfoo" in by_name["broken"]

    code, out, _ = await run("a2a", "--plugins", "list", "--output", "json", env=_env(site))
    assert code == 0
    plugins = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert plugins["thirdparty"] == {
        "name": "thirdparty", "distribution": "thirdparty-plugin", "version": "1.2.3",
        "hooks": ["iac_code_http_routes", "iac_code_part_decoders"], "kind": "installed",
        "status": "active", "reason": ""}
    assert plugins["http"]["hooks"] == ["iac_code_check_config", "iac_code_config_model", "iac_code_transports"]
    assert plugins["text-parts"]["kind"] == "built-in" and plugins["runtime-offline"]["kind"] == "installed"
    assert plugins["a2a-client"]["hooks"] == ["iac_code_cli_commands", "iac_code_routers"]  # the default router
    assert plugins["a2a-client"]["kind"] == "installed" and plugins["a2a-client"]["distribution"] == "iac-code-a2a-client"
    assert plugins["broken"]["status"] == "failed"
    assert plugins["broken-ws"]["reason"].startswith("ModuleNotFoundError")


async def test_blocked_plugin_is_listed_as_blocked(site: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text("disabled-plugins: [thirdparty]\n")
    code, out, _ = await run("a2a", "--config", str(config), "--plugins", "list", "--output", "json",
                             env=_env(site))
    plugins = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert plugins["thirdparty"]["status"] == "blocked"


async def test_server_serves_card_and_seed_message(site: Path) -> None:
    async with serving(env=_env(site)) as (url, lines), aiohttp.ClientSession() as http:
        assert any("Plugin broken" in line and "needs libfoo" in line for line in lines)
        async with http.get(url + ".well-known/agent-card.json") as r:
            card = await r.json()
            assert card["supportedInterfaces"][0]["url"] == url
        body = send_message_body("Create a VPC with two vSwitches.")
        body["params"]["message"]["metadata"] = {"iac_code": {"cwd": "/absolute/path/to/project"}}
        async with http.post(url, json=body, headers=A2A_HEADERS) as r:
            task = (await r.json())["result"]["task"]
        # The seed's placeholder path does not exist: a clear, path-free failure.
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"][0]["text"] == "Invalid A2A workspace metadata."
        body["params"]["message"]["metadata"] = {"iac_code": {"cwd": str(site)}}
        body["params"]["message"]["messageId"] = "msg-2"
        async with http.post(url, json=body, headers=A2A_HEADERS) as r:
            task = (await r.json())["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        async with http.get(url + "thirdparty/hello") as r:
            assert await r.json() == {"hello": "from thirdparty"}
        order = send_message_body("x", message_id="m-order")
        order["params"]["message"]["parts"] = [{"data": {"vswitches": 3}, "mediaType": "application/x-vpc-order"}]
        async with http.post(url, json=order, headers=A2A_HEADERS) as r:
            history = (await r.json())["result"]["task"]["history"]
        assert " ".join(m["parts"][0].get("text", "") for m in history).count("Type: ALIYUN::ECS::VSwitch") == 3


async def test_cli_flags_override_config_file(tmp_path: Path) -> None:
    config = tmp_path / "server.yml"
    config.write_text("host: 0.0.0.0\nport: 1\npublic_url: http://example.invalid:9/a2a\n")
    async with serving("--config", str(config), "--host", "127.0.0.1") as (url, _), \
            aiohttp.ClientSession() as http:
        assert url == "http://example.invalid:9/a2a/"
        async with http.get("http://127.0.0.1:" + _port_of(_), timeout=aiohttp.ClientTimeout(total=10)) as r:
            assert r.status in (404, 405)


async def test_log_to_stdout_mirrors_the_log() -> None:
    async with serving("--log-to-stdout", read_stdout=True) as (url, lines):
        assert url.startswith("http://127.0.0.1:")


def _port_of(lines: list[str]) -> str:
    for line in lines:
        if "bound" in line:
            return line.rsplit(":", 1)[1].strip().split("/")[0]
    raise AssertionError("no bound-address log line")


@pytest.mark.parametrize(("yaml_text", "fragments"), [
    ("no_such_key: 1\n", ["unknown configuration key 'no-such-key'"]),
    ("port: eighty\n", ["'port'", "integer"]),
    ("sse-ping-seconds: soon\n", ["'sse-ping-seconds'"]),
    ("agent-card:\n  colour: red\n", ["'agent-card.colour'"]),
    ("- just\n- a list\n", ["A2A config file must contain a YAML mapping."]),
    ("port: [1\n", ["not valid YAML"]),
])
async def test_bad_config_is_a_clear_startup_error(tmp_path: Path, yaml_text: str, fragments: list[str]) -> None:
    config = tmp_path / "bad.yml"
    config.write_text(yaml_text)
    code, out, err = await run("a2a", "--config", str(config))
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err
    assert "Traceback" not in err


async def test_missing_transport_plugin_names_the_extra(tmp_path: Path) -> None:
    without_grpc = tmp_path / "no-grpc.yml"  # as if iac-code[a2a-grpc] were not installed
    without_grpc.write_text("disabled-plugins: [grpc]\n")
    code, _, err = await run("a2a", "--transport", "grpc", "--config", str(without_grpc))
    assert code == 2
    assert "pip install 'iac-code[a2a-grpc]'" in err and "Traceback" not in err
    config = tmp_path / "no-http.yml"
    config.write_text("disabled-plugins: [http]\n")
    code, _, err = await run("a2a", "--config", str(config))
    assert code == 2
    assert "pip install 'iac-code[a2a]'" in err


async def test_failed_plugin_needed_by_config_stops_startup(site: Path) -> None:
    code, _, err = await run("a2a", "--transport", "broken-ws", env=_env(site))
    assert code == 2
    lines = err.strip().splitlines()
    assert "Plugin 'broken-ws'" in lines[-1] and "failed to load" in lines[-1] and "pip install" in lines[-1]
    assert "Traceback" not in err


# Plugins that declare the plugin API version they were built for (``IAC_CODE_API_VERSION``).
VERSIONED_ROUTE = '''
from aiohttp import web
from iac_code.api import HttpRouteSpec, TransportSpec, hookimpl

IAC_CODE_API_VERSION = {declared}


@hookimpl
def iac_code_transports():
    return [TransportSpec(name={name!r}, create=lambda context: None)]


@hookimpl
def iac_code_http_routes(kernel):
    async def hello(request):
        return web.json_response({{"hello": {name!r}}})
    return [HttpRouteSpec("GET", "/versioned/{name}", hello)]
'''
API_TOO_NEW = "built for plugin API 2.0; this iac-code provides API 1.0"


@pytest.fixture
def versioned_site(tmp_path: Path) -> Path:
    """Four installed plugins: built for API 1.0 (current), 2.0 and 1.9 (too new), and one whose declaration is malformed."""
    site = tmp_path / "versioned-site"
    site.mkdir()
    for dist, name, declared in (("current-plugin", "current", '"1.0"'), ("future-plugin", "future", '"2.0"'),
                                 ("newer-plugin", "newer", '"1.9"'), ("sloppy-plugin", "sloppy", "1.0")):
        _install(site, dist, "4.5.6", {name: f"{name}_api_plugin"},
                 {f"{name}_api_plugin": VERSIONED_ROUTE.format(declared=declared, name=name)})
    return site


async def test_plugins_built_for_another_api_version_are_listed_as_failed(versioned_site: Path) -> None:
    code, out, err = await run("a2a", "--plugins", "list", "--output", "json", env=_env(versioned_site))
    assert code == 0, err
    plugins = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert plugins["current"]["status"] == "active" and plugins["current"]["reason"] == ""
    assert plugins["current"]["hooks"] == ["iac_code_http_routes", "iac_code_transports"]
    assert {k: plugins["future"][k] for k in ("distribution", "version", "status", "reason", "hooks")} == {
        "distribution": "future-plugin", "version": "4.5.6", "status": "failed", "reason": API_TOO_NEW, "hooks": []}
    assert plugins["newer"]["status"] == "failed"
    assert plugins["newer"]["reason"] == "built for plugin API 1.9; this iac-code provides API 1.0"
    assert plugins["sloppy"]["status"] == "failed"
    assert plugins["sloppy"]["reason"] == "declares IAC_CODE_API_VERSION = 1.0, which is not a 'MAJOR.MINOR' string"
    # Every first-party plugin declares the API it is built for, and this kernel provides it.
    assert all(p["status"] == "active" for p in plugins.values() if p["distribution"].startswith("iac-code"))

    code, out, err = await run("a2a", "--plugins", "list", env=_env(versioned_site))
    assert code == 0, err
    by_name = {r.split()[0]: r for r in out.strip().splitlines()[1:]}
    assert f"failed: {API_TOO_NEW}" in by_name["future"] and "active" in by_name["current"]


async def test_server_starts_without_a_plugin_built_for_another_api(versioned_site: Path) -> None:
    async with serving(env=_env(versioned_site)) as (url, lines), aiohttp.ClientSession() as http:
        assert any(f"Plugin future (future-plugin 4.5.6) failed to load and is not used: {API_TOO_NEW}" in line
                   for line in lines)
        async with http.get(url + "versioned/current") as r:
            assert await r.json() == {"hello": "current"}
        async with http.get(url + "versioned/future") as r:  # not registered: its route is not there
            assert r.status == 404


async def test_a_needed_plugin_built_for_another_api_stops_startup(versioned_site: Path) -> None:
    code, _, err = await run("a2a", "--transport", "future", env=_env(versioned_site))
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert "Plugin 'future' (future-plugin 4.5.6)" in last and API_TOO_NEW in last
    assert "Traceback" not in err


async def test_removed_flags_are_rejected() -> None:
    code, _, err = await run("a2a", "--token", "x")
    assert code == 2
    assert "No such option" in err and "--token" in err


async def test_debug_flag_and_env_auth() -> None:
    env = _env(IACCODE_A2A_HTTP_TOKEN="cli-token")
    async with serving("-d", env=env) as (url, lines), aiohttp.ClientSession() as http:
        async with http.get(url + ".well-known/agent-card.json") as r:
            assert r.status == 401
        async with http.get(url + ".well-known/agent-card.json",
                            headers={"Authorization": "Bearer cli-token"}) as r:
            assert "bearerAuth" in (await r.json())["securitySchemes"]
        async with http.get(url + "health") as r:
            assert r.status == 200


def test_help_lists_options() -> None:
    from click.testing import CliRunner

    from iac_code.server.cli import main

    result = CliRunner().invoke(main, ["a2a", "--help"])
    assert result.exit_code == 0
    for option in ("--config", "--host", "--port", "--transport", "--debug", "--log-to-stdout", "--plugins",
                   "--output"):
        assert option in result.output


async def test_version_names_the_distribution_it_runs_from() -> None:
    """The package index has an unrelated ``iac-code``: ``--version`` says which distribution this is and where."""
    from importlib.metadata import distribution

    code, out, err = await run("--version")
    assert code == 0, err
    dist = distribution("iac-code")
    assert out.startswith(f"iac-code, version {dist.version} (distribution iac-code {dist.version}: ")
    assert "A2A" in out and str(dist.locate_file("")) in out


# ----------------------------------------------------------------------------- iac-code a2a-client, a plugin


def _client_hidden(site: Path) -> Path:
    """A site directory that hides the installed iac-code-a2a-client's entry point: its own metadata
    for that distribution, without one, comes first on the path (Python uses the first it finds)."""
    info = site / "iac_code_a2a_client-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: iac-code-a2a-client\nVersion: 0.1.0\n")
    return site


async def test_a2a_client_without_its_plugin_names_what_to_install(tmp_path: Path) -> None:
    env = _env(_client_hidden(tmp_path / "site"))
    code, out, err = await run("a2a-client", "call", "--url", "http://127.0.0.1:9/", "-p", "hi", env=env)
    assert code == 2 and not out
    assert err.splitlines() == ["Error: 'iac-code a2a-client' needs the plugin distribution iac-code-a2a-client, "
                                "which is not installed. Install with: pip install 'iac-code[a2a]'"]
    code, out, err = await run("--help", env=env)
    assert code == 0, err
    assert "a2a-client" not in out and "a2a " in out
    code, _, err = await run("a2a-clint", env=env)  # any other unknown command stays click's usage error
    assert code == 2 and "No such command 'a2a-clint'" in err and "pip install" not in err


async def test_a2a_client_whose_plugin_cannot_be_imported_says_so(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "iac_code_a2a_client").mkdir(parents=True)  # a package of that name without the plugin module
    (site / "iac_code_a2a_client" / "__init__.py").write_text("")
    code, out, err = await run("a2a-client", "discover", "--url", "http://127.0.0.1:9/", env=_env(site))
    assert code == 2 and not out
    [line] = err.splitlines()
    assert line.startswith("Error: 'iac-code a2a-client' comes with plugin 'a2a-client' (iac-code-a2a-client 0.1.0), "
                           "which failed to load: ModuleNotFoundError")
    assert line.endswith("Reinstall with: pip install 'iac-code[a2a]'")


async def test_a2a_client_is_imported_only_when_it_runs() -> None:
    """Every ``iac-code`` start loads the plugin's entry point (and the small default router it registers); the
    client itself waits for its command."""
    script = ("import sys\nfrom iac_code.server.plugins import Plugins\n"
              "commands = Plugins.load().cli_commands()\n"
              "print(sorted(commands), sorted(m for m in sys.modules if m.startswith('iac_code_a2a_client')))\n"
              "commands['a2a-client'].record.load()\n"
              "print('iac_code_a2a_client.commands' in sys.modules)\n")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, env=_env(),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        "['a2a-client'] ['iac_code_a2a_client', 'iac_code_a2a_client.default_router', 'iac_code_a2a_client.plugin']",
        "True"]
