"""Plugin registration: the ``http`` transport and its configuration keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from iac_code.hookspecs import hookimpl
from iac_code.records import TransportSpec

if TYPE_CHECKING:
    from iac_code.kernel import Kernel
    from iac_code.records import TransportServer


class HttpTransportConfig(BaseModel):
    """Keys the HTTP transport adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    public_url: str = Field(
        "", description="Base URL advertised on the Agent Card (default http://<host>:<port>/).")
    sse_ping_seconds: float = Field(15.0, gt=0, description="Interval of SSE keep-alive comments.")


def create_transport(kernel: Kernel) -> TransportServer:
    from iac_code_transport_http.server import HttpTransport

    return HttpTransport(kernel)


@hookimpl
def iac_code_transports() -> list[TransportSpec]:
    return [TransportSpec(
        name="http",
        aliases=("jsonrpc", "json-rpc", "http+jsonrpc", "http-jsonrpc", "https"),
        create=create_transport,
        description="JSON-RPC 2.0 over HTTP with SSE streaming (aiohttp).",
    )]


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return HttpTransportConfig
