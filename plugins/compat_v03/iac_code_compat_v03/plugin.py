"""Plugin registration: the A2A 0.3 protocol adapter and its configuration key.

Blocked (``disabled-plugins: [compat-v03]``) or not installed, the server speaks A2A 1.0
only: a 0.3 method name is an unknown method (-32601), a ``/v1/...`` request is the 1.0
route of a tenant named ``v1`` (refused for its missing ``A2A-Version``), and the card is
the strict 1.0 card.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import ProtocolAdapterSpec, hookimpl
from iac_code_compat_v03.card import card_document
from iac_code_compat_v03.jsonrpc import JSONRPC_METHODS, STREAMING_METHODS, dispatch_jsonrpc
from iac_code_compat_v03.rest import ADAPTER_ROUTES

IAC_CODE_API_VERSION = "1.0"


class CompatConfig(BaseModel):
    """Keys the A2A 0.3 compatibility adds to the configuration."""

    model_config = ConfigDict(extra="forbid")

    card_legacy_fields: bool = Field(
        False, description="The HTTP card also lists the 0.3 interfaces this server serves, with the A2A 0.3 fields "
        "(url, preferredTransport, protocolVersion, additionalInterfaces, ...) that 0.3 clients discover a server "
        "by; off, the card is the strict 1.0 card.")


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return CompatConfig


@hookimpl
def iac_code_protocol_adapters() -> list[ProtocolAdapterSpec]:
    return [ProtocolAdapterSpec(
        name="a2a-0.3",
        methods=dict.fromkeys(JSONRPC_METHODS, dispatch_jsonrpc),
        streaming=STREAMING_METHODS,
        http_routes=ADAPTER_ROUTES,
        card_document=card_document,
    )]
