"""The code in docs/plugin-hooks.md runs: the tutorial's files are the example plugin's, and pass its tests.

Every ```python (or ```toml) block of the guide is one of two things:

* a file of ``examples/csv_plugin``, when its first line is ``# file: <path>``: it must equal that
  file, and the tutorial's tests run (in a pytest process) against the tutorial's plugin, made
  visible to entry-point discovery as an install would;
* otherwise a plugin module for one hook's section: it is registered with a running server,
  each hook it implements is collected, and what it provides is used once.

Either way the code imports nothing of iac-code but ``iac_code.api``.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import httpx
import pytest

from iac_code.agents.runtime import RuntimeEvent, TurnRequest
from iac_code.testing import start_server

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "plugin-hooks.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
FILE_MARKER = re.compile(r"# file: (\S+)\n")


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int
    path: str = ""  # the repository file a tutorial block is


def blocks(text: str) -> list[Block]:
    found = []
    for match in FENCE.finditer(text):
        language, code = match.group(1), match.group(2)
        if language not in ("python", "toml"):
            continue
        line = text.count("\n", 0, match.start()) + 1
        marker = FILE_MARKER.match(code)
        found.append(Block(language, code[marker.end():] if marker else code, line, marker.group(1) if marker else ""))
    return found


BLOCKS = blocks(GUIDE.read_text(encoding="utf-8"))
FILES = [b for b in BLOCKS if b.path]
SNIPPETS = [b for b in BLOCKS if not b.path]


def test_the_guide_has_the_tutorial_and_hook_snippets() -> None:
    paths = {b.path for b in FILES}
    assert {"examples/csv_plugin/pyproject.toml", "examples/csv_plugin/src/iac_code_example_csv/plugin.py",
            "examples/csv_plugin/src/iac_code_example_csv/decoder.py",
            "examples/csv_plugin/tests/test_decoder.py"} <= paths
    assert len(SNIPPETS) >= 5 and all(b.language == "python" for b in SNIPPETS)


@pytest.mark.parametrize("block", FILES, ids=[b.path for b in FILES])
def test_a_tutorial_file_is_the_example_plugins_file(block: Block) -> None:
    assert block.code == (ROOT / block.path).read_text(encoding="utf-8"), \
        f"docs/plugin-hooks.md line {block.line} differs from {block.path}: copy the file into the guide"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "python"],
                         ids=[f"line-{b.line}" for b in BLOCKS if b.language == "python"])
def test_the_guide_imports_nothing_of_iac_code_but_its_api(block: Block) -> None:
    imported = set()
    for node in ast.walk(ast.parse(block.code)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module)
    assert {m for m in imported if m.split(".")[0] == "iac_code"} <= {"iac_code.api"}, f"line {block.line}"


def install_like_a_wheel(project: Path, site: Path) -> None:
    """Make ``project`` (a src layout) importable from ``site`` with its entry points, as an install would."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta.get("entry-points", {})
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items())
        for group, entries in groups.items()))
    for package in (project / "src").iterdir():
        (site / package.name).symlink_to(package, target_is_directory=True)


def test_the_tutorials_plugin_passes_the_tutorials_tests(tmp_path: Path) -> None:
    for block in FILES:
        target = tmp_path / block.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
    project = tmp_path / "examples" / "csv_plugin"
    site = tmp_path / "site"
    install_like_a_wheel(project, site)
    tests = sorted(str(p.relative_to(project)) for p in (project / "tests").glob("test_*.py"))
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *tests], cwd=project, env=env,
                          capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", done.stdout) and "failed" not in done.stdout


def snippet_module(block: Block) -> types.ModuleType:
    module = types.ModuleType(f"plugin_hooks_snippet_{block.line}")
    exec(compile(block.code, f"docs/plugin-hooks.md:{block.line}", "exec"), module.__dict__)  # noqa: S102
    return module


