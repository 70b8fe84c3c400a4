"""Plugin registration: the ``redis-streams`` transport and its configuration keys."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import StartupError, TransportSpec, hookimpl, without_effect

if TYPE_CHECKING:
    from iac_code.api import ClientTarget, JsonRpcChannel, PluginContext, TransportServer

IAC_CODE_API_VERSION = "1.0"

MISSING_DEPENDENCIES = "Redis Streams A2A transport requires optional dependencies. Install iac-code[a2a-redis]."
MISSING_URL = "redis-url is required in --config for --transport redis-streams."
SAME_STREAMS = "request-stream and response-stream must be different Redis keys."
TRANSPORT_NAME = "redis-streams"


class RedisTransportConfig(BaseModel):
    """Keys the Redis Streams transport adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    redis_url: str = Field(
        "", description="Redis URL (redis://, rediss:// or unix://) of the request and response streams; "
                        "required with --transport redis-streams. Its credentials are never logged or advertised.")
    request_stream: str = Field("iac-code:a2a:requests", description="Stream the server reads JSON-RPC requests from.")
    response_stream: str = Field(
        "iac-code:a2a:responses", description="Stream answers go to when a request names no reply_stream.")
    consumer_group: str = Field("iac-code", description="Consumer group every server process reads requests through.")
    consumer_name: str = Field(
        "", description="This process's consumer name in the group (default: consumer-<12 random hex>).")
    redis_lease_timeout_ms: int = Field(
        60000, ge=1, description="A request pending this long on a consumer that stopped renewing it "
                                 "(a dead server) is claimed and served by another.")
    redis_stream_maxlen: int = Field(
        10000, ge=1, description="Response streams are capped near this many entries (XADD MAXLEN ~); "
                                 "request entries are deleted once handled.")
    redis_concurrency: int = Field(64, ge=1, description="Requests one server process serves at once.")


def create_transport(kernel: PluginContext) -> TransportServer:
    """Build the Redis Streams transport for ``kernel`` (the URL is checked before anything is imported)."""
    if not str(getattr(kernel.config, "redis_url", "") or "").strip():
        raise StartupError(MISSING_URL)
    try:
        from iac_code_transport_redis.server import RedisStreamsTransport
    except ImportError:
        raise StartupError(MISSING_DEPENDENCIES) from None
    return RedisStreamsTransport(kernel)


async def connect(target: ClientTarget) -> JsonRpcChannel:
    """The client side: a :class:`~iac_code_transport_redis.client.RedisStreamsClient` for the interface URL."""
    try:
        from iac_code_transport_redis.connect import open_channel
    except ImportError:
        from a2a.client import A2AClientError

        raise A2AClientError(MISSING_DEPENDENCIES) from None
    return open_channel(target)


@hookimpl
def iac_code_transports() -> list[TransportSpec]:
    return [TransportSpec(
        name="redis-streams",
        aliases=("redis", "redis-stream"),
        create=create_transport,
        connect=connect,
        url_schemes=("redis-streams",),
        description="JSON-RPC over Redis Streams (consumer group on the request stream, one reply stream per client).",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return RedisTransportConfig


@hookimpl
def iac_code_check_config(config: Any, transports: list[str]) -> list[str]:
    """``redis-url`` and the ``redis`` package when the transport is selected; its keys are refused otherwise."""
    if TRANSPORT_NAME not in transports:
        return without_effect(config, RedisTransportConfig.model_fields, f"transport: {TRANSPORT_NAME}")
    problems: list[str] = []
    if not str(config.redis_url or "").strip():
        problems.append(MISSING_URL)
    if config.request_stream == config.response_stream:
        problems.append(SAME_STREAMS)
    if importlib.util.find_spec("redis") is None:
        problems.append(MISSING_DEPENDENCIES)
    return problems
