"""Plugin registration: the ``local-file`` push queue (the default ``push-queue``).

It adds no configuration keys: the lease is the push plugin's ``push-lease-timeout-ms``
and the queue lives in ``<persistence-dir>/push_queue/``.
"""

from __future__ import annotations

from iac_code.api import PushQueue, PushQueueSpec, QueueContext, hookimpl
from iac_code_push_file.queue import DEFAULT_LEASE_MS, LocalFileQueue

IAC_CODE_API_VERSION = "1.0"

QUEUE_DIRECTORY = "push_queue"


def lease_timeout_ms(config: object) -> int:
    """The ``push_lease_timeout_ms`` setting (5 minutes when absent or not a positive number)."""
    value = getattr(config, "push_lease_timeout_ms", DEFAULT_LEASE_MS)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return DEFAULT_LEASE_MS
    return int(value)


def create_queue(context: QueueContext) -> PushQueue:
    return LocalFileQueue(context.state_dir / QUEUE_DIRECTORY, context.codec,
                          lease_timeout_ms=lease_timeout_ms(context.config))


@hookimpl
def iac_code_push_queues() -> list[PushQueueSpec]:
    return [PushQueueSpec(
        name="local-file",
        create=create_queue,
        description="One encrypted file per job under <persistence-dir>/push_queue/ (atomic writes, "
                    "rename claims; several processes may share the directory).",
    )]
