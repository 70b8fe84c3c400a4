"""Shared fixtures for the kernel's tests: real servers on ephemeral ports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from iac_code.testing import RunningServer, start_server


@pytest.fixture
async def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningServer]:
    """A server with the default configuration (writes ask permission)."""
    monkeypatch.chdir(tmp_path)  # the default workspace: generated files land here, not in the repository
    async with start_server() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A client's working directory, inside the server's allowed workspace roots (the system temp dir)."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder
