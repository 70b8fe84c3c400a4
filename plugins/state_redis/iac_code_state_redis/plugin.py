"""Plugin registration: the ``redis`` state backend (``task-store: redis``) and its configuration keys.

``redis`` is imported only when the backend is created, so the plugin loads (and
its keys validate) without the optional dependency installed.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import StartupError, StateBackend, StateBackendSpec, hookimpl, redis_location, without_effect

if TYPE_CHECKING:

    from iac_code.api import PluginContext
    from iac_code_state_redis.push_configs import RedisPushConfigRecords

IAC_CODE_API_VERSION = "1.0"

BACKEND_NAME = "redis"
MISSING_DEPENDENCIES = "task-store: redis requires optional dependencies. Install iac-code[a2a-redis]."
MISSING_URL = "task-store-redis-url is required in --config for task-store: redis."


class RedisStateConfig(BaseModel):
    """Keys the Redis state backend adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    task_store_redis_url: str = Field(
        "", description="Redis URL of the shared state (redis://, rediss:// or unix://; may hold a password, "
                        "which is never logged). Required when task-store is redis.")
    task_store_key_prefix: str = Field(
        "iac-code:a2a:", min_length=1, description="Prefix of every key the shared state uses in Redis.")
    task_store_finished_ttl: float = Field(
        0.0, ge=0, description="Seconds a finished task (completed, failed, canceled, rejected) is kept; 0 keeps it.")
    node_id: str = Field(
        "", description="This node's id in the cluster (default: <hostname>-<pid>-<8 hex>). Unique per process.")
    node_lease_seconds: float = Field(
        10.0, ge=0.5, description="Heartbeat and context-lease expiry: how long a dead node's turns stay WORKING "
                                  "before a survivor marks them interrupted.")


COMMAND_TIMEOUT = 10.0  # no command waits longer, whatever happened to its connection
BLOCKING_TIMEOUT = 70.0  # XREAD BLOCK (5 s) and BLPOP (forwarded calls, up to 30 s) wait less


def _client(config: Any, socket_timeout: float = COMMAND_TIMEOUT) -> Any:
    """A Redis client of ``task-store-redis-url`` (not connected yet)."""
    url = str(getattr(config, "task_store_redis_url", "") or "").strip()
    if not url:
        raise StartupError(MISSING_URL)
    try:
        import redis.asyncio as redis
    except ImportError:
        raise StartupError(MISSING_DEPENDENCIES) from None
    try:
        return redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=socket_timeout,
                                    health_check_interval=30)
    except ValueError:
        raise StartupError(f"task-store-redis-url is not a Redis URL ({redis_location(url)}).") from None


def push_configs(config: Any) -> RedisPushConfigRecords:
    """The shared push-config records alone (``iac-code a2a push-worker``)."""
    from iac_code_state_redis.keys import Keys
    from iac_code_state_redis.push_configs import RedisPushConfigRecords

    return RedisPushConfigRecords(_client(config), Keys(config.task_store_key_prefix))


def create_backend(kernel: PluginContext) -> StateBackend:
    """The shared task store, this node's link, the push-config records, the permission-wait checkpoints and
    the features' shared records.

    Two connection pools: one for commands, one for the reads that block (event streams,
    forwarded calls), so a waiting subscriber never holds up a write.
    """
    config: Any = kernel.config
    client, blocking = _client(config), _client(config, BLOCKING_TIMEOUT)
    url = str(config.task_store_redis_url).strip()
    from iac_code_state_redis.events import RedisTaskEventStream
    from iac_code_state_redis.keys import Keys
    from iac_code_state_redis.nodes import RedisNodeLink
    from iac_code_state_redis.permission_waits import RedisPermissionWaits
    from iac_code_state_redis.push_configs import RedisPushConfigRecords
    from iac_code_state_redis.records import RedisSharedRecords
    from iac_code_state_redis.store import RedisTaskStore

    keys = Keys(config.task_store_key_prefix)
    store = RedisTaskStore(client, keys, retained_events=config.stream_resume_events,
                           finished_ttl=config.task_store_finished_ttl)
    events = RedisTaskEventStream(blocking, keys)
    link = RedisNodeLink(client, keys, store, events, blocking=blocking, node_id=config.node_id,
                         lease_seconds=config.node_lease_seconds, location=redis_location(url))
    return StateBackend(task_store=store, link=link, push_configs=RedisPushConfigRecords(client, keys),
                        permission_waits=RedisPermissionWaits(client, keys), records=RedisSharedRecords(client, keys))


@hookimpl
def iac_code_state_backends() -> list[StateBackendSpec]:
    return [StateBackendSpec(
        name=BACKEND_NAME,
        create=create_backend,
        push_configs=push_configs,
        description="Tasks, contexts and push configs in Redis: several server nodes serving one service.",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return RedisStateConfig


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """``task-store-redis-url`` and the ``redis`` package for ``task-store: redis``; its keys refused otherwise."""
    if str(config.task_store).strip().lower() != BACKEND_NAME:
        return without_effect(config, RedisStateConfig.model_fields, f"task-store: {BACKEND_NAME}")
    problems: list[str] = []
    url = str(config.task_store_redis_url or "").strip()
    if not url:
        problems.append(MISSING_URL)
    elif not url.lower().startswith(REDIS_SCHEMES):
        problems.append(f"task-store-redis-url is not a Redis URL ({redis_location(url)}).")
    if importlib.util.find_spec("redis") is None:
        problems.append(MISSING_DEPENDENCIES)
    return problems
