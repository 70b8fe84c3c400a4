"""The push plugin as the kernel sees it: its keys, their validation, its push service and its commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from iac_code_push.plugin import iac_code_cli_commands
from iac_code_push.settings import PushConfig

from iac_code.api import ConfigProblems
from iac_code.testing import make_kernel, start_server


def test_the_keys_keep_their_names_defaults_and_descriptions() -> None:
    fields = PushConfig.model_fields
    defaults = {name: field.get_default(call_default_factory=True) for name, field in fields.items()}
    assert defaults == {
        "push_notifications": False, "push_queue": "local-file", "push_events": ["terminal", "input-required"],
        "push_delivery": "server", "push_timeout": 5.0, "push_max_attempts": 5, "push_retry_base_delay": 1.0,
        "push_retry_max_delay": 60.0, "push_concurrency": 64, "push_lease_timeout_ms": 300_000,
        "push_signing": False, "push_allowed_hosts": []}
    assert all(field.description for field in fields.values())


@pytest.mark.parametrize(("settings", "message"), [
    ({"push-delivery": "sometimes"}, "Invalid configuration: push-delivery: must be server or external"),
    ({"push-events": ["terminal", "nope"]}, "Invalid configuration: push-events: unknown event 'nope' (use all, "),
    ({"push-events": 3}, "Invalid configuration: push-events: a list of event names, or 'all'"),
    ({"push-allowed-hosts": ["10.0.0.0/33"]},
     "Invalid configuration: push-allowed-hosts: '10.0.0.0/33' is not a valid CIDR network"),
    ({"push-allowed-hosts": ["bad host!"]},
     "Invalid configuration: push-allowed-hosts: 'bad host!' is not a host name, IP address or CIDR network"),
    ({"push-timeout": 0}, "Invalid configuration: 'push-timeout': Input should be greater than 0"),
    ({"push-lease-timeout-ms": 10}, "Invalid configuration: 'push-lease-timeout-ms': Input should be greater than or "
                                    "equal to 100"),
    ({"push-queue-name": "x"}, "Invalid configuration: unknown configuration key 'push-queue-name'"),
])
def test_bad_values_are_refused_with_the_same_messages(settings: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigProblems) as refused:
        make_kernel({"persistence-dir": str(tmp_path), **settings})
    assert any(line.startswith(message) for line in refused.value.problems), refused.value.problems


def test_names_are_normalised(tmp_path: Path) -> None:
    kernel = make_kernel({"persistence-dir": str(tmp_path), "push-notifications": True, "push-queue": "Local_File",
                          "push-delivery": " EXTERNAL "})
    assert (kernel.config.push_queue, kernel.config.push_delivery) == ("local-file", "external")  # type: ignore[attr-defined]


def test_the_plugin_adds_its_commands_to_the_server_group() -> None:
    commands = {spec.name: spec for spec in iac_code_cli_commands()}
    assert set(commands) == {"push-worker", "push-key-rotate", "push-status"}
    assert all(spec.parent == "a2a" and spec.help for spec in commands.values())
    assert {name: spec.load().name for name, spec in commands.items()} == {name: name for name in commands}


async def test_the_card_offers_push_exactly_when_it_is_on() -> None:
    for enabled in (True, False):
        async with start_server({"push-notifications": enabled}) as server, aiohttp.ClientSession() as http:
            assert server.kernel.push is not None and server.kernel.push.enabled is enabled
            async with http.get(server.url + ".well-known/agent-card.json") as r:
                card = await r.json()
            assert card["capabilities"].get("pushNotifications", False) is enabled
