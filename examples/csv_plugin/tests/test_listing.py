"""The installed plugin is listed by ``iac-code a2a --plugins list`` with the hooks it implements."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.asyncio


async def test_the_plugin_is_listed_as_active(iac_code_cli):
    listed = await iac_code_cli("a2a", "--plugins", "list", "--output", "json")
    assert listed.code == 0, listed.err
    [row] = [row for row in listed.json()["plugins"] if row["name"] == "csv"]
    assert (row["distribution"], row["status"], row["kind"]) == ("iac-code-example-csv", "active", "installed")
    assert set(row["hooks"]) == {"iac_code_part_decoders", "iac_code_routers", "iac_code_http_routes"}
