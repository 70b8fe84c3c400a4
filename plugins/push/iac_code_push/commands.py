"""``iac-code a2a push-worker``, ``push-key-rotate`` and ``push-status``: push delivery apart from the server.

Each reads the server's configuration file (every plugin's keys, the same persistence
directory), so it works on the server's keyring, queue and configurations.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import click

from iac_code import api
from iac_code.api import StartupError
from iac_code_push.crypto import PushKeyring, PushSecretError
from iac_code_push.delivery import display_url
from iac_code_push.service import PushNotifications

logger = logging.getLogger(__name__)


@click.command("push-worker")
@click.option("--config", "config_path", default="", help="The server's YAML file (same push settings).")
@click.option("--debug", "-d", is_flag=True, help="Debug logging.")
def push_worker(config_path: str, debug: bool) -> None:
    """Deliver queued push notifications, apart from the server (any number may run)."""
    try:
        command = api.command_context(config_path, {"debug": True} if debug else {})
        config = command.config
        if not config.push_notifications:
            raise StartupError("push-notifications is off in this configuration: there is nothing to deliver.")
        service = PushNotifications(command.push_context(shared=True))
        instrumentation = command.instrumentation()

        async def work(stop: asyncio.Event) -> None:
            if instrumentation is not None:  # deliveries continue the traces of the turns that queued them
                await instrumentation.start(None)
            try:
                await service.open(deliver=True, issuer=_issuer(config), metrics=instrumentation)
                logger.info("iac-code push worker delivering from the %s queue", config.push_queue)
                try:
                    await stop.wait()
                finally:
                    await service.stop()
            finally:
                if instrumentation is not None:
                    await instrumentation.stop()

        api.run_until_stopped(work)
    except StartupError as exc:
        api.fail(str(exc))


@click.command("push-key-rotate")
@click.option("--config", "config_path", default="", help="The server's YAML file (for persistence-dir).")
def push_key_rotate(config_path: str) -> None:
    """Add a new push-secret encryption key and make it active (old keys stay for old secrets)."""
    try:
        command = api.command_context(config_path)
        key_id = PushKeyring.rotate_file(command.state_dir)
    except (StartupError, PushSecretError) as exc:
        api.fail(str(exc))
        return
    click.echo(f"Active push secret key: {key_id}")


@click.command("push-status")
@click.option("--config", "config_path", default="", help="The server's YAML file.")
@click.option("--dead", "dead", type=int, default=0, help="Also list up to N dead-lettered jobs.")
def push_status(config_path: str, dead: int) -> None:
    """Print the push queue's job counts (and dead letters) as JSON."""
    try:
        command = api.command_context(config_path)
        config = command.config
        service = PushNotifications(command.push_context(shared=False))
        report: dict[str, Any] = {}

        async def inspect(_stop: asyncio.Event) -> None:
            await service.open(deliver=False, shared=False)
            queue = service.queue
            assert queue is not None
            try:
                report["queue"] = config.push_queue
                report["depth"] = await queue.depth()
                if dead:
                    report["dead"] = [{"jobId": j.job_id, "taskId": j.task_id, "configId": j.config_id,
                                       "url": display_url(j.url), "attempt": j.attempt, "lastError": j.last_error}
                                      for j in await queue.dead_letters(dead)]
            finally:
                await service.stop()

        api.run_until_stopped(inspect)
    except StartupError as exc:
        api.fail(str(exc))
        return
    click.echo(json.dumps(report, indent=2))


def _issuer(config: Any) -> str:
    return f"http://{config.host}:{config.port}"
