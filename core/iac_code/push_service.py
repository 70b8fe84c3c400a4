"""Push notifications assembled from the settings: keyring, config store, URL guard, queue, worker.

One place builds them, for the server (:class:`~iac_code.kernel.Kernel`) and for
``iac-code a2a push-worker`` alike, so both read the same directory, keyring,
queue and rules.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iac_code.errors import StartupError
from iac_code.push_configs import EncryptedPushConfigStore
from iac_code.push_crypto import JobCipher, PushKeyring, PushSecretError
from iac_code.push_delivery import DeliverySettings, PushDeliveryWorker
from iac_code.push_jobs import PushQueue, QueueContext
from iac_code.push_urls import PushUrlGuard

if TYPE_CHECKING:
    from iac_code.config import ServerConfig
    from iac_code.plugins import Plugins
    from iac_code.push_signing import NotificationSigner

logger = logging.getLogger(__name__)

INSTALL_HINT = {"local-file": "iac-code[a2a]", "redis-streams": "iac-code[a2a-redis]"}


class PushService:
    """The push parts of one process; :meth:`start` opens the queue (and the worker, when asked)."""

    def __init__(self, config: ServerConfig, plugins: Plugins, state_dir: Path) -> None:
        self.config = config
        self.state_dir = state_dir
        try:
            self.keyring = PushKeyring.load(state_dir)
        except PushSecretError as exc:
            raise StartupError(str(exc)) from None
        self.store = EncryptedPushConfigStore(state_dir, self.keyring)
        moved = self.store.import_legacy(state_dir)
        if moved:
            logger.info("Moved %d push configuration(s) to the encrypted store", moved)
        self.guard = PushUrlGuard(config.push_allowed_hosts)
        self.queue = _create_queue(config, plugins, QueueContext(config=config, codec=JobCipher(self.keyring),
                                                                 state_dir=state_dir))
        self.signer: NotificationSigner | None = None
        if config.push_signing:
            from iac_code.push_signing import NotificationSigner, load_or_create_signing_key

            self.signer = NotificationSigner(load_or_create_signing_key(state_dir))
        self.worker: PushDeliveryWorker | None = None

    def public_jwks(self) -> dict[str, Any]:
        """The JWKS a receiver verifies signed notifications with (empty without ``push-signing``)."""
        if self.signer is None:
            return {"keys": []}
        from iac_code.push_signing import public_jwks

        return public_jwks([self.signer.key])

    async def start(self, *, deliver: bool, issuer: str = "") -> None:
        """Open the queue; with ``deliver``, also start a delivery worker on it."""
        try:
            await self.queue.start()
        except StartupError:
            raise
        except Exception as exc:
            raise StartupError(f"The push queue {self.config.push_queue!r} cannot start: {type(exc).__name__}.") from None
        if deliver:
            self.worker = PushDeliveryWorker(self.queue, self.store, self.guard,
                                             DeliverySettings.of(self.config, issuer), self.signer)
            await self.worker.start()

    async def stop(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
            self.worker = None
        await self.queue.close()


def _create_queue(config: ServerConfig, plugins: Plugins, context: QueueContext) -> PushQueue:
    name = config.push_queue
    queues = plugins.push_queues()
    if name not in queues:
        if name in INSTALL_HINT:
            raise StartupError(f"push-queue {name!r} is not installed. Install {INSTALL_HINT[name]}.")
        raise StartupError("--push-queue must be local-file or redis-streams.")
    return queues[name].record.create(context)
