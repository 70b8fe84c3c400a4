"""Plugin registration: the ``redis-streams`` push queue and its configuration keys.

``redis`` is imported only when the queue is created, so the plugin loads (and
its keys validate) without the optional dependency installed.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import PushQueue, PushQueueSpec, QueueContext, StartupError, hookimpl, without_effect

IAC_CODE_API_VERSION = "1.0"

QUEUE_NAME = "redis-streams"
MISSING_DEPENDENCIES = "Redis-backed A2A push delivery requires optional dependencies. Install iac-code[a2a-redis]."
MISSING_URL = "push-redis-url is required in --config for push-queue: redis-streams."
DEFAULT_LEASE_TIMEOUT_MS = 300000


class RedisPushQueueConfig(BaseModel):
    """Keys the Redis Streams push queue adds to the configuration (spec push.md §8)."""

    model_config = ConfigDict(extra="forbid")

    push_redis_url: str = Field(
        "", description="Redis URL of the push queue (redis://, rediss:// or unix://; may hold a password, "
                        "which is never logged). Required when push-queue is redis-streams.")
    push_stream: str = Field(
        "iac-code:a2a:push", min_length=1, description="Redis stream holding due push jobs.")
    push_retry_key: str = Field(
        "iac-code:a2a:push:retry", min_length=1,
        description="Redis sorted set holding jobs scheduled for later (score: due time, epoch seconds).")
    push_dead_stream: str = Field(
        "iac-code:a2a:push:dead", min_length=1,
        description="Redis stream holding dead-lettered push jobs (capped at about 100000 entries).")
    push_consumer_group: str = Field(
        "iac-code-push", min_length=1, description="Consumer group shared by every push worker of the queue.")
    push_consumer_name: str = Field(
        "", description="This worker's consumer name in the group (default: <hostname>-<pid>-<12 hex>).")


def create_queue(ctx: QueueContext) -> PushQueue:
    """Build the (not yet started) Redis Streams queue from the settings."""
    if not str(getattr(ctx.config, "push_redis_url", "") or "").strip():
        raise StartupError(MISSING_URL)
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        raise StartupError(MISSING_DEPENDENCIES) from None
    from iac_code_push_redis.queue import RedisStreamsQueue

    return RedisStreamsQueue.from_context(ctx)


@hookimpl
def iac_code_push_queues() -> list[PushQueueSpec]:
    return [PushQueueSpec(
        name=QUEUE_NAME,
        create=create_queue,
        description="Redis Streams consumer-group queue shared by every worker (at-least-once, leases, retries).",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return RedisPushQueueConfig


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """``push-redis-url``, three distinct keys and the ``redis`` package for this queue; its keys refused otherwise."""
    if not getattr(config, "push_notifications", False):  # also without the push plugin
        return without_effect(config, RedisPushQueueConfig.model_fields, "push-notifications: true")
    if config.push_queue != QUEUE_NAME:
        return without_effect(config, RedisPushQueueConfig.model_fields, f"push-queue: {QUEUE_NAME}")
    problems: list[str] = []
    if not str(config.push_redis_url or "").strip():
        problems.append(MISSING_URL)
    if len({config.push_stream, config.push_retry_key, config.push_dead_stream}) != 3:
        problems.append("push-stream, push-retry-key and push-dead-stream must be three different Redis keys.")
    if importlib.util.find_spec("redis") is None:
        problems.append(MISSING_DEPENDENCIES)
    return problems
