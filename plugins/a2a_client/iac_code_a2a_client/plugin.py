"""``iac-code a2a-client`` as a plugin: the command registered through ``iac_code_cli_commands``.

This module is imported at every ``iac-code`` start (entry-point loading), so it imports
nothing of the client: the click group is imported only when the command runs or help lists it.
"""

from __future__ import annotations

from typing import Any

from iac_code.api import CliCommandSpec, hookimpl

IAC_CODE_API_VERSION = "1.0"


def _load() -> Any:
    from iac_code_a2a_client.commands import client

    return client


@hookimpl
def iac_code_cli_commands() -> list[CliCommandSpec]:
    return [CliCommandSpec(name="a2a-client", load=_load, help="Call remote A2A agents.")]
