"""Push notifications assembled from the settings: keyring, config store, URL guard, queue, sender, worker.

One place builds them, for the server (the kernel's push seam, :class:`iac_code.api.PushService`)
and for ``iac-code a2a push-worker`` and ``push-status`` alike, so all read the same
directory, keyring, queue and rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from iac_code.api import PushContext, PushQueue, QueueContext, StartupError
from iac_code_push.configs import EncryptedPushConfigStore, PushConfigStore, SharedPushConfigStore
from iac_code_push.crypto import JobCipher, PushKeyring, PushSecretError
from iac_code_push.delivery import DeliverySettings, PushDeliveryWorker
from iac_code_push.sender import QueueingPushSender
from iac_code_push.settings import MISSING_QUEUE, UNKNOWN_QUEUE
from iac_code_push.signing import NotificationSigner, key_id, load_or_create_signing_key, public_jwks
from iac_code_push.urls import PushUrlGuard

logger = logging.getLogger(__name__)


class PushNotifications:
    """The push parts of one process.

    Built without I/O; :meth:`start` loads the keyring, opens the config store and the queue
    and, when this process delivers, starts a worker. With ``push-notifications`` off only
    the URL guard works: a configuration is still screened before a2a-sdk refuses it.
    """

    def __init__(self, context: PushContext) -> None:
        self.context = context
        config = context.config
        self.config = config
        self.enabled = bool(config.push_notifications)
        self.signs = bool(config.push_signing)  # its keys are published at /.well-known/jwks.json
        self.guard = PushUrlGuard(config.push_allowed_hosts)
        self.keyring: PushKeyring | None = None
        self.store: PushConfigStore | None = None
        self.queue: PushQueue | None = None
        self.sender: QueueingPushSender | None = None
        self.signer: KeySetSigner | None = None
        self.worker: PushDeliveryWorker | None = None
        self._own_jwks: dict[str, Any] = {"keys": []}

    # ------------------------------------------------------------------ the kernel's seam

    @property
    def config_store(self) -> PushConfigStore | None:
        """The request handler's push-config store (``None`` with push off: a2a-sdk answers -32003)."""
        return self.store

    async def check_url(self, url: str) -> None:
        """The callback URL guard at store time; ``ValueError`` with the message the client gets."""
        await self.guard.check(url)

    async def flushed(self, task_id: str) -> None:
        """Wait until the jobs of ``task_id``'s events sent so far are durably queued."""
        if self.sender is not None:
            await self.sender.flushed(task_id)

    def public_jwks(self) -> dict[str, Any]:
        """The JWKS a receiver verifies signed notifications with (empty without ``push-signing``)."""
        if self.signer is None:
            return {"keys": []}
        server = self.context.server
        key_set = server.signing_keys if server is not None else None
        return key_set.public_jwks() if key_set is not None else self._own_jwks

    async def start(self, issuer: str) -> None:
        """Open store and queue, and deliver when ``push-delivery`` is ``server`` (the server's start)."""
        allowed = self.config.push_allowed_hosts
        if not self.enabled:
            if allowed:
                logger.warning("push-allowed-hosts is set but push-notifications is off: it has no effect")
            return
        server = self.context.server
        await self.open(deliver=self.config.push_delivery == "server", issuer=issuer,
                        metrics=server.instrumentation if server is not None else None)
        assert self.store is not None and self.queue is not None
        settle = None
        if server is not None:
            tasks = server.task_store
            settle = getattr(tasks, "settle_task", None) or (lambda _task_id: tasks.sync())
        self.sender = QueueingPushSender(self.store, self.queue, self.guard, events=self.config.push_events,
                                         settle=settle)
        if allowed:
            logger.warning("push-allowed-hosts: push notifications may go to %s without the "
                           "private/loopback/link-local URL screen", ", ".join(allowed))

    async def stop(self) -> None:
        """Wait for the enqueues in progress, stop delivering, close the queue."""
        if self.sender is not None:
            await self.sender.flush_all()
            self.sender = None
        if self.worker is not None:
            await self.worker.stop()
            self.worker = None
        if self.queue is not None:
            await self.queue.close()
            self.queue = None

    # ------------------------------------------------------------------ the parts

    def load(self, *, shared: bool = True) -> None:
        """Load the keyring, and build the config store (``shared``: the backend's, when it has one) and the queue."""
        context = self.context
        try:
            self.keyring = PushKeyring.load(context.state_dir)
        except PushSecretError as exc:
            raise StartupError(str(exc)) from None
        if shared and context.shared_configs is not None:  # several nodes: the configs live in the shared backend
            self.store = SharedPushConfigStore(context.shared_configs, self.keyring)
        else:
            store = EncryptedPushConfigStore(context.state_dir, self.keyring)
            moved = store.import_legacy(context.state_dir)
            if moved:
                logger.info("Moved %d push configuration(s) to the encrypted store", moved)
            self.store = store
        self.queue = _create_queue(context, QueueContext(config=self.config, codec=JobCipher(self.keyring),
                                                         state_dir=context.state_dir))
        if self.config.push_signing:
            server = context.server
            key_set = server.signing_keys if server is not None else None
            if key_set is None:  # no signer plugin's keys: our own key, created once, owner-only
                key = load_or_create_signing_key(context.state_dir)
                self._own_jwks = public_jwks([key])
                self.signer = KeySetSigner(lambda: key)
            else:
                self.signer = KeySetSigner(key_set.active_key)

    async def open(self, *, deliver: bool, issuer: str = "", metrics: Any = None, shared: bool = True) -> None:
        """:meth:`load` the parts, open the queue; with ``deliver``, also start a delivery worker on it."""
        self.load(shared=shared)
        assert self.queue is not None and self.store is not None
        try:
            await self.queue.start()
        except StartupError:
            raise
        except Exception as exc:
            raise StartupError(f"The push queue {self.config.push_queue!r} cannot start: {type(exc).__name__}.") from None
        if deliver:
            self.worker = PushDeliveryWorker(self.queue, self.store, self.guard,
                                             DeliverySettings.of(self.config, issuer), self.signer, metrics)
            server = self.context.server
            self.worker.projection = getattr(server, "projection", None) if server is not None else None
            await self.worker.start()


class KeySetSigner:
    """Signs notifications with whatever key is active now (a key set rotates)."""

    def __init__(self, active_key: Callable[[], Any]) -> None:
        self._active_key = active_key
        self._signers: dict[str, NotificationSigner] = {}

    def sign(self, *, issuer: str, audience: str, job_id: str, task_id: str) -> str:
        key = self._active_key()
        kid = key_id(key)
        signer = self._signers.get(kid)
        if signer is None:
            self._signers = {kid: (signer := NotificationSigner(key))}
        return signer.sign(issuer=issuer, audience=audience, job_id=job_id, task_id=task_id)


def _create_queue(context: PushContext, queue_context: QueueContext) -> PushQueue:
    name = context.config.push_queue
    if name not in context.queues:
        raise StartupError(MISSING_QUEUE.get(name, UNKNOWN_QUEUE))
    return context.queues[name](queue_context)
