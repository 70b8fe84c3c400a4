"""``iac-code a2a-client`` as a plugin: the command (``iac_code_cli_commands``) and the ``default`` router
(``iac_code_routers``) that picks which configured remote agent a call goes to.

This module is imported at every ``iac-code`` start (entry-point loading), so it imports
nothing of the client: the click group is imported only when the command runs or help lists it.
The router is a few regular expressions, imported here.
"""

from __future__ import annotations

from typing import Any

from iac_code.api import CliCommandSpec, RouterSpec, hookimpl
from iac_code_a2a_client.default_router import DEFAULT_ROUTER

IAC_CODE_API_VERSION = "1.0"


def _load() -> Any:
    from iac_code_a2a_client.commands import client

    return client


@hookimpl
def iac_code_cli_commands() -> list[CliCommandSpec]:
    return [CliCommandSpec(name="a2a-client", load=_load, help="Call remote A2A agents.")]


@hookimpl
def iac_code_routers() -> list[RouterSpec]:
    return [DEFAULT_ROUTER]
