"""The push delivery worker: claims jobs from the push queue and POSTs them to the callbacks.

Runs in the server (``push-delivery: server``, the default) or alone in
``iac-code a2a push-worker``; any number of workers share one queue. Per job
(spec: push.md §6, with what it lacks added):

* headers rebuilt from the configuration as stored now (token, auth scheme), plus
  ``Idempotency-Key`` (the job id, stable across retries and redeliveries) and,
  with ``push-signing``, an ``X-A2A-Notification-Signature`` JWT;
* the URL screened again and connected to exactly the address that was screened
  (:class:`~iac_code_push.urls.PinnedResolver`); redirects are not followed;
* 2xx acks; a transient failure (timeout, connection error, 408/409/425/429/5xx
  of the list) retries with exponential backoff and ±20 % jitter; anything else,
  or the last attempt, dead-letters with an ERROR log;
* one delivery at a time per (owner, task, configuration), in the order the
  events happened: a job waits until its predecessor is done.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import inspect
import logging
import random
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from iac_code import api
from iac_code.api import ClaimedJob, PushJob, PushQueue, jsonio, mask_urls_in, redact, spawn
from iac_code_push.urls import PinnedConnector, refusal_of

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import TaskPushNotificationConfig

    from iac_code_push.configs import PushConfigStore
    from iac_code_push.urls import PushUrlGuard

logger = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
SIGNATURE_HEADER = "X-A2A-Notification-Signature"
TOKEN_HEADER = "X-A2A-Notification-Token"
IDEMPOTENCY_HEADER = "Idempotency-Key"
LAST_ERROR_LIMIT = 1000
CLAIM_WAIT = 0.25
CLAIM_BATCH = 64
# How long a job waits for its predecessor beyond the predecessor's whole retry schedule before it goes
# anyway (a lost "done" mark must not block a configuration forever).
ORDER_WAIT_MARGIN = 600.0
_PATH = re.compile(r"(?:[A-Za-z]:\\|/)(?:[^\s'\"]+[/\\])+[^\s'\"]*")


@dataclass(frozen=True)
class DeliverySettings:
    """The ``push-*`` settings the worker applies."""

    timeout: float = 5.0
    max_attempts: int = 5
    retry_base_delay: float = 1.0
    retry_max_delay: float = 60.0
    concurrency: int = 64
    issuer: str = ""

    @classmethod
    def of(cls, config: Any, issuer: str = "") -> DeliverySettings:
        return cls(timeout=config.push_timeout, max_attempts=config.push_max_attempts,
                   retry_base_delay=config.push_retry_base_delay, retry_max_delay=config.push_retry_max_delay,
                   concurrency=config.push_concurrency, issuer=issuer)

    @functools.cached_property
    def order_wait_limit(self) -> float:
        """Seconds a job waits for its predecessor: past every attempt and backoff it can have, plus a margin."""
        growing = min(self.max_attempts - 1, 60)  # past 2^60 × base every delay is the cap
        backoff = 1.2 * (sum(min(self.retry_max_delay, self.retry_base_delay * 2 ** (n - 1))
                             for n in range(1, growing + 1))
                         + (self.max_attempts - 1 - growing) * self.retry_max_delay)
        return ORDER_WAIT_MARGIN + backoff + self.max_attempts * (self.timeout + CLAIM_WAIT + 1.0)

    def delay(self, attempt: int) -> float:
        """Backoff before attempt ``attempt + 1`` (``attempt`` ≥ 1): base × 2^(n−1), capped, ±20 % jitter."""
        base = min(self.retry_max_delay, self.retry_base_delay * 2 ** (attempt - 1))
        return base * random.uniform(0.8, 1.2)


class NotificationSigning(Protocol):
    """What signs a notification (``X-A2A-Notification-Signature``)."""

    def sign(self, *, issuer: str, audience: str, job_id: str, task_id: str) -> str:
        ...


class DeliveryError(Exception):
    """One failed attempt; ``transient`` ones are retried."""

    def __init__(self, text: str, *, transient: bool) -> None:
        super().__init__(text)
        self.transient = transient


def auth_headers(config: TaskPushNotificationConfig | None) -> dict[str, str]:
    """The token and ``Authorization`` headers of a configuration (spec push.md §6.2)."""
    if config is None:
        return {}
    headers: dict[str, str] = {}
    if config.token:
        headers[TOKEN_HEADER] = config.token
    scheme = config.authentication.scheme.strip() if config.HasField("authentication") else ""
    credentials = config.authentication.credentials if config.HasField("authentication") else ""
    if scheme and credentials:
        if scheme.lower() == "bearer":
            headers["Authorization"] = f"Bearer {credentials}"
        elif scheme.lower() == "basic":
            headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode("utf-8")).decode("ascii")
        else:
            headers["Authorization"] = f"{scheme} {credentials}"
    return headers


def sanitize_error(text: str, secrets: tuple[str, ...] = ()) -> str:
    """An error text fit for a job record and a log: no secret, no local path, bounded."""
    text = redact(mask_urls_in(text), secrets, "[REDACTED]")
    return _PATH.sub("[PATH]", text)[:LAST_ERROR_LIMIT]


def display_url(url: str) -> str:
    """A callback URL without user info, query or fragment (for logs)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    except ValueError:
        return "<invalid URL>"


