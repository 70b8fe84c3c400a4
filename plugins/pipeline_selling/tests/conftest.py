"""Fixtures of the selling pipelines' tests: ``fake_ros``, a local ROS stand-in (:mod:`fake_ros`) and its endpoint;
``ticketed``, the offline runtime plugin with its template generation held until the test releases it
(:mod:`ticketed`). And the stream readers (:mod:`streams`), loaded here, before any test module, so that test
modules import them: ``from pipeline_selling_test_streams import pipeline_events``."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest


def load_helper(name: str) -> Any:
    """The helper module ``tests/<name>.py`` (the tests run with --import-mode=importlib: loaded by its path)."""
    qualified = f"iac_code_pipeline_selling_tests_{name}"
    if qualified not in sys.modules:
        spec = importlib.util.spec_from_file_location(qualified, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = module
        spec.loader.exec_module(module)
    return sys.modules[qualified]


# The stream readers, importable as pipeline_selling_test_streams from here on (an iac_code_* name is kept for the
# plugin's own package: tests/test_import_contracts.py).
sys.modules.setdefault("pipeline_selling_test_streams", load_helper("streams"))


@pytest.fixture
async def fake_ros() -> AsyncIterator[Any]:
    """A running fake ROS (``.endpoint`` is its ``http://127.0.0.1:<port>``); stopped after the test."""
    ros = load_helper("fake_ros").FakeRos()
    ros.endpoint = await ros.start()
    try:
        yield ros
    finally:
        await ros.stop()


@pytest.fixture
def ticketed() -> Any:
    """A fresh ``TicketedOffline`` plugin (``ticketed.py``): register it as ``extra_plugins`` of a server started with
    ``ticketed_settings()``; ``.tickets.release(n)`` lets ``n`` template generations through."""
    return load_helper("ticketed").TicketedOffline()


@pytest.fixture
def ticketed_settings() -> Any:
    """``ticketed.ticketed_settings``: server settings (pipeline mode) with the offline runtime plugin replaced."""
    return load_helper("ticketed").ticketed_settings
