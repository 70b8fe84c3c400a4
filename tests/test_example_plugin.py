"""The example third-party plugin stays third-party: it reaches iac-code only through ``iac_code.api``.

Its behaviour is tested by its own tests, which ``.ci/check_example_plugin.py`` runs from its wheel
in a fresh virtual environment (and tests/test_docs_snippets.py runs as the guide shows them).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from iac_code.api import API_VERSION_ATTRIBUTE, api_version_problem

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "csv_plugin"
SOURCES = sorted(EXAMPLE.rglob("*.py"))


def kernel_imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return {m for m in modules if m.split(".")[0] == "iac_code"}


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(EXAMPLE)) for p in SOURCES])
def test_the_example_imports_nothing_of_iac_code_but_its_api(path: Path) -> None:
    assert kernel_imports(path) <= {"iac_code.api"}


def test_the_example_declares_an_api_version_this_kernel_provides() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    [target] = project["entry-points"]["iac_code"].values()
    module = EXAMPLE / "src" / (target.replace(".", "/") + ".py")
    declared = [node.value.value for node in ast.parse(module.read_text(encoding="utf-8")).body
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and any(isinstance(t, ast.Name) and t.id == API_VERSION_ATTRIBUTE for t in node.targets)]
    assert declared == ["1.0"] and api_version_problem(declared[0]) is None


def test_the_example_is_its_own_distribution_not_a_workspace_member() -> None:
    root = tomllib.loads((EXAMPLE.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert not any(member.startswith("examples") for member in root["tool"]["uv"]["workspace"]["members"])
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "iac-code-example-csv" and any(d.startswith("iac-code") for d in project["dependencies"])