class _KeyLocks:
    """One asyncio lock per ordering key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> Any:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class PushDeliveryWorker:
    """Claims jobs and delivers them, ``concurrency`` at a time; start with :meth:`start`, end with :meth:`stop`."""

    def __init__(self, queue: PushQueue, store: PushConfigStore, guard: PushUrlGuard,
                 settings: DeliverySettings, signer: NotificationSigning | None = None,
                 metrics: Any = None) -> None:
        self.queue = queue
        self.store = store
        self.guard = guard
        self.settings = settings
        self.signer = signer
        self._session: aiohttp.ClientSession | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._locks = _KeyLocks()
        self._stopping = False
        # The server's metrics (``push_outcome``, ``push_attempt``); None: none kept.
        self.metrics = metrics
        # Safe mode's path projection (PluginContext.projection), applied to each attempt's payload with the
        # mode in force at send time (the queued payload stays canonical); None: a worker without a server.
        self.projection: Any = None

    async def start(self) -> None:
        connector = PinnedConnector(self.guard, limit=self.settings.concurrency)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=self.settings.timeout),
            json_serialize=lambda value: jsonio.dumps(value).decode("utf-8"), trust_env=False)
        self._loop_task = spawn(self._loop(), name="push-delivery")

    async def stop(self) -> None:
        """Stop claiming, let deliveries in flight finish (bounded by the timeout), close the HTTP client."""
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        if self._running:
            await asyncio.wait(list(self._running), timeout=self.settings.timeout + 1)
        for task in list(self._running):
            task.cancel()  # their leases expire and another worker delivers them
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _loop(self) -> None:
        failures = 0
        while not self._stopping:
            await self._slots.acquire()
            free = 1
            while free < CLAIM_BATCH and not self._slots.locked():
                await self._slots.acquire()
                free += 1
            try:
                claimed = await self.queue.claim(free, CLAIM_WAIT)
                failures = 0
            except Exception as exc:
                claimed = []
                failures += 1
                if failures == 1:
                    logger.error("The push queue cannot be read (%s); retrying", type(exc).__name__)
                await asyncio.sleep(min(5.0, 0.1 * 2 ** min(failures, 6)))
            for _ in range(free - len(claimed)):
                self._slots.release()
            for item in claimed:
                task = spawn(self._handle(item), name="push-deliver")
                self._running.add(task)
                task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slots.release()

    async def _handle(self, claimed: ClaimedJob) -> None:
        job = claimed.job
        key = job.order_key
        async with self._locks.hold(key):
            now = time.time()
            if job.prev_seq and now - job.created_at < self.settings.order_wait_limit and \
                    await self.queue.done_through(key) < job.prev_seq:
                waited = max(0.0, now - job.created_at)
                await self.queue.retry(claimed, job.rescheduled(at=now + min(1.0, 0.05 + waited / 10)))
                if self.metrics is not None:
                    self.metrics.push_outcome("deferred")
                return
            metrics = self.metrics
            started = time.perf_counter() if metrics is not None else 0.0
            try:
                await self._deliver(job)
            except DeliveryError as exc:
                if metrics is not None:
                    metrics.push_attempt(time.perf_counter() - started)
                await self._failed(claimed, job, exc)
                return
            if metrics is not None:
                metrics.push_attempt(time.perf_counter() - started)
                metrics.push_outcome("delivered")
            if not _is_final(job):  # nothing follows a terminal state: no successor waits for its mark
                await self.queue.mark_done(key, job.seq)
            await self.queue.ack(claimed)

    async def _failed(self, claimed: ClaimedJob, job: PushJob, error: DeliveryError) -> None:
        attempt = job.attempt + 1
        text = str(error)
        if error.transient and attempt < self.settings.max_attempts:
            await self.queue.retry(claimed, job.rescheduled(
                at=time.time() + self.settings.delay(attempt), attempt=attempt, last_error=text))
            if self.metrics is not None:
                self.metrics.push_outcome("retried")
            return
        dead = job.rescheduled(at=job.next_attempt_at, attempt=attempt, last_error=text)
        logger.error("A2A push notification dead-lettered: task %s config %s url %s attempt %d: %s",
                     job.task_id, job.config_id, display_url(job.url), attempt, text)
        await self.queue.mark_done(job.order_key, job.seq)
        await self.queue.dead_letter(claimed, dead)
        if self.metrics is not None:
            self.metrics.push_outcome("dead_lettered")

    def headers_for(self, job: PushJob, config: TaskPushNotificationConfig | None) -> dict[str, str]:
        """Every header of one attempt (credentials from the current configuration)."""
        headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: job.job_id, **auth_headers(config)}
        if self.signer is not None:
            headers[SIGNATURE_HEADER] = self.signer.sign(issuer=self.settings.issuer, audience=job.url,
                                                         job_id=job.job_id, task_id=job.task_id)
        return headers

    async def _payload(self, job: PushJob) -> Any:
        """The job's payload as sent now: projected when safe mode is on (``IAC_CODE_A2A_SAFE_MODE``)."""
        projection = self.projection
        if projection is None or not projection.enabled():
            return job.payload
        return await projection.project(job.payload, None)  # no caller: the roots of the contexts it names

    async def _deliver(self, job: PushJob) -> None:
        with api.tracing.push_span(job.trace, task_id=job.task_id, **{"url.full": display_url(job.url)},
                               attempt=job.attempt + 1) as span:
            await self._attempt(job, span)

    async def _attempt(self, job: PushJob, span: Any) -> None:
        config = self.store.read_for_delivery(job.owner, job.task_id, job.config_id)
        if inspect.isawaitable(config):  # a shared store reads over the network
            config = await config
        secrets = _secrets_of(config)
        try:
            self.guard.check_static(job.url)
        except ValueError as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}", transient=False) from None
        assert self._session is not None
        headers = self.headers_for(job, config)
        api.tracing.inject(headers, job.trace)  # traceparent: this attempt's span, in the queuing turn's trace
        try:
            async with self._session.post(job.url, data=jsonio.dumps(await self._payload(job)), headers=headers,
                                          allow_redirects=False) as response:
                status = response.status
                span.set_attribute("http.response.status_code", status)
                await response.read()
        except TimeoutError:
            raise DeliveryError("TimeoutError: the callback did not answer in time", transient=True) from None
        except (aiohttp.ClientError, OSError) as exc:
            screened = refusal_of(exc)
            if screened is not None:
                raise DeliveryError(f"PushUrlError: {screened}", transient=False) from None
            raise DeliveryError(sanitize_error(f"{type(exc).__name__}: {exc}", secrets), transient=True) from None
        if 200 <= status < 300:
            return
        raise DeliveryError(f"RuntimeError: HTTP {status}", transient=status in TRANSIENT_STATUS)


_FINAL_STATES = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})


def _is_final(job: PushJob) -> bool:
    """Whether the job reports a terminal task state (its task sends nothing after it)."""
    payload = job.payload
    event = payload.get("statusUpdate") or payload.get("task")
    return isinstance(event, dict) and event.get("status", {}).get("state") in _FINAL_STATES


def _secrets_of(config: TaskPushNotificationConfig | None) -> tuple[str, ...]:
    if config is None:
        return ()
    return (config.token, config.authentication.credentials) if config.HasField("authentication") else (config.token,)
