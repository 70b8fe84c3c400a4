"""Fixtures of the selling pipelines' tests: ``fake_ros``, a local ROS stand-in (:mod:`fake_ros`) and its endpoint."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest


def _load_fake_ros() -> Any:
    name = "iac_code_pipeline_selling_tests_fake_ros"
    if name not in sys.modules:  # the tests run with --import-mode=importlib: load the helper by its path
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("fake_ros.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
async def fake_ros() -> AsyncIterator[Any]:
    """A running fake ROS (``.endpoint`` is its ``http://127.0.0.1:<port>``); stopped after the test."""
    ros = _load_fake_ros().FakeRos()
    ros.endpoint = await ros.start()
    try:
        yield ros
    finally:
        await ros.stop()
