"""The import contracts of the root ``pyproject.toml`` hold, and break when a plugin reaches past ``iac_code.api``.

``lint-imports`` checks the plugin packages (only ``iac_code.api`` from the kernel, never each
other) and the kernel (never a plugin). Plugin tests are no packages import-linter sees, so their
imports are read here: ``iac_code.api``, ``iac_code.testing`` and the plugin's own package only.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from tests.import_contracts import illegal_imports

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
PLUGIN_TEST_IMPORTS = ("iac_code.api", "iac_code.testing")
# until i29-push merges: these plugins' tests still import kernel internals.
NOT_YET_ON_THE_API: set[str] = set()


def lint_imports(*args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (pythonpath, str(ROOT)) if p)}
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--config", str(ROOT / "pyproject.toml"), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_are_kept() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "0 broken" in result.stdout
    assert "Plugins import from the kernel only its plugin API, iac_code.api KEPT" in result.stdout


def test_every_plugin_package_is_under_contract() -> None:
    """A new plugin under plugins/ is checked from its first commit: root package, api_only importer, independent."""
    packages = {path.parent.name for path in ROOT.glob("plugins/*/iac_code_*/__init__.py")}
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in settings["contracts"]}
    assert set(settings["root_packages"]) == packages | {"iac_code"}
    assert set(contracts["plugins-use-the-api"]["importers"]) == packages
    assert set(contracts["plugins-are-independent"]["modules"]) == packages
    assert set(contracts["kernel-imports-no-plugin"]["forbidden_modules"]) == packages


def test_a_plugin_reaching_into_the_kernel_or_another_plugin_breaks_the_contracts(tmp_path: Path) -> None:
    """The real configuration against a copy of a real plugin with two deliberate violations."""
    copy = tmp_path / "iac_code_transport_redis"
    shutil.copytree(ROOT / "plugins/transport_redis/iac_code_transport_redis", copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    connect = copy / "connect.py"
    source = connect.read_text()
    assert "from iac_code.api import ClientTarget\n" in source
    connect.write_text(source.replace(
        "from iac_code.api import ClientTarget\n",
        "from iac_code.api import ClientTarget\n"
        "from iac_code.protocol.framing import dumps\n"
        "from iac_code_transport_http.limits import ConnectionLimits\n"))
    line = 1 + source.splitlines().index("from iac_code.api import ClientTarget")
    result = lint_imports(pythonpath=str(tmp_path))  # the copy shadows the installed plugin
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "Plugins import from the kernel only its plugin API, iac_code.api BROKEN" in out
    assert f"- iac_code_transport_redis.connect -> iac_code.protocol.framing (l.{line + 1})" in out
    assert "Plugins never import each other BROKEN" in out
    assert "iac_code_transport_redis.connect -> iac_code_transport_http.limits" in out
    assert "Contracts: 2 kept, 2 broken." in out
    assert "Import it from iac_code.api" in out  # the guidance


def test_the_contract_allows_the_api_and_its_submodules_only() -> None:
    graph = grimp.ImportGraph()
    for module in ("kernel", "kernel.api", "kernel.api.records", "kernel.inner", "kernel_plugin", "plugin",
                   "plugin.a", "plugin.b"):
        graph.add_module(module)
    for importer, imported, line in (("plugin.a", "kernel.api", 1), ("plugin.a", "kernel.api.records", 2),
                                     ("plugin.a", "kernel", 3), ("plugin.b", "kernel.inner", 4),
                                     ("plugin.b", "kernel.inner", 7), ("plugin.b", "kernel_plugin", 5),
                                     ("kernel.api", "kernel.inner", 6)):
        graph.add_import(importer=importer, imported=imported, line_number=line, line_contents="")
    found = illegal_imports(graph, {"plugin", "plugin.a", "plugin.b"}, "kernel", {"kernel.api"})
    assert [(link["importer"], link["imported"], sorted(link["line_numbers"])) for link in found] == [
        ("plugin.a", "kernel", [3]), ("plugin.b", "kernel.inner", [4, 7])]


def _kernel_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of each import of ``iac_code`` or one of its modules in ``path``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [f"{node.module}.{alias.name}" for alias in node.names] if node.module == "iac_code" \
                else [node.module]
            found += [(node.lineno, module) for module in modules]
    return [(n, m) for n, m in found if m == "iac_code" or m.startswith(("iac_code.", "iac_code_"))]


@pytest.mark.parametrize("plugin", sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "tests").is_dir()))
def test_plugin_tests_import_the_api_the_testing_helpers_and_their_own_package(plugin: str) -> None:
    own = {path.parent.name for path in (ROOT / "plugins" / plugin).glob("iac_code_*/__init__.py")}
    wrong = [f"{path.relative_to(ROOT)}:{line}: {module}"
             for path in sorted((ROOT / "plugins" / plugin / "tests").rglob("*.py"))
             for line, module in _kernel_imports(path)
             if module.split(".")[0] not in own and not module.startswith(PLUGIN_TEST_IMPORTS)]
    if plugin in NOT_YET_ON_THE_API:
        assert wrong, f"{plugin}'s tests use only the API now: drop it from NOT_YET_ON_THE_API"
    else:
        assert wrong == []


def test_the_test_import_check_sees_what_it_must(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text("from iac_code import api, kernel\nimport iac_code.testing\nfrom iac_code_x.y import z\n"
                     "from . import sibling\nimport aiohttp\n")
    assert _kernel_imports(probe) == [(1, "iac_code.api"), (1, "iac_code.kernel"), (2, "iac_code.testing"),
                                      (3, "iac_code_x.y")]