def implemented_hooks(module: types.ModuleType) -> set[str]:
    return {name for name, value in vars(module).items()
            if name.startswith("iac_code_") and hasattr(value, "iac_code_impl")}


@pytest.mark.parametrize("block", SNIPPETS, ids=[f"line-{b.line}" for b in SNIPPETS])
async def test_a_hook_snippet_is_a_working_plugin(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = snippet_module(block)
    hooks = implemented_hooks(module)
    assert hooks, f"docs/plugin-hooks.md line {block.line}: a snippet outside the tutorial implements a hook"
    monkeypatch.chdir(tmp_path)
    async with start_server(extra_plugins={"snippet": module}) as server:
        plugins = server.kernel.plugins
        mine = _collected(plugins, server.kernel)
        for hook in hooks - {"iac_code_check_config"}:
            assert mine.get(hook), f"{hook} of the snippet at line {block.line} provided nothing"
        for transports in (["http"], ["grpc"]):
            assert isinstance(plugins.check_config(server.kernel.config, transports), list)
        for provided in mine.get("iac_code_cli_commands", []):
            assert isinstance(provided.record.load(), click.Command)
        for provided in mine.get("iac_code_agent_runtimes", []):
            runtime = provided.record.create_runtime(server.kernel)
            turn = TurnRequest(context_id="c", task_id="t", prompt="count these words", cwd=str(tmp_path))
            events = [event async for event in runtime.run_turn(turn)]
            assert events and all(isinstance(e, RuntimeEvent) for e in events)  # type: ignore[arg-type]
        for provided in mine.get("iac_code_price_sources", []):
            cost = await provided.record.create(server.kernel).estimate([{"name": "Web", "type": "ALIYUN::ECS::Instance"}])
            assert cost["price_source"] and all(item["price_source"] for item in cost["items"])
        for provided in mine.get("iac_code_tools", []):
            assert provided.record.create(server.kernel).name == provided.record.name
        async with httpx.AsyncClient() as http:
            for provided in mine.get("iac_code_http_routes", []):
                if provided.record.method == "GET":
                    reply = await http.get(server.url.rstrip("/") + provided.record.path)
                    assert reply.status_code == 200, reply.text
            for provided in mine.get("iac_code_protocol_adapters", []):
                for method in provided.record.methods:  # the dispatcher hands the adapter its names
                    reply = await http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": method},
                                            headers={"A2A-Version": "1.0"})
                    assert reply.status_code == 200 and "result" in reply.json(), reply.text


def _collected(plugins: Any, kernel: Any) -> dict[str, list[Any]]:
    """What the plugin named ``snippet`` provides, per hook, through the kernel's own collection."""
    tables = {
        "iac_code_transports": plugins.transports(), "iac_code_push_queues": plugins.push_queues(),
        "iac_code_card_signers": plugins.card_signers(), "iac_code_part_decoders": plugins.part_decoders(),
        "iac_code_routers": plugins.routers(), "iac_code_agent_runtimes": plugins.agent_runtimes(),
        "iac_code_tools": plugins.tools(), "iac_code_state_backends": plugins.state_backends(),
        "iac_code_price_sources": plugins.price_sources(),
        "iac_code_cli_commands": {**plugins.cli_commands(""), **plugins.cli_commands("a2a")},
    }
    mine = {hook: [p for p in table.values() if p.plugin == "snippet"] for hook, table in tables.items()}
    mine["iac_code_http_routes"] = [p for p in plugins.http_routes(kernel) if p.plugin == "snippet"]
    mine["iac_code_config_model"] = [p for p in plugins.config_models() if p.plugin == "snippet"]
    mine["iac_code_protocol_adapters"] = [p for p in plugins.protocol_adapters() if p.plugin == "snippet"]
    mine["iac_code_card_extensions"] = [p for p in plugins.card_extensions(kernel.config, list(kernel.interfaces))
                                        if p.plugin == "snippet"]
    mine["iac_code_turn_gates"] = [p for p in plugins.turn_gates() if p.plugin == "snippet"]
    return mine
