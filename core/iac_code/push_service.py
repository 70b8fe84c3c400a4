"""Push notifications assembled from the settings: keyring, config store, URL guard, queue, worker.

One place builds them, for the server (:class:`~iac_code.kernel.Kernel`) and for
``iac-code a2a push-worker`` alike, so both read the same directory, keyring,
queue and rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iac_code.errors import StartupError
from iac_code.push_configs import EncryptedPushConfigStore
from iac_code.push_crypto import JobCipher, PushKeyring, PushSecretError
from iac_code.push_delivery import DeliverySettings, PushDeliveryWorker
from iac_code.push_jobs import PushQueue, QueueContext
from iac_code.push_urls import PushUrlGuard

if TYPE_CHECKING:
    from a2a.server.tasks import PushNotificationConfigStore

    from iac_code.config import ServerConfig
    from iac_code.plugins import Plugins
    from iac_code.push_signing import NotificationSigner
    from iac_code.records import SigningKeySet

logger = logging.getLogger(__name__)

# What to say when the selected queue's plugin is not installed (the redis text is the product's).
MISSING_QUEUE = {
    "local-file": "push-queue 'local-file' is not installed. Install iac-code[a2a].",
    "redis-streams": "Redis-backed A2A push delivery requires optional dependencies. Install iac-code[a2a-redis].",
}


class PushService:
    """The push parts of one process; :meth:`start` opens the queue (and the worker, when asked)."""

    def __init__(self, config: ServerConfig, plugins: Plugins, state_dir: Path, *,
                 key_set: SigningKeySet | None = None,
                 shared_store: Callable[[PushKeyring], PushNotificationConfigStore] | None = None) -> None:
        self.config = config
        self.state_dir = state_dir
        try:
            self.keyring = PushKeyring.load(state_dir)
        except PushSecretError as exc:
            raise StartupError(str(exc)) from None
        if shared_store is not None:  # several nodes: the configs live in the shared state backend
            self.store: Any = shared_store(self.keyring)
        else:
            self.store = EncryptedPushConfigStore(state_dir, self.keyring)
            moved = self.store.import_legacy(state_dir)
            if moved:
                logger.info("Moved %d push configuration(s) to the encrypted store", moved)
        self.guard = PushUrlGuard(config.push_allowed_hosts)
        self.queue = _create_queue(config, plugins, QueueContext(config=config, codec=JobCipher(self.keyring),
                                                                 state_dir=state_dir))
        self.key_set = key_set
        self.signer: KeySetSigner | None = None
        if config.push_signing:
            if key_set is None:  # no signer plugin's keys: our own key, created once, owner-only
                from iac_code.push_signing import load_or_create_signing_key, public_jwks

                key = load_or_create_signing_key(state_dir)
                self._own_jwks = public_jwks([key])
                self.signer = KeySetSigner(lambda: key)
            else:
                self.signer = KeySetSigner(key_set.active_key)
        self.worker: PushDeliveryWorker | None = None

    def public_jwks(self) -> dict[str, Any]:
        """The JWKS a receiver verifies signed notifications with (empty without ``push-signing``)."""
        if self.signer is None:
            return {"keys": []}
        return self.key_set.public_jwks() if self.key_set is not None else self._own_jwks

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


class KeySetSigner:
    """Signs notifications with whatever key is active now (a key set rotates)."""

    def __init__(self, active_key: Callable[[], Any]) -> None:
        self._active_key = active_key
        self._signers: dict[str, NotificationSigner] = {}

    def sign(self, *, issuer: str, audience: str, job_id: str, task_id: str) -> str:
        from iac_code.push_signing import NotificationSigner, key_id

        key = self._active_key()
        kid = key_id(key)
        signer = self._signers.get(kid)
        if signer is None:
            self._signers = {kid: (signer := NotificationSigner(key))}
        return signer.sign(issuer=issuer, audience=audience, job_id=job_id, task_id=task_id)


def _create_queue(config: ServerConfig, plugins: Plugins, context: QueueContext) -> PushQueue:
    name = config.push_queue
    queues = plugins.push_queues()
    if name not in queues:
        if name in MISSING_QUEUE:
            raise StartupError(MISSING_QUEUE[name])
        raise StartupError("--push-queue must be local-file or redis-streams.")
    return queues[name].record.create(context)
