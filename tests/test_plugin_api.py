"""``iac_code.api``: its version rule, its names, and the context the kernel hands plugins."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from iac_code import api
from iac_code.testing import make_kernel, start_server

ROOT = Path(__file__).resolve().parent.parent
# until i29-push merges: these entry points declare no API version yet.
UNDECLARED: set[str] = set()


@pytest.mark.parametrize("declared", ["1.0", api.API_VERSION])
def test_a_plugin_built_for_this_api_or_an_older_minor_fits(declared: str) -> None:
    assert api.api_version_problem(declared) is None


@pytest.mark.parametrize(("declared", "reason"), [
    ("2.0", "built for plugin API 2.0; this iac-code provides API 1.0"),
    ("0.9", "built for plugin API 0.9; this iac-code provides API 1.0"),
    ("1.1", "built for plugin API 1.1; this iac-code provides API 1.0"),
    ("01.10", "built for plugin API 1.10; this iac-code provides API 1.0"),
])
def test_another_major_or_a_newer_minor_does_not(declared: str, reason: str) -> None:
    assert api.api_version_problem(declared) == reason


@pytest.mark.parametrize("declared", [1.0, 1, None, "1", "1.0.0", "v1.0", " 1.0", "1.0\n", "", "1.x", "１.０"])
def test_a_declaration_that_is_not_a_major_minor_string_is_refused(declared: object) -> None:
    reason = api.api_version_problem(declared)
    assert reason is not None and reason.startswith(f"declares {api.API_VERSION_ATTRIBUTE} = ")
    assert reason.endswith("which is not a 'MAJOR.MINOR' string") and "\n" not in reason


def test_a_long_declaration_is_cut_in_the_reason() -> None:
    reason = api.api_version_problem("9" * 500)
    assert reason is not None and len(reason) < 120


def test_every_exported_name_exists_and_the_list_is_sorted() -> None:
    assert [name for name in api.__all__ if not hasattr(api, name)] == []
    assert len(set(api.__all__)) == len(api.__all__)
    kind = {True: 0, False: 1}
    key = [(0 if n.isupper() else kind[n[0].isupper()] + 1, n) for n in api.__all__]
    assert key == sorted(key), "keep __all__ sorted: CONSTANTS, then Classes, then functions and modules"


def _members(protocol: type) -> set[str]:
    hinted = set(protocol.__annotations__)  # the names; their types need not resolve here
    methods = {n for n, v in vars(protocol).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return hinted | methods


def test_the_kernel_is_a_plugin_context(tmp_path: Path) -> None:
    kernel = make_kernel({"persistence-dir": str(tmp_path)})
    assert isinstance(kernel, api.PluginContext)
    assert isinstance(kernel.artifacts, api.ArtifactFiles)
    missing = {name for name in _members(api.PluginContext) if not hasattr(kernel, name)}
    assert missing == set()
    assert {"config", "dispatcher", "tools", "http_routes", "card_document", "interfaces"} <= _members(api.PluginContext)


async def test_what_a_context_shows_a_plugin() -> None:
    async with start_server({"transport": ["http", "websocket"], "port": 0, "card-public": True}) as server:
        context: api.PluginContext = server.kernel
        assert context.transport_names == ("http", "websocket")
        assert [i.protocol_binding for i in context.interfaces][:2] == ["JSONRPC", "HTTP+JSON"]
        assert context.readiness == "ready" and context.dispatcher is not None
        tools = context.tools()
        assert "read-file" in tools and all(isinstance(spec, api.ToolSpec) for spec in tools.values())
        assert all(isinstance(route, api.HttpRouteSpec) for route in context.http_routes())
        document = context.card_document
        assert isinstance(document, api.CardDocument) and document.etag and b"supportedInterfaces" in document.body
        assert context.artifacts.base_url == context.interfaces[0].url


def _first_party_entry_points() -> dict[str, str]:
    entries: dict[str, str] = {}
    for pyproject in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        entries |= tomllib.loads(pyproject.read_text())["project"]["entry-points"]["iac_code"]
    return entries


@pytest.mark.parametrize(("name", "target"), sorted(_first_party_entry_points().items()))
def test_every_first_party_plugin_declares_the_api_it_is_built_for(name: str, target: str) -> None:
    module = importlib.import_module(target)
    declared = getattr(module, api.API_VERSION_ATTRIBUTE, None)
    if name in UNDECLARED:
        assert declared is None, f"{name} declares its API version now: drop it from UNDECLARED"
    else:
        assert declared == api.API_VERSION
