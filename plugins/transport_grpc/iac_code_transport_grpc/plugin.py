"""Plugin registration: the ``grpc`` transport and its configuration keys."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iac_code.api import StartupError, TransportSpec, hookimpl, in_conflict, without_effect
from iac_code_transport_grpc.addresses import is_loopback, plaintext_refused

if TYPE_CHECKING:
    from iac_code.api import ClientTarget, JsonRpcChannel, PluginContext, TransportServer

IAC_CODE_API_VERSION = "1.0"

MISSING_DEPENDENCIES = "gRPC A2A transport requires optional dependencies. Install iac-code[a2a-grpc]."
GRPC, GRPC_JSONRPC = "grpc", "grpc-jsonrpc"
SHARED_JSONRPC_PORT = 50052  # grpc-jsonrpc's default port when the official grpc transport holds grpc-port


class GrpcTransportConfig(BaseModel):
    """Keys the gRPC transport adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    grpc_host: str = Field("", description="gRPC bind host (default: the 'host' setting).")
    grpc_port: int = Field(
        50051, ge=0, le=65535, description="gRPC bind port (0 picks a free one; the bound port is advertised).")
    grpc_tls_cert: str = Field("", description="PEM certificate chain file; TLS when set with grpc-tls-key.")
    grpc_tls_key: str = Field("", description="PEM private key file of grpc-tls-cert.")
    grpc_insecure: bool = Field(
        False, description="Allow plaintext gRPC on a non-loopback grpc-host (logged as a warning).")
    grpc_jsonrpc_port: int | None = Field(
        None, ge=0, le=65535, description=(
            "gRPC JSON-RPC envelope (grpc-jsonrpc) bind port; unset: grpc-port, or 50052 when the official "
            "grpc transport is configured too (0 picks a free one)."))

    @field_validator("grpc_port", mode="before")
    @classmethod
    def _port_not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic would read true as 1
            raise ValueError(f"'grpc-port': must be a port number, not {value}")
        return value

    @field_validator("grpc_jsonrpc_port", mode="before")
    @classmethod
    def _jsonrpc_port_not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"'grpc-jsonrpc-port': must be a port number, not {value}")
        return value


def create_transport(kernel: PluginContext) -> TransportServer:
    try:
        from iac_code_transport_grpc.server import GrpcTransport
    except ImportError:
        raise StartupError(MISSING_DEPENDENCIES) from None
    return GrpcTransport(kernel)


def create_jsonrpc_transport(kernel: PluginContext) -> TransportServer:
    """The ``grpc-jsonrpc`` transport (JSON-RPC objects in ``JsonRpcEnvelope`` messages)."""
    try:
        from iac_code_transport_grpc.jsonrpc_envelope import GrpcJsonRpcTransport
    except ImportError:
        raise StartupError(MISSING_DEPENDENCIES) from None
    return GrpcJsonRpcTransport(kernel)


async def connect_jsonrpc(target: ClientTarget) -> JsonRpcChannel:
    """The client side of ``grpc-jsonrpc``: an insecure channel to ``grpc-jsonrpc://host:port``.

    No channel-wide metadata: the headers (``target.headers`` included) go on every call, and the
    server reads the first value of a key, so channel metadata would shadow a call's own headers.
    """
    try:
        from iac_code_transport_grpc.jsonrpc_client import GrpcJsonRpcClient
    except ImportError:
        from a2a.client import A2AClientError

        raise A2AClientError(MISSING_DEPENDENCIES) from None
    return GrpcJsonRpcClient(target.url)


@hookimpl
def iac_code_transports() -> list[TransportSpec]:
    return [TransportSpec(
        name="grpc",
        aliases=("grpcs",),
        create=create_transport,
        description="Official A2A gRPC binding (lf.a2a.v1.A2AService, grpcio asyncio server).",
    ), TransportSpec(
        name="grpc-jsonrpc",
        aliases=("grpc+jsonrpc",),
        create=create_jsonrpc_transport,
        connect=connect_jsonrpc,
        url_schemes=("grpc-jsonrpc",),
        description="JSON-RPC envelopes over gRPC (iac_code.a2a.transports.proto.A2AJsonRpc).",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return GrpcTransportConfig


@hookimpl
def iac_code_check_config(config: Any, transports: list[str]) -> list[str]:
    """TLS settings, plaintext on a public address, grpcio installed and the two gRPC transports' ports.

    The ``grpc-*`` keys are refused when neither gRPC transport is selected.
    """
    selected = [name for name in (GRPC, GRPC_JSONRPC) if name in transports]
    if not selected:
        return without_effect(config, GrpcTransportConfig.model_fields, f"transport: {GRPC}")
    problems: list[str] = []
    if GRPC_JSONRPC not in selected:
        problems += without_effect(config, ("grpc_jsonrpc_port",), f"transport: {GRPC_JSONRPC}")
    cert, key = str(config.grpc_tls_cert or ""), str(config.grpc_tls_key or "")
    host = str(config.grpc_host or config.host).strip()
    if bool(cert) != bool(key):
        given, missing = ("grpc-tls-cert", "grpc-tls-key") if cert else ("grpc-tls-key", "grpc-tls-cert")
        problems.append(f"'{given}' has no effect without '{missing}': gRPC TLS needs both.")
    elif cert:
        problems += in_conflict(config, ("grpc_insecure",), "grpc-tls-cert")
        problems += [f"Cannot read the '{name}' file {path!r}." for name, path in
                     (("grpc-tls-cert", cert), ("grpc-tls-key", key)) if not os.access(os.path.expanduser(path), os.R_OK)]
    elif not is_loopback(host) and not config.grpc_insecure:
        problems.append(plaintext_refused(host))
    if importlib.util.find_spec("grpc") is None:
        problems.append(MISSING_DEPENDENCIES)
    if len(selected) == 2:
        jsonrpc = config.grpc_jsonrpc_port if config.grpc_jsonrpc_port is not None else SHARED_JSONRPC_PORT
        if jsonrpc and jsonrpc == config.grpc_port:
            problems.append(f"Transports '{GRPC}' and '{GRPC_JSONRPC}' would both bind port {jsonrpc}: "
                            "set 'grpc-jsonrpc-port' to another port (0 picks a free one).")
    return problems
