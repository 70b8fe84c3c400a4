"""Plugin registration: push notifications (the ``push-*`` keys, the push service, the push commands).

The kernel keeps only the push-job interface the queue plugins implement and a seam
(:class:`iac_code.api.PushServiceSpec`); everything that stores, screens, encrypts, signs
and delivers is here. Without this plugin the server runs without push notifications
(the card says ``pushNotifications: false``; the push-config methods answer -32003).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import BaseModel

from iac_code.api import CliCommandSpec, PushContext, PushServiceSpec, hookimpl
from iac_code_push import settings

IAC_CODE_API_VERSION = "1.0"


def create_service(context: PushContext) -> Any:
    from iac_code_push.service import PushNotifications

    return PushNotifications(context)


def check(config: Any, queues: Collection[str]) -> list[str]:
    return settings.check(config, queues)


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return settings.PushConfig


@hookimpl
def iac_code_push_services() -> list[PushServiceSpec]:
    return [PushServiceSpec(
        name="push",
        create=create_service,
        check=check,
        description="Encrypted push-config store, callback URL guard, keyring, signed deliveries with retries "
                    "from the push-queue plugin's queue.",
    )]


def _command(name: str) -> Any:
    from iac_code_push import commands

    return getattr(commands, name)


@hookimpl
def iac_code_cli_commands() -> list[CliCommandSpec]:
    return [
        CliCommandSpec(name="push-worker", load=lambda: _command("push_worker"), parent="a2a",
                       help="Deliver queued push notifications, apart from the server (any number may run)."),
        CliCommandSpec(name="push-key-rotate", load=lambda: _command("push_key_rotate"), parent="a2a",
                       help="Add a new push-secret encryption key and make it active (old keys stay for old secrets)."),
        CliCommandSpec(name="push-status", load=lambda: _command("push_status"), parent="a2a",
                       help="Print the push queue's job counts (and dead letters) as JSON."),
    ]
