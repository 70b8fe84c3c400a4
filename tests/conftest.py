"""Shared fixtures for the kernel's tests: real servers on ephemeral ports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from iac_code.testing import RunningServer, start_server


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    async with start_server() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
